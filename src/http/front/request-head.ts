import { LlhttpRun, OK, PAUSED, TYPE_REQUEST, USER_ERROR } from '../llhttp.ts';

/**
 * Reads a connection's request heads with llhttp in request mode, for the request front
 * (docs/architecture.md, "The request front"): the front answers a plain request itself and
 * hands every other connection to node:http with the bytes it has read (`socket.unshift`). So this
 * reader says only two things for sure: "a plain request, here is its head", or "not mine". It never
 * refuses: a head llhttp finds malformed is "not mine" too, and node:http refuses it as it always has.
 *
 * Plain means all of: GET, HEAD or DELETE; HTTP/1.1; no body (no Transfer-Encoding, Content-Length
 * absent or 0); no Expect, no Upgrade; a Host (node:http answers 400 without one); no header repeated;
 * at most `maxHeaders` headers (node keeps only that many); and a head, request line to blank line,
 * of at most `maxHeaderBytes` (node's limit counts no more than that, so it would have taken it).
 * The test that this is safe is differential (test/http/front/request-head.test.ts): whatever this
 * reader calls plain, node's parser reads the same way, without error.
 */

/** A plain request's head, as the client spelled it. */
export interface RequestHead {
  method: 'GET' | 'HEAD' | 'DELETE';
  /** The request target, raw (the gateway canonicalises it). */
  target: string;
  /** Flat [name, value, …] list, names as sent. */
  rawHeaders: string[];
  /** The same by lower-case name (no name is repeated in a plain head): IncomingMessage.headers. */
  headers: Record<string, string>;
  /** The client allows the connection to stay open after the answer (HTTP/1.1 without Connection: close). */
  keepAlive: boolean;
}

export type HeadReading =
  /** The head is not whole yet; every byte given so far belongs to it. */
  | { kind: 'partial' }
  /** A plain request: its head, and how many bytes of the chunk it took (the rest is the next request's). */
  | { kind: 'plain'; head: RequestHead; consumed: number }
  /** Not a plain request (or not a well-formed one): the connection is node:http's, with every byte read. */
  | { kind: 'other'; why: string };

export interface RequestHeadLimits {
  /** Largest head accepted on the plain path (MAX_HEADER_BYTES, node:http's maxHeaderSize). */
  maxHeaderBytes: number;
  /** Most headers on the plain path (node:http's maxHeadersCount; it drops those past it). */
  maxHeaders: number;
}

// llhttp's method numbers (llhttp/constants.js METHODS).
const PLAIN_METHODS: ReadonlyMap<number, RequestHead['method']> = new Map([
  [0, 'DELETE'],
  [1, 'GET'],
  [2, 'HEAD'],
]);
const TRAILING_WHITESPACE = /[ \t]+$/;

/**
 * One llhttp instance shared by the front's connections (http/llhttp.ts's LlhttpRun notes which
 * reader its callbacks belong to while it runs); each connection has a HeadReader of its own.
 */
export class RequestHeadParsers {
  readonly run = new LlhttpRun<HeadReader>(TYPE_REQUEST, (run) => ({
    wasm_on_message_begin: () => run.current!.onMessageBegin(),
    wasm_on_url: (_parser, at, length) => run.current!.onTarget(run.text(at, length)),
    wasm_on_status: () => USER_ERROR,
    wasm_on_header_field: (_parser, at, length) => run.current!.onHeaderField(run.text(at, length)),
    wasm_on_header_value: (_parser, at, length) => run.current!.onHeaderValue(run.text(at, length)),
    wasm_on_headers_complete: (parser, _status, upgrade, keepAlive) => run.current!.onHeadersComplete(parser, upgrade === 1, keepAlive === 1),
    wasm_on_body: () => USER_ERROR,
    wasm_on_message_complete: () => run.current!.onMessageComplete(),
  }));

  constructor(readonly limits: RequestHeadLimits) {}

  reader(): HeadReader {
    return new HeadReader(this, this.run.alloc());
  }
}

/** One connection's heads, read one request at a time. */
export class HeadReader {
  private target = '';
  private rawHeaders: string[] = [];
  private headers: Record<string, string> | undefined;
  /** Bytes of the head so far, across chunks (request line and headers). */
  private headBytes = 0;
  private notPlain: string | undefined;
  private head: RequestHead | undefined;
  private freed = false;

  constructor(
    private readonly parsers: RequestHeadParsers,
    readonly parser: number,
  ) {}

