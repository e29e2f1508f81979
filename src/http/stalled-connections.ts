import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface StalledConnectionsOptions {
  /** A connection that moves no byte for this long, outside node's keep-alive wait, is closed. */
  stallMs: number;
  /** Monotonic milliseconds (performance.now(); a test's clock): a wall-clock step must not close every connection at once. */
  now: () => number;
  /** How often the sweep runs on its own; 0: only when sweep() is called (tests). Default: an eighth of stallMs, at most every second. */
  sweepEveryMs?: number;
  /** Connections whose present wait another part times (the request front's, waiting for a request): left alone while it does. */
  timedElsewhere?: (socket: Socket) => boolean;
}

/** Where a connection's bytes stood when last seen to move. */
interface Progress {
  bytes: number;
  since: number;
}

/**
 * Closes client connections that have stalled: no byte read from them or taken by them for
 * `stallMs`, while node's keep-alive wait does not cover them — a client that stopped reading its
 * response (the gateway then holds an upstream exchange for it), a request whose answer never
 * comes, a connection that sends nothing. It does what `server.setTimeout()` did with one sweep every
 * eighth of `stallMs` (at most every second), where node's per-socket timer was refreshed on every
 * read and write and swapped with the keep-alive timer twice per request (bench/README.md). A stall
 * may thus be seen up to one sweep late, later if the event loop is busy, never early.
 *
 * Between requests node arms its keep-alive timer on the socket (`socket.timeout` is then the
 * server's keep-alive timeout plus its buffer): those connections are left to it, so none is closed
 * before the keep-alive time its response advertised. The request front's connections waiting for
 * a request are left to the front the same way (`timedElsewhere`). Headers and whole requests keep node's own
 * deadlines (headersTimeout, requestTimeout); this adds the response side, which node leaves unbounded.
 */
export class StalledConnections {
  private readonly connections = new Map<Socket, Progress>();
  private readonly sweeper: NodeJS.Timeout | undefined;
  private readonly watch: (socket: Socket) => void;

  constructor(
    private readonly server: Server,
    private readonly options: StalledConnectionsOptions,
  ) {
    // No 'close' listener per connection: the sweep forgets the closed ones. (With one, the
    // gateway promoted ~2,700 bytes per proxied request out of the young generation, against ~20
    // without, and paced runs had mark-compacts: bench/README.md.)
    this.watch = (socket) => this.connections.set(socket, { bytes: 0, since: options.now() });
    server.on('connection', this.watch);
    const every = options.sweepEveryMs ?? Math.min(1000, Math.max(10, Math.floor(options.stallMs / 8)));
    if (every > 0) {
      this.sweeper = setInterval(() => this.sweep(), every);
      this.sweeper.unref();
    }
  }

  /** Connections being watched (closed ones until the next sweep). */
  get size(): number {
    return this.connections.size;
  }

  /** One pass: forgets closed connections, closes stalled ones. Run by the interval; tests call it with their clock moved. */
  sweep(): void {
    const now = this.options.now();
    // What node sets on a socket waiting between requests (_http_server.js, resOnFinish).
    const keepAliveWait = this.server.keepAliveTimeout + ((this.server as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer ?? 1000);
    for (const [socket, progress] of this.connections) {
      if (socket.destroyed) {
        this.connections.delete(socket);
        continue;
      }
      // Bytes read, plus bytes written that the peer has taken (written into the stream minus what
      // still waits in it): a response piling up for a client that does not read does not count.
      const bytes = socket.bytesRead + (socket.bytesWritten ?? 0) - socket.writableLength;
      if (bytes !== progress.bytes || socket.timeout === keepAliveWait || this.options.timedElsewhere?.(socket)) {
        progress.bytes = bytes;
        progress.since = now;
      } else if (now - progress.since >= this.options.stallMs) {
        this.connections.delete(socket);
        socket.destroy();
      }
    }
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.server.off('connection', this.watch);
    this.connections.clear();
  }
}
