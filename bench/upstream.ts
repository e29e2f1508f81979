/**
 * The benchmark's upstream: a plain node:http server answering every request with the same small
 * JSON body. It does as little as possible so that it measures the ceiling of this machine's HTTP
 * stack, not an application. Run as its own process by processes.ts (port reported over IPC).
 */
import http from 'node:http';

const BODY = Buffer.from(JSON.stringify({ things: [{ id: 'a1b2c3', name: 'bench', size: 1 }] }));

const server = http.createServer((request, response) => {
  // Drain any request body before answering so keep-alive connections stay usable.
  request.resume();
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length });
    response.end(BODY);
  });
});
// Longer than any pool's idle timeout in front of it: the client side closes idle connections first.
server.keepAliveTimeout = 65_000;

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
});

// The parent (bench/run.ts) went away, however it died: do not outlive it.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
