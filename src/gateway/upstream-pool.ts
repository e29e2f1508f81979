import net from 'node:net';
import tls from 'node:tls';
import type { RequestBody } from './client-exchange.ts';
import { LlhttpRun, OK, PAUSED, SKIP_BODY, TYPE_RESPONSE, USER_ERROR } from '../http/llhttp.ts';

/**
 * The gateway's HTTP/1.1 client for upstreams: keep-alive connections per upstream origin, requests
 * written as one string, responses framed by llhttp (the parser of Node and undici, here the
 * WebAssembly build undici ships).
 *
 * Why not undici itself: a proxied request's upstream half cost about as much as node:http's whole
 * server half (bench/README.md, "An HTTP client of our own"). Most of it went to work a proxy does
 * not need — a Request object per exchange, every header validated again although node:http had
 * already parsed and validated the client's, a setImmediate before each connection is reused. What
 * must not be cut is framing: a response framed wrongly would hand one user's bytes to the next
 * request on that connection, so framing is llhttp's, and any byte an upstream sends that does not
 * belong to the exchange in progress ends the connection.
 *
 * The WebAssembly file is undici's (http/llhttp.ts says how it is loaded).
 */

/** What one exchange is told, in order: onConnect; then onHeaders, onData…, onComplete; or onError. */
export interface UpstreamHandler {
  /**
   * The request is being written to a connection; `abort` cuts it off (onError follows). Called
   * again, with a new `abort`, when a bodiless idempotent request is sent once more because the
   * reused connection it first went on had been closed by the upstream.
   */
  onConnect(abort: (reason?: Error) => void): void;
  /**
   * The final response's head (1xx are not passed on). `headers` is the flat [name, value, …] list
   * as the upstream spelled it. false: pause until `resume` is called. May throw: the exchange is
   * then cut off, and onError gets the error.
   */
  onHeaders(status: number, headers: string[], resume: () => void): boolean;
  /** A piece of the body (a view on the socket's chunk). false: pause until `resume`. */
  onData(chunk: Buffer): boolean;
  onComplete(): void;
  onError(error: Error): void;
  /**
   * True once the exchange has ended while its request waited for a connection (its client went
   * away, or its deadline passed, and it reported so itself): the request is dropped, never sent.
   */
  readonly abandoned?: boolean;
}

export interface UpstreamRequest {
  method: string;
  /** The request target, already canonical (origin-form). */
  path: string;
  /** Flat [name, value, …] list; lower-case names; no hop-by-hop headers. */
  headers: (string | string[])[];
  /**
   * How many entries at the start of `headers` (a name and its value are two) are known to be
   * sendable, and are not tested again: the client's headers as node's HTTP parser read them (it
   * refused every name that is not a token and every value with a control character, as dispatch()
   * would: the server parses strictly, `insecureHTTPParser: false` in src/app.ts) and what the
   * gateway made of them (src/gateway/upstream-request.ts). A forwarded token alone is ~200 characters.
   */
  checkedHeaders?: number;
  /** Lines checked and written before, sent after `headers` as they are. */
  prepared?: PreparedHeaders;
  /** The client's request, streamed as the body (null: no body). */
  body: RequestBody | null;
}

export interface UpstreamPoolOptions {
  /** Most connections open to this origin at once; further requests wait for one. */
  connections: number;
  connectTimeoutMs: number;
  /** An idle connection is closed after this (or sooner, when the upstream's Keep-Alive says so). */
  keepAliveTimeoutMs: number;
  /** Largest response head accepted (as node:http's and undici's default: 16 KiB). */
  maxHeaderBytes?: number;
  /** Clock for idle expiry (injected in tests). */
  now?: () => number;
}

export type UpstreamErrorCode =
  /** Refused, reset, unresolvable, or closed before the answer was whole. */
  | 'connect'
  | 'connect-timeout'
  /** The upstream's bytes are not a response to what was asked. */
  | 'protocol'
  /** The request could not be written as given (a header value with a line break, say). */
  | 'invalid-request'
  /** The pool was closed (shutdown). */
  | 'closed'
  /** The upstream's answer did not start in time (set by the handler's deadlines). */
  | 'response-timeout'
  /**
   * The request's deadline passed before it had a connection (every one to the upstream busy, or
   * the new one still opening): never sent, so nothing the upstream did (set by the handler).
   */
  | 'queue-timeout'
  /** The upstream paused inside its body too long (set by the handler's deadlines). */
  | 'body-timeout'
  /** Cut off: the client went away, or broke off its request body. */
  | 'aborted';

