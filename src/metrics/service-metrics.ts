import cluster from 'node:cluster';
import { monitorEventLoopDelay, type ELDHistogram } from 'node:perf_hooks';
import v8 from 'node:v8';
import { WorkerMetricsExchange } from './cluster-metrics.ts';
import { MetricsRegistry, renderFamilies, type Counter, type CounterChild, type Histogram, type HistogramChild, type Sample } from './registry.ts';

/** How a request ended: the decision taken on it, or 'error' when none was (bad request, not found, failure). */
export type RequestDecision = 'allowed' | 'denied' | 'unauthenticated' | 'error';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other'] as const;
const DECISIONS: readonly RequestDecision[] = ['allowed', 'denied', 'unauthenticated', 'error'];
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const SLOTS = METHODS.length * DECISIONS.length * STATUS_CLASSES.length;

/** Seconds: proxied requests take ~0.1–1 ms of the gateway's time, identity calls up to a bcrypt or more. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

function methodIndex(method: string): number {
  switch (method) {
    case 'GET':
      return 0;
    case 'HEAD':
      return 1;
    case 'POST':
      return 2;
    case 'PUT':
      return 3;
    case 'PATCH':
      return 4;
    case 'DELETE':
      return 5;
    case 'OPTIONS':
      return 6;
    default:
      return 7;
  }
}

function decisionIndex(decision: RequestDecision): number {
  return decision === 'allowed' ? 0 : decision === 'denied' ? 1 : decision === 'unauthenticated' ? 2 : 3;
}

function statusClassIndex(status: number): number {
  const index = Math.floor(status / 100) - 1;
  return index < 0 ? 0 : index > 4 ? 4 : index;
}

/** The identity API's decision, read from its status: 401 and 403 are refusals, other errors are errors. */
export function identityDecision(status: number): RequestDecision {
  if (status < 400) return 'allowed';
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'denied';
  return 'error';
}

interface Series {
  requests: CounterChild;
  duration: HistogramChild;
}

/** The series of one face and route, by method × decision × status class, each created on first use. */
class RouteSeries {
  private readonly slots: (Series | undefined)[] = new Array(SLOTS);

  constructor(
    private readonly face: string,
    private readonly route: string,
    private readonly requests: Counter,
    private readonly duration: Histogram,
  ) {}

  record(method: string, decision: RequestDecision, status: number, seconds: number): void {
    const methodAt = methodIndex(method);
    const decisionAt = decisionIndex(decision);
    const classAt = statusClassIndex(status);
    const slot = (methodAt * DECISIONS.length + decisionAt) * STATUS_CLASSES.length + classAt;
    let series = this.slots[slot];
    if (series === undefined) {
      const labels = [this.face, this.route, METHODS[methodAt]!, DECISIONS[decisionAt]!, STATUS_CLASSES[classAt]!];
      series = { requests: this.requests.labels(...labels), duration: this.duration.labels(...labels) };
      this.slots[slot] = series;
    }
    series.requests.value++;
    series.duration.observe(seconds);
  }
}

export interface CacheCounts {
  readonly hits: number;
  readonly misses: number;
}

/** Values other parts of the service keep, read at each scrape (wired in app.ts). */
export interface MetricSources {
  tokenValidations(): { valid: number; invalid: number; error: number };
  /** Hit and miss counts by cache name. */
  caches(): Iterable<[name: string, counts: CacheCounts]>;
  /** Policy reloads by policy name ('gateway', 'identity'). */
  policyReloads(): Iterable<[policy: string, counts: { success: number; failure: number }]>;
  /** Upstream origins that have had failures, with their circuit state. */
  circuits(): Iterable<[upstream: string, state: 'closed' | 'open' | 'half_open']>;
  /** Whether the database is reachable now, and how many times it has become unreachable. */
  database?(): { reachable: boolean; partitions: number };
}

const CIRCUIT_STATE_VALUES = { closed: 0, open: 1, half_open: 2 } as const;

/**
 * Every metric this process exposes on GET /metrics. Per request the gateway and the identity API
 * each cost a Map lookup and a few increments; everything other objects already count is read only
 * when scraped. With node:cluster each worker has its own registry (label `worker`).
 */
export class ServiceMetrics {
  readonly registry: MetricsRegistry;
  private readonly requests: Counter;
  private readonly duration: Histogram;
  private readonly upstreamErrors: Counter;
  private readonly shadowDecisions: Counter;
  private readonly gatewayRoutes = new Map<string, RouteSeries>();
  private readonly identityRoutes = new Map<string, RouteSeries>();
  private sources: MetricSources | undefined;
  private readonly eventLoopDelay: ELDHistogram | undefined;
  private readonly exchange: WorkerMetricsExchange | undefined;

