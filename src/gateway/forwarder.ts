import type { ClientRequest, ClientResponse } from './client-exchange.ts';
import { ResponseParsers, UpstreamError, UpstreamPool, type PreparedHeaders, type UpstreamHandler, type UpstreamPoolOptions, type UpstreamRequest } from './upstream-pool.ts';
import { UnavailableError } from '../support/errors.ts';
import { ExchangeDeadlines, type DeadlineEntry, type DeadlineList } from './exchange-deadlines.ts';

export interface ForwarderOptions {
  connectTimeoutMs: number;
  /** Time for the upstream to start answering (its response headers). */
  responseTimeoutMs: number;
  /** Longest pause inside a response body. */
  bodyTimeoutMs: number;
  connectionsPerUpstream: number;
}

/**
 * Why no upstream answer came: 'connect' (refused, reset, unresolvable: 502), 'timeout' (connecting
 * or the response headers took too long: 504), 'busy' (no connection to it came free before the
 * deadline: 504, never sent, says nothing about the upstream), 'aborted' (the client went away, or
 * broke off its request body, before the answer came; says nothing about the upstream).
 */
export type ForwardFailure = { kind: 'connect' | 'timeout' | 'busy' | 'aborted'; detail: string };

export interface ForwardResult {
  status: number;
  failure?: ForwardFailure;
}

/**
 * Request headers as a flat [name, value, name, value, …] list of lower-case names (written as they
 * are, and what writeHead takes without merging duplicates).
 */
export type HeaderList = (string | string[])[];

export interface ForwardTarget {
  origin: string;
  path: string;
  headers: HeaderList;
  /** How many entries at the start of `headers` are known to be sendable (UpstreamRequest.checkedHeaders). */
  checkedHeaders?: number;
  /** Sent after `headers`: lines checked and written once (a token's identity headers). */
  preparedHeaders?: PreparedHeaders;
  /**
   * Headers of ours for the client's response, sent with the upstream's. The response must carry no
   * setHeader() headers when forward() is called: writeHead would then merge by name and collapse
   * repeated upstream headers (Set-Cookie).
   */
  responseHeaders: string[];
}

/** What the forwarder needs of one upstream origin's connections. */
export interface UpstreamDispatcher {
  dispatch(request: UpstreamRequest, handler: UpstreamHandler): void;
  close(): Promise<void>;
}

/** Makes the keep-alive pool of one upstream origin (a parameter so tests can see what it is asked). */
export type PoolFactory = (origin: string, options: UpstreamPoolOptions, parsers: ResponseParsers) => UpstreamDispatcher;

/**
 * Streams a request to an upstream and its response back, over keep-alive pools (one per upstream
 * origin, upstream-pool.ts). Bodies are never parsed or buffered; a client's Content-Length is kept.
 * Upstream chunks go straight into response.write(), with the upstream's socket paused while the
 * client's is full. The response and body deadlines are ours (exchange-deadlines.ts): no timer per
 * exchange.
 */
export class Forwarder {
  private readonly pools = new Map<string, UpstreamDispatcher>();
  private readonly deadlines: ExchangeDeadlines;
  private readonly parsers = new ResponseParsers();

  constructor(
    private readonly options: ForwarderOptions,
    private readonly createPool: PoolFactory = (origin, poolOptions, parsers) => new UpstreamPool(origin, poolOptions, parsers),
  ) {
    this.deadlines = new ExchangeDeadlines(options);
  }

  /**
   * Calls `settled` once: with the upstream's status when its headers have been written to the
   * client, or with the upstream's failure before that. Calls `failed` instead for a failure of
   * ours, which says nothing about the upstream: a request we built that cannot be sent (500), our
   * pool closed by a shutdown (503), or Node refusing the upstream's headers (the response is then
   * already destroyed). Callbacks rather than a promise: this is the per-request path.
   */
  forward(
    request: ClientRequest,
    response: ClientResponse,
    target: ForwardTarget,
    rewriteLocation: (location: string) => string,
    settled: (result: ForwardResult) => void,
    failed: (error: unknown) => void,
  ): void {
    const pool = this.pool(target.origin);
    const hasBody = request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
    const exchange = new Exchange(request, response, hasBody, this.deadlines, target.responseHeaders, rewriteLocation, settled, failed);
    // Owed from now: a request waiting for a connection (every one busy) waits on the same deadline.
    this.deadlines.awaitHeaders(exchange);
    pool.dispatch({ path: target.path, method: request.method ?? 'GET', headers: target.headers, checkedHeaders: target.checkedHeaders, prepared: target.preparedHeaders, body: hasBody ? request : null }, exchange);
  }

  /** Refuses new requests; the ones under way finish, on their deadlines (a silent upstream still gets its 504). */
  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.close()));
    this.pools.clear();
    this.deadlines.close();
  }

  private pool(origin: string): UpstreamDispatcher {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = this.createPool(
        origin,
        { connections: this.options.connectionsPerUpstream, connectTimeoutMs: this.options.connectTimeoutMs, keepAliveTimeoutMs: 30_000 },
        this.parsers,
      );
      this.pools.set(origin, pool);
    }
    return pool;
  }
}