export class UpstreamError extends Error {
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'UpstreamError';
  }
}

const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
/** A header value node:http would send: no control characters but tab, nothing past Latin-1. */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const KEEP_ALIVE_TIMEOUT = /timeout=(\d+)/i;
/** Names whose value decides how a request is framed or where it goes: only dispatch() writes them. */
const FRAMING: ReadonlySet<string> = new Set(['host', 'content-length', 'transfer-encoding']);
const EMPTY = Buffer.alloc(0);
/** The most a plain connection reads at once (node's own read size). */
const READ_BUFFER_BYTES = 65_536;

/**
 * One llhttp WebAssembly instance, shared by every connection of a Forwarder (http/llhttp.ts's
 * LlhttpRun notes which connection and which chunk its callbacks belong to while it runs).
 */
export class ResponseParsers {
  /**
   * Where every plain (not TLS) connection's socket reads into (net's `onread`): one buffer for them
   * all, since a read is handed to its connection and parsed before the next socket is read. It
   * spares each read a buffer of its own, and the stream's 'data' event with the tick it schedules
   * (bench/README.md). What must outlive the read (a body piece, bytes left while paused) is copied.
   */
  readonly readBuffer = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
  readonly run = new LlhttpRun<UpstreamConnection>(TYPE_RESPONSE, (run) => ({
    wasm_on_url: () => OK,
    wasm_on_status: () => OK,
    wasm_on_message_begin: () => run.current!.onMessageBegin(),
    wasm_on_header_field: (_parser, at, length) => run.current!.onHeaderField(run.text(at, length), length),
    wasm_on_header_value: (_parser, at, length) => run.current!.onHeaderValue(run.text(at, length), length),
    wasm_on_headers_complete: (_parser, status) => run.current!.onHeadersComplete(status),
    wasm_on_body: (_parser, at, length) => run.current!.onBody(run.bytes(at, length)),
    wasm_on_message_complete: () => run.current!.onMessageComplete(),
  }));

  shouldKeepAlive(parser: number): boolean {
    return this.run.llhttp.llhttp_should_keep_alive(parser) === 1;
  }
}

/** A request waiting for a connection. */
interface Pending {
  request: UpstreamRequest;
  head: string;
  handler: UpstreamHandler;
  /** Already sent once, on a reused connection the upstream had closed. */
  retried: boolean;
  /** The body goes chunked (the request has a body and no Content-Length). */
  chunked: boolean;
}

/**
 * The keep-alive connections to one upstream origin, and the requests waiting for one.
 * Requests are never pipelined: a connection carries one exchange at a time.
 */
export class UpstreamPool {
  private readonly idle: UpstreamConnection[] = [];
  private readonly waiting: Pending[] = [];
  private waitingHead = 0;
  private open = 0;
  private closed = false;
  private closing: (() => void) | undefined;
  private readonly sweeper: NodeJS.Timeout;
  readonly host: string;
  readonly port: number;
  readonly secure: boolean;
  /** The Host header a request gets when it brings none (the origin's host and port). */
  readonly hostHeader: string;
  readonly maxHeaderBytes: number;
  readonly now: () => number;

  constructor(
    origin: string,
    readonly options: UpstreamPoolOptions,
    readonly parsers: ResponseParsers,
  ) {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UpstreamError('invalid-request', `Unsupported upstream protocol ${url.protocol}`);
    this.secure = url.protocol === 'https:';
    this.hostHeader = url.host;
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port ? Number(url.port) : this.secure ? 443 : 80;
    this.maxHeaderBytes = options.maxHeaderBytes ?? 16_384;
    this.now = options.now ?? Date.now;
    // One timer for the pool's idle connections, not one per connection and request.
    this.sweeper = setInterval(() => this.sweepIdle(), Math.min(1_000, Math.max(50, options.keepAliveTimeoutMs / 4)));
    this.sweeper.unref();
  }

  /** Connections open or opening (for tests and metrics). */
  get connections(): number {
    return this.open;
  }

