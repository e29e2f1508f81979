import cluster, { type Worker } from 'node:cluster';
import type { ClusterMessage, EventBus } from './events/event-bus.ts';
import { PrimaryDecisionRelay } from './gateway/worker-decision-peers.ts';
import { PrimaryMetricsRelay } from './metrics/cluster-metrics.ts';
import type { WorkerHeap } from './config.ts';

interface Log {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** A change notification on its way between workers, through the primary. */
interface EventEnvelope {
  keystoneGatewayEvent: ClusterMessage;
}

function isEventEnvelope(value: unknown): value is EventEnvelope {
  const message = (value as Partial<EventEnvelope> | null)?.keystoneGatewayEvent;
  return typeof message === 'object' && message !== null && (message.type === 'changed' || message.type === 'revoked' || message.type === 'keys-changed');
}

/**
 * The workers of one service without Redis: each worker's commits reach its siblings' caches over
 * the cluster's IPC channel, relayed by the primary (with REDIS_URL, Redis does this instead).
 */
export class WorkerEventBus implements EventBus {
  private listener: ((raw: unknown) => void) | undefined;

  /** A worker whose channel is gone is exited by node:cluster, so this is true while it serves. */
  get connected(): boolean {
    return process.connected === true;
  }

  publish(message: ClusterMessage): void {
    if (!process.connected || !process.send) return;
    const envelope: EventEnvelope = { keystoneGatewayEvent: message };
    process.send(envelope, undefined, undefined, () => {}); // a closing channel is not an error
  }

  subscribe(handlers: Parameters<EventBus['subscribe']>[0]): void {
    this.listener = (raw) => {
      if (isEventEnvelope(raw)) handlers.message(raw.keystoneGatewayEvent);
    };
    process.on('message', this.listener);
  }

  async close(): Promise<void> {
    if (this.listener) process.off('message', this.listener);
    this.listener = undefined;
  }
}

/**
 * How long to wait before replacing a worker that crashed: at once for an occasional crash; while
 * crashes keep coming (within a minute of each other) the wait doubles, 1 s up to 30 s, so a worker
 * that dies on start does not spin.
 */
export class RestartBackoff {
  private crashes: number[] = [];

  constructor(
    private readonly windowMs = 60_000,
    private readonly firstDelayMs = 1000,
    private readonly maxDelayMs = 30_000,
  ) {}

  /** Records a crash at `now` (ms) and answers the delay before the replacement starts. */
  next(now: number): number {
    this.crashes = this.crashes.filter((at) => now - at < this.windowMs);
    this.crashes.push(now);
    const earlier = this.crashes.length - 1;
    return earlier === 0 ? 0 : Math.min(this.firstDelayMs * 2 ** (earlier - 1), this.maxDelayMs);
  }
}

/**
 * The node flags that give a worker the configured heap limits: --max-old-space-size (old
 * generation) and --max-semi-space-size (each half of the young generation), in MB; a limit at 0
 * adds nothing (the workers inherit whatever node was given). Passed after the primary's own
 * flags, so a setting wins over the same flag given to node.
 */
export function workerHeapFlags(heap: WorkerHeap): string[] {
  const flags: string[] = [];
  if (heap.maxOldSpaceMb > 0) flags.push(`--max-old-space-size=${heap.maxOldSpaceMb}`);
  if (heap.maxSemiSpaceMb > 0) flags.push(`--max-semi-space-size=${heap.maxSemiSpaceMb}`);
  return flags;
}

export interface SupervisorOptions {
  workers: number;
  /** Node flags for the workers on top of the primary's own (process.execArgv), e.g. workerHeapFlags(). */
  workerExecArgv?: string[];
  /** SHUTDOWN_TIMEOUT_MS: workers get this long to drain (and a little more to exit) before SIGKILL. */
  shutdownTimeoutMs: number;
  log: Log;
  backoff?: RestartBackoff;
}

/** A worker that is past its own drain deadline is hung: this much later it is killed. */
const EXIT_GRACE_MS = 10_000;

/**
 * The cluster primary's job once the database is ready: fork the workers (they share the listening
 * socket), relay change notifications, metrics scrapes and decision lookups between them, replace
 * those that die, and stop them all.
 */
export class WorkerSupervisor {
  private stopping = false;
  private started = false;
  private readonly exits = new Map<Worker, Promise<number | null>>();
  private readonly pendingRestarts = new Set<NodeJS.Timeout>();
  private readonly backoff: RestartBackoff;
  private abortStart: ((error: Error) => void) | undefined;
  private readonly metrics = new PrimaryMetricsRelay();
  private readonly decisions = new PrimaryDecisionRelay();

