/**
 * One scenario run: preflight, warm-up, then the measured autocannon run with the CPU time of the
 * scenario's processes read before and after.
 */
import autocannon, { type Instance, type Options } from 'autocannon';
import { Pool } from 'undici';
import { cpuMs, settle, type KernelThreadActivity, type SchedulerCounters, type ThreadCounters } from './processes.ts';
import type { CpuHoldersReport } from './cpu-holders.ts';
import type { ProcessRole, Scenario } from './scenarios.ts';

export interface LoadSettings {
  /** seconds */
  duration: number;
  connections: number;
  /** seconds; 0 skips the warm-up */
  warmup: number;
  /** per-request timeout, seconds */
  timeout: number;
}

/**
 * bench/paced.c's own lateness (ms): requests sent after their scheduled time on a free connection
 * (`sends` of them measured), answers read after the kernel had them (`reads`: those with a receive
 * timestamp). No quantiles where none was measured.
 */
export interface GeneratorLag {
  sends: number;
  sendP99?: number;
  sendMax?: number;
  reads: number;
  readP99?: number;
  readMax?: number;
}

export interface LatencyQuantiles {
  p50: number;
  p99: number;
  max: number;
}

export interface ScenarioResult {
  /** The scenario's name; with a fixed rate, followed by its label (e.g. "gateway @ half load"). */
  name: string;
  request: string;
  measures: string;
  /** Set when the scenario did not run (preflight refused); the run counts as failed. */
  skipped?: string;
  durationS: number;
  /** Completed responses, any status. */
  requests: number;
  /** Completed plus those still in flight at the end: the CPU-per-request denominator. */
  sent: number;
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  statusCodes: Record<string, number>;
  non2xx: number;
  /** Socket errors and timeouts. */
  errors: number;
  timeouts: number;
  errorSamples: string[];
  /** CPU µs per request for each measured process role (absent: not measured). */
  cpuUsPerRequest: Partial<Record<ProcessRole, number>>;
  /** Of cpuUsPerRequest, the kernel's part (system time; paced runs only, absent elsewhere). */
  kernelUsPerRequest?: number;
  /** The processes were still busy 60 s after the run: CPU per request is an underestimate. */
  cpuIncomplete?: boolean;
  /**
   * The scheduler's view of the measured processes over a paced run, warm-up included: how long
   * their main threads (and the rest) ran, waited for a CPU, and were preempted. A request that
   * arrives while the event loop waits in the run queue waits as long, outside anything the
   * process can measure of itself.
   */
  scheduler?: SchedulerCounters;
  /** The same for the upstream behind a proxy, over the same run. */
  upstreamScheduler?: SchedulerCounters;
  /** The host's TCP counters' growth over a paced run (bench/kernel-events.ts tcpCounters). */
  tcp?: Record<string, number>;
  /** The paced generator's own (bench/paced.c): while it waits for a CPU, its requests look slower. */
  generatorScheduler?: ThreadCounters;
  /** How late bench/paced.c itself was over a paced run (bench/paced.c). */
  generatorLagMs?: GeneratorLag;
  /**
   * A paced run's latencies counted to when the kernel's receive path took in each answer's last
   * segment (SO_TIMESTAMPNS; on loopback, about when the server sent it), not to when the generator
   * read it: the generator's late reads taken out (its late sends are still in both).
   */
  arrivalLatencyMs?: LatencyQuantiles;
  /** The host's busiest kernel threads over a paced run, warm-up included (bench/processes.ts kernelThreadGrowth). */
  kernelThreads?: KernelThreadActivity[];
  /** Each CPU's steal time over a paced run, warm-up included, in ms (bench/processes.ts stealMs): the hypervisor's share. */
  stolenMs?: number[];
  /** The service's own event-loop delay over a paced run (its /metrics), when it could be read. */
  eventLoopDelayMs?: { mean: number; p99: number; max: number };
  /**
   * The gateway's own latency over a paced run, warm-up included (its request-duration histogram, from a request's
   * arrival in the handler to its response's end): the upper bound of the bucket holding each
   * quantile. Set beside a client's p99, it tells a stall inside the process from one before it
   * (a request waiting in the kernel while the event loop was busy or the process not scheduled).
   */
  inServiceMs?: { requests: number; p50AtMost: number; p99AtMost: number; /** Answered in over 10 ms (the histogram's 10 ms bucket). */ overTenMs?: number };
  /** Requests of a paced run's measured window answered in over 10 ms, as bench/paced.c counted them. */
  overTenMs?: number;
  /** Where the target's main threads waited for a CPU during a paced run (BENCH_PACED_TIMELINE; bench/paced.ts placementOf). */
  placement?: Placement;
  /** What held the CPU while the target's main threads waited for one (BENCH_PACED_SCHED; bench/cpu-holders.ts). */
  cpuHolders?: CpuHoldersReport;
}