  dispatch(request: UpstreamRequest, handler: UpstreamHandler): void {
    if (this.closed) {
      process.nextTick(() => handler.onError(new UpstreamError('closed', 'The upstream pool is closed')));
      return;
    }
    let pending: Pending;
    try {
      pending = pendingRequest(request, handler, this.hostHeader);
    } catch (error) {
      process.nextTick(() => handler.onError(error as Error));
      return;
    }
    this.assign(pending);
  }

  private assign(pending: Pending): void {
    let connection = this.idle.pop();
    while (connection && connection.socket.destroyed) connection = this.idle.pop();
    if (connection) {
      connection.start(pending);
    } else if (this.open < this.options.connections) {
      this.open++;
      new UpstreamConnection(this, pending);
    } else {
      this.waiting.push(pending);
    }
  }

  /** A connection finished an exchange and may carry another. */
  release(connection: UpstreamConnection): void {
    const next = this.nextWaiting();
    if (next) {
      connection.start(next);
      return;
    }
    connection.idleSince = this.now();
    this.idle.push(connection);
    if (this.closed) connection.socket.destroy();
  }

  /** A connection is gone (closed, failed, cut off). */
  forget(connection: UpstreamConnection): void {
    this.open--;
    const index = this.idle.indexOf(connection);
    if (index >= 0) this.idle.splice(index, 1);
    // Someone was waiting for a connection: this one's place is free.
    const next = this.closed ? undefined : this.nextWaiting();
    if (next) this.assign(next);
    if (this.closed && this.open === 0) this.closing?.();
  }

  /** Sends a request again on a new connection: its first try met a reused connection just closed. */
  retry(pending: Pending): void {
    if (this.closed) {
      pending.handler.onError(new UpstreamError('closed', 'The upstream pool is closed'));
      return;
    }
    pending.retried = true;
    this.assign(pending);
  }

  /** The first waiting request that still wants a connection (abandoned ones are dropped on the way). */
  private nextWaiting(): Pending | undefined {
    for (;;) {
      if (this.waitingHead >= this.waiting.length) return undefined;
      const next = this.waiting[this.waitingHead]!;
      this.waiting[this.waitingHead++] = undefined as unknown as Pending;
      if (this.waitingHead === this.waiting.length) {
        this.waiting.length = 0;
        this.waitingHead = 0;
      } else if (this.waitingHead >= 1024 && this.waitingHead * 2 >= this.waiting.length) {
        // Never empty under steady saturation: the slots already taken are dropped now and then.
        this.waiting.splice(0, this.waitingHead);
        this.waitingHead = 0;
      }
      if (!next.handler.abandoned) return next;
    }
  }

  /** Closes the idle connections past their time (the pool's interval calls it). */
  sweepIdle(): void {
    const now = this.now();
    for (let index = this.idle.length - 1; index >= 0; index--) {
      const connection = this.idle[index]!;
      if (now - connection.idleSince >= connection.keepAliveMs) connection.socket.destroy();
    }
  }

  /** Refuses new requests, lets the ones under way finish, then closes every connection. */
  close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const pending of this.waiting.splice(this.waitingHead)) {
      if (!pending.handler.abandoned) pending.handler.onError(new UpstreamError('closed', 'The upstream pool is closed'));
    }
    this.waitingHead = 0;
    for (const connection of this.idle) connection.socket.destroy();
    if (this.open === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.closing = resolve;
    });
  }
}

/**
 * Header lines checked and written once, for headers many requests carry unchanged (a token's
 * identity headers: the validation cache hands back the same context), so that a request does not
 * test and concatenate them again. dispatch() appends them to the head as they are.
 */
export class PreparedHeaders {
  private constructor(readonly lines: string) {}

  /**
   * The lines for a flat [name, value, …] list of lower-case names; undefined when one of them
   * could not be sent as it is (dispatch() refuses a request carrying it in `headers`) or names the
   * request's framing or host.
   */
  static of(headers: readonly string[]): PreparedHeaders | undefined {
    let lines = '';
    for (let index = 0; index < headers.length; index += 2) {
      const name = headers[index]!;
      const value = headers[index + 1]!;
      if (!TOKEN.test(name) || FRAMING.has(name) || INVALID_VALUE.test(value)) return undefined;
      lines += `${name}: ${value}\r\n`;
    }
    return new PreparedHeaders(lines);
  }
}

