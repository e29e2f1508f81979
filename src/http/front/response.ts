import { STATUS_CODES } from 'node:http';
import type { ClientResponse } from '../../gateway/client-exchange.ts';

/**
 * The request front's response to a plain request (docs/architecture.md, "The request front"):
 * what the gateway does with node:http's ServerResponse (gateway/client-exchange.ts), written
 * as node:http writes it, byte for byte but the Date (test/http/front/response.test.ts puts the two
 * side by side). Node's rules kept here:
 * - the head is made by writeHead (or the first write or end) and sent with the first body bytes;
 * - after the caller's headers: Date unless given, then Connection: keep-alive with Keep-Alive:
 *   timeout=N, or Connection: close; then, unless Content-Length or Transfer-Encoding was given,
 *   Content-Length when end() brought the whole body before any head, else chunked;
 * - no body for HEAD, 1xx, 204 and 304, whatever is written;
 * - a header name that is not a token, or a value with a control character, throws from writeHead.
 */

/** The socket a response writes to (the front's connection owns it). */
export interface ResponseSocket {
  write(data: string | Buffer, encoding?: BufferEncoding, written?: () => void): boolean;
  cork(): void;
  uncork(): void;
  /** Bytes given to write() that the kernel has not taken yet. */
  readonly writableLength: number;
}

export interface FrontResponseOptions {
  /** Keep-Alive: timeout=N on a connection that stays open (node:http's keepAliveTimeout, in seconds). */
  keepAliveTimeoutSeconds: number;
  /** The Date header's value now (cached per second by the front, as node:http does). */
  date: () => string;
}

/**
 * How the response's end reaches its connection: 'keep-alive' (it may carry another request),
 * 'close' (closed once what is written has gone), 'cut' (destroyed: the client must not take a cut
 * answer for a whole one). Called from inside end() or destroy(), which the gateway calls from inside
 * its upstream parser's callbacks: the connection must not start its next request before that call
 * has returned.
 */
export type ResponseEnded = (next: 'keep-alive' | 'close' | 'cut') => void;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** node:http's test of a Transfer-Encoding it frames itself. */
const CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;

/**
 * An answer whose head and body together are at most this long is written as one buffer: the head
 * copied in front of the body costs less than the corked pair's writev (a stream buffer entry each,
 * an array of chunks, the string flattened in C++) for the small bodies most answers have.
 */
const ONE_WRITE_BYTES = 16_384;

const EMPTY = Buffer.alloc(0);
/** Settled: a reaction on it runs once the code under way (end()'s caller) has returned. */
const SETTLED = Promise.resolve();

/** Node's own errors for a header it will not send (ERR_INVALID_HTTP_TOKEN, ERR_INVALID_CHAR). */
class InvalidHeaderError extends TypeError {
  constructor(
    readonly code: 'ERR_INVALID_HTTP_TOKEN' | 'ERR_INVALID_CHAR',
    message: string,
  ) {
    super(message);
  }
}

export class FrontResponse implements ClientResponse {
  statusCode = 200;
  shouldKeepAlive: boolean;
  /** The head has been made (it may not have reached the socket yet). */
  headersSent = false;
  destroyed = false;
  /** Headers set one by one (the gateway's own answers), in order, by lower-case name. */
  private setHeaders: Map<string, [name: string, value: string]> | undefined;
  /** The head, made but not yet written (it goes with the first body bytes). */
  private head: string | undefined;
  private hasBody: boolean;
  private chunked = false;
  /** Connection: close was written: the connection ends with this response. */
  private last = false;
  private ended = false;
  private closeListeners: (() => void)[] | undefined;
  private drainListeners: (() => void)[] | undefined;

  constructor(
    private readonly socket: ResponseSocket,
    /** The request was a HEAD: the head says what a GET's would, and no body follows. */
    head: boolean,
    /** The client allows the connection to stay open (HTTP/1.1 without Connection: close). */
    keepAlive: boolean,
    private readonly options: FrontResponseOptions,
    private readonly onEnded: ResponseEnded,
  ) {
    this.hasBody = !head;
    this.shouldKeepAlive = keepAlive;
  }