/**
 * Samples (one per ms of the measured window) of the target's main threads: the share in which one
 * was runnable on the CPU the generator was running on (waiting behind it), and the share in which one
 * was runnable on the CPU of a runnable upstream (one of the two waiting).
 */
export interface PlacementShare {
  slots: number;
  samples: number;
  behindGeneratorPercent: number;
  besideUpstreamPercent: number;
  /** The main threads' time on a CPU and waiting for one, ms per 10 ms slot (summed over threads). */
  runMsPerSlot: number;
  waitMsPerSlot: number;
}
export interface Placement {
  all: PlacementShare;
  /** The 10 ms slots whose worst latency was over 1 ms above the slot before's: a queue building up. */
  queueBuilding: PlacementShare;
}

/** The running autocannon instance, so Ctrl-C can stop it. */
let current: Instance | undefined;
export function stopLoad(): void {
  current?.stop();
}

/** Latencies of every response (autocannon's own histogram keeps 2xx only, in whole ms). */
class Latencies {
  private values = new Float64Array(1 << 16);
  private count = 0;

  add(ms: number): void {
    if (this.count === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.count++] = ms;
  }

  summary(): ScenarioResult['latencyMs'] {
    const sorted = this.values.subarray(0, this.count).sort();
    const at = (fraction: number) => (this.count ? sorted[Math.min(this.count - 1, Math.ceil(fraction * this.count) - 1)]! : 0);
    const round = (ms: number) => Math.round(ms * 100) / 100;
    return { p50: round(at(0.5)), p90: round(at(0.9)), p99: round(at(0.99)), max: round(at(1)) };
  }
}

function run(options: Options, latencies?: Latencies, errorSamples?: Set<string>) {
  return new Promise<import('autocannon').Result>((resolve, reject) => {
    const instance = autocannon(options, (error, result) => {
      current = undefined;
      if (error) reject(error);
      else resolve(result);
    });
    current = instance;
    if (latencies) instance.on('response', (_client, _status, _bytes, responseTimeMs) => latencies.add(responseTimeMs));
    if (errorSamples) {
      instance.on('reqError', (error: Error) => {
        if (errorSamples.size < 5) errorSamples.add(error.message || String(error));
      });
    }
  });
}

/**
 * One request outside the load, so a scenario that cannot succeed (a 401 from a missing policy, a
 * 404 from an unregistered endpoint) is reported with its body instead of hammered for N seconds.
 */
async function preflight(scenario: Scenario): Promise<string | undefined> {
  try {
    const response = await fetch(scenario.url, { method: scenario.method, headers: scenario.headers, body: scenario.body });
    const text = await response.text();
    if (response.status >= 200 && response.status < 300) return undefined;
    return `preflight got HTTP ${response.status}: ${text.slice(0, 300)}`;
  } catch (error) {
    return `preflight failed: ${(error as Error).message}`;
  }
}

function emptyResult(scenario: Scenario): ScenarioResult {
  return {
    name: scenario.name,
    request: `${scenario.method} ${new URL(scenario.url).pathname}${new URL(scenario.url).search}`,
    measures: scenario.measures,
    durationS: 0,
    requests: 0,
    sent: 0,
    rps: 0,
    latencyMs: { p50: 0, p90: 0, p99: 0, max: 0 },
    statusCodes: {},
    non2xx: 0,
    errors: 0,
    timeouts: 0,
    errorSamples: [],
    cpuUsPerRequest: {},
  };
}