/**
 * A request with its head written and its body's framing decided (one place says both), refusing
 * what could not be sent as one request.
 */
function pendingRequest(request: UpstreamRequest, handler: UpstreamHandler, host: string): Pending {
  if (!TOKEN.test(request.method)) throw new UpstreamError('invalid-request', 'Invalid request method');
  if (INVALID_VALUE.test(request.path) || request.path.includes(' ') || request.path.length === 0) throw new UpstreamError('invalid-request', 'Invalid request path');
  let head = `${request.method} ${request.path} HTTP/1.1\r\n`;
  let hasLength = false;
  let hasHost = false;
  const headers = request.headers;
  const checked = request.checkedHeaders ?? 0;
  for (let index = 0; index < headers.length; index += 2) {
    const name = headers[index] as string;
    const value = headers[index + 1]!;
    const check = index >= checked;
    if (check && !TOKEN.test(name)) throw new UpstreamError('invalid-request', `Invalid header name ${JSON.stringify(name)}`);
    if (name === 'content-length') hasLength = true;
    else if (name === 'host') hasHost = true;
    // The body's framing is ours (node:http has decoded the client's chunks).
    else if (name === 'transfer-encoding') continue;
    if (typeof value === 'string') {
      if (check && INVALID_VALUE.test(value)) throw new UpstreamError('invalid-request', `Invalid value of header ${name}`);
      head += `${name}: ${value}\r\n`;
    } else {
      for (const item of value) {
        if (check && INVALID_VALUE.test(item)) throw new UpstreamError('invalid-request', `Invalid value of header ${name}`);
        head += `${name}: ${item}\r\n`;
      }
    }
  }
  if (request.prepared) head += request.prepared.lines;
  if (!hasHost) head += `host: ${host}\r\n`;
  // A body without the client's length is sent chunked.
  const chunked = request.body !== null && !hasLength;
  if (chunked) head += 'transfer-encoding: chunked\r\n';
  return { request, head: `${head}\r\n`, handler, retried: false, chunked };
}

/** One keep-alive connection to an upstream and the exchange it carries. */
class UpstreamConnection {
  readonly socket: net.Socket;
  readonly parser: number;
  idleSince = 0;
  keepAliveMs: number;
  private pending: Pending | null;
  private handler: UpstreamHandler | null = null;
  private connected = false;
  /** This connection has carried an exchange before the current one. */
  private reused = false;
  private receivedAny = false;
  private status = 0;
  private headers: string[] = [];
  private headerBytes = 0;
  private paused = false;
  /** What llhttp had not read of a chunk when the exchange paused. */
  private rest: Buffer = EMPTY;
  /** The upstream closed its side. */
  private ended = false;
  private upload: Upload | null = null;
  /** The chunk being read is the shared read buffer's (reused by the next read): what outlives it is copied. */
  private borrowed = false;
  private failure: Error | null = null;
  private connectTimer: NodeJS.Timeout | undefined;
  /** The exchange in progress's resume (a stale one must not resume the next exchange). */
  private resumeFn: () => void = () => undefined;

  constructor(
    private readonly pool: UpstreamPool,
    first: Pending,
  ) {
    this.pending = first;
    this.keepAliveMs = pool.options.keepAliveTimeoutMs;
    this.parser = pool.parsers.run.alloc();
    // Half-open: an upstream's FIN must not close the socket before a paused exchange has read what it sent.
    // TCP keep-alive probes (as undici): an upstream host that vanished is noticed on an idle connection.
    const options = { host: pool.host, port: pool.port, noDelay: true, allowHalfOpen: true, keepAlive: true, keepAliveInitialDelay: 60_000 };
    if (pool.secure) {
      this.socket = tls.connect({ ...options, servername: net.isIP(pool.host) ? undefined : pool.host });
      this.socket.on('data', (chunk: Buffer) => this.onSocketData(chunk));
    } else {
      const onread = { buffer: pool.parsers.readBuffer, callback: (length: number, buffer: Uint8Array) => this.onRead(length, buffer as Buffer) };
      this.socket = net.connect({ ...options, onread });
    }
    this.connectTimer = setTimeout(() => this.fail(new UpstreamError('connect-timeout', `Connecting to the upstream took over ${pool.options.connectTimeoutMs} ms`)), pool.options.connectTimeoutMs);
    this.connectTimer.unref();
    this.socket.once(pool.secure ? 'secureConnect' : 'connect', () => this.onConnected());
    this.socket.on('end', () => this.onSocketEnd());
    this.socket.on('error', (error: Error) => {
      this.failure ??= error;
    });
    this.socket.on('close', () => this.onSocketClose());
  }

