import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Clock } from '../support/clock.ts';

export interface StalledConnectionsOptions {
  /** A connection that moves no byte for this long, outside node's keep-alive wait, is closed. */
  stallMs: number;
  clock: Clock;
}

/** Where a connection's bytes stood when last seen to move. */
interface Progress {
  bytes: number;
  since: number;
}

/**
 * Closes client connections that have stalled: no byte read from them or taken by them for
 * `stallMs`, while no keep-alive wait of node's covers them — a client that stopped reading its
 * response (the gateway then holds an upstream connection for it), a request whose answer never
 * comes, a connection that sends nothing. It does what `server.setTimeout()` did with one sweep every
 * eighth of `stallMs` (at most every second), where node's per-socket timer was refreshed on every
 * read and write and swapped with the keep-alive timer twice per request (~2,000 instructions per
 * request of a plain node:http server, bench/README.md). A stall may thus be seen up to one sweep late.
 *
 * Between requests node arms its own keep-alive timer on the socket (`socket.timeout` is then set):
 * those connections are left to it, so one is never closed before the keep-alive time the
 * response advertised. Headers and whole requests keep node's own deadlines (headersTimeout,
 * requestTimeout); this adds the response side, which node leaves unbounded.
 */
export class StalledConnections {
  private readonly connections = new Map<Socket, Progress>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    server: Server,
    private readonly options: StalledConnectionsOptions,
  ) {
    // (No 'close' listener per connection: the sweep forgets the ones that have closed.)
    server.on('connection', (socket: Socket) => this.connections.set(socket, { bytes: 0, since: options.clock.now() }));
    this.sweeper = setInterval(() => this.sweep(), Math.min(1000, Math.max(10, Math.floor(options.stallMs / 8))));
    this.sweeper.unref();
  }

  /** Connections being watched (closed ones until the next sweep). */
  get size(): number {
    return this.connections.size;
  }

  /** One pass: forgets closed connections, closes stalled ones. Run by the interval; tests call it with their clock moved. */
  sweep(): void {
    const now = this.options.clock.now();
    for (const [socket, progress] of this.connections) {
      if (socket.destroyed) {
        this.connections.delete(socket);
        continue;
      }
      // Bytes read, plus bytes written that the peer has taken (written into the stream minus what
      // still waits in it): a response piling up for a client that does not read does not count.
      const bytes = socket.bytesRead + (socket.bytesWritten ?? 0) - socket.writableLength;
      if (bytes !== progress.bytes || socket.timeout) {
        progress.bytes = bytes;
        progress.since = now;
      } else if (now - progress.since >= this.options.stallMs) {
        this.connections.delete(socket);
        socket.destroy();
      }
    }
  }

  stop(): void {
    clearInterval(this.sweeper);
    this.connections.clear();
  }
}
