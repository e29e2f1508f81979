import { runningDeadline } from './connect-deadline.ts';
import { databaseUnreachableReason, isDatabaseBusy } from './unavailable.ts';

export interface DatabaseHealthOptions {
  /** How often the probe runs (e.g. min(query timeout, 1 s)); a probe gets as long to answer. */
  probeIntervalMs: number;
  /** How long the probe set off by a timeout gets to answer (default half an interval: requests wait for it). */
  confirmTimeoutMs?: number;
}

/**
 * Whether the database can be reached, as far as this node knows. A partition ends no connection:
 * only timeouts tell, and every request waiting out its own would turn the node into a queue. So the
 * first query timeout or failed connection sets the probe off at once (half an interval to answer;
 * a probe already under way gets as long from then), requests wait for its verdict, and only its failure marks the
 * database unreachable; from then on queries fail at once (DatabaseUnreachableError → 503) and caches serve what they hold, while one probe
 * (a `select 1` on its own connection, every interval) decides when it is back. The probe also runs
 * while the database is reachable, so an idle node notices a partition too.
 */
export class DatabaseHealth {
  /** False from the first timeout (or probe failure) until a probe succeeds. */
  reachable = true;
  /** Times the database became unreachable (a metric). */
  partitions = 0;
  /** Why it was last found unreachable (a short reason, no SQL or values). */
  lastReason = '';
  /** performance.now() when it was last found unreachable. */
  private unreachableSince = 0;
  private readonly listeners = new Set<(reachable: boolean, detail: { reason: string; unreachableForMs: number }) => void>();
  private timer: NodeJS.Timeout | undefined;
  /** Set from start() to stop(): the background probe runs (and a suspicion can be confirmed). */
  private watching = false;

  constructor(
    private readonly probe: (timeoutMs?: number) => Promise<void>,
    readonly options: DatabaseHealthOptions,
  ) {}

  /** Starts the background probe: one every interval, counted from the start of the one before. */
  start(): void {
    this.watching = true;
    this.scheduleProbe(this.options.probeIntervalMs);
  }

  stop(): void {
    this.watching = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Not a plain interval: a probe on a dead connection gives up after a whole interval (and decides
   * after that loop turn's I/O), so an interval's tick would find it still running, join it, and the
   * next probe would start one interval later: two intervals between a partition's end and its
   * notice. Here the next probe starts an interval after the last one started, at once if that is past.
   */
  private scheduleProbe(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const startedAt = performance.now();
      void this.runProbe().finally(() => {
        if (this.watching) this.scheduleProbe(Math.max(0, startedAt + this.options.probeIntervalMs - performance.now()));
      });
    }, delayMs);
    this.timer.unref();
  }

  /** Hears every change of `reachable`; returns a function that stops listening. */
  onChange(listener: (reachable: boolean, detail: { reason: string; unreachableForMs: number }) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * A query timed out or a connection could not be opened: the probe asks at once, and only its
   * failure marks the database unreachable. A slow answer (a loaded server, a long statement, this
   * process's own event loop held up) is no partition, and taking it for one would make the node
   * serve what it holds: with Redis down too, even tokens revoked meanwhile.
   */
  suspect(reason: string): void {
    // Unwatched (the manage CLI, a cluster's first process): nothing would ever find it back.
    if (!this.reachable || !this.watching || this.verdict) return;
    const confirmMs = this.options.confirmTimeoutMs ?? Math.max(100, Math.floor(this.options.probeIntervalMs / 2));
    this.suspectedReason = reason;
    const underWay = this.running;
    const verdict = underWay ? this.confirmWith(underWay, confirmMs, reason) : this.runProbe(confirmMs);
    this.verdict = verdict;
    void verdict.finally(() => {
      if (this.verdict === verdict) this.verdict = undefined;
    });
  }

  /**
   * The probe under way may have set off up to an interval ago on a path as silent: it gets the
   * confirmation time from now, not what is left of its own (requests would wait up to a whole
   * interval more). Having set off earlier, it has had at least as long as a probe of its own.
   */
  private confirmWith(underWay: Promise<void>, confirmMs: number, reason: string): Promise<void> {
    return new Promise<void>((resolve) => {
      // As the probe decides: in time this process ran, after that loop turn's I/O.
      const cancel = runningDeadline(confirmMs, () =>
        setImmediate(() => {
          if (this.running === underWay) this.markUnreachable(reason);
          resolve();
        }),
      );
      void underWay.finally(() => {
        cancel();
        resolve();
      });
    });
  }

  /** Why the database was last suspected (the reason logged if the probe confirms it). */
  private suspectedReason: string | undefined;

  /** The verdict on a suspicion, until it is given. */
  private verdict: Promise<void> | undefined;

  /**
   * While a suspicion is being checked, the probe's verdict: a request waits for it (at most the
   * confirmation timeout) rather than send its query on a connection that may be as silent, so the
   * first requests of a partition cost one query timeout and one confirmation, not one timeout each.
   */
  get pendingVerdict(): Promise<void> | undefined {
    return this.verdict;
  }

  /** The probe under way, if any. */
  private running: Promise<void> | undefined;

  /** The probe failed: stop waiting on the database. */
  markUnreachable(reason: string): void {
    // Unwatched (the manage CLI, a cluster's first process): nothing would ever find it back.
    if (!this.reachable || !this.watching) return;
    this.reachable = false;
    this.partitions++;
    this.lastReason = reason;
    this.unreachableSince = performance.now();
    this.notify(false, reason, 0);
    // Ask at once: a single refused connection should not cost a whole interval of 503s.
    void this.runProbe();
  }

  /** Runs one probe unless one is under way (then that one's outcome counts); it bounds its own wait. */
  runProbe(timeoutMs?: number): Promise<void> {
    this.running ??= this.probeOnce(timeoutMs).finally(() => {
      this.running = undefined;
      this.suspectedReason = undefined;
    });
    return this.running;
  }

  private async probeOnce(timeoutMs: number | undefined): Promise<void> {
    try {
      try {
        await this.probe(timeoutMs);
      } catch (error) {
        // The server answered (e.g. too many connections): reachable.
        if (!isDatabaseBusy(error)) throw error;
      }
      if (!this.reachable) {
        this.reachable = true;
        this.notify(true, this.lastReason, performance.now() - this.unreachableSince);
      }
    } catch (error) {
      this.markUnreachable(this.suspectedReason ?? databaseUnreachableReason(error) ?? 'the probe query failed');
    }
  }

  private notify(reachable: boolean, reason: string, unreachableForMs: number): void {
    for (const listener of this.listeners) listener(reachable, { reason, unreachableForMs: Math.round(unreachableForMs) });
  }
}