  private onConnected(): void {
    clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
    this.connected = true;
    const first = this.pending;
    this.pending = null;
    if (first) this.start(first);
    else this.pool.release(this);
  }

  /** Writes a request and waits for its answer (the connection is connected and free). */
  start(pending: Pending): void {
    if (pending.handler.abandoned) {
      // Ended while this connection was opening (its deadline, its client): nothing to send.
      this.pool.release(this);
      return;
    }
    this.pending = pending;
    this.handler = pending.handler;
    this.receivedAny = false;
    const handler = pending.handler;
    this.resumeFn = () => {
      if (this.handler === handler) this.resume();
    };
    handler.onConnect((reason) => this.abort(handler, reason));
    if (this.handler !== handler) return; // aborted at once
    this.socket.write(pending.head, 'latin1');
    const body = pending.request.body;
    if (body) this.upload = new Upload(this, body, pending.chunked);
  }

  /** The exchange is cut off by its handler: the connection cannot be reused. */
  private abort(handler: UpstreamHandler, reason: Error | undefined): void {
    if (this.handler !== handler) return;
    this.end(reason ?? new UpstreamError('aborted', 'The request was aborted'));
  }

  /** Ends the exchange in progress with `error` and closes the connection. */
  end(error: Error): void {
    const handler = this.handler;
    this.handler = null;
    this.pending = null;
    this.upload?.stop();
    this.upload = null;
    this.socket.destroy();
    handler?.onError(error);
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.socket.destroy();
  }

  /** A read into the shared buffer: parsed now, before the buffer is read into again. (A pause stops the socket itself.) */
  private onRead(length: number, buffer: Buffer): true {
    this.borrowed = true;
    try {
      this.onSocketData(buffer.subarray(0, length));
    } finally {
      this.borrowed = false;
    }
    return true;
  }

  private onSocketData(chunk: Buffer): void {
    if (this.paused) {
      // A chunk already on its way when the socket was paused.
      this.rest = this.rest.length === 0 ? this.kept(chunk) : Buffer.concat([this.rest, chunk]);
      return;
    }
    if (!this.handler) {
      // Bytes nobody asked for (an upstream answering twice, or after its answer): never read as
      // the next exchange's answer.
      this.socket.destroy();
      return;
    }
    this.receivedAny = true;
    const run = this.pool.parsers.run;
    let code: number;
    try {
      code = run.execute(this, this.parser, chunk);
    } catch (error) {
      // A callback threw through llhttp: the parser is mid-message, the connection unusable.
      if (this.handler) this.end(error as Error);
      else this.socket.destroy();
      return;
    }
    if (code === OK) return;
    const consumed = run.stoppedAt;
    if (code === PAUSED) {
      if (this.completedExchange) {
        this.finishExchange(consumed < chunk.length);
        return;
      }
      // Paused in the body (the client's socket is full): the rest waits for resume().
      run.resume(this.parser);
      this.paused = true;
      this.socket.pause();
      this.rest = consumed < chunk.length ? this.kept(chunk.subarray(consumed)) : EMPTY;
      return;
    }
    if (!this.handler) return; // the handler cut the exchange off from a callback
    this.end(new UpstreamError('protocol', `The upstream's response is malformed: ${run.reason(this.parser, 'malformed response')}`));
  }

  /** Bytes of the chunk being read, as a buffer that outlives the read. */
  private kept(bytes: Buffer): Buffer {
    return this.borrowed ? Buffer.from(bytes) : bytes;
  }

