/**
 * The console table, the derived comparisons (bcrypt limit, gateway vs upstream and bare proxy), the
 * loud failure block and the JSON results file.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ScenarioResult } from './load.ts';
import { ROOT } from './processes.ts';

export interface BcryptLimit {
  cost: number;
  /** One hash, best of a few, in this process. */
  hashMs: number;
  cores: number;
  /** cores / one hash's time: password token issues per second if bcrypt were the only cost. */
  limitPerSecond: number;
}

export interface Comparisons {
  /** token-issue-password req/s as a share of the bcrypt limit. */
  passwordVsBcryptLimitPct?: number;
  gatewayVsUpstreamPct?: number;
  gatewayServiceUsPerRequest?: number;
  bareProxyUsPerRequest?: number;
  /** Paced at a share of the gateway's top rate: its p99 minus the upstream's own p99 at that rate. */
  pacedLoads?: { share: number; rate: number; gatewayP99Ms: number; upstreamP99Ms: number; addedP99Ms: number; eventLoopDelayMs?: { mean: number; p99: number; max: number } }[];
}

export function compare(results: readonly ScenarioResult[], bcrypt: BcryptLimit | undefined): Comparisons {
  const byName = new Map(results.filter((result) => !failed(result)).map((result) => [result.name, result]));
  const comparisons: Comparisons = {};
  const password = byName.get('token-issue-password');
  if (password && bcrypt) comparisons.passwordVsBcryptLimitPct = Math.round((password.rps / bcrypt.limitPerSecond) * 1000) / 10;
  const gateway = byName.get('gateway');
  const upstream = byName.get('upstream-direct');
  const bare = byName.get('bare-proxy');
  if (gateway && upstream?.rps) comparisons.gatewayVsUpstreamPct = Math.round((gateway.rps / upstream.rps) * 1000) / 10;
  if (gateway?.cpuUsPerRequest.service !== undefined) comparisons.gatewayServiceUsPerRequest = gateway.cpuUsPerRequest.service;
  if (bare?.cpuUsPerRequest.proxy !== undefined) comparisons.bareProxyUsPerRequest = bare.cpuUsPerRequest.proxy;
  for (const result of results) {
    const share = result.name.startsWith('gateway @ ') ? Number(result.name.slice('gateway @ '.length).replace(/ % load$/, '')) / 100 : NaN;
    const paced = byName.get(result.name);
    const direct = byName.get(pacedName('upstream-direct', share));
    if (!gateway || !paced || !direct) continue;
    (comparisons.pacedLoads ??= []).push({
      share,
      rate: pacedRate(gateway, share),
      gatewayP99Ms: paced.latencyMs.p99,
      upstreamP99Ms: direct.latencyMs.p99,
      addedP99Ms: Math.round((paced.latencyMs.p99 - direct.latencyMs.p99) * 100) / 100,
      ...(paced.eventLoopDelayMs ? { eventLoopDelayMs: paced.eventLoopDelayMs } : {}),
    });
  }
  return comparisons;
}

/** The name of a scenario's paced run at `share` of the gateway's top rate. */
export function pacedName(name: string, share: number): string {
  return `${name} @ ${Math.round(share * 100)} % load`;
}

export function pacedRate(gateway: ScenarioResult, share: number): number {
  return Math.max(1, Math.round(gateway.rps * share));
}

export function failed(result: ScenarioResult): boolean {
  return result.skipped !== undefined || result.non2xx > 0 || result.errors > 0 || result.requests === 0;
}

const number = (value: number, digits = 0) => value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function pad(cells: string[], widths: number[]): string {
  return cells.map((cell, index) => (index === 0 ? cell.padEnd(widths[index]!) : cell.padStart(widths[index]!))).join('  ');
}