/**
 * One request's upstream handler (onConnect, onHeaders, onData, onComplete, onError). It reports
 * once: with the upstream's status when its headers have been written to the client, or with the
 * failure before that. Its deadlines: the response headers are owed from when the request came,
 * waiting for a connection included (for a request with a body, counted again once the client has
 * sent all of it: a slow upload is not a slow upstream); then each piece of the body, except while
 * the client's socket is full. Ended before it had a connection (its client gone, its deadline
 * passed), it reports at once and is abandoned: the pool drops it.
 */
class Exchange implements DeadlineEntry, UpstreamHandler {
  deadlineList: DeadlineList | undefined = undefined;
  deadlinePrevious: DeadlineEntry | undefined = undefined;
  deadlineNext: DeadlineEntry | undefined = undefined;
  deadlineArmedAt = 0;
  private abortUpstream: ((reason?: Error) => void) | undefined;
  private resumeUpstream: (() => void) | undefined;
  /** The outcome has been reported (headers written, or a failure). */
  private settled = false;
  /** The upstream's answer has been passed on whole. */
  private completed = false;
  /** The client's connection closed before the answer was complete. */
  private clientGone = false;
  /** Node refused the upstream's headers: the response was destroyed and the failure reported. */
  private answeredByGateway = false;
  /** What is left of a body whose length the upstream gave (Content-Length); -1 when it gave none. */
  private bodyLeft = -1;
  /** The response was ended with the body's last piece (onComplete has nothing left to write). */
  private endedWithBody = false;

  // The request's own objects are not readonly: they are let go when the exchange ends (letGo()).
  constructor(
    private request: ClientRequest,
    private response: ClientResponse,
    private readonly hasBody: boolean,
    private readonly deadlines: ExchangeDeadlines,
    private ourHeaders: string[],
    private rewriteLocation: (location: string) => string,
    private settle: (result: ForwardResult) => void,
    private fail: (error: unknown) => void,
  ) {
    // Either side breaking off ends the other: a client that goes away releases the upstream request
    // (and its connection) at once, rather than when the upstream has answered in full.
    // (Listeners are anonymous arrows passed as arguments: tsx, as production runs it, wraps every
    // function stored under a name — class fields included — in a defineProperty call per instance.)
    // ('close' is emitted once: on() spares once()'s wrapper.)
    if (response.destroyed) this.clientGone = true;
    else response.on('close', () => this.onClientClose());
  }

  /** Ended while its request waited for a connection: the pool drops the request. */
  get abandoned(): boolean {
    return this.completed;
  }

  private onClientClose(): void {
    if (this.completed) return;
    this.clientGone = true;
    this.cutOff(new UpstreamError('aborted', 'The client went away'));
  }

  /**
   * Ends the exchange with `error`: through its connection's abort when it has one (onError
   * follows at once), else here. An abort that does nothing is a connection's the request has left
   * (a retry waiting for another): the request is not on a connection, and reports here too.
   */
  private cutOff(error: Error): void {
    this.abortUpstream?.(error);
    if (!this.completed) this.onError(error);
  }

  onConnect(abort: (reason?: Error) => void): void {
    // Ended already (its client gone before it was dispatched, or anything while it waited).
    if (this.completed || this.clientGone) {
      abort(new UpstreamError('aborted', 'The client went away'));
      return;
    }
    this.abortUpstream = abort;
    // The headers' deadline runs from when the request came (forward()); a body still on its way
    // stops it until the client has sent it all.
    if (this.hasBody && !this.request.complete) {
      this.deadlines.release(this);
      this.request.once('end', () => this.bodySent());
    }
  }

  private bodySent(): void {
    if (!this.settled && !this.completed) this.deadlines.awaitHeaders(this);
  }

  /** A deadline passed: the upstream is cut off (onError follows, with this error). */
  expire(): void {
    if (this.settled) {
      this.cutOff(new UpstreamError('body-timeout', 'The upstream paused its body too long'));
      return;
    }
    this.abortUpstream?.(new UpstreamError('response-timeout', 'The upstream did not answer in time'));
    // Not on a connection (every one busy, or its own still opening): answered now, and never sent.
    if (!this.completed) this.onError(new UpstreamError('queue-timeout', 'No connection to the upstream came free in time'));
  }

