/**
 * How long opening a PostgreSQL connection may take, counted in time this process ran.
 *
 * pg's own `connectionTimeoutMillis` is a plain timer. When the event loop is held up (a long
 * synchronous task, a CPU-starved container) for longer than the timeout while a connection is being
 * opened, the timer runs before the server's answers, already waiting unread, and the connection is
 * destroyed: a healthy database looks unreachable, and the node answers 503 until the next probe
 * (measured: a 6 s block turned into a second of 503s). Here a timer that fires late gives its
 * lateness back once, plus a short grace for the opening's remaining round trips; only then does
 * the opening fail, the way pg's timer fails it ('timeout expired', the socket destroyed).
 */

/** A timer firing later than this was held up, not merely jittery. */
const LATE_MS = 50;
/** After a hold-up: how long the opening may still take (its few remaining round trips). */
const GRACE_MS = 250;

/**
 * Calls `expire` once `ms` have passed while the event loop ran: a timer held up by more than
 * `LATE_MS` is armed once more for the time it was held up plus a grace. Returns the cancel.
 */
export function runningDeadline(ms: number, expire: () => void, now: () => number = () => performance.now()): () => void {
  let timer: NodeJS.Timeout | undefined;
  let extended = false;
  const arm = (delay: number) => {
    const due = now() + delay;
    timer = setTimeout(() => {
      const late = now() - due;
      if (late > LATE_MS && !extended) {
        extended = true;
        arm(Math.min(late, ms) + GRACE_MS);
      } else {
        expire();
      }
    }, delay);
    timer.unref();
  };
  arm(ms);
  return () => clearTimeout(timer);
}

/** The part of pg's Client the deadline needs. */
interface PgClientLike {
  connect(): Promise<void>;
  connection: { _ending?: boolean; stream: { destroy(error?: Error): void } };
}

type PgClientClass = new (...args: any[]) => PgClientLike;

/**
 * pg's Client with the opening bounded by `runningDeadline` instead of pg's timer: the settings'
 * `connectionTimeoutMillis` is taken over (pg gets 0).
 */
export function withRunningConnectDeadline<T extends PgClientClass>(Client: T): T {
  return class extends Client {
    private readonly connectTimeoutMs: number;

    constructor(...args: any[]) {
      const settings = (args[0] ?? {}) as Record<string, unknown>;
      super({ ...settings, connectionTimeoutMillis: 0 });
      this.connectTimeoutMs = typeof settings.connectionTimeoutMillis === 'number' ? settings.connectionTimeoutMillis : 0;
    }

    override connect(): Promise<void> {
      const opening = super.connect();
      if (this.connectTimeoutMs <= 0) return opening;
      const cancel = runningDeadline(this.connectTimeoutMs, () => {
        // As pg's own timer does: the 'end' that follows is no unexpected disconnection.
        this.connection._ending = true;
        this.connection.stream.destroy(new Error('timeout expired'));
      });
      opening.then(cancel, cancel);
      return opening;
    }
  };
}