export function printTable(results: readonly ScenarioResult[], bcrypt: BcryptLimit | undefined, comparisons: Comparisons): string {
  const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'requests', 'non-2xx', 'errors', 'cpu µs/req: service', 'proxy', 'upstream', ''];
  const rows = results.map((result) => {
    if (result.skipped) return [result.name, '-', '-', '-', '-', '-', '-', '-', '-', '-', 'FAILED: not run'];
    const cpu = (value: number | undefined) => (value === undefined ? '-' : `${result.cpuIncomplete ? '>' : ''}${number(value)}`);
    return [
      result.name,
      number(result.rps, 1),
      number(result.latencyMs.p50, 2),
      number(result.latencyMs.p99, 2),
      number(result.requests),
      number(result.non2xx),
      number(result.errors),
      cpu(result.cpuUsPerRequest.service),
      cpu(result.cpuUsPerRequest.proxy),
      cpu(result.cpuUsPerRequest.upstream),
      failed(result) ? '<<< FAILED' : '',
    ];
  });
  const widths = header.map((cell, index) => Math.max(cell.length, ...rows.map((row) => row[index]!.length)));
  const lines = [pad(header, widths).trimEnd(), widths.map((width) => '-'.repeat(width)).join('  ').trimEnd(), ...rows.map((row) => pad(row, widths).trimEnd())];

  if (results.some((result) => result.cpuIncomplete)) lines.push('>: the processes were still busy 60 s after the run; CPU per request is at least this');
  if (bcrypt) {
    lines.push(
      '',
      `bcrypt: one cost-${bcrypt.cost} hash = ${number(bcrypt.hashMs, 1)} ms here; theoretical limit ${bcrypt.cores} cores / ${number(bcrypt.hashMs, 1)} ms = ${number(bcrypt.limitPerSecond, 1)} password token issues/s` +
        (comparisons.passwordVsBcryptLimitPct !== undefined ? `; token-issue-password reached ${comparisons.passwordVsBcryptLimitPct} % of it` : ''),
    );
  }
  if (comparisons.gatewayVsUpstreamPct !== undefined || comparisons.gatewayServiceUsPerRequest !== undefined) {
    lines.push('');
    if (comparisons.gatewayVsUpstreamPct !== undefined) lines.push(`gateway throughput: ${comparisons.gatewayVsUpstreamPct} % of upstream-direct req/s`);
    if (comparisons.gatewayServiceUsPerRequest !== undefined) {
      const bare = comparisons.bareProxyUsPerRequest;
      lines.push(
        `gateway CPU: ${number(comparisons.gatewayServiceUsPerRequest)} µs/request in the service` +
          (bare !== undefined ? ` vs ${number(bare)} µs/request in the bare proxy (${bare ? number(comparisons.gatewayServiceUsPerRequest / bare, 1) : '-'}×)` : ' (bare-proxy not run)'),
      );
    }
    for (const paced of comparisons.pacedLoads ?? []) {
      lines.push(
        `gateway paced at ${Math.round(paced.share * 100)} % of its top rate (${number(paced.rate)} req/s): p99 ${number(paced.gatewayP99Ms, 2)} ms vs ${number(paced.upstreamP99Ms, 2)} ms straight to the upstream at that rate: added p99 ${number(paced.addedP99Ms, 2)} ms` +
          (paced.eventLoopDelayMs ? `; the service's event-loop delay meanwhile: mean ${number(paced.eventLoopDelayMs.mean, 2)}, p99 ${number(paced.eventLoopDelayMs.p99, 2)}, max ${number(paced.eventLoopDelayMs.max, 2)} ms` : ''),
      );
    }
  }
  return lines.join('\n');
}

/** The failure block: every scenario with non-2xx responses, errors or no run at all, with why. */
export function failureReport(results: readonly ScenarioResult[]): string | undefined {
  const bad = results.filter(failed);
  if (!bad.length) return undefined;
  const lines = ['', '!'.repeat(78), `!!! ${bad.length} SCENARIO(S) FAILED: their numbers are not valid measurements`];
  for (const result of bad) {
    if (result.skipped) {
      lines.push(`!!! ${result.name}: not run, ${result.skipped}`);
      continue;
    }
    const codes = Object.entries(result.statusCodes)
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, count]) => `${code}×${count}`)
      .join(', ');
    lines.push(
      `!!! ${result.name}: ${result.non2xx} non-2xx${codes ? ` (${codes})` : ''}, ${result.errors} errors (${result.timeouts} timeouts)` +
        (result.requests === 0 ? ', no response completed' : '') +
        (result.errorSamples.length ? `; e.g. ${result.errorSamples.join(' | ')}` : ''),
    );
  }
  lines.push('!'.repeat(78));
  return lines.join('\n');
}

/** Writes bench/results/<timestamp>.json (git-ignored) and returns its path. */
export function writeResults(document: object, startedAt: Date, prefix = ''): string {
  const directory = path.join(ROOT, 'bench', 'results');
  mkdirSync(directory, { recursive: true });
  const file = path.join(directory, `${prefix}${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(document, null, 2) + '\n');
  return file;
}