  setHeader(name: string, value: string | number): this {
    if (this.headersSent) throw new Error('Cannot set headers after they are sent to the client');
    const text = String(value);
    checkHeader(name, text);
    (this.setHeaders ??= new Map()).set(name.toLowerCase(), [name, text]);
    return this;
  }

  writeHead(status: number, headers: string[]): this {
    return this.writeCheckedHead(status, headers, 0);
  }

  writeCheckedHead(status: number, headers: string[], checked: number): this {
    if (this.headersSent) throw new Error('Cannot write headers after they are sent to the client');
    // Mixing the two would make node:http merge by name and lose repeated headers: the gateway never does.
    if (this.setHeaders !== undefined) throw new Error('writeHead after setHeader is not supported by the request front');
    this.statusCode = status;
    this.makeHead(headers, undefined, checked);
    return this;
  }

  write(chunk: Buffer): boolean {
    if (this.ended || this.destroyed) return false;
    if (!this.headersSent) this.makeHead(this.flatSetHeaders(), undefined);
    if (!this.hasBody || chunk.length === 0) return true;
    const socket = this.socket;
    socket.cork();
    this.flushHead();
    if (this.chunked) socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
    let room = socket.write(chunk);
    if (this.chunked) room = socket.write('\r\n', 'latin1');
    socket.uncork();
    return room;
  }

