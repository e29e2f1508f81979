import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { ClientRequest } from '../../gateway/client-exchange.ts';
import { RequestHeadParsers, type HeadReader, type RequestHead, type RequestHeadLimits } from './request-head.ts';
import { FrontResponse } from './response.ts';
import { SharedReads } from './shared-reads.ts';

/**
 * The request front (docs/architecture.md, "The request front"): client connections reach it before
 * node:http. A request it can answer cheaply — a plain GET, HEAD or DELETE (request-head.ts) whose
 * head arrived whole, for a path `takes()` accepts — it hands to `handle` with a request and response
 * of its own (no IncomingMessage, no ServerResponse, one read and one write per exchange). At the
 * first request it cannot, it hands the connection to node:http with every byte it has read, and is
 * done with it: bodies, Expect, upgrades, HTTP/1.0, the identity API, heads that come in pieces, and
 * every malformed or ambiguous head keep node:http's handling, refusals included.
 *
 * It takes node:http's own 'connection' listener off the server and calls it for the connections it
 * hands over, so the server still listens, counts and closes every connection; node:http's
 * closeIdleConnections()/closeAllConnections() see only its own, and the front's are closed by the
 * same-named methods here.
 */

export interface RequestFrontOptions {
  limits: RequestHeadLimits;
  /** How long a connection may wait for its first request (node:http's headersTimeout). */
  headersTimeoutMs: number;
  /** How long a connection may sit idle between requests (node:http's keepAliveTimeout). */
  keepAliveTimeoutMs: number;
  /** Wall-clock milliseconds, for the Date header. */
  now: () => number;
  /** Monotonic milliseconds for the waits (default performance.now(); a test's clock). */
  clock?: () => number;
  /** How often the waits are swept; 0: only when sweep() is called (tests). Default: an eighth of the shorter wait, at most every second. */
  sweepEveryMs?: number;
  /** Whether a plain request is the front's to answer (a gateway path), or node:http's. */
  takes: (head: RequestHead) => boolean;
  /** Answers a request the front took. */
  handle: (request: ClientRequest, response: FrontResponse) => void;
  /** Whether connections are read into one shared buffer (shared-reads.ts) where the runtime allows; false: 'data' events. Default true. */
  sharedReads?: boolean;
}

/** What node adds to keepAliveTimeout for the timer it arms between requests (_http_server.js). */
const KEEP_ALIVE_TIMEOUT_BUFFER_MS = 1000;

export class RequestFront {
  private readonly parsers: RequestHeadParsers;
  /** Where the connections read into, when the runtime allows it (undefined: each read is a 'data' event). */
  readonly sharedReads: SharedReads | undefined;
  private readonly connections = new Map<Socket, FrontConnection>();
  private readonly nodeListener: (socket: Socket) => void;
  private readonly listener = (socket: Socket): void => {
    this.connections.set(socket, new FrontConnection(this, socket));
  };
  private readonly clock: () => number;
  private readonly sweeper: NodeJS.Timeout | undefined;
  private cachedDate = '';
  private cachedSecond = -1;
  /** The Date header's value, made once a second. */
  readonly date = (): string => {
    const now = this.options.now();
    const second = Math.floor(now / 1000);
    if (second !== this.cachedSecond) {
      this.cachedSecond = second;
      this.cachedDate = new Date(now).toUTCString();
    }
    return this.cachedDate;
  };
  readonly responseOptions: { keepAliveTimeoutSeconds: number; date: () => string };
  /** How long a connection may wait between requests: node's keep-alive timer (its timeout plus its buffer). */
  readonly keepAliveWaitMs: number;

  constructor(
    readonly server: Server,
    readonly options: RequestFrontOptions,
  ) {
    this.parsers = new RequestHeadParsers(options.limits);
    this.sharedReads = options.sharedReads === false ? undefined : new SharedReads();
    this.responseOptions = { keepAliveTimeoutSeconds: Math.floor(options.keepAliveTimeoutMs / 1000), date: this.date };
    this.keepAliveWaitMs = options.keepAliveTimeoutMs + KEEP_ALIVE_TIMEOUT_BUFFER_MS;
    // node:http's connection listener is the first 'connection' listener (its constructor adds it).
    const [nodeListener] = server.listeners('connection') as ((socket: Socket) => void)[];
    if (!nodeListener) throw new Error('the server has no connection listener of node:http to hand connections to');
    this.nodeListener = nodeListener;
    server.off('connection', nodeListener);
    server.prependListener('connection', this.listener);
    // The waits for a request are swept, not a timer per socket: socket.setTimeout() twice per
    // request, and the refresh it costs on every read, were ~2.6k instructions per proxied request
    // (bench/README.md). A wait may thus end up to about two sweeps late, never early.
    this.clock = options.clock ?? (() => performance.now());
    const every = options.sweepEveryMs ?? Math.min(1000, Math.max(10, Math.floor(Math.min(options.headersTimeoutMs, this.keepAliveWaitMs) / 8)));
    if (every > 0) {
      this.sweeper = setInterval(() => this.sweep(), every);
      this.sweeper.unref();
    }
  }

