/**
 * The ingress comparison (issue 21): the gateway against nginx as a bare proxy, in one run.
 *
 * The same upstream (nginx answering a fixed JSON body, so the upstream costs next to nothing) sits
 * behind three proxies: nginx (one worker, keep-alive to the upstream), the bare Node proxy
 * (bench/bare-proxy.ts: node:http + the gateway's upstream client, no auth) and the gateway (token validation, policy,
 * identity headers). Each is loaded by wrk, an external C load generator (it shares the cores, not
 * an event loop, with what it measures), for `rounds` rounds in turn; the CPU per request is each
 * server's /proc time over the requests wrk completed. Then an open-loop paced run (latency counted
 * from each request's scheduled time) at half the gateway's top rate, for direct, nginx and gateway.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { countKernelEvents, shortEventName, tcpCounters, tcpGrowth } from './kernel-events.ts';
import { runPacedScenario, serviceView, type LoadSettings, type PlacementShare, type ScenarioResult } from './load.ts';
import type { CpuHolders } from './cpu-holders.ts';
import { compilePaced, runExternalPaced } from './paced.ts';
import { cpuTimes, freePort, gcSummary, minorFaults, onCleanup, schedulerCounters, settle, startHelper, tempDirectory, type GcSummary, type HelperProcess, type ThreadCounters } from './processes.ts';
import type { Scenario } from './scenarios.ts';

/** The upstream's answer: the same as bench/upstream.ts. */
const BODY = JSON.stringify({ things: [{ id: 'a1b2c3', name: 'bench', size: 1 }] });

export type IngressTarget = 'direct' | 'nginx' | 'bare-proxy' | 'gateway';

export interface WrkRun {
  requests: number;
  durationS: number;
  rps: number;
  /** Server CPU µs per completed request (the proxy's own; the upstream's is not included). */
  cpuUsPerRequest: number;
  /** The part of cpuUsPerRequest spent in the kernel (system time: its system calls and socket work). */
  kernelUsPerRequest?: number;
  /**
   * The part of cpuUsPerRequest on each process's main thread (schedstat; for node the event loop),
   * the rest being other threads': V8's parallel collectors and compilers, libuv's pool.
   */
  mainThreadUsPerRequest?: number;
  /** Minor page faults per request (bench/processes.ts minorFaults): pages the process touched for the first time, or again after giving them back. */
  faultsPerRequest?: number;
  latencyMs: { p50: number; p99: number; max: number };
  non2xx: number;
  socketErrors: number;
  /** The gateway's V8 heap bytes allocated per completed request (its /metrics), when it could be read. */
  allocatedBytesPerRequest?: number;
  /** BENCH_PERF_EVENTS=1: per request, the system calls (all, and by name), wake-ups, switches and faults perf counted (kernel-events.ts). */
  kernelEventsPerRequest?: Record<string, number>;
}

export interface IngressResult {
  settings: { threads: number; connections: number; durationS: number; rounds: number; pacedShare: number; pacedDurationS: number };
  tools: { wrk: string; nginx: string };
  /** Each target's wrk rounds, in the order run. */
  rounds: Record<IngressTarget, WrkRun[]>;
  /** Medians over the rounds, and the ratios to nginx. */
  summary: Record<IngressTarget, { cpuUsPerRequest: number; kernelUsPerRequest?: number; mainThreadUsPerRequest?: number; faultsPerRequest?: number; rps: number; cpuVsNginx: number | null; rpsVsNginx: number | null; allocatedBytesPerRequest?: number }>;
  paced?: { rate: number; generator: string; isolated?: boolean; results: Partial<Record<'direct' | 'nginx' | 'gateway', ScenarioResult>>; gatewayAddedP99Ms?: number; gatewayGc?: GcSummary };
}

/** Whether wrk and nginx are installed (the ingress comparison needs both). */
export function ingressTools(): { wrk: string; nginx: string } | { missing: string[] } {
  // wrk -v exits 1 after printing its version; nginx -v writes it to stderr.
  const version = (command: string, args: string[]) => {
    const run = spawnSync(command, args, { encoding: 'utf8' });
    if (run.error) return undefined;
    return `${run.stdout}${run.stderr}`.trim().split('\n')[0] || command;
  };
  const wrk = version('wrk', ['-v']);
  const nginx = version('nginx', ['-v']) ?? version('/usr/sbin/nginx', ['-v']);
  const missing = [...(wrk ? [] : ['wrk']), ...(nginx ? [] : ['nginx-light'])];
  return missing.length ? { missing } : { wrk: wrk!, nginx: nginx! };
}

