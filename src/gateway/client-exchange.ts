import type { IncomingHttpHeaders } from 'node:http';

/**
 * What the gateway uses of a client's exchange: the request it reads and the response it writes.
 * node:http's IncomingMessage and ServerResponse have all of it, and are passed as they are (no
 * wrapper per request); the request front (http/front/, docs/architecture.md "The request front")
 * gives the gateway its own objects of these shapes for plain requests. Anything the gateway starts
 * using of node:http's objects must be added here, where the front sees that it owes it too.
 */

/** A request body as the upstream client streams it (upstream-pool.ts): node:http's IncomingMessage. */
export interface RequestBody {
  /** The whole body has arrived. */
  readonly complete: boolean;
  readonly readableEnded: boolean;
  readonly destroyed: boolean;
  pause(): unknown;
  resume(): unknown;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end' | 'aborted' | 'error' | 'close', listener: () => void): unknown;
  off(event: 'data', listener: (chunk: Buffer) => void): unknown;
  off(event: 'end' | 'aborted' | 'error' | 'close', listener: () => void): unknown;
}

/** The client's request. Its body, when it has one, is itself (a stream, read only when forwarded). */
export interface ClientRequest extends RequestBody {
  readonly method?: string | undefined;
  /** The request target as sent. */
  readonly url?: string | undefined;
  /** Lower-case names, duplicates combined as node:http combines them (IncomingMessage.headers). */
  readonly headers: IncomingHttpHeaders;
  readonly socket: { readonly remoteAddress?: string | undefined };
  once(event: 'end', listener: () => void): unknown;
}

/** The response to the client. */
export interface ClientResponse {
  /** The status written, or to be written by end() when writeHead() was not called. */
  statusCode: number;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  /** false: the connection closes after this response (a draining server). */
  shouldKeepAlive: boolean;
  /** A header for the answers the gateway gives itself (never with writeHead's list: see ForwardTarget.responseHeaders). */
  setHeader(name: string, value: string | number): unknown;
  /** The head with a flat [name, value, …] list (repeated names kept apart). Throws for a header it will not send. */
  writeHead(status: number, headers: string[]): unknown;
  /**
   * writeHead, where the first `checked` entries are known to be sendable (names tokens, values
   * without control characters but tab) and are not tested again. The request front's; node:http's
   * response has none (its writeHead would take a third argument for the headers).
   */
  writeCheckedHead?(status: number, headers: string[], checked: number): unknown;
  /** false: the client's socket is full; 'drain' follows. */
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer | string): unknown;
  destroy(): unknown;
  /** HTTP/1.1 100 Continue (the client sent Expect: 100-continue). */
  writeContinue(): void;
  on(event: 'close', listener: () => void): unknown;
  once(event: 'drain', listener: () => void): unknown;
}