  /**
   * Reads the next piece of the connection's bytes. After `plain`, the bytes past `consumed` are the
   * next request's: give them (and what follows) to `read` again once the answer is under way. After
   * `other`, the reader is spent (free it).
   */
  read(chunk: Buffer): HeadReading {
    if (this.freed) throw new Error('the head reader was freed');
    if (this.notPlain !== undefined) return { kind: 'other', why: this.notPlain };
    const run = this.parsers.run;
    const code = run.execute(this, this.parser, chunk);
    if (code === OK) {
      // Nothing stopped it: the head goes on in the next chunk, unless it is already too large.
      if (this.head === undefined) {
        this.headBytes += chunk.length;
        if (this.headBytes > this.parsers.limits.maxHeaderBytes) return this.refuse('the head is larger than MAX_HEADER_BYTES');
        return { kind: 'partial' };
      }
    }
    if (code === PAUSED && this.head !== undefined) {
      // Every chunk given starts inside the head (or at its start), so its size is exact here.
      const stoppedAt = run.stoppedAt;
      if (this.headBytes + stoppedAt > this.parsers.limits.maxHeaderBytes) return this.refuse('the head is larger than MAX_HEADER_BYTES');
      const head = this.head;
      this.head = undefined;
      this.target = '';
      this.rawHeaders = [];
      this.headBytes = 0;
      run.resume(this.parser);
      return { kind: 'plain', head, consumed: stoppedAt };
    }
    return this.refuse(this.notPlain ?? `malformed: ${run.reason(this.parser, 'malformed request')}`);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.parsers.run.free(this.parser);
  }

  private refuse(why: string): HeadReading {
    this.notPlain = why;
    return { kind: 'other', why };
  }

  // ---- llhttp's callbacks (through RequestHeadParsers) -----------------------------------------

  onMessageBegin(): number {
    this.target = '';
    this.rawHeaders = [];
    return OK;
  }

  onTarget(text: string): number {
    this.target += text;
    return OK;
  }

  onHeaderField(text: string): number {
    const headers = this.rawHeaders;
    if ((headers.length & 1) === 0) headers.push(text);
    else headers[headers.length - 1] += text;
    return OK;
  }

  onHeaderValue(text: string): number {
    const headers = this.rawHeaders;
    if ((headers.length & 1) === 1) headers.push(text);
    else headers[headers.length - 1] += text;
    return OK;
  }

  onHeadersComplete(parser: number, upgrade: boolean, keepAlive: boolean): number {
    const why = this.whyNotPlain(parser, upgrade);
    if (why !== undefined) {
      this.notPlain = why;
      return PAUSED;
    }
    this.head = { method: PLAIN_METHODS.get(this.parsers.run.llhttp.llhttp_get_method(parser))!, target: this.target, rawHeaders: this.rawHeaders, headers: this.headers!, keepAlive };
    this.headers = undefined;
    return OK;
  }

  /** Called at once after the head: a plain request has no body. Stops llhttp at the request's end. */
  onMessageComplete(): number {
    return this.head === undefined ? USER_ERROR : PAUSED;
  }

  /** Why the head is not plain, or undefined with `this.headers` made. */
  private whyNotPlain(parser: number, upgrade: boolean): string | undefined {
    const llhttp = this.parsers.run.llhttp;
    if (!PLAIN_METHODS.has(llhttp.llhttp_get_method(parser))) return 'the method may have a body';
    if (llhttp.llhttp_get_http_major(parser) !== 1 || llhttp.llhttp_get_http_minor(parser) !== 1) return 'not HTTP/1.1';
    if (upgrade) return 'an upgrade';
    const raw = this.rawHeaders;
    if (raw.length / 2 > this.parsers.limits.maxHeaders) return 'more headers than node:http keeps';
    // A plain object, as node's: V8 keeps it in fast mode (a prototype-less one is a dictionary, and
    // every read of it a megamorphic load). A name like constructor is an own property once set.
    const headers: Record<string, string> = {};
    for (let index = 0; index < raw.length; index += 2) {
      const name = raw[index]!.toLowerCase();
      // llhttp's value runs to the line's end; node:http drops the whitespace at its end, as RFC 9112 §5 says.
      let value = raw[index + 1]!;
      const last = value.charCodeAt(value.length - 1);
      if (last === 0x20 || last === 0x09) raw[index + 1] = value = value.replace(TRAILING_WHITESPACE, '');
      // node:http combines a repeated header by rules of its own (first one kept, or joined, or an
      // array): not worth copying for the rare client that repeats one, so node:http reads those.
      if (typeof headers[name] === 'string') return name === 'host' ? 'more than one Host' : name === 'content-length' ? 'a body (Content-Length)' : 'a repeated header';
      switch (name) {
        case 'expect':
          return 'Expect';
        case 'upgrade':
          return 'Upgrade';
        case 'transfer-encoding':
          return 'a body (Transfer-Encoding)';
        case 'content-length':
          if (value !== '0') return 'a body (Content-Length)';
          break;
        case '__proto__':
          return 'a header node:http cannot keep';
      }
      headers[name] = value;
    }
    if (headers.host === undefined) return 'no Host';
    this.headers = headers;
    return undefined;
  }
}
