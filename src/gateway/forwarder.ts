import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool, errors as undiciErrors } from 'undici';
import type { HeaderMap } from './identity-headers.ts';

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
 * or the response headers took too long: 504), 'aborted' (the client broke off its request body; says
 * nothing about the upstream).
 */
export type ForwardFailure = { kind: 'connect' | 'timeout' | 'aborted'; detail: string };

export interface ForwardResult {
  status: number;
  failure?: ForwardFailure;
}

const RESPONSE_HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'trailer', 'te']);

/**
 * Streams a request to an upstream and its response back, over keep-alive undici pools (one per
 * upstream origin). Bodies are never parsed or buffered; a client's Content-Length is kept.
 */
export class Forwarder {
  private readonly pools = new Map<string, Pool>();

  constructor(private readonly options: ForwarderOptions) {}

  async forward(
    request: IncomingMessage,
    response: ServerResponse,
    target: { origin: string; path: string; headers: HeaderMap },
    rewriteLocation: (location: string) => string,
  ): Promise<ForwardResult> {
    const pool = this.pool(target.origin);
    const hasBody = request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
    let upstream;
    try {
      upstream = await pool.request({
        path: target.path,
        method: request.method as 'GET',
        headers: target.headers,
        body: hasBody ? request : null,
        headersTimeout: this.options.responseTimeoutMs,
        bodyTimeout: this.options.bodyTimeoutMs,
      });
    } catch (error) {
      return { status: 0, failure: classify(error, request) };
    }
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (value === undefined || RESPONSE_HOP_BY_HOP.has(name)) continue;
      headers[name] = name === 'location' && typeof value === 'string' ? rewriteLocation(value) : value;
    }
    response.writeHead(upstream.statusCode, headers);
    // Plain pipe, not stream.pipeline: pipeline builds (and aborts) an AbortController per call,
    // measured here at ~8% of the gateway's CPU. Either side breaking off destroys the other, so a
    // client never takes a truncated body for a whole one and an abandoned upstream is let go.
    const body = upstream.body;
    body.once('error', () => response.destroy());
    response.once('close', () => {
      if (!body.readableEnded) body.destroy();
    });
    body.pipe(response);
    return { status: upstream.statusCode };
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.close()));
    this.pools.clear();
  }

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.options.connectionsPerUpstream,
        connect: { timeout: this.options.connectTimeoutMs },
        keepAliveTimeout: 30_000,
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }
}

function classify(error: unknown, request: IncomingMessage): ForwardFailure {
  const detail = error instanceof Error ? error.message : String(error);
  if (error instanceof undiciErrors.ConnectTimeoutError || error instanceof undiciErrors.HeadersTimeoutError) return { kind: 'timeout', detail };
  if (request.destroyed && !request.complete) return { kind: 'aborted', detail };
  return { kind: 'connect', detail };
}
