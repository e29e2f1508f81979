/**
 * The baseline a lean proxy achieves: node:http in front of the gateway's own upstream client
 * (src/gateway/upstream-pool.ts), no authentication, no policy, no logging. It forwards the way
 * src/gateway/forwarder.ts does (same pool size, a handler writing straight into the response, the
 * upstream paused while the client's socket is full, hop-by-hop headers dropped), so the gateway's
 * extra cost per request is what the gateway itself adds. Usage (spawned by processes.ts, which
 * reads the port from an IPC message): bare-proxy.ts <upstream origin> [port]; without an IPC
 * channel (bench/instructions.sh) it prints `listening on <port>`.
 */
import http from 'node:http';
import { ResponseParsers, UpstreamPool, type UpstreamHandler } from '../src/gateway/upstream-pool.ts';

const origin = process.argv[2];
if (!origin) throw new Error('usage: bare-proxy.ts http://host:port');

// 128 = the gateway's UPSTREAM_CONNECTIONS default.
const pool = new UpstreamPool(origin, { connections: 128, connectTimeoutMs: 5_000, keepAliveTimeoutMs: 30_000 }, new ResponseParsers());
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'trailer', 'te', 'host']);

/** One exchange's upstream handler (a class: tsx names every arrow stored under a key, per call). */
class Exchange implements UpstreamHandler {
  private abort: ((reason?: Error) => void) | undefined;
  private resume: (() => void) | undefined;
  private completed = false;
  private started = false;

  constructor(private readonly response: http.ServerResponse) {
    response.once('close', () => {
      if (!this.completed) this.abort?.();
    });
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(status: number, raw: string[], resume: () => void): boolean {
    this.resume = resume;
    const headers: string[] = [];
    for (let index = 0; index < raw.length; index += 2) {
      const name = raw[index]!.toLowerCase();
      if (!HOP_BY_HOP.has(name)) headers.push(name, raw[index + 1]!);
    }
    this.started = true;
    this.response.writeHead(status, headers);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.response.write(chunk)) return true;
    this.response.once('drain', () => this.resume?.());
    return false;
  }

  onComplete(): void {
    this.completed = true;
    this.response.end();
  }

  onError(): void {
    this.completed = true;
    if (this.started) this.response.destroy();
    else this.response.writeHead(502, { 'content-type': 'application/json' }).end('{"error":"bad gateway"}');
  }
}

function proxy(request: http.IncomingMessage, response: http.ServerResponse): void {
  const hasBody = request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
  const headers: string[] = [];
  const raw = request.rawHeaders;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!.toLowerCase();
    if (!HOP_BY_HOP.has(name)) headers.push(name, raw[index + 1]!);
  }
  pool.dispatch({ path: request.url ?? '/', method: request.method ?? 'GET', headers, body: hasBody ? request : null }, new Exchange(response));
}

const server = http.createServer(proxy);
server.keepAliveTimeout = 72_000; // as the service's

server.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  if (process.send) process.send({ port });
  else console.log(`listening on ${port}`);
});

process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