function nginxBinary(): string {
  try {
    execFileSync('nginx', ['-v'], { stdio: 'ignore' });
    return 'nginx';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? '/usr/sbin/nginx' : 'nginx';
  }
}

/**
 * nginx with a config of its own (its own prefix, pid and temp paths: no system files touched):
 * `upstream` answers BODY to everything, `proxy` forwards to `upstreamPort` over keep-alive.
 * One worker process, as the Node servers are one process each.
 */
export async function startNginx(role: 'upstream' | 'proxy', upstreamPort?: number): Promise<HelperProcess> {
  const directory = tempDirectory(`kg-bench-nginx-${role}-`);
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(path.join(directory, sub));
  const port = await freePort();
  const location =
    role === 'upstream'
      ? `default_type application/json; return 200 '${BODY}';`
      : 'proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";';
  const config = `
worker_processes 1;
daemon off;
pid ${directory}/nginx.pid;
error_log ${directory}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 65s;
  client_body_temp_path ${directory}/body;
  proxy_temp_path ${directory}/proxy;
  fastcgi_temp_path ${directory}/fastcgi;
  uwsgi_temp_path ${directory}/uwsgi;
  scgi_temp_path ${directory}/scgi;
  ${role === 'proxy' ? `upstream backend { server 127.0.0.1:${upstreamPort}; keepalive 128; }` : ''}
  server {
    listen 127.0.0.1:${port};
    location / { ${location} }
  }
}
`;
  const file = path.join(directory, 'nginx.conf');
  writeFileSync(file, config);
  const child = spawn(nginxBinary(), ['-p', directory, '-c', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr?.on('data', (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-4000)));
  onCleanup(`stop nginx ${role} (pid ${child.pid})`, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGQUIT');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx (${role}) exited: ${errors}`);
    try {
      if ((await fetch(`${url}/`)).status < 500) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`nginx (${role}) did not answer on ${url}: ${errors}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url, pid: child.pid! };
}

/** wrk's duration units to ms. */
function toMs(value: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(value.trim());
  if (!match) return NaN;
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm'];
  return Number(match[1]) * scale;
}

/** The numbers of one wrk report (`--latency`). */
export function parseWrk(output: string): Omit<WrkRun, 'cpuUsPerRequest'> {
  const requests = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(output);
  if (!requests) throw new Error(`unreadable wrk output:\n${output}`);
  const percentile = (label: string) => toMs(new RegExp(`^\\s*${label}%\\s+(\\S+)`, 'm').exec(output)?.[1] ?? '');
  const max = toMs(/^\s*Latency\s+\S+\s+\S+\s+(\S+)/m.exec(output)?.[1] ?? '');
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  const durationS = toMs(`${requests[2]}${requests[3]}`) / 1000;
  const round = (ms: number) => Math.round(ms * 1000) / 1000;
  return {
    requests: Number(requests[1]),
    durationS,
    rps: Math.round((Number(requests[1]) / durationS) * 10) / 10,
    latencyMs: { p50: round(percentile('50')), p99: round(percentile('99')), max: round(max) },
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0),
    socketErrors: socket ? socket.slice(1).reduce((sum, count) => sum + Number(count), 0) : 0,
  };
}

/** One wrk run's report (`--latency`), for parseWrk. */
export function wrk(url: string, headers: Record<string, string>, threads: number, connections: number, durationS: number): Promise<string> {
  const args = [`-t${threads}`, `-c${connections}`, `-d${durationS}s`, '--latency', ...Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]), url];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`wrk exited ${code}: ${output}`))));
  });
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

export interface IngressContext {
  /** The service under test: its URL, processes, and a project token that the `ingress` service's policy allows. */
  serviceUrl: string;
  servicePids: number[];
  token: string;
  projectId: string;
  /** The service's /metrics, when the bench started it: the gateway's own view of its paced run is read there. */
  metricsUrl?: string;
  /** Registers the `ingress` service's internal endpoint at this URL (the nginx upstream). */
  register(upstreamUrl: string): Promise<void>;
  log(message: string): void;
}

/**
 * Runs the comparison. The gateway's service type is `ingress`; its policy file must allow the
 * token's GET on /v1/{project_id}/things (bench/run.ts writes it).
 */
export async function runIngressBench(context: IngressContext, options: { threads: number; connections: number; durationS: number; rounds: number; pacedShare: number; pacedRate?: number | undefined; paced: LoadSettings; perfEvents?: boolean }): Promise<IngressResult> {
  const tools = ingressTools();
  if ('missing' in tools) throw new Error(`the ingress comparison needs ${tools.missing.join(' and ')} (apt-get install ${tools.missing.join(' ')})`);
  const upstream = await startNginx('upstream');
  const nginx = await startNginx('proxy', Number(new URL(upstream.url).port));
  const bare = await startHelper('bare-proxy.ts', [upstream.url]);
  await context.register(upstream.url);
  context.log(`ingress: nginx upstream ${upstream.url} (pid ${upstream.pid}), nginx proxy ${nginx.url} (pid ${nginx.pid}), bare proxy ${bare.url} (pid ${bare.pid})`);

  const thingsPath = `/v1/${context.projectId}/things`;
  // The same request (path and token header) everywhere, so the bytes on the wire match.
  const headers = { 'X-Auth-Token': context.token };
  const targets: Record<IngressTarget, { url: string; pids: number[] }> = {
    direct: { url: `${upstream.url}${thingsPath}`, pids: [upstream.pid] },
    nginx: { url: `${nginx.url}${thingsPath}`, pids: [nginx.pid] },
    'bare-proxy': { url: `${bare.url}${thingsPath}`, pids: [bare.pid] },
    gateway: { url: `${context.serviceUrl}/ingress${thingsPath}`, pids: context.servicePids },
  };
  for (const [name, target] of Object.entries(targets)) {
    const response = await fetch(target.url, { headers });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`ingress preflight ${name}: HTTP ${response.status} ${text.slice(0, 300)}`);
  }

  const order: IngressTarget[] = ['direct', 'nginx', 'bare-proxy', 'gateway'];
  const rounds = Object.fromEntries(order.map((name) => [name, [] as WrkRun[]])) as Record<IngressTarget, WrkRun[]>;
  const allPids = [upstream.pid, nginx.pid, bare.pid, ...context.servicePids];
  // Warm-up: JIT, caches and connection pools, one short run each, not counted.
  for (const name of order) await wrk(targets[name].url, headers, options.threads, options.connections, 2);
  for (let round = 1; round <= options.rounds; round++) {
    for (const name of order) {
      await settle(allPids);
      // Read before the CPU count starts and after it ends: a scrape's own bytes are not the requests'.
      const allocatedBefore = name === 'gateway' && context.metricsUrl ? await allocatedBytes(context.metricsUrl) : undefined;
      const before = cpuTimes(targets[name].pids);
      const faultsBefore = minorFaults(targets[name].pids);
      const scheduledBefore = schedulerCounters(targets[name].pids);
      const counting = options.perfEvents ? await countKernelEvents(targets[name].pids) : undefined;
      const tcpBefore = options.perfEvents ? tcpCounters() : undefined;
      const report = parseWrk(await wrk(targets[name].url, headers, options.threads, options.connections, options.durationS));
      const events = counting && tcpBefore ? { ...(await counting.stop()), ...tcpGrowth(tcpBefore, tcpCounters()) } : undefined;
      await settle(allPids);
      const after = cpuTimes(targets[name].pids);
      const faultsAfter = minorFaults(targets[name].pids);
      const scheduledAfter = schedulerCounters(targets[name].pids);
      const perRequest = (ms: number) => (report.requests ? Math.round((ms * 1000 * 10) / report.requests) / 10 : 0);
      const run: WrkRun = {
        ...report,
        cpuUsPerRequest: perRequest(after.userMs + after.systemMs - before.userMs - before.systemMs),
        kernelUsPerRequest: perRequest(after.systemMs - before.systemMs),
        mainThreadUsPerRequest: perRequest(scheduledAfter.main.runMs - scheduledBefore.main.runMs),
        faultsPerRequest: report.requests ? Math.round(((faultsAfter - faultsBefore) / report.requests) * 1000) / 1000 : 0,
      };
      const allocatedAfter = allocatedBefore !== undefined ? await allocatedBytes(context.metricsUrl!) : undefined;
      if (allocatedBefore !== undefined && allocatedAfter !== undefined && report.requests > 0) run.allocatedBytesPerRequest = Math.round((allocatedAfter - allocatedBefore) / report.requests);
      if (events && report.requests > 0) {
        run.kernelEventsPerRequest = Object.fromEntries(Object.entries(events).map(([event, count]) => [shortEventName(event), Math.round((count / report.requests) * 100) / 100]));
      }
      rounds[name].push(run);
      context.log(
        `ingress round ${round} ${name}: ${run.rps} req/s, ${run.cpuUsPerRequest} µs CPU/request (${run.kernelUsPerRequest} in the kernel, ${run.mainThreadUsPerRequest} on main threads, ${run.faultsPerRequest} page faults), p99 ${run.latencyMs.p99} ms` +
          (run.allocatedBytesPerRequest !== undefined ? `, ${run.allocatedBytesPerRequest} bytes allocated/request` : '') +
          (run.kernelEventsPerRequest ? `, per request: ${Object.entries(run.kernelEventsPerRequest).filter(([, count]) => count >= 0.01).map(([event, count]) => `${event} ${count}`).join(', ')}` : '') +
          (run.non2xx || run.socketErrors ? ` !!! ${run.non2xx} non-2xx, ${run.socketErrors} socket errors` : ''),
      );
    }
  }
  const medians = Object.fromEntries(order.map((name) => [name, { cpu: median(rounds[name].map((run) => run.cpuUsPerRequest)), rps: median(rounds[name].map((run) => run.rps)) }])) as Record<IngressTarget, { cpu: number; rps: number }>;
  const ratio = (value: number, of: number) => (of ? Math.round((value / of) * 100) / 100 : null);
  const summary = Object.fromEntries(
    order.map((name) => [
      name,
      {
        cpuUsPerRequest: medians[name].cpu,
        ...medianOf(rounds[name], 'kernelUsPerRequest'),
        ...medianOf(rounds[name], 'mainThreadUsPerRequest'),
        ...medianOf(rounds[name], 'faultsPerRequest'),
        rps: medians[name].rps,
        cpuVsNginx: name === 'direct' ? null : ratio(medians[name].cpu, medians.nginx.cpu),
        rpsVsNginx: name === 'direct' ? null : ratio(medians[name].rps, medians.nginx.rps),
        ...medianOf(rounds[name], 'allocatedBytesPerRequest'),
      },
    ]),
  ) as IngressResult['summary'];

  const result: IngressResult = {
    settings: { threads: options.threads, connections: options.connections, durationS: options.durationS, rounds: options.rounds, pacedShare: options.pacedShare, pacedDurationS: options.paced.duration },
    tools,
    rounds,
    summary,
  };
  if (options.pacedShare > 0 || options.pacedRate) {
    // A fixed rate (BENCH_PACED_RATE) makes runs comparable whatever the top rate measured.
    const rate = options.pacedRate ?? Math.max(1, Math.round(medians.gateway.rps * options.pacedShare));
    const generator = compilePaced();
    if ('unavailable' in generator) context.log(`ingress paced: ${generator.unavailable}; the in-process generator runs instead (it competes with the servers for the cores)`);
    const paced: NonNullable<IngressResult['paced']> = {
      rate,
      generator: 'binary' in generator ? 'bench/paced.c' : 'in-process (bench/load.ts)',
      ...('binary' in generator && process.env.BENCH_PACED_ISOLATE ? { isolated: true } : {}),
      results: {},
    };
    for (const name of ['direct', 'nginx', 'gateway'] as const) {
      const scenario: Scenario = {
        // A scenario name of bench/scenarios.ts: BENCH_PACED_TIMELINE's files are <prefix>-upstream-direct, -bare-proxy (nginx's run) and -gateway.
        name: name === 'gateway' ? 'gateway' : name === 'nginx' ? 'bare-proxy' : 'upstream-direct',
        measures: `${name}, paced at ${rate} req/s (open loop, latency from the scheduled time)`,
        method: 'GET',
        url: targets[name].url,
        headers: { 'x-auth-token': context.token },
        processes: name === 'gateway' ? { service: targets.gateway.pids } : { proxy: targets[name].pids },
      };
      context.log(`ingress paced ${name}: ${options.paced.duration} s at ${rate} req/s`);
      const started = Date.now();
      const tcpBefore = tcpCounters();
      // The gateway's own view of the run (warm-up included): its event-loop delay and in-service latency.
      const view = name === 'gateway' && context.metricsUrl ? await serviceView(context.metricsUrl, 'ingress') : undefined;
      const measured =
        'binary' in generator
          ? await runExternalPaced(
              generator.binary,
              { ...scenario, role: name === 'gateway' ? 'service' : 'proxy', pids: targets[name].pids, ...(name === 'direct' ? {} : { upstreamPids: targets.direct.pids }) },
              options.paced,
              rate,
            )
          : await runPacedScenario(scenario, options.paced, rate);
      if (view) Object.assign(measured, await view());
      measured.tcp = tcpGrowth(tcpBefore, tcpCounters());
      // The collections of the measured part only (the warm-up's are left out).
      if (name === 'gateway') paced.gatewayGc = gcSummary(started + options.paced.warmup * 1000, Date.now(), measured.requests);
      paced.results[name] = { ...measured, name: options.pacedRate ? `${name} @ ${rate} req/s` : `${name} @ ${Math.round(options.pacedShare * 100)} % of the gateway's top rate` };
    }
    const gateway = paced.results.gateway;
    const direct = paced.results.direct;
    if (gateway && direct) paced.gatewayAddedP99Ms = Math.round((gateway.latencyMs.p99 - direct.latencyMs.p99) * 100) / 100;
    result.paced = paced;
  }
  return result;
}

/**
 * The service's V8 heap bytes allocated since it started, summed over its processes (under
 * node:cluster the scrape has a line per worker); undefined when /metrics cannot be read.
 */
async function allocatedBytes(metricsUrl: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(metricsUrl)).text();
    const values = [...text.matchAll(/^nodejs_heap_allocated_bytes_total(?:\{[^}]*\})? (\d+(?:\.\d+)?(?:e\+\d+)?)$/gm)].map((match) => Number(match[1]));
    return values.length > 0 ? values.reduce((sum, value) => sum + value, 0) : undefined;
  } catch {
    return undefined;
  }
}