  constructor(options: { worker?: string | undefined; eventLoopDelay?: boolean } = {}) {
    const worker = options.worker ?? (cluster.isWorker && cluster.worker ? String(cluster.worker.id) : undefined);
    this.registry = new MetricsRegistry(worker === undefined ? {} : { worker });
    // A cluster worker answers its siblings' scrapes through the primary (see cluster-metrics.ts).
    if (cluster.isWorker) this.exchange = new WorkerMetricsExchange(() => this.registry.families());
    const registry = this.registry;
    const requestLabels = ['face', 'route', 'method', 'decision', 'status_class'];
    this.requests = registry.counter(
      'keystone_gateway_http_requests_total',
      'Requests answered, by face (identity, gateway), route (the identity API route template, or the service type for the gateway), method, decision and status class.',
      requestLabels,
    );
    this.duration = registry.histogram(
      'keystone_gateway_http_request_duration_seconds',
      'Time from a request reaching the service until its answer was sent (gateway: until the upstream response ended).',
      requestLabels,
      LATENCY_BUCKETS,
    );
    this.upstreamErrors = registry.counter(
      'keystone_gateway_upstream_errors_total',
      'Proxied requests that got no answer from their service, by service type and kind (connect, timeout, circuit_open).',
      ['service', 'kind'],
    );
    this.shadowDecisions = registry.counter(
      'keystone_gateway_shadow_decisions_total',
      'Proxied requests the shadow policy (POLICY_SHADOW_DIR) decided otherwise than the live policy, by service type and the two effects (allow, deny).',
      ['service', 'live', 'shadow'],
    );
    registry.collected('keystone_gateway_upstream_circuit_state', 'Circuit of an upstream origin that has had failures: 0 closed, 1 open, 2 half-open.', 'gauge', ['upstream'], () =>
      map(this.sources?.circuits() ?? [], ([upstream, state]) => [[upstream], CIRCUIT_STATE_VALUES[state]]),
    );
    registry.collected('keystone_gateway_database_reachable', 'Whether this process can reach the database (0 while it serves cached answers and refuses what needs the database).', 'gauge', [], () => {
      const database = this.sources?.database?.();
      return database ? [[[], database.reachable ? 1 : 0]] : [];
    });
    registry.collected('keystone_gateway_database_partitions_total', 'Times this process found the database unreachable (a query timed out, a connection could not be opened, or the probe failed).', 'counter', [], () => {
      const database = this.sources?.database?.();
      return database ? [[[], database.partitions]] : [];
    });
    registry.collected('keystone_gateway_token_validations_total', 'Token validations (identity API and gateway), by result.', 'counter', ['result'], () => {
      const counts = this.sources?.tokenValidations();
      return counts ? [[['valid'], counts.valid], [['invalid'], counts.invalid], [['error'], counts.error]] : [];
    });
    registry.collected('keystone_gateway_cache_requests_total', 'Lookups of the in-process caches, by cache and result (hit, miss).', 'counter', ['cache', 'result'], () =>
      flatMap(this.sources?.caches() ?? [], ([name, counts]) => [
        [[name, 'hit'], counts.hits],
        [[name, 'miss'], counts.misses],
      ]),
    );
    registry.collected('keystone_gateway_policy_reloads_total', 'Policy reloads, by policy (gateway, identity) and result (success, failure: the last good policy kept).', 'counter', ['policy', 'result'], () =>
      flatMap(this.sources?.policyReloads() ?? [], ([policy, counts]) => [
        [[policy, 'success'], counts.success],
        [[policy, 'failure'], counts.failure],
      ]),
    );

    const startSeconds = Math.round((Date.now() - performance.now()) / 10) / 100;
    registry.collected('process_start_time_seconds', 'Start time of the process since the Unix epoch, in seconds.', 'gauge', [], () => [[[], startSeconds]]);
    registry.collected('process_cpu_seconds_total', 'User and system CPU time spent, in seconds.', 'counter', [], () => {
      const usage = process.cpuUsage();
      return [[[], (usage.user + usage.system) / 1e6]];
    });
    registry.collected('process_resident_memory_bytes', 'Resident memory size in bytes.', 'gauge', [], () => [[[], process.memoryUsage.rss()]]);
    registry.collected('nodejs_heap_size_used_bytes', 'V8 heap in use, in bytes.', 'gauge', [], () => [[[], process.memoryUsage().heapUsed]]);
    registry.collected('nodejs_heap_size_total_bytes', 'V8 heap allocated, in bytes.', 'gauge', [], () => [[[], process.memoryUsage().heapTotal]]);
    // By space, with prom-client's names and labels (space = V8's name without '_space'): what a
    // worker's resident memory is made of, e.g. how large the young generation has grown.
    const heapSpaces = (pick: (space: v8.HeapSpaceInfo) => number) => (): Sample[] =>
      v8.getHeapSpaceStatistics().map((space) => [[space.space_name.replace(/_space$/, '')], pick(space)]);
    registry.collected('nodejs_heap_space_size_total_bytes', 'V8 heap space committed, by space, in bytes.', 'gauge', ['space'], heapSpaces((space) => space.space_size));
    registry.collected('nodejs_heap_space_size_used_bytes', 'V8 heap space in use, by space, in bytes.', 'gauge', ['space'], heapSpaces((space) => space.space_used_size));
    // Every byte V8 has allocated since the start: per request, the garbage a path makes (what sets
    // how often the young generation is collected), repeatable where CPU time is not (bench/README.md).
    registry.collected('nodejs_heap_allocated_bytes_total', 'Bytes allocated in the V8 heap since the process started.', 'counter', [], () => [[[], v8.getHeapStatistics().total_allocated_bytes]]);
    registry.collected('nodejs_external_memory_bytes', 'Memory outside the V8 heap held by JavaScript objects (buffers, WebAssembly memories), in bytes.', 'gauge', [], () => [[[], process.memoryUsage().external]]);
    if (options.eventLoopDelay !== false) {
      // Sampled by a libuv timer every 20 ms: no cost on requests.
      const resolutionMs = 20;
      const histogram = monitorEventLoopDelay({ resolution: resolutionMs });
      histogram.enable();
      this.eventLoopDelay = histogram;
      // The histogram records each sampling interval whole (an idle loop reads 20 ms): the delay
      // is what exceeds the interval.
      const read = (pick: (h: ELDHistogram) => number) => (histogram.count > 0 ? Math.max(0, pick(histogram) - resolutionMs * 1e6) / 1e9 : 0);
      registry.collected('nodejs_eventloop_delay_p99_seconds', 'Event loop delay, 99th percentile since the previous scrape.', 'gauge', [], () => [[[], read((h) => h.percentile(99))]]);
      registry.collected('nodejs_eventloop_delay_max_seconds', 'Largest event loop delay since the previous scrape.', 'gauge', [], () => [[[], read((h) => h.max)]]);
      registry.collected('nodejs_eventloop_delay_mean_seconds', 'Mean event loop delay since the previous scrape.', 'gauge', [], () => {
        const mean = read((h) => h.mean);
        histogram.reset(); // the last event-loop metric rendered: the next scrape sees a fresh window
        return [[[], mean]];
      });
    }
  }