export async function runScenario(scenario: Scenario, settings: LoadSettings): Promise<ScenarioResult> {
  const base = emptyResult(scenario);
  const refused = await preflight(scenario);
  if (refused) return { ...base, skipped: refused };

  const options: Options = {
    url: scenario.url,
    method: scenario.method,
    headers: scenario.headers,
    ...(scenario.body === undefined ? {} : { body: scenario.body }),
    connections: settings.connections,
    timeout: settings.timeout,
    pipelining: 1,
  };
  const roles = Object.entries(scenario.processes).filter(([, pids]) => pids && pids.length) as [ProcessRole, number[]][];
  const allPids = roles.flatMap(([, pids]) => pids);

  // Warm-up: JIT and caches. Few connections, so that its in-flight tail when it stops is short
  // (64 queued cost-12 hashes would take half a minute on a busy 2-core machine).
  if (settings.warmup > 0) await run({ ...options, connections: Math.min(settings.connections, 8), duration: settings.warmup });
  await settle(allPids);

  const before = new Map(roles.map(([role, pids]) => [role, cpuMs(pids)]));
  const latencies = new Latencies();
  const errorSamples = new Set<string>();
  const result = await run({ ...options, duration: settings.duration }, latencies, errorSamples);
  // Requests still in flight when autocannon stopped are processed anyway: wait for them, and count
  // them (at most one per connection) so short runs of slow scenarios are not overstated.
  // autocannon's `sent` itself is no use here: it counts a request twice when the server closes
  // each connection (Keystone's uwsgi peer sends Connection: close).
  const settled = await settle(allPids);
  const inFlight = Math.min(settings.connections, Math.max(0, result.requests.sent - result.requests.total));
  const sent = result.requests.total + inFlight;
  const cpuUsPerRequest: ScenarioResult['cpuUsPerRequest'] = {};
  for (const [role, pids] of roles) {
    cpuUsPerRequest[role] = sent ? Math.round(((cpuMs(pids) - before.get(role)!) * 1000) / sent) : 0;
  }

  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  return {
    ...base,
    durationS: result.duration,
    requests: result.requests.total,
    sent,
    rps: result.duration ? Math.round((result.requests.total / result.duration) * 10) / 10 : 0,
    latencyMs: latencies.summary(),
    statusCodes,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    errorSamples: [...errorSamples],
    cpuUsPerRequest,
    ...(settled ? {} : { cpuIncomplete: true }),
  };
}

/**
 * The scenario at a fixed rate, open loop: requests are sent on a schedule (every 1/rate s, over up
 * to `connections` keep-alive connections) whatever the answers do, and each latency is counted from
 * the request's scheduled time, so a server that falls behind shows it. (autocannon's overallRate
 * sends each second's quota as one burst on all connections: that measures a full-load queue for
 * part of each second, not a load level.)
 */
/**
 * The service's event-loop delay gauges (src/metrics/service-metrics.ts): each scrape reports the
 * window since the one before, so a scrape before the run starts the window and one after reads it.
 */
async function eventLoopDelay(metricsUrl: string): Promise<ScenarioResult['eventLoopDelayMs']> {
  try {
    return eventLoopDelayOf(await (await fetch(metricsUrl)).text());
  } catch {
    return undefined;
  }
}