  /** One pass: closes the connections that have waited for a request past their time (the interval runs it; tests call it with their clock moved). */
  sweep(): void {
    const now = this.clock();
    for (const connection of this.connections.values()) connection.sweep(now);
  }

  /** Whether the front times this connection's present wait itself (a request's head, or the next request): StalledConnections leaves it alone. */
  waitsForRequest(socket: Socket): boolean {
    return this.connections.get(socket)?.waitsForRequest() ?? false;
  }

  /** Stops the sweep (the connections stay: closeAllConnections() closes them). */
  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
  }

  /** Connections the front still holds. */
  get size(): number {
    return this.connections.size;
  }

  reader(): HeadReader {
    return this.parsers.reader();
  }

  /** node:http takes the connection, with `bytes` read first. */
  handOver(socket: Socket, bytes: Buffer | undefined): void {
    this.connections.delete(socket);
    if (bytes !== undefined && bytes.length > 0) socket.unshift(bytes);
    // Flowing again if the front had paused it (a client pipelining ahead): node:http's listener
    // attaches before the unshifted bytes flow, on the next tick.
    socket.resume();
    this.nodeListener.call(this.server, socket);
  }

  forget(socket: Socket): void {
    this.connections.delete(socket);
  }

  /** Closes the connections waiting for a request (a draining server; node:http's closeIdleConnections()). */
  closeIdleConnections(): void {
    for (const connection of this.connections.values()) connection.closeIfIdle();
  }

  /** Closes every connection the front holds, answers under way cut off. */
  closeAllConnections(): void {
    for (const connection of this.connections.values()) connection.destroy();
  }
}

/** One client connection while the front holds it. */
class FrontConnection {
  private readonly reader: HeadReader;
  /** The answer under way (one at a time: bytes of a pipelined request wait in `waiting`). */
  private response: FrontResponse | undefined;
  /** Bytes read behind the answer under way, in the order read (joined once, when it has ended). */
  private waiting: Buffer[] | undefined;
  private waitingBytes = 0;
  private done = false;
  /**
   * How long the connection may now go without a byte moving: the head's wait at first, node's
   * keep-alive wait between requests, 0 while a request is answered (StalledConnections times that).
   */
  private waitMs: number;
  /** What the last sweep saw: the wait, the bytes moved by then, and since when they had not moved. */
  private sweptWaitMs = -1;
  private sweptBytes = -1;
  private sweptSince = 0;
  private readonly onData = (chunk: Buffer): void => this.read(chunk, true);
  /** Whether reads come from the front's shared buffer (a view valid during the read) rather than as 'data' chunks. */
  private readonly shared: boolean;
  private readonly onDrain = (): void => this.response?.drained();
  // The client half-closed. As node:http does (httpAllowHalfOpen false): the request under way is
  // abandoned and the connection closed, so the gateway lets its upstream exchange go at once.
  private readonly onEnd = (): void => {
    if (this.response) this.destroy();
    else this.finish(true);
  };
  private readonly onClose = (): void => {
    this.finish(false);
    this.front.forget(this.socket);
    this.response?.socketClosed();
    this.response = undefined;
  };
  private readonly responseEnded = (next: 'keep-alive' | 'close' | 'cut'): void => this.answered(next);

  constructor(
    private readonly front: RequestFront,
    private readonly socket: Socket,
  ) {
    this.reader = front.reader();
    this.waitMs = front.options.headersTimeoutMs;
    this.shared = front.sharedReads?.attach(socket, (length, buffer) => this.read(buffer.subarray(0, length), false)) ?? false;
    if (!this.shared) socket.on('data', this.onData);
    socket.on('drain', this.onDrain);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('error', noop);
  }

  waitsForRequest(): boolean {
    return !this.done && this.waitMs > 0;
  }

  /**
   * Closes the connection once no byte has moved (read, or taken by the client) for its wait, as
   * socket.setTimeout() would: counted from the first sweep that saw the wait and the bytes as they
   * are, so never early, and up to about two sweeps late (the wait may begin just after a sweep).
   */
  sweep(now: number): void {
    if (this.done) return;
    const socket = this.socket;
    const bytes = socket.bytesRead + socket.bytesWritten - socket.writableLength;
    if (this.waitMs === 0 || this.waitMs !== this.sweptWaitMs || bytes !== this.sweptBytes) {
      this.sweptWaitMs = this.waitMs;
      this.sweptBytes = bytes;
      this.sweptSince = now;
    } else if (now - this.sweptSince >= this.waitMs) {
      this.destroy();
    }
  }