  private resume(): void {
    if (!this.paused || this.socket.destroyed || !this.handler) return;
    this.paused = false;
    const rest = this.rest;
    this.rest = EMPTY;
    // Even with nothing left over, llhttp may owe the end of the message (a body read to its last
    // byte before the pause): an empty execute completes it.
    this.onSocketData(rest);
    if (this.paused || this.socket.destroyed) return;
    if (this.ended) this.onSocketEnd();
    else this.socket.resume();
  }

  private onSocketEnd(): void {
    this.ended = true;
    // Paused: resume() reads what is left in `rest`, then comes back here.
    if (this.paused) return;
    // Idle, or nothing of an answer yet: closed now ('close' decides: a retry, or a failure).
    if (!this.handler || !this.receivedAny) {
      this.socket.destroy();
      return;
    }
    // The upstream closed its side: a response without a length ends here, anything else is cut.
    this.pool.parsers.run.finish(this, this.parser);
    if (this.completedExchange) this.finishExchange(false);
    else this.end(new UpstreamError('connect', 'The upstream closed the connection before its answer was complete'));
  }

  private onSocketClose(): void {
    clearTimeout(this.connectTimer);
    this.upload?.stop();
    this.upload = null;
    this.pool.parsers.run.free(this.parser);
    const handler = this.handler;
    const pending = this.pending;
    this.handler = null;
    this.pending = null;
    this.pool.forget(this);
    if (!handler && pending && !this.connected) {
      // Never connected: the request that opened it fails.
      pending.handler.onError(this.closedError('The upstream closed the connection'));
      return;
    }
    if (!handler) return;
    // A reused connection the upstream closed before answering at all: it was closing when we wrote.
    // A request that is safe to repeat, and whose body (if any) is not consumed, goes again once.
    if (this.reused && !this.receivedAny && pending && !pending.retried && pending.request.body === null && IDEMPOTENT.has(pending.request.method)) {
      this.pool.retry(pending);
      return;
    }
    handler.onError(this.closedError('The upstream closed the connection before its answer was complete'));
  }

  /** Why the connection closed: the failure it met, else `otherwise`. */
  private closedError(otherwise: string): UpstreamError {
    if (this.failure instanceof UpstreamError) return this.failure;
    return new UpstreamError('connect', this.failure ? this.failure.message : otherwise);
  }

  // ---- llhttp's callbacks (through ResponseParsers) --------------------------------------------

  /** The exchange whose response has been read whole, waiting for execute() to return. */
  private completedExchange: UpstreamHandler | null = null;

  onMessageBegin(): number {
    if (!this.handler) return USER_ERROR;
    this.status = 0;
    this.headers = [];
    this.headerBytes = 0;
    return OK;
  }

  onHeaderField(text: string, length: number): number {
    const headers = this.headers;
    if ((headers.length & 1) === 0) headers.push(text);
    else headers[headers.length - 1] += text;
    return this.countHeader(length);
  }

  onHeaderValue(text: string, length: number): number {
    const headers = this.headers;
    if ((headers.length & 1) === 1) headers.push(text);
    else headers[headers.length - 1] += text;
    return this.countHeader(length);
  }

  private countHeader(length: number): number {
    this.headerBytes += length;
    return this.headerBytes > this.pool.maxHeaderBytes ? USER_ERROR : OK;
  }

  onHeadersComplete(status: number): number {
    const handler = this.handler;
    if (!handler) return USER_ERROR;
    this.status = status;
    // 1xx: informational, read past. We never ask for 100 (no Expect) nor for an upgrade (101).
    // A 1xx has no body (RFC 9110 §15.2), whatever its headers say; llhttp knows it only for 102
    // and 103, so it is told (as undici does): no byte after a 1xx head reaches the handler as body.
    if (status < 200) return status === 100 || status === 101 ? USER_ERROR : SKIP_BODY;
    const headers = this.headers;
    for (let index = 0; index < headers.length; index += 2) {
      if (headers[index]!.length === 10 && headers[index]!.toLowerCase() === 'keep-alive') {
        const hint = KEEP_ALIVE_TIMEOUT.exec(headers[index + 1]!);
        // Leave a second's margin, as undici does: the upstream's clock started before ours.
        if (hint) this.keepAliveMs = Math.min(this.pool.options.keepAliveTimeoutMs, Number(hint[1]) * 1000 - 1000);
      }
    }
    let proceed: boolean;
    try {
      proceed = handler.onHeaders(status, headers, this.resumeFn);
    } catch (error) {
      this.end(error as Error);
      return USER_ERROR;
    }
    if (this.handler !== handler) return USER_ERROR;
    if (this.pending!.request.method === 'HEAD') {
      if (!proceed) this.paused = true;
      return SKIP_BODY;
    }
    return proceed ? OK : PAUSED;
  }

