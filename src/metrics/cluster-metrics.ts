import type { Worker } from 'node:cluster';
import type { MetricFamily } from './registry.ts';

/**
 * A scrape under node:cluster reaches one worker; that worker asks the primary, which asks every
 * worker for its metric families and hands them back, so one scrape shows the whole service (each
 * series labelled with its worker). Messages between processes:
 *   worker → primary  gather   {id}            a scrape wants everyone's metrics
 *   primary → worker  collect  {id}            send yours
 *   worker → primary  families {id, families}
 *   primary → worker  gathered {id, sources}   every answer that came in time
 */
type MetricsMessage =
  | { type: 'gather'; id: number }
  | { type: 'collect'; id: number }
  | { type: 'families'; id: number; families: MetricFamily[] }
  | { type: 'gathered'; id: number; sources: MetricFamily[][] };

interface MetricsEnvelope {
  keystoneGatewayMetrics: MetricsMessage;
}

function metricsMessage(value: unknown): MetricsMessage | undefined {
  const message = (value as Partial<MetricsEnvelope> | null)?.keystoneGatewayMetrics;
  return typeof message === 'object' && message !== null && typeof message.id === 'number' ? message : undefined;
}

function envelope(message: MetricsMessage): MetricsEnvelope {
  return { keystoneGatewayMetrics: message };
}

/** How long the primary waits for the workers' answers; a busy or dying worker is left out. */
export const COLLECT_TIMEOUT_MS = 1000;

/** A worker's side: answers the primary's collect requests, and gathers for its own scrapes. */
export class WorkerMetricsExchange {
  private nextId = 1;
  private readonly pending = new Map<number, (sources: MetricFamily[][] | undefined) => void>();
  private readonly listener = (raw: unknown) => this.receive(raw);

  constructor(private readonly families: () => MetricFamily[]) {
    process.on('message', this.listener);
  }

  /** Every worker's families, or undefined when the primary did not answer in time (the caller renders its own). */
  gather(timeoutMs = COLLECT_TIMEOUT_MS * 2): Promise<MetricFamily[][] | undefined> {
    if (!process.connected || !process.send) return Promise.resolve(undefined);
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const finish = (sources: MetricFamily[][] | undefined) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(sources);
      };
      this.pending.set(id, finish);
      process.send!(envelope({ type: 'gather', id }), undefined, undefined, (error) => {
        if (error) finish(undefined);
      });
    });
  }

  close(): void {
    process.off('message', this.listener);
    for (const finish of [...this.pending.values()]) finish(undefined);
  }

  private receive(raw: unknown): void {
    const message = metricsMessage(raw);
    if (!message) return;
    if (message.type === 'collect' && process.connected && process.send) {
      process.send(envelope({ type: 'families', id: message.id, families: this.families() }), undefined, undefined, () => {});
    } else if (message.type === 'gathered') {
      this.pending.get(message.id)?.(message.sources);
    }
  }
}

/** The primary's side: fans a worker's gather out to every worker and returns what came back in time. */
export class PrimaryMetricsRelay {
  private nextId = 1;
  private readonly gatherings = new Map<number, { answers: [workerId: number, families: MetricFamily[]][]; waiting: Set<Worker>; done: () => void }>();

  /** Handles a metrics message from `sender` (true), or leaves it to others (false). */
  handle(sender: Worker, raw: unknown, workers: Iterable<Worker>): boolean {
    const message = metricsMessage(raw);
    if (!message) return false;
    if (message.type === 'gather') this.gather(sender, message.id, workers);
    else if (message.type === 'families') this.answer(sender, message.id, message.families);
    return true;
  }

  private gather(requester: Worker, requestId: number, workers: Iterable<Worker>): void {
    const id = this.nextId++;
    const waiting = new Set([...workers].filter((worker) => worker.isConnected()));
    const answers: [number, MetricFamily[]][] = [];
    const done = () => {
      clearTimeout(timer);
      this.gatherings.delete(id);
      // In worker order, so consecutive scrapes list series alike.
      const sources = answers.sort(([a], [b]) => a - b).map(([, families]) => families);
      if (requester.isConnected()) requester.send(envelope({ type: 'gathered', id: requestId, sources }), () => {});
    };
    const timer = setTimeout(done, COLLECT_TIMEOUT_MS);
    this.gatherings.set(id, { answers, waiting, done });
    for (const worker of waiting) {
      worker.send(envelope({ type: 'collect', id }), (error: Error | null) => {
        if (error) this.answer(worker, id, undefined);
      });
    }
    if (waiting.size === 0) done();
  }

  private answer(worker: Worker, id: number, families: MetricFamily[] | undefined): void {
    const gathering = this.gatherings.get(id);
    if (!gathering || !gathering.waiting.delete(worker)) return;
    if (families) gathering.answers.push([worker.id, families]);
    if (gathering.waiting.size === 0) gathering.done();
  }
}