function eventLoopDelayOf(text: string): ScenarioResult['eventLoopDelayMs'] {
  // Under WORKERS every worker reports its own (a `worker` label): each figure is the worst worker's
  // (the mean too), as the tail is the worst worker's.
  const gauge = (name: string) => {
    const values = [...text.matchAll(new RegExp(`^nodejs_eventloop_delay_${name}_seconds(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].map((match) => Number(match[1]));
    return values.length ? Math.max(...values) : Number.NaN;
  };
  const values = { mean: gauge('mean'), p99: gauge('p99'), max: gauge('max') };
  if (Object.values(values).some((value) => !Number.isFinite(value))) return undefined;
  const ms = (seconds: number) => Math.round(seconds * 1e5) / 100;
  return { mean: ms(values.mean), p99: ms(values.p99), max: ms(values.max) };
}

/** One scrape of the gateway's request-duration histogram (see gatewayDurations). */
export interface DurationScrape {
  /** Each series of the service type (its labels but `le`) with its cumulative counts by bucket bound (s). */
  series: Map<string, Map<number, number>>;
  /** The workers the scrape heard from (any metric's `worker` label); empty for a single process. */
  workers: Set<string>;
}

/** The gateway face's request-duration histogram for one service type, from a /metrics text. */
export function gatewayDurations(metricsText: string, service: string): DurationScrape {
  const series = new Map<string, Map<number, number>>();
  const line = /^keystone_gateway_http_request_duration_seconds_bucket\{([^}]*)\} (\S+)$/gm;
  for (const [, labels, value] of metricsText.matchAll(line)) {
    if (!/(?:^|,)face="gateway"/.test(labels!) || /(?:^|,)route="([^"]*)"/.exec(labels!)?.[1] !== service) continue;
    const bound = /(?:^|,)le="([^"]+)"/.exec(labels!)?.[1];
    if (bound === undefined) continue;
    const key = labels!.replace(/(?:^|,)le="[^"]*"/, '');
    let buckets = series.get(key);
    if (!buckets) series.set(key, (buckets = new Map()));
    buckets.set(bound === '+Inf' ? Number.POSITIVE_INFINITY : Number(bound), Number(value));
  }
  const workers = new Set([...metricsText.matchAll(/[{,]worker="([^"]*)"/g)].map((match) => match[1]!));
  return { series, workers };
}

/**
 * The in-service quantiles between two scrapes. Under WORKERS a scrape may miss a worker that did
 * not answer the primary in time (or one restarted between them): only workers heard in both count,
 * or a missed worker's whole count would be read as this run's. Undefined: nothing recorded between.
 */
export function inServiceLatency(before: DurationScrape, after: DurationScrape): ScenarioResult['inServiceMs'] {
  const counts = new Map<number, number>();
  for (const [key, buckets] of after.series) {
    const worker = /(?:^|,)worker="([^"]*)"/.exec(key)?.[1];
    if (worker !== undefined && !before.workers.has(worker)) continue;
    const earlier = before.series.get(key); // absent: a series that began after the first scrape
    for (const [bound, count] of buckets) counts.set(bound, (counts.get(bound) ?? 0) + count - (earlier?.get(bound) ?? 0));
  }
  const bounds = [...counts.keys()].sort((a, b) => a - b);
  const total = counts.get(Number.POSITIVE_INFINITY) ?? 0;
  if (total <= 0) return undefined;
  const atMost = (quantile: number) => {
    for (const bound of bounds) if (counts.get(bound)! >= quantile * total) return bound * 1000;
    return Number.POSITIVE_INFINITY;
  };
  const tenMs = counts.get(0.01);
  return { requests: total, p50AtMost: atMost(0.5), p99AtMost: atMost(0.99), ...(tenMs === undefined ? {} : { overTenMs: total - tenMs }) };
}

/**
 * Reads the service's own view of a paced run: call before the run (it starts the event-loop
 * window and notes the histogram) and call what it returns after.
 */
export async function serviceView(metricsUrl: string, service: string): Promise<() => Promise<Pick<ScenarioResult, 'eventLoopDelayMs' | 'inServiceMs'>>> {
  let before: DurationScrape | undefined;
  try {
    before = gatewayDurations(await (await fetch(metricsUrl)).text(), service);
  } catch {
    before = undefined;
  }
  return async () => {
    if (!before) return {};
    try {
      const text = await (await fetch(metricsUrl)).text();
      const loop = eventLoopDelayOf(text);
      const inService = inServiceLatency(before, gatewayDurations(text, service));
      return { ...(loop ? { eventLoopDelayMs: loop } : {}), ...(inService ? { inServiceMs: inService } : {}) };
    } catch {
      return {};
    }
  };
}

export async function runPacedScenario(scenario: Scenario, settings: LoadSettings, rate: number, metricsUrl?: string): Promise<ScenarioResult> {
  const base = emptyResult(scenario);
  const refused = await preflight(scenario);
  if (refused) return { ...base, skipped: refused };
  const roles = Object.entries(scenario.processes).filter(([, pids]) => pids && pids.length) as [ProcessRole, number[]][];
  const allPids = roles.flatMap(([, pids]) => pids);
  await settle(allPids);

  const target = new URL(scenario.url);
  const pool = new Pool(target.origin, { connections: settings.connections, pipelining: 1 });
  const latencies = new Latencies();
  const statusCodes: Record<string, number> = {};
  const errorSamples = new Set<string>();
  let errors = 0;
  let timeouts = 0;
  let sent = 0;
  const interval = 1000 / rate;

  /** Sends at `rate` for `durationMs`, each latency counted from its scheduled time; resolves when all have answered. */
  const pace = (durationMs: number, record: boolean) =>
    new Promise<void>((resolve) => {
      const start = performance.now();
      const end = start + durationMs;
      let next = start;
      let paced = 0;
      let completed = 0;
      const finished = () => next >= end && completed === paced;
      const send = (scheduled: number) => {
        paced++;
        if (record) sent++;
        pool
          .request({
            method: scenario.method,
            path: target.pathname + target.search,
            headers: scenario.headers,
            ...(scenario.body === undefined ? {} : { body: scenario.body }),
            headersTimeout: settings.timeout * 1000,
            bodyTimeout: settings.timeout * 1000,
          })
          .then(async (response) => {
            await response.body.dump();
            if (!record) return;
            statusCodes[response.statusCode] = (statusCodes[response.statusCode] ?? 0) + 1;
            latencies.add(performance.now() - scheduled);
          })
          .catch((error: Error & { code?: string }) => {
            if (!record) return;
            errors++;
            if (error.code === 'UND_ERR_HEADERS_TIMEOUT' || error.code === 'UND_ERR_BODY_TIMEOUT') timeouts++;
            if (errorSamples.size < 5) errorSamples.add(error.message || String(error));
          })
          .finally(() => {
            completed++;
            if (finished()) resolve();
          });
      };
      const tick = () => {
        const now = performance.now();
        while (next <= now && next < end) {
          send(next);
          next += interval;
        }
        if (next < end) setTimeout(tick, 1);
        else if (finished()) resolve();
      };
      tick();
    });

  // Warm-up at the same rate on the same pool, not counted: without it the measured run opens its
  // connections (and warms this process's code) while the clock runs, and that start-up burst alone
  // made the p99 (measured: 90-200 ms with it, single-digit ms without, at the same rate).
  if (settings.warmup > 0) await pace(settings.warmup * 1000, false);
  if (metricsUrl) await eventLoopDelay(metricsUrl);
  const before = new Map(roles.map(([role, pids]) => [role, cpuMs(pids)]));
  const start = performance.now();
  await pace(settings.duration * 1000, true);
  const durationS = (performance.now() - start) / 1000;
  const loopDelay = metricsUrl ? await eventLoopDelay(metricsUrl) : undefined;
  await pool.close();
  const settled = await settle(allPids);
  const cpuUsPerRequest: ScenarioResult['cpuUsPerRequest'] = {};
  for (const [role, pids] of roles) cpuUsPerRequest[role] = sent ? Math.round(((cpuMs(pids) - before.get(role)!) * 1000) / sent) : 0;
  const answered = Object.values(statusCodes).reduce((sum, count) => sum + count, 0);
  const non2xx = Object.entries(statusCodes).reduce((sum, [code, count]) => sum + (code.startsWith('2') ? 0 : count), 0);
  return {
    ...base,
    durationS: Math.round(durationS * 100) / 100,
    requests: answered,
    sent,
    rps: Math.round((answered / durationS) * 10) / 10,
    latencyMs: latencies.summary(),
    statusCodes,
    non2xx,
    errors,
    timeouts,
    errorSamples: [...errorSamples],
    cpuUsPerRequest,
    ...(settled ? {} : { cpuIncomplete: true }),
    ...(loopDelay ? { eventLoopDelayMs: loopDelay } : {}),
  };
}