  onBody(chunk: Buffer): number {
    const handler = this.handler;
    if (!handler) return USER_ERROR;
    // An execute restarts an open body span: the empty execute of resume() reports 0 bytes.
    if (chunk.length === 0) return OK;
    // The handler may keep the piece (written to a client socket that is full, or not yet its own).
    const proceed = handler.onData(this.kept(chunk));
    if (this.handler !== handler) return USER_ERROR;
    if (!proceed || this.paused) {
      this.paused = true;
      return PAUSED;
    }
    return OK;
  }

  onMessageComplete(): number {
    if (!this.handler) return USER_ERROR;
    if (this.status < 200) return OK; // the final response follows
    this.completedExchange = this.handler;
    // Stop here: the connection is released (or closed) once llhttp has returned.
    return PAUSED;
  }

  /** The response was read whole: the handler is told, and the connection reused or closed. */
  private finishExchange(trailingBytes: boolean): void {
    const handler = this.completedExchange!;
    const uploadDone = this.upload === null || this.upload.done;
    this.completedExchange = null;
    this.handler = null;
    this.pending = null;
    this.upload?.stop();
    this.upload = null;
    this.pool.parsers.run.resume(this.parser);
    const reusable = !trailingBytes && uploadDone && !this.ended && this.keepAliveMs > 0 && this.pool.parsers.shouldKeepAlive(this.parser) && !this.socket.destroyed;
    if (!reusable) this.socket.destroy();
    else if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    handler.onComplete();
    if (reusable) {
      this.reused = true;
      this.pool.release(this);
    }
  }

  /** The request body could not be read whole (the client went away mid-upload). */
  uploadFailed(error: Error): void {
    if (this.handler) this.end(error);
  }
}

/** Streams a client's request body to the upstream, chunked when the client gave no length. */
class Upload {
  done = false;
  private stopped = false;
  private readonly onData = (chunk: Buffer): void => {
    if (this.stopped) return;
    const socket = this.connection.socket;
    let room: boolean;
    if (this.chunked) {
      if (chunk.length === 0) return;
      socket.cork();
      socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
      socket.write(chunk);
      room = socket.write('\r\n', 'latin1');
      socket.uncork();
    } else {
      room = socket.write(chunk);
    }
    if (!room) {
      this.body.pause();
      socket.once('drain', this.onDrain);
    }
  };
  private readonly onDrain = (): void => {
    if (!this.stopped) this.body.resume();
  };
  private readonly onEnd = (): void => {
    if (this.stopped) return;
    if (this.chunked) this.connection.socket.write('0\r\n\r\n', 'latin1');
    this.done = true;
    this.detach();
  };
  private readonly onBroken = (): void => {
    if (this.stopped || this.done) return;
    this.stop();
    this.connection.uploadFailed(new UpstreamError('aborted', 'The client broke off its request body'));
  };

  constructor(
    private readonly connection: UpstreamConnection,
    private readonly body: RequestBody,
    private readonly chunked: boolean,
  ) {
    if (body.complete && body.readableEnded) {
      // Nothing left to read (an empty body already consumed).
      this.onEnd();
      return;
    }
    body.on('data', this.onData);
    body.on('end', this.onEnd);
    body.on('aborted', this.onBroken);
    body.on('error', this.onBroken);
    body.on('close', this.onBroken);
  }

  /** Stops sending (the exchange ended): the client's remaining body is no longer read here. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.detach();
    // Not read whole (an early answer, a failure): discard the rest, as node:http does for an unread
    // body, or the client's connection stalls with its upload paused.
    if (!this.done) this.body.resume();
  }

  private detach(): void {
    this.body.off('data', this.onData);
    this.body.off('end', this.onEnd);
    this.body.off('aborted', this.onBroken);
    this.body.off('error', this.onBroken);
    this.body.off('close', this.onBroken);
    this.connection.socket.off('drain', this.onDrain);
  }
}