  /** Closes the connection if it waits for a request (one closing after its last answer goes on: closeAllConnections cuts it). */
  closeIfIdle(): void {
    // (Not while the last answer's bytes still wait to be written: they would be lost.)
    if (!this.done && !this.response && this.waiting === undefined && this.socket.writableLength === 0) this.destroy();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** `own`: the chunk is the read's own ('data'); otherwise a view on the shared buffer, copied if kept. */
  private read(chunk: Buffer, own: boolean): void {
    const limit = this.front.options.limits.maxHeaderBytes;
    if (this.response) {
      // Pipelined behind the answer under way: read once it has ended. A client that sends more
      // than a head's worth meanwhile is not read on (and is node:http's after this answer).
      (this.waiting ??= []).push(own ? chunk : Buffer.from(chunk));
      this.waitingBytes += chunk.length;
      if (this.waitingBytes > limit) this.socket.pause();
      return;
    }
    // llhttp sees at most a head's worth: a plain head is no longer, and the rest of a large read
    // (pipelined requests, a body) is not copied into its memory for nothing.
    const reading = this.reader.read(chunk.length > limit + 1 ? chunk.subarray(0, limit + 1) : chunk);
    if (reading.kind !== 'plain' || !this.front.options.takes(reading.head)) {
      // Not the front's (or a head in pieces: node:http times such heads, and reads them whole).
      this.handOver(own ? chunk : Buffer.from(chunk));
      return;
    }
    // (A socket's 'data' chunks are its own: a view on one outlives the read. The shared buffer's is copied.)
    const rest = reading.consumed >= chunk.length ? undefined : own ? chunk.subarray(reading.consumed) : Buffer.from(chunk.subarray(reading.consumed));
    if (rest !== undefined) {
      this.waiting = [rest];
      this.waitingBytes = rest.length;
    }
    this.waitMs = 0;
    const { head } = reading;
    const response = new FrontResponse(this.socket, head.method === 'HEAD', head.keepAlive, this.front.responseOptions, this.responseEnded);
    this.response = response;
    this.front.options.handle(new FrontRequest(head, this.socket), response);
  }

  /** The answer has been written (or cut off): the next request, or the connection's end. */
  private answered(next: 'keep-alive' | 'close' | 'cut'): void {
    this.response = undefined;
    if (this.done) return;
    if (next !== 'keep-alive') {
      if (next === 'cut') this.destroy();
      else this.finish(true);
      return;
    }
    this.waitMs = this.front.keepAliveWaitMs;
    if (this.waiting === undefined) return;
    const waiting = this.waiting.length === 1 ? this.waiting[0]! : Buffer.concat(this.waiting, this.waitingBytes);
    this.waiting = undefined;
    this.waitingBytes = 0;
    // Not from inside end(): its caller (the upstream's handler) is still at work.
    process.nextTick(() => {
      if (this.done) return;
      // More pipelined than one head's worth: node:http, which reads such a client at its own pace,
      // takes the connection (the socket stays paused until node reads it).
      if (waiting.length > this.front.options.limits.maxHeaderBytes) {
        this.handOver(waiting);
        return;
      }
      this.socket.resume();
      this.read(waiting, true);
    });
  }

  /** Every read is parsed whole or handed over: `chunk` is all the front has read and not answered. */
  private handOver(chunk: Buffer): void {
    this.detach();
    // node:http listens for errors and the close from now on.
    this.socket.off('close', this.onClose);
    this.socket.off('error', noop);
    this.front.handOver(this.socket, chunk);
  }

  /**
   * The front reads no more of the connection: closed once what is written has gone (`close`, as
   * node does after a last response: without waiting for the client's side), or gone already. It
   * stays the front's until its 'close' (closeAllConnections cuts a client that does not read its last
   * answer), and its error listener stays: a reset while the last bytes go is not an uncaught 'error'.
   */
  private finish(close: boolean): void {
    if (this.done) return;
    this.detach();
    if (close) {
      // Nothing more is read: a client that sends on without reading its last answer then stalls,
      // and is swept (StalledConnections), rather than being read and ignored for ever.
      this.socket.pause();
      this.socket.destroySoon();
    }
  }

  private detach(): void {
    this.done = true;
    const socket = this.socket;
    // Reads go to the stream again: node:http's, or nobody's (a connection closing).
    if (this.shared) this.front.sharedReads!.detach(socket);
    else socket.off('data', this.onData);
    socket.off('drain', this.onDrain);
    socket.off('end', this.onEnd);
    this.reader.free();
  }
}

/** A plain request as the gateway reads it (ClientRequest): no body, so its stream has ended before it is seen. */
class FrontRequest implements ClientRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly complete = true;
  readonly readableEnded = true;
  readonly destroyed = false;

  constructor(
    head: RequestHead,
    readonly socket: Socket,
  ) {
    this.method = head.method;
    this.url = head.target;
    this.headers = head.headers;
  }

  pause(): this {
    return this;
  }
  resume(): this {
    return this;
  }
  on(): this {
    return this;
  }
  off(): this {
    return this;
  }
  once(): this {
    return this;
  }
}

function noop(): void {}
