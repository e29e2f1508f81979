/**
 * The baseline a lean proxy achieves: node:http in front of an undici Pool, no authentication, no
 * policy, no logging. It forwards the way src/gateway/forwarder.ts does (same pool size, streamed
 * bodies, hop-by-hop headers dropped), so the gateway's extra cost per request is what the gateway
 * itself adds. Usage (spawned by processes.ts): bare-proxy.ts <upstream origin>.
 */
import http from 'node:http';
import { Pool } from 'undici';

const origin = process.argv[2];
if (!origin) throw new Error('usage: bare-proxy.ts http://host:port');

// 128 = the gateway's UPSTREAM_CONNECTIONS default.
const pool = new Pool(origin, { connections: 128, keepAliveTimeout: 30_000 });
const upstreamHost = new URL(origin).host;
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'trailer', 'te', 'host']);

function forwardable(headers: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const result: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) result[name] = value;
  }
  return result;
}

async function proxy(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
  const hasBody = request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
  const upstream = await pool.request({
    path: request.url ?? '/',
    method: (request.method ?? 'GET') as 'GET',
    headers: { ...forwardable(request.headers), host: upstreamHost },
    body: hasBody ? request : null,
  });
  response.writeHead(upstream.statusCode, forwardable(upstream.headers as http.IncomingHttpHeaders));
  for await (const chunk of upstream.body) {
    if (!response.write(chunk)) await new Promise((resolve) => response.once('drain', resolve));
  }
  response.end();
}

const server = http.createServer((request, response) => {
  proxy(request, response).catch(() => {
    if (response.headersSent) response.destroy();
    else response.writeHead(502, { 'content-type': 'application/json' }).end('{"error":"bad gateway"}');
  });
});
server.keepAliveTimeout = 72_000; // as the service's

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
});

process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
