/**
 * npm run bench: starts the service under test (or uses BENCH_URL), the upstream and the bare proxy,
 * creates its fixtures through the API, runs each scenario with autocannon, prints a table and writes
 * bench/results/<timestamp>.json. Exits 1 if any scenario saw a non-2xx response or an error.
 * Environment: see bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hashSync } from '@node-rs/bcrypt';
import { createFixtures, registerBenchService, type AdminCredentials, type Fixtures } from './fixtures.ts';
import { ingressFailed, ingressTable, ingressTools, runIngressBench, type IngressResult } from './ingress.ts';
import { perfEventsAvailable } from './kernel-events.ts';
import { runPacedScenario, runScenario, stopLoad, type LoadSettings, type ScenarioResult } from './load.ts';
import {
  cleanup,
  compiledEntry,
  createDatabase,
  installSignalHandlers,
  isInterrupted,
  ROOT,
  startHelper,
  startService,
  tempDirectory,
  type HelperProcess,
} from './processes.ts';
import { compare, failed, failureReport, pacedName, pacedRate, printTable, writeResults, type BcryptLimit } from './report.ts';
import { buildScenario, needs, SCENARIO_NAMES, type ScenarioName } from './scenarios.ts';

function positiveNumber(name: string, fallback: number, allowZero = false): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) throw new Error(`${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got '${raw}'`);
  return value;
}

/**
 * The autocannon gateway scenarios (upstream-direct, bare-proxy, gateway) run only when named: the
 * ingress comparison (wrk, nginx) measures the gateway by default.
 */
const AUTOCANNON_GATEWAY: readonly ScenarioName[] = ['upstream-direct', 'bare-proxy', 'gateway'];

function selectedScenarios(): { scenarios: ScenarioName[]; ingress: boolean } {
  const raw = process.env.BENCH_ONLY?.trim();
  if (!raw) return { scenarios: SCENARIO_NAMES.filter((name) => !AUTOCANNON_GATEWAY.includes(name)), ingress: true };
  const wanted = raw.split(',').map((name) => name.trim()).filter(Boolean);
  const known = [...SCENARIO_NAMES, 'ingress'];
  const unknown = wanted.filter((name) => !known.includes(name));
  if (unknown.length) throw new Error(`BENCH_ONLY: unknown scenario(s) ${unknown.join(', ')}; known: ${known.join(', ')}`);
  return { scenarios: SCENARIO_NAMES.filter((name) => wanted.includes(name)), ingress: wanted.includes('ingress') };
}

/** Passwords never go into the results file. */
function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return value;
  }
}

/** Cost of one bcrypt hash at the service's default cost, best of three, measured in this process. */
function measureBcrypt(): BcryptLimit {
  const cost = 12;
  hashSync('warm-up', { cost: 4 }); // loads the native module outside the timing
  let best = Infinity;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const started = performance.now();
    hashSync('bench-password-sample', { cost });
    best = Math.min(best, performance.now() - started);
  }
  const cores = os.availableParallelism();
  return { cost, hashMs: Math.round(best * 10) / 10, cores, limitPerSecond: Math.round((cores / (best / 1000)) * 10) / 10 };
}

/**
 * The gateway policy for the run: the shipped model and rules plus the `bench` service's rules.
 * `stricter`: the same without the member rule (BENCH_SHADOW's shadow policy, which then disagrees
 * with the live one on every gateway request: the most a shadow costs).
 */
function writePolicyDirectory(stricter = false): string {
  const directory = tempDirectory('kg-bench-policy-');
  const source = path.join(ROOT, 'policies');
  for (const file of readdirSync(source)) {
    if (file === 'model.conf' || file.endsWith('.csv')) copyFileSync(path.join(source, file), path.join(directory, file));
  }
  const memberRule = stricter ? [] : ['p, member, project, /v1/{project_id}/things, GET, allow'];
  for (const service of ['bench', 'ingress']) {
    writeFileSync(path.join(directory, `${service}.csv`), ['# Written by bench/run.ts for the gateway scenarios.', ...memberRule, 'p, admin, *, /**, *, allow', ''].join('\n'));
  }
  return directory;
}