  onHeaders(statusCode: number, upstreamHeaders: string[], resume: () => void): boolean {
    this.resumeUpstream = resume;
    const headers: string[] = this.ourHeaders;
    // Ours, and the upstream's as llhttp read them (a name that is not a token, or a value with a
    // control character other than tab, fails the response), are sendable as they are; from a
    // rewritten Location on, the response tests them (ClientResponse.writeHead).
    let checked = -1;
    for (let index = 0; index < upstreamHeaders.length; index += 2) {
      const name = upstreamHeaders[index]!.toLowerCase();
      if (isHopByHop(name)) continue;
      const value = upstreamHeaders[index + 1]!;
      // (llhttp has checked it is digits, and refused a response with two that differ.)
      if (name === 'content-length') this.bodyLeft = Number(value);
      if (name === 'location') {
        if (checked < 0) checked = headers.length;
        headers.push(name, this.rewriteLocation(value));
      } else headers.push(name, value);
    }
    try {
      const response = this.response;
      if (response.writeCheckedHead) response.writeCheckedHead(statusCode, headers, checked < 0 ? headers.length : checked);
      else response.writeHead(statusCode, headers);
    } catch (error) {
      // Headers Node refuses to send: a failure of ours, not of the upstream. writeHead has already
      // taken the upstream's status line (and for 204/304 that there is no body), so no clean 500
      // can follow on this response: the connection is cut, and the failure reported.
      this.settled = true;
      this.answeredByGateway = true;
      this.response.destroy();
      this.fail(error);
      throw error; // the upstream pool cuts the exchange off
    }
    this.settled = true;
    this.deadlines.awaitBody(this);
    this.settle({ status: statusCode });
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.bodyLeft > 0) {
      this.bodyLeft -= chunk.length;
      if (this.bodyLeft === 0) {
        // The body's last piece (for most answers, its only one) goes with the response's end: a
        // write() would cork the socket and queue a tick to uncork it, for the end() that follows at
        // once. llhttp completes the message in this same call: onComplete runs before anything else.
        this.endedWithBody = true;
        this.response.end(chunk);
        return true;
      }
    }
    if (this.response.write(chunk)) {
      this.deadlines.awaitBody(this);
      return true;
    }
    // The client's socket is full: the upstream is not read until it drains, and the
    // upstream owes nothing meanwhile.
    this.deadlines.release(this);
    this.response.once('drain', () => this.drained());
    return false;
  }

  private drained(): void {
    if (this.completed) return;
    this.deadlines.awaitBody(this);
    this.resumeUpstream?.();
  }

  onComplete(): void {
    this.completed = true;
    this.deadlines.release(this);
    if (!this.endedWithBody) this.response.end();
    this.letGo();
  }

  onError(error: Error): void {
    if (this.completed) return;
    this.completed = true;
    this.deadlines.release(this);
    if (this.answeredByGateway) {
      this.letGo();
      return;
    }
    if (!this.settled) {
      this.settled = true;
      const own = ownFailure(error);
      if (own) this.fail(own);
      else this.settle({ status: 0, failure: this.classify(error) });
    } else {
      // Mid-body: the client must not take a truncated body for a whole one.
      this.response.destroy();
    }
    this.letGo();
  }

  /**
   * The exchange has ended: its request's objects are let go. This handler can outlive its exchange
   * (the response's listeners, its pool connection's last closures), and whatever it still held
   * (the request, the response, the callbacks and through them the whole proxied request) then
   * outlived two young-generation collections: 700–2,500 bytes promoted per request and several
   * mark-compacts per paced bench run, against ~20 bytes and none once let go (bench/README.md).
   * Every callback that can still come (the client's close, a drain, the request body's end)
   * returns early once `completed` is set.
   */
  private letGo(): void {
    // (Typed as still there: nothing reads these once `completed` is set.)
    const gone = undefined as never;
    this.request = gone;
    this.response = gone;
    this.ourHeaders = gone;
    this.rewriteLocation = gone;
    this.settle = gone;
    this.fail = gone;
    this.abortUpstream = undefined;
    this.resumeUpstream = undefined;
  }

  private classify(error: Error): ForwardFailure {
    const detail = error.message;
    if (error instanceof UpstreamError && (error.code === 'connect-timeout' || error.code === 'response-timeout')) return { kind: 'timeout', detail };
    if (error instanceof UpstreamError && error.code === 'queue-timeout') return { kind: 'busy', detail };
    // (A request without a body is handed over with its stream already ended and destroyed.)
    if (this.clientGone || (this.hasBody && this.request.destroyed && !this.request.complete)) return { kind: 'aborted', detail };
    return { kind: 'connect', detail };
  }
}

/**
 * Errors about the request we built or about our own pool, before anything reached the
 * upstream: not the upstream's failure, so they must not count against its circuit. Undefined for
 * any other error.
 */
function ownFailure(error: Error): Error | undefined {
  // Closed or destroyed pool: this process is shutting down.
  if (!(error instanceof UpstreamError)) return undefined;
  if (error.code === 'closed') return new UnavailableError('The gateway is shutting down; retry the request.');
  if (error.code === 'invalid-request') return error;
  return undefined;
}

/**
 * A response header that describes the upstream's connection, not the answer: never passed on.
 * A switch, not a Set: the name is lower-cased afresh for each response, and a Set lookup would
 * internalize it (support/segments.ts says what that costs).
 */
function isHopByHop(name: string): boolean {
  switch (name) {
    case 'connection':
    case 'keep-alive':
    case 'transfer-encoding':
    case 'proxy-connection':
    case 'upgrade':
    case 'trailer':
    case 'te':
      return true;
    default:
      return false;
  }
}