  end(chunk?: Buffer | string): this {
    if (this.ended || this.destroyed) return this;
    this.ended = true;
    const body = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (!this.headersSent) this.makeHead(this.flatSetHeaders(), body?.length ?? 0);
    const socket = this.socket;
    const head = this.head;
    this.head = undefined;
    const data = this.hasBody && body !== undefined && body.length > 0 ? body : undefined;
    // Several writes are corked into one writev; a single one goes as it is (corking it would only
    // queue it in the stream's buffer first).
    if (this.chunked) {
      socket.cork();
      if (head !== undefined) socket.write(head, 'latin1');
      if (data !== undefined) {
        socket.write(`${data.length.toString(16)}\r\n`, 'latin1');
        socket.write(data);
        socket.write('\r\n', 'latin1');
      }
      socket.write('0\r\n\r\n', 'latin1');
      socket.uncork();
    } else if (data !== undefined) {
      if (head === undefined) socket.write(data);
      else if (head.length + data.length <= ONE_WRITE_BYTES) socket.write(headAndBody(head, data));
      else {
        socket.cork();
        socket.write(head, 'latin1');
        socket.write(data);
        socket.uncork();
      }
    } else if (head !== undefined) {
      socket.write(head, 'latin1');
    }
    this.closeOnceWritten();
    this.onEnded(this.last ? 'close' : 'keep-alive');
    return this;
  }

  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    // Ended already: the bytes are the connection's, which may be carrying the next request by now.
    if (this.ended) return this;
    // The connection goes with it: the client must not take a cut answer for a whole one.
    this.onEnded('cut');
    process.nextTick(this.emitClose);
    return this;
  }

  /** Not owed: a request with Expect is node:http's, never the front's. */
  writeContinue(): void {
    throw new Error('Expect: 100-continue is not handled by the request front');
  }

  on(_event: 'close', listener: () => void): this {
    (this.closeListeners ??= []).push(listener);
    return this;
  }

  once(_event: 'drain', listener: () => void): this {
    (this.drainListeners ??= []).push(listener);
    return this;
  }

  /** The connection's socket took all it was given ('drain'). */
  drained(): void {
    const listeners = this.drainListeners;
    if (!listeners) return;
    this.drainListeners = undefined;
    for (const listener of listeners) listener();
  }

  /** The connection closed before the response ended (the client went away). */
  socketClosed(): void {
    if (this.ended || this.destroyed) return;
    this.destroyed = true;
    this.emitClose();
  }

  /**
   * 'close' once the last bytes are written, as node:http's response emits it after 'finish', and
   * never from inside end(): its caller (the upstream's handler) has not yet marked its exchange
   * done. Most answers go to the kernel at once: then 'close' is a reaction to a settled promise,
   * run as soon as that caller has returned. (A callback on the write itself would cost a tick per
   * answer: node's Writable defers a callback of a write done at once with process.nextTick, and
   * that tick makes node run its tick queue in JavaScript after the read that brought the answer.)
   * Bytes still waiting are followed by an empty write whose callback comes once they have gone.
   */
  private closeOnceWritten(): void {
    if (this.socket.writableLength === 0) void SETTLED.then(this.emitClose);
    else this.socket.write(EMPTY, undefined, this.emitClose);
  }

  // (An arrow, made once per response: it is passed as a callback.)
  private readonly emitClose = (): void => {
    const listeners = this.closeListeners;
    if (!listeners) return;
    this.closeListeners = undefined;
    this.drainListeners = undefined;
    for (const listener of listeners) listener();
  };

  private flatSetHeaders(): string[] {
    const flat: string[] = [];
    if (this.setHeaders) for (const [name, value] of this.setHeaders.values()) flat.push(name, value);
    return flat;
  }

  /** The head, as node:http's _storeHeader makes it. `wholeBodyLength`: end() brought the body before any head. */
  private makeHead(headers: string[], wholeBodyLength: number | undefined, checked = 0): void {
    const status = this.statusCode;
    if (!(status >= 100 && status <= 999)) throw new RangeError(`Invalid status code: ${status}`);
    if (status === 204 || status === 304 || status < 200) this.hasBody = false;
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`;
    let date = false;
    let connection = false;
    let length = false;
    for (let index = 0; index < headers.length; index += 2) {
      const name = headers[index]!;
      const value = headers[index + 1]!;
      if (index >= checked) checkHeader(name, value);
      head += `${name}: ${value}\r\n`;
      switch (name.length) {
        case 4:
          if (name.toLowerCase() === 'date') date = true;
          break;
        case 10:
          if (name.toLowerCase() === 'connection') {
            connection = true;
            if (value.toLowerCase().includes('close')) this.last = true;
          }
          break;
        case 14:
          if (name.toLowerCase() === 'content-length') length = true;
          break;
        case 17:
          if (name.toLowerCase() === 'transfer-encoding') {
            length = true;
            if (CHUNKED.test(value)) this.chunked = true;
          }
          break;
      }
    }
    if (!date) head += `Date: ${this.options.date()}\r\n`;
    if (!connection) {
      if (this.shouldKeepAlive) head += `Connection: keep-alive\r\nKeep-Alive: timeout=${this.options.keepAliveTimeoutSeconds}\r\n`;
      else {
        this.last = true;
        head += 'Connection: close\r\n';
      }
    }
    if (!length && this.hasBody) {
      if (wholeBodyLength !== undefined) head += `Content-Length: ${wholeBodyLength}\r\n`;
      else {
        head += 'Transfer-Encoding: chunked\r\n';
        this.chunked = true;
      }
    }
    this.head = head + '\r\n';
    this.headersSent = true;
  }

  private flushHead(): void {
    if (this.head === undefined) return;
    this.socket.write(this.head, 'latin1');
    this.head = undefined;
  }
}

function checkHeader(name: string, value: string): void {
  if (!TOKEN.test(name)) throw new InvalidHeaderError('ERR_INVALID_HTTP_TOKEN', `Header name must be a valid HTTP token ["${name}"]`);
  if (INVALID_VALUE.test(value)) throw new InvalidHeaderError('ERR_INVALID_CHAR', `Invalid character in header content ["${name}"]`);
}

/** The head (Latin-1 text) and the body in one buffer. */
function headAndBody(head: string, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(head.length + body.length);
  out.write(head, 0, 'latin1');
  out.set(body, head.length);
  return out;
}
