/**
 * The upstream exchanges' deadlines (the 504 when an upstream is slow to answer, the cut when its
 * body pauses too long), kept by one coarse ticking timer for all of them rather than by undici's
 * timers per request.
 *
 * Why: undici re-arms each socket's parser timer per exchange, between its native keep-alive timer
 * and a "fast" headers/body timer whose cleared entries stay in a 1 s wheel for about half a second.
 * Under load they outlive two young-generation collections, so each request left a timer in the old
 * generation (bytes promoted per request 154 with them, 84 without, in the paced bench): old-generation
 * growth is what brings the long mark-compact pauses. Here an exchange is a node in an intrusive list
 * (no allocation), re-linked in O(1), and the lists are swept by one interval.
 *
 * Time is counted in ticks of that interval, not read from a clock: a deadline passes only after
 * enough ticks have really run, so an event loop held up for seconds (a busy machine, a synchronous
 * call) cannot time out an answer that arrived meanwhile and waits to be read. A deadline passes
 * between its timeout and its timeout plus two ticks; a tick is an eighth of the shorter timeout,
 * between 5 ms and 1 s.
 */
export interface DeadlineEntry {
  /** Called once when the deadline has passed; the entry is no longer armed. */
  expire(): void;
  /** Owned by DeadlineList: the list it is armed in, its neighbours there, the tick it was armed at. */
  deadlineList: DeadlineList | undefined;
  deadlinePrevious: DeadlineEntry | undefined;
  deadlineNext: DeadlineEntry | undefined;
  deadlineArmedAt: number;
}

/** Entries that share one timeout, in the order they were (re-)armed, so the oldest is the first. */
export class DeadlineList {
  private head: DeadlineEntry | undefined;
  private tail: DeadlineEntry | undefined;

  /** `ticks`: how many ticks after its arming an entry expires. */
  constructor(readonly ticks: number) {}

  get empty(): boolean {
    return this.head === undefined;
  }

  /** Arms (or re-arms) the entry at tick `now`, taking it out of any list it was in. */
  arm(entry: DeadlineEntry, now: number): void {
    entry.deadlineList?.remove(entry);
    entry.deadlineList = this;
    entry.deadlineArmedAt = now;
    entry.deadlinePrevious = this.tail;
    entry.deadlineNext = undefined;
    if (this.tail) this.tail.deadlineNext = entry;
    else this.head = entry;
    this.tail = entry;
  }

  remove(entry: DeadlineEntry): void {
    if (entry.deadlineList !== this) return;
    const { deadlinePrevious: previous, deadlineNext: next } = entry;
    if (previous) previous.deadlineNext = next;
    else this.head = next;
    if (next) next.deadlinePrevious = previous;
    else this.tail = previous;
    entry.deadlineList = entry.deadlinePrevious = entry.deadlineNext = undefined;
  }

  /** Expires every entry armed `ticks` or more ticks before `now`: a walk over the expired ones only. */
  expire(now: number): void {
    let entry = this.head;
    while (entry && now - entry.deadlineArmedAt >= this.ticks) {
      this.remove(entry);
      entry.expire();
      entry = this.head;
    }
  }
}

type Interval = { unref(): unknown };

export interface DeadlineTimers {
  setInterval(callback: () => void, ms: number): Interval;
  clearInterval(timer: Interval): void;
}

const nodeTimers: DeadlineTimers = {
  setInterval: (callback, ms) => setInterval(callback, ms),
  clearInterval: (timer) => clearInterval(timer as NodeJS.Timeout),
};

/** The two deadlines of an exchange: its response headers, then each pause in its response body. */
export class ExchangeDeadlines {
  readonly tickMs: number;
  private readonly headers: DeadlineList;
  private readonly body: DeadlineList;
  private now = 0;
  private timer: Interval | undefined;

  constructor(
    options: { responseTimeoutMs: number; bodyTimeoutMs: number },
    private readonly timers: DeadlineTimers = nodeTimers,
  ) {
    this.tickMs = Math.min(1000, Math.max(5, Math.floor(Math.min(options.responseTimeoutMs, options.bodyTimeoutMs) / 8)));
    // Armed between two ticks: one more tick makes sure the whole timeout has run.
    this.headers = new DeadlineList(Math.ceil(options.responseTimeoutMs / this.tickMs) + 1);
    this.body = new DeadlineList(Math.ceil(options.bodyTimeoutMs / this.tickMs) + 1);
  }

  /** The upstream now owes its response headers. */
  awaitHeaders(entry: DeadlineEntry): void {
    this.headers.arm(entry, this.now);
    this.run();
  }

  /** The upstream now owes the next piece of its body (called again at each piece). */
  awaitBody(entry: DeadlineEntry): void {
    this.body.arm(entry, this.now);
    this.run();
  }

  /** Nothing is owed (the exchange ended, or its client is not reading). */
  release(entry: DeadlineEntry): void {
    entry.deadlineList?.remove(entry);
  }

  /** One tick: expires what is due; the timer stops while nothing is armed. */
  tick(): void {
    this.now += 1;
    this.headers.expire(this.now);
    this.body.expire(this.now);
    if (this.timer && this.headers.empty && this.body.empty) {
      this.timers.clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  close(): void {
    if (this.timer) this.timers.clearInterval(this.timer);
    this.timer = undefined;
  }

  private run(): void {
    if (this.timer) return;
    this.timer = this.timers.setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
  }
}