  /** Connects the values other objects count (see MetricSources). */
  attach(sources: MetricSources): void {
    this.sources = sources;
  }

  /** One proxied request (hot path: a Map lookup and increments). */
  request(service: string, method: string, decision: RequestDecision, status: number, seconds: number): void {
    let series = this.gatewayRoutes.get(service);
    if (series === undefined) {
      series = new RouteSeries('gateway', service, this.requests, this.duration);
      this.gatewayRoutes.set(service, series);
    }
    series.record(method, decision, status, seconds);
  }

  /** One identity API request; `route` is fastify's route template ('unmatched' for none). */
  identityRequest(route: string, method: string, status: number, seconds: number): void {
    let series = this.identityRoutes.get(route);
    if (series === undefined) {
      series = new RouteSeries('identity', route, this.requests, this.duration);
      this.identityRoutes.set(route, series);
    }
    series.record(method, identityDecision(status), status, seconds);
  }

  /** One proxied request the shadow policy decided otherwise (disagreements only: rare by design, so the label lookup is fine). */
  shadowDisagreement(service: string, live: 'allow' | 'deny', shadow: 'allow' | 'deny'): void {
    this.shadowDecisions.labels(service, live, shadow).inc();
  }

  upstreamError(service: string, kind: 'connect' | 'timeout' | 'busy' | 'circuit_open'): void {
    this.upstreamErrors.labels(service, kind).inc();
  }

  /** This process's metrics only. */
  render(): string {
    return this.registry.render();
  }

  /** What a scrape answers: under node:cluster every worker's metrics (those that answer in time), else this process's. */
  async renderAll(): Promise<string> {
    if (!this.exchange) return this.render();
    const sources = await this.exchange.gather();
    return sources && sources.length > 0 ? renderFamilies(sources) : this.render();
  }

  close(): void {
    this.eventLoopDelay?.disable();
    this.exchange?.close();
  }
}

function* map<T>(items: Iterable<T>, transform: (item: T) => Sample): Iterable<Sample> {
  for (const item of items) yield transform(item);
}

function* flatMap<T>(items: Iterable<T>, transform: (item: T) => Sample[]): Iterable<Sample> {
  for (const item of items) yield* transform(item);
}