function git(...args: string[]): string | undefined {
  try {
    // --no-optional-locks: read-only, never refreshes the index (another engineer works in this tree).
    return execFileSync('git', ['--no-optional-locks', ...args], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

const log = (message: string) => process.stderr.write(`bench: ${message}\n`);

/** BENCH_PACED_LOADS: shares of the gateway's top rate to pace at, e.g. "0.25,0.5" (default 0.5). */
function pacedLoads(): number[] {
  const text = process.env.BENCH_PACED_LOADS ?? '0.5';
  const shares = text.split(',').map((part) => part.trim()).filter(Boolean).map(Number);
  if (shares.some((share) => !(share > 0 && share <= 1))) throw new Error(`BENCH_PACED_LOADS must list shares in (0, 1], got '${text}'`);
  return shares;
}

async function main(): Promise<number> {
  const startedAt = new Date();
  const settings: LoadSettings = {
    duration: positiveNumber('BENCH_DURATION', 10),
    connections: Math.round(positiveNumber('BENCH_CONNECTIONS', 64)),
    warmup: positiveNumber('BENCH_WARMUP', 1, true),
    timeout: positiveNumber('BENCH_TIMEOUT', 30),
  };
  const { scenarios: selected, ingress: runIngress } = selectedScenarios();
  const externalUrl = process.env.BENCH_URL?.replace(/\/+$/, '').replace(/\/v3$/, '') || undefined;
  const databaseServer = process.env.BENCH_DATABASE_URL || undefined;
  if (externalUrl && databaseServer) throw new Error('BENCH_URL and BENCH_DATABASE_URL exclude each other (the external service has its own database)');
  const need = needs(selected);
  if (runIngress) {
    need.service = true;
    const tools = ingressTools();
    if ('missing' in tools) throw new Error(`the ingress comparison needs ${tools.missing.join(' and ')}: apt-get install ${tools.missing.join(' ')} (or leave 'ingress' out of BENCH_ONLY)`);
    const perf = process.env.BENCH_PERF_EVENTS === '1' ? perfEventsAvailable() : undefined;
    if (perf) throw new Error(`BENCH_PERF_EVENTS=1: ${perf}`);
  }
  installSignalHandlers(stopLoad);

  const loadBefore = os.loadavg();
  const bcrypt = selected.includes('token-issue-password') ? measureBcrypt() : undefined;
  if (bcrypt) log(`one cost-${bcrypt.cost} bcrypt hash: ${bcrypt.hashMs} ms → limit ${bcrypt.limitPerSecond}/s on ${bcrypt.cores} cores`);

  // Helpers first: the gateway endpoint must point at the upstream.
  const upstream: HelperProcess | undefined = need.upstream ? await startHelper('upstream.ts') : undefined;
  const bareProxy: HelperProcess | undefined = need.bareProxy && upstream ? await startHelper('bare-proxy.ts', [upstream.url]) : undefined;
  if (upstream) log(`upstream ${upstream.url} (pid ${upstream.pid})`);
  if (bareProxy) log(`bare proxy ${bareProxy.url} (pid ${bareProxy.pid})`);

  let serviceUrl: string | undefined;
  let servicePids: number[] = [];
  let target: string;
  let serviceSettings: Record<string, string> = {};
  let admin: AdminCredentials;
  if (externalUrl) {
    serviceUrl = externalUrl;
    servicePids = (process.env.BENCH_PIDS ?? '').split(/[\s,]+/).filter(Boolean).map(Number);
    if (servicePids.some((pid) => !Number.isInteger(pid) || pid <= 0)) throw new Error(`BENCH_PIDS must list process ids, got '${process.env.BENCH_PIDS}'`);
    target = `external ${externalUrl}`;
    // The openstack CLI's variables, with bench.sh's defaults.
    admin = {
      username: process.env.OS_USERNAME || 'admin',
      password: process.env.OS_PASSWORD || 'admin-secret',
      projectName: process.env.OS_PROJECT_NAME || 'admin',
      userDomainName: process.env.OS_USER_DOMAIN_NAME || 'Default',
      projectDomainName: process.env.OS_PROJECT_DOMAIN_NAME || 'Default',
    };
    log(`using the running service at ${externalUrl}${servicePids.length ? ` (CPU of pids ${servicePids.join(', ')})` : ' (no BENCH_PIDS: server CPU not measured)'}`);
  } else if (need.service) {
    const adminPassword = `bench-${randomBytes(12).toString('hex')}`;
    admin = { username: 'admin', password: adminPassword, projectName: 'admin', userDomainName: 'Default', projectDomainName: 'Default' };
    const databaseUrl = databaseServer ? await createDatabase(databaseServer) : undefined;
    // BENCH_SHADOW=1: a shadow policy beside the live one (its cost on the gateway path).
    const shadow = process.env.BENCH_SHADOW === '1' ? { POLICY_SHADOW_DIR: writePolicyDirectory(true) } : undefined;
    // What `npm start` runs (the esbuild bundle under plain node), unless BENCH_SOURCE=1 asks for
    // `node --import=tsx src/main.ts` (tsx's transformer in the process: a larger heap to collect).
    const entry = process.env.BENCH_SOURCE === '1' ? undefined : await compiledEntry(log);
    const settings = { ...(entry ? { IDENTITY_POLICY_DIR: path.join(ROOT, 'policies', 'identity') } : {}), ...shadow };
    const service = await startService({ adminPassword, policyDirectory: writePolicyDirectory(), ...(databaseUrl ? { databaseUrl } : {}), settings, ...(entry ? { entry } : {}) });
    serviceUrl = service.url;
    servicePids = [service.pid];
    serviceSettings = Object.fromEntries(Object.entries(service.settings).map(([name, value]) => [name, redactUrl(value)]));
    target = databaseUrl ? `service on PostgreSQL (${redactUrl(databaseUrl)})` : 'service on embedded PGlite';
    log(`${target} at ${service.url} (pid ${service.pid})`);
  } else {
    target = 'no service (upstream scenarios only)';
    admin = { username: '', password: '', projectName: '', userDomainName: '', projectDomainName: '' };
  }

  let fixtures: Fixtures | undefined;
  if (serviceUrl) {
    log('creating fixtures (domain, project, member user, 20 users, application credential, tokens)');
    fixtures = await createFixtures(serviceUrl, admin, Boolean(externalUrl));
    if (selected.includes('gateway') && upstream) await registerBenchService(serviceUrl, fixtures.adminToken, upstream.url, Boolean(externalUrl));
  }

  const results: ScenarioResult[] = [];
  for (const name of selected) {
    const scenario = buildScenario(name, { ...(serviceUrl ? { serviceUrl } : {}), servicePids, ...(upstream ? { upstream } : {}), ...(bareProxy ? { bareProxy } : {}), ...(fixtures ? { fixtures } : {}) });
    log(`${name}: ${settings.warmup ? `${settings.warmup} s warm-up + ` : ''}${settings.duration} s × ${settings.connections} connections`);
    const result = await runScenario(scenario, settings);
    // Interrupted: the signal handler is cleaning up and will exit; start nothing more.
    if (isInterrupted()) await new Promise(() => {});
    results.push(result);
    if (result.skipped) log(`${name}: NOT RUN: ${result.skipped}`);
    else log(`${name}: ${result.rps} req/s${failed(result) ? `  !!! ${result.non2xx} non-2xx, ${result.errors} errors` : ''}`);
  }

  // The gateway's added latency: it and the upstream alone, each paced at a share of the gateway's
  // top rate (BENCH_PACED_LOADS, default half).
  const gatewayRun = results.find((result) => result.name === 'gateway' && !failed(result));
  if (gatewayRun && selected.includes('upstream-direct') && !isInterrupted()) {
    for (const share of pacedLoads()) {
      const rate = pacedRate(gatewayRun, share);
      for (const name of ['gateway', 'upstream-direct'] as const) {
        const scenario = buildScenario(name, { ...(serviceUrl ? { serviceUrl } : {}), servicePids, ...(upstream ? { upstream } : {}), ...(fixtures ? { fixtures } : {}) });
        log(`${pacedName(name, share)}: ${settings.duration} s at ${rate} req/s, paced, up to ${settings.connections} connections`);
        // The service's event-loop delay beside the latencies (our own service only: /metrics).
        const metricsUrl = name === 'gateway' && serviceUrl && !externalUrl ? `${serviceUrl}/metrics` : undefined;
        const result = await runPacedScenario(scenario, settings, rate, metricsUrl);
        if (isInterrupted()) await new Promise(() => {});
        results.push({ ...result, name: pacedName(name, share), measures: `${scenario.measures}; paced at ${rate} req/s, ${Math.round(share * 100)} % of the gateway's req/s above` });
      }
    }
  }

  // The gateway against nginx and the bare Node proxy, wrk-loaded, and the paced tail (bench/ingress.ts).
  let ingress: IngressResult | undefined;
  if (runIngress && serviceUrl && fixtures && !isInterrupted()) {
    const f = fixtures;
    const url = serviceUrl;
    ingress = await runIngressBench(
      {
        serviceUrl: url,
        servicePids,
        token: f.userToken,
        projectId: f.projectId,
        register: (upstreamUrl) => registerBenchService(url, f.adminToken, upstreamUrl, Boolean(externalUrl), 'ingress', ''),
        // Scraping resets the event-loop window: only a service the bench started (not another's Prometheus).
        ...(externalUrl ? {} : { metricsUrl: `${url}/metrics` }),
        log,
      },
      {
        threads: Math.round(positiveNumber('BENCH_WRK_THREADS', 1)),
        connections: Math.round(positiveNumber('BENCH_WRK_CONNECTIONS', 32)),
        durationS: positiveNumber('BENCH_WRK_DURATION', 8),
        rounds: Math.round(positiveNumber('BENCH_WRK_ROUNDS', 3)),
        pacedShare: positiveNumber('BENCH_PACED_SHARE', 0.5, true),
        pacedRate: process.env.BENCH_PACED_RATE ? Math.round(positiveNumber('BENCH_PACED_RATE', 1)) : undefined,
        paced: { ...settings, connections: Math.round(positiveNumber('BENCH_WRK_CONNECTIONS', 32)) },
        perfEvents: process.env.BENCH_PERF_EVENTS === '1',
      },
    );
  }

  const comparisons = compare(results, bcrypt);
  const table = results.length ? printTable(results, bcrypt, comparisons) : '(no autocannon scenario selected)';
  const failures = failureReport(results);
  process.stdout.write(
    `\nkeystone-gateway bench: ${target}; ${settings.duration} s × ${settings.connections} connections per scenario; ` +
      `${os.availableParallelism()} cores, load ${loadBefore.map((value) => value.toFixed(2)).join(' ')} before\n\n${table}\n`,
  );
  if (failures) process.stdout.write(`${failures}\n`);
  if (ingress) process.stdout.write(`\n${ingressTable(ingress)}\n`);
  if (ingress && ingressFailed(ingress)) process.stdout.write('\n!!! the ingress comparison saw errors or non-2xx answers (see the rounds above)\n');

  const file = writeResults(
    {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      label: process.env.BENCH_LABEL ?? '',
      git: { commit: git('rev-parse', 'HEAD'), dirty: Boolean(git('status', '--porcelain', '--untracked-files=no')) },
      machine: {
        node: process.version,
        cores: os.availableParallelism(),
        cpu: os.cpus()[0]?.model,
        loadavgBefore: loadBefore,
        loadavgAfter: os.loadavg(),
      },
      settings: { ...settings, scenarios: selected, target, service: serviceSettings },
      bcrypt,
      scenarios: results,
      comparisons,
      ingress,
      failed: [...results.filter(failed).map((result) => result.name), ...(ingress && ingressFailed(ingress) ? ['ingress'] : [])],
    },
    startedAt,
  );
  process.stdout.write(`\nwrote ${path.relative(process.cwd(), file)}\n`);
  return results.some(failed) || (ingress !== undefined && ingressFailed(ingress)) ? 1 : 0;
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
    await cleanup();
    process.exit(2);
  });
