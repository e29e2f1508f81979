/**
 * An experiment (bench/front-experiment.ts), not a server to deploy: bare-proxy.ts without
 * node:http's request front. A net server parses requests with node's own llhttp binding
 * (`_http_common`'s HTTPParser, undocumented), makes no IncomingMessage or ServerResponse, and writes
 * each response's head and body corked into one writev; the upstream side is the gateway's
 * UpstreamPool, as in bare-proxy.ts. GET without a body only, one request in flight per connection,
 * a head in one read, status lines all "OK", no backpressure, no timeouts, no limits: what it
 * measures is how much of a proxy's CPU node:http's JavaScript is. Usage: raw-front-proxy.ts <origin>.
 */
import net from 'node:net';
// @ts-expect-error internal module
import { HTTPParser, methods } from '_http_common';
import { ResponseParsers, UpstreamPool, type UpstreamHandler } from '../src/gateway/upstream-pool.ts';

const origin = process.argv[2];
if (!origin) throw new Error('usage: raw-front-proxy.ts http://host:port');
const pool = new UpstreamPool(origin, { connections: 128, connectTimeoutMs: 5_000, keepAliveTimeoutMs: 30_000 }, new ResponseParsers());
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'trailer', 'te', 'host']);
const kOnHeadersComplete = HTTPParser.kOnHeadersComplete | 0;
const kOnMessageComplete = HTTPParser.kOnMessageComplete | 0;
const kOnBody = HTTPParser.kOnBody | 0;
const kOnExecute = HTTPParser.kOnExecute | 0;

class Exchange implements UpstreamHandler {
  private head = '';
  private chunked = false;
  constructor(private readonly socket: net.Socket, private readonly keepAlive: boolean) {}
  onConnect(): void {}
  onHeaders(status: number, raw: string[]): boolean {
    let head = `HTTP/1.1 ${status} OK\r\n`;
    let length = false;
    for (let index = 0; index < raw.length; index += 2) {
      const name = raw[index]!.toLowerCase();
      if (HOP_BY_HOP.has(name)) continue;
      if (name === 'content-length') length = true;
      head += `${name}: ${raw[index + 1]}\r\n`;
    }
    this.chunked = !length;
    head += this.keepAlive ? 'connection: keep-alive\r\n' : 'connection: close\r\n';
    if (this.chunked) head += 'transfer-encoding: chunked\r\n';
    this.head = head + '\r\n';
    this.socket.cork();
    return true;
  }
  onData(chunk: Buffer): boolean {
    if (this.head) { this.socket.write(this.head); this.head = ''; }
    if (this.chunked) this.socket.write(`${chunk.length.toString(16)}\r\n`);
    this.socket.write(chunk);
    if (this.chunked) this.socket.write('\r\n');
    return true;
  }
  onComplete(): void {
    if (this.head) { this.socket.write(this.head); this.head = ''; }
    if (this.chunked) this.socket.write('0\r\n\r\n');
    this.socket.uncork();
    if (!this.keepAlive) this.socket.end();
  }
  onError(): void {
    this.socket.destroy();
  }
}

const server = net.createServer({ noDelay: true }, (socket) => {
  const parser = new HTTPParser();
  parser.initialize(HTTPParser.REQUEST, {}, 0, 0);
  parser[kOnHeadersComplete] = (_major: number, _minor: number, headers: string[] | undefined, method: number, url: string | undefined, _s: unknown, _m: unknown, _upgrade: boolean, keepAlive: boolean) => {
    // A head in several reads arrives through kOnHeaders instead: not handled here, the connection is closed.
    if (headers === undefined || url === undefined) {
      socket.destroy();
      return 0;
    }
    const forwarded: string[] = [];
    for (let index = 0; index < headers.length; index += 2) {
      const name = headers[index]!.toLowerCase();
      if (!HOP_BY_HOP.has(name)) forwarded.push(name, headers[index + 1]!);
    }
    pool.dispatch({ path: url, method: methods[method], headers: forwarded, body: null }, new Exchange(socket, keepAlive));
    return 0;
  };
  parser[kOnBody] = () => {};
  parser[kOnMessageComplete] = () => {};
  parser[kOnExecute] = () => {};
  socket.on('data', (data: Buffer) => {
    const result = parser.execute(data);
    if (result instanceof Error) socket.destroy();
  });
  socket.on('error', () => {});
  socket.on('close', () => parser.free?.());
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