  constructor(private readonly options: SupervisorOptions) {
    this.backoff = options.backoff ?? new RestartBackoff();
  }

  /** Forks the workers; resolves with the port once every one listens, rejects if one exits first. */
  start(): Promise<number> {
    // Later flags win: the workers' own come after the primary's.
    if (this.options.workerExecArgv?.length) cluster.setupPrimary({ execArgv: [...process.execArgv, ...this.options.workerExecArgv] });
    cluster.on('message', (sender, message) => this.relay(sender, message));
    cluster.on('exit', (worker, code, signal) => this.onExit(worker, code, signal));
    return new Promise<number>((resolve, reject) => {
      this.abortStart = reject;
      const listening = new Set<number>();
      const onListening = (worker: Worker, address: { port: number }) => {
        listening.add(worker.id);
        if (listening.size < this.options.workers) return;
        cluster.off('listening', onListening);
        this.started = true;
        this.abortStart = undefined;
        resolve(address.port);
      };
      cluster.on('listening', onListening);
      for (let index = 0; index < this.options.workers; index++) this.fork();
    });
  }

  /** Asks every worker to drain (SIGTERM), waits for them; the exit status for the primary. */
  async stop(): Promise<number> {
    this.stopping = true;
    for (const timer of this.pendingRestarts) clearTimeout(timer);
    this.pendingRestarts.clear();
    const workers = [...this.exits.keys()];
    for (const worker of workers) signal(worker, 'SIGTERM');
    let killed = false;
    const deadline = setTimeout(() => {
      killed = true;
      this.options.log.error({ workers: [...this.exits.keys()].map((worker) => worker.process.pid) }, 'workers did not stop in time: killing them');
      for (const worker of this.exits.keys()) signal(worker, 'SIGKILL');
    }, this.options.shutdownTimeoutMs + EXIT_GRACE_MS);
    const codes = await Promise.all(workers.map((worker) => this.exits.get(worker)));
    clearTimeout(deadline);
    // A worker killed by our SIGTERM before it could handle it (still starting) stopped cleanly too.
    return killed || codes.some((code) => code !== 0 && code !== null && code !== undefined) ? 1 : 0;
  }

  private fork(): void {
    const worker = cluster.fork();
    // IPC errors mean the worker is going away; its 'exit' is what matters.
    worker.on('error', () => {});
    this.exits.set(
      worker,
      new Promise((resolve) => {
        worker.once('exit', (code: number | null) => {
          this.exits.delete(worker);
          this.decisions.forget(worker);
          resolve(code);
        });
      }),
    );
  }

  private relay(sender: Worker, message: unknown): void {
    // A scrape of GET /metrics on one worker gathers every worker's metrics.
    if (this.metrics.handle(sender, message, this.exits.keys())) return;
    // A gateway decision looked up on one worker is asked of the others (without Redis).
    if (this.decisions.handle(sender, message, this.exits.keys())) return;
    if (!isEventEnvelope(message)) return;
    for (const worker of this.exits.keys()) {
      if (worker !== sender && worker.isConnected()) worker.send(message, () => {});
    }
  }

  private onExit(worker: Worker, code: number | null, signalName: string | null): void {
    if (this.stopping) return;
    const { log } = this.options;
    const workerPid = worker.process.pid;
    if (!this.started) {
      // A worker that cannot start (port taken, database unreachable) would fail again: give up.
      this.stopping = true;
      log.error({ worker: workerPid, code, signal: signalName }, 'a worker exited while starting; stopping the others');
      const abort = this.abortStart;
      void this.stop().then(() => abort?.(new Error(`a worker exited while starting (${signalName ?? `exit code ${code}`})`)));
      return;
    }
    const crashed = code !== 0;
    const delayMs = crashed ? this.backoff.next(Date.now()) : 0;
    if (crashed) log.warn({ worker: workerPid, code, signal: signalName, restartInMs: delayMs }, 'worker died unexpectedly; starting a replacement');
    else log.info({ worker: workerPid }, 'worker exited; starting a replacement');
    const timer = setTimeout(() => {
      this.pendingRestarts.delete(timer);
      if (!this.stopping) this.fork();
    }, delayMs);
    this.pendingRestarts.add(timer);
  }
}

function signal(worker: Worker, name: NodeJS.Signals): void {
  try {
    worker.process.kill(name);
  } catch {
    // Already gone.
  }
}