/** The median of an optional per-run figure over the runs that have it, as a field of the summary (absent when none has it). */
function medianOf<K extends 'kernelUsPerRequest' | 'mainThreadUsPerRequest' | 'faultsPerRequest' | 'allocatedBytesPerRequest'>(runs: WrkRun[], field: K): Partial<Record<K, number>> {
  const values = runs.flatMap((run) => (run[field] === undefined ? [] : [run[field]!]));
  return (values.length > 0 ? { [field]: median(values) } : {}) as Partial<Record<K, number>>;
}

/** The console table of a comparison. */
export function ingressTable(result: IngressResult): string {
  const { settings, summary, rounds } = result;
  const lines = [
    `ingress: wrk -t${settings.threads} -c${settings.connections}, ${settings.durationS} s × ${settings.rounds} rounds per target (medians; ranges over the rounds); ${result.tools.nginx}`,
    '',
    `${'target'.padEnd(12)}  ${'CPU µs/req'.padStart(10)}  ${'range'.padStart(13)}  ${'kernel'.padStart(6)}  ${'main'.padStart(6)}  ${'× nginx'.padStart(7)}  ${'req/s'.padStart(9)}  ${'range'.padStart(15)}  ${'÷ nginx'.padStart(7)}`,
  ];
  for (const name of Object.keys(summary) as IngressTarget[]) {
    const cpu = rounds[name].map((run) => run.cpuUsPerRequest);
    const rps = rounds[name].map((run) => run.rps);
    const row = summary[name];
    lines.push(
      `${name.padEnd(12)}  ${row.cpuUsPerRequest.toFixed(1).padStart(10)}  ${`${Math.min(...cpu).toFixed(1)}–${Math.max(...cpu).toFixed(1)}`.padStart(13)}  ${(row.kernelUsPerRequest === undefined ? '-' : row.kernelUsPerRequest.toFixed(1)).padStart(6)}  ${(row.mainThreadUsPerRequest === undefined ? '-' : row.mainThreadUsPerRequest.toFixed(1)).padStart(6)}  ${(row.cpuVsNginx === null ? '-' : `${row.cpuVsNginx.toFixed(2)}×`).padStart(7)}  ${Math.round(row.rps).toLocaleString('en-US').padStart(9)}  ${`${Math.round(Math.min(...rps))}–${Math.round(Math.max(...rps))}`.padStart(15)}  ${(row.rpsVsNginx === null ? '-' : `${Math.round(row.rpsVsNginx * 100)} %`).padStart(7)}`,
    );
  }
  if (summary.gateway.allocatedBytesPerRequest !== undefined) {
    const allocated = rounds.gateway.flatMap((run) => (run.allocatedBytesPerRequest === undefined ? [] : [run.allocatedBytesPerRequest]));
    lines.push('', `gateway: ${Math.round(summary.gateway.allocatedBytesPerRequest).toLocaleString('en-US')} bytes allocated in its V8 heap per request (median; ${Math.min(...allocated)}–${Math.max(...allocated)})`);
  }
  const faulted = (Object.keys(summary) as IngressTarget[]).filter((name) => summary[name].faultsPerRequest !== undefined);
  if (faulted.length > 0) lines.push('', `minor page faults per request (median): ${faulted.map((name) => `${name} ${Math.round(summary[name].faultsPerRequest! * 1000) / 1000}`).join(', ')}`);
  const counted = (Object.keys(summary) as IngressTarget[]).filter((name) => rounds[name].some((run) => run.kernelEventsPerRequest));
  if (counted.length > 0) lines.push('', kernelEventsTable(rounds, counted));
  if (result.paced) {
    lines.push('', `paced by ${result.paced.generator} (open loop, ${settings.pacedDurationS} s at ${result.paced.rate} req/s = ${Math.round((result.paced.rate / summary.gateway.rps) * 100)} % of the gateway's median top rate${result.paced.isolated ? `; each target's main threads alone on the last CPU, the generator and its upstream on the others (BENCH_PACED_ISOLATE)` : ''}):`, '');
    // Paced, a request often has an event-loop turn, a wake-up and a write to itself: its CPU can be
    // well above the same target's under wrk (× wrk), so "half the top rate" may not be half a core.
    lines.push(`${'target'.padEnd(12)}  ${'p50 ms'.padStart(8)}  ${'p99 ms'.padStart(8)}  ${'max ms'.padStart(8)}  ${'non-2xx'.padStart(7)}  ${'errors'.padStart(6)}  ${'CPU µs/req'.padStart(10)}  ${'kernel'.padStart(6)}  ${'× wrk'.padStart(6)}`);
    for (const [name, paced] of Object.entries(result.paced.results)) {
      if (!paced) continue;
      const cpu = Object.values(paced.cpuUsPerRequest)[0];
      const saturated = summary[name as IngressTarget]?.cpuUsPerRequest;
      const cells = [
        (cpu === undefined ? '-' : cpu.toFixed(1)).padStart(10),
        (cpu === undefined || paced.kernelUsPerRequest === undefined ? '-' : paced.kernelUsPerRequest.toFixed(1)).padStart(6),
        (cpu === undefined || !saturated ? '-' : `${(cpu / saturated).toFixed(2)}×`).padStart(6),
      ];
      lines.push(`${name.padEnd(12)}  ${paced.latencyMs.p50.toFixed(2).padStart(8)}  ${paced.latencyMs.p99.toFixed(2).padStart(8)}  ${paced.latencyMs.max.toFixed(2).padStart(8)}  ${String(paced.non2xx).padStart(7)}  ${String(paced.errors).padStart(6)}  ${cells.join('  ')}`);
    }
    const lagged = Object.entries(result.paced.results).filter(([, paced]) => paced?.generatorLagMs);
    if (lagged.length > 0) {
      // The generator shares the cores too: a late send or a late read of its own is in its latencies.
      // A late read shows as a gap between the p99 and the p99 at receipt; a late send moves both.
      lines.push('', `the generator's own lateness (ms: sent after the scheduled time on a free connection, read after the kernel had the answer) and the p99 counted to the kernel's receipt:`, '');
      lines.push(`${'target'.padEnd(12)}  ${'sent p99'.padStart(8)}  ${'sent max'.padStart(8)}  ${'read p99'.padStart(8)}  ${'read max'.padStart(8)}  ${'p99 at receipt'.padStart(14)}`);
      for (const [name, paced] of lagged) {
        const lag = paced!.generatorLagMs!;
        const receipt = paced!.arrivalLatencyMs?.p99;
        const cell = (ms: number | undefined, width: number) => (ms === undefined ? '-' : ms.toFixed(2)).padStart(width);
        lines.push(`${name.padEnd(12)}  ${cell(lag.sendP99, 8)}  ${cell(lag.sendMax, 8)}  ${cell(lag.readP99, 8)}  ${cell(lag.readMax, 8)}  ${cell(receipt, 14)}`);
      }
    }
    const scheduled = Object.entries(result.paced.results).filter(([, paced]) => paced?.scheduler);
    if (scheduled.length > 0) {
      // Waiting in the run queue is time the process cannot see: its own latency histogram and
      // event-loop delay start when it runs again.
      lines.push(
        '',
        `the scheduler's view of each paced run (warm-up included; /proc/<pid>/task/*/schedstat and status): ms on a CPU, ms runnable but waiting for one, times preempted`,
        '',
      );
      const cell = (counters: ThreadCounters | undefined, width: number) =>
        (counters ? `${counters.runMs.toFixed(0)} / ${counters.waitMs.toFixed(0)} / ${counters.preempted}` : '-').padStart(width);
      lines.push(`${'target'.padEnd(12)}  ${'main thread'.padStart(20)}  ${'other threads'.padStart(16)}  ${'upstream'.padStart(20)}  ${'generator'.padStart(20)}`);
      for (const [name, paced] of scheduled) {
        const { scheduler, upstreamScheduler, generatorScheduler } = paced!;
        lines.push(`${name.padEnd(12)}  ${cell(scheduler!.main, 20)}  ${cell(scheduler!.others, 16)}  ${cell(upstreamScheduler?.main, 20)}  ${cell(generatorScheduler, 20)}`);
      }
    }
    const withKernelThreads = Object.entries(result.paced.results).filter(([, paced]) => paced?.kernelThreads);
    // Absent where no kernel thread could be seen (a container's /proc); empty where none was busy.
    if (withKernelThreads.length > 0) {
      // A kernel thread's burst takes one of the cores from the generator, the proxy and the upstream at once.
      lines.push('', `the host's busiest kernel threads over each paced run (warm-up included; /proc/<pid>/schedstat of PF_KTHREAD tasks): ms on a CPU / ms waiting for one / wake-ups`, '');
      for (const [name, paced] of withKernelThreads) {
        const threads = paced!.kernelThreads!.map((thread) => `${thread.name} ${thread.runMs.toFixed(0)} / ${thread.waitMs.toFixed(0)} / ${thread.wakeups}`).join(', ');
        lines.push(`${name.padEnd(12)}  ${threads || 'none over 1 ms'}`);
      }
    }
    const withSteal = Object.entries(result.paced.results).filter(([, paced]) => paced?.stolenMs);
    if (withSteal.length > 0) {
      // A vCPU the host took away stalls whatever ran on it, and its threads' own counters show neither run nor wait.
      lines.push('', `the host's steal time over each paced run (warm-up included; /proc/stat, 10 ms ticks): ms per CPU`, '');
      for (const [name, paced] of withSteal) lines.push(`${name.padEnd(12)}  ${paced!.stolenMs!.map((ms, cpu) => `cpu${cpu} ${ms}`).join(', ')}`);
    }
    const withTcp = Object.entries(result.paced.results).filter(([, paced]) => paced?.tcp && Object.keys(paced.tcp).length > 0);
    if (withTcp.length > 0) {
      // A segment lost or a window closed stalls its connection for a timer's length, outside any process.
      lines.push('', `the host's TCP counters over each paced run (warm-up included; /proc/net/snmp, /proc/net/netstat): growth`, '');
      const names = Object.keys(withTcp[0]![1]!.tcp!);
      lines.push(`${'counter'.padEnd(22)}${withTcp.map(([name]) => name.padStart(12)).join('')}`);
      for (const counter of names) lines.push(`${counter.padEnd(22)}${withTcp.map(([, paced]) => String(paced!.tcp![counter] ?? '-').padStart(12)).join('')}`);
    }
    if (result.paced.gatewayAddedP99Ms !== undefined) {
      const over = result.paced.results.gateway?.overTenMs;
      lines.push('', `gateway's added p99 (gateway p99 − direct p99): ${result.paced.gatewayAddedP99Ms} ms` + (over === undefined ? '' : `; ${over} of its paced requests took over 10 ms as the generator counts (measured window only)`));
    }
    const { inServiceMs, eventLoopDelayMs } = result.paced.results.gateway ?? {};
    if (inServiceMs || eventLoopDelayMs) {
      lines.push(
        `the gateway's own view of its paced run (/metrics, warm-up included):` +
          (inServiceMs ? ` in the service p50 ≤ ${inServiceMs.p50AtMost} ms, p99 ≤ ${inServiceMs.p99AtMost} ms (histogram buckets, ${inServiceMs.requests} requests)${inServiceMs.overTenMs === undefined ? '' : `, ${inServiceMs.overTenMs} over 10 ms (warm-up included)`};` : '') +
          (eventLoopDelayMs ? ` event-loop delay p99 ${eventLoopDelayMs.p99} ms, max ${eventLoopDelayMs.max} ms` : ''),
      );
    }
    const placed = Object.entries(result.paced.results).filter(([, paced]) => paced?.placement);
    if (placed.length > 0) {
      // A main thread short of its CPU for tens of ms builds a queue its event loop cannot see.
      lines.push(
        '',
        `where each target's main threads waited (BENCH_PACED_TIMELINE; sampled each ms by the generator): % of samples with one runnable on the generator's CPU / on a runnable upstream's CPU; ms they ran / waited for a CPU per 10 ms slot`,
        '',
        `${'target'.padEnd(12)}  ${'all slots'.padStart(26)}  ${'slots where a queue built up'.padStart(40)}`,
      );
      const cell = (share: PlacementShare) => `${share.behindGeneratorPercent} / ${share.besideUpstreamPercent} %; ${share.runMsPerSlot} / ${share.waitMsPerSlot} ms`;
      for (const [name, paced] of placed) {
        const { all, queueBuilding } = paced!.placement!;
        lines.push(`${name.padEnd(12)}  ${cell(all).padStart(26)}  ${`${cell(queueBuilding)} (${queueBuilding.slots} slots)`.padStart(40)}`);
      }
    }
    const held = Object.entries(result.paced.results).filter(([, paced]) => paced?.cpuHolders);
    if (held.length > 0) {
      lines.push('', `who held the CPU while each target's main threads waited for one (BENCH_PACED_SCHED; perf's scheduler events): ms waited, ms another CPU sat idle meanwhile, then what ran on their CPU (ms)`);
      const cell = (holders: CpuHolders) =>
        `${holders.waitMs} ms waited, ${holders.otherCpuIdleMs} idle elsewhere; ${holders.holders.slice(0, 6).map(({ who, ms }) => `${who} ${ms}`).join(', ') || 'nothing'}`;
      for (const [name, paced] of held) {
        const { all, queueBuilding, lostChunks } = paced!.cpuHolders!;
        lines.push(`${name.padEnd(12)}  all slots: ${cell(all)}`, `${''.padEnd(12)}  where a queue built up: ${cell(queueBuilding)}`);
        if (lostChunks) lines.push(`${''.padEnd(12)}  perf lost ${lostChunks} buffers of events: these figures are short`);
      }
    }
    const gc = result.paced.gatewayGc;
    if (gc) {
      lines.push(
        `gateway's collections while paced (BENCH_GC=1): ${gc.scavenges} scavenges (one per ${gc.requestsPerScavenge} requests), ${gc.markCompacts} mark-compacts; ` +
          `pauses ${gc.pauseMs} ms in all, longest ${gc.maxPauseMs} ms; ${gc.promotedBytesPerRequest} bytes promoted per request`,
      );
      for (const cause of gc.markCompactCauses ?? []) {
        lines.push(`  a mark-compact of ${cause.pauseMs} ms: ${cause.reason || 'no reason given'}${cause.reduceMemory ? ' (shrinking the heap)' : ''}`);
      }
    }
  }
  return lines.join('\n');
}

/**
 * BENCH_PERF_EVENTS=1: each target's kernel events per request (median over its rounds), one row
 * per event any target had at least 0.01 of, in the order perf counted them.
 */
function kernelEventsTable(rounds: Record<IngressTarget, WrkRun[]>, targets: IngressTarget[]): string {
  const events: string[] = [];
  for (const name of targets) for (const run of rounds[name]) for (const event of Object.keys(run.kernelEventsPerRequest ?? {})) if (!events.includes(event)) events.push(event);
  // Undefined: perf did not count it for that target.
  const value = (name: IngressTarget, event: string) => {
    const counted = rounds[name].flatMap((run) => (run.kernelEventsPerRequest?.[event] === undefined ? [] : [run.kernelEventsPerRequest[event]!]));
    return counted.length > 0 ? median(counted) : undefined;
  };
  const shown = events.filter((event) => targets.some((name) => (value(name, event) ?? 0) >= 0.01));
  const lines = [`kernel events per request (perf stat on each target's pids during its wrk runs; medians):`, '', `${'event'.padEnd(18)}${targets.map((name) => name.padStart(12)).join('')}`];
  for (const event of shown) lines.push(`${event.padEnd(18)}${targets.map((name) => (value(name, event)?.toFixed(2) ?? '-').padStart(12)).join('')}`);
  return lines.join('\n');
}

/** Whether any wrk round or paced run saw an error or a non-2xx answer. */
export function ingressFailed(result: IngressResult): boolean {
  const wrkFailed = Object.values(result.rounds).some((runs) => runs.some((run) => run.non2xx > 0 || run.socketErrors > 0 || run.requests === 0));
  const pacedFailed = Object.values(result.paced?.results ?? {}).some((paced) => paced && (paced.non2xx > 0 || paced.errors > 0 || paced.requests === 0));
  return wrkFailed || pacedFailed;
}
