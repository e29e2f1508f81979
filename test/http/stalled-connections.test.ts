import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import t from 'tap';
import { StalledConnections, type StalledConnectionsOptions } from '../../src/http/stalled-connections.ts';
import { ManualClock } from '../helpers/clock.ts';

// Connections that stall outside node's keep-alive wait are closed by a sweep on the injected clock:
// a client that stops reading its response, a request never answered. A client that reads, however
// slowly, and a connection waiting between requests are left alone.

const STALL_MS = 10_000;
const CHUNK = Buffer.alloc(1024 * 1024, 'stalled ');

interface Fixture {
  port: number;
  clock: ManualClock;
  stalled: StalledConnections;
  /** The server's side of each connection, in the order they came. */
  serverSockets: net.Socket[];
}

async function startServer(t: { teardown(fn: () => unknown): void }, handler: http.RequestListener, options: Partial<StalledConnectionsOptions> = {}): Promise<Fixture> {
  const server = http.createServer(handler);
  server.keepAliveTimeout = 60_000;
  const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
  // No sweep of its own: the test sweeps, between moves of its clock.
  const stalled = new StalledConnections(server, { stallMs: STALL_MS, now: () => clock.now(), sweepEveryMs: 0, ...options });
  const serverSockets: net.Socket[] = [];
  server.on('connection', (socket: net.Socket) => serverSockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    stalled.stop();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { port: (server.address() as AddressInfo).port, clock, stalled, serverSockets };
}

/** Writes 1 MiB pieces until the stream holds some back, then again on each drain, until `limit` pieces. */
function writeBig(response: http.ServerResponse, limit = 256): void {
  response.writeHead(200, { 'content-type': 'application/octet-stream' });
  let written = 0;
  const write = (): void => {
    while (written < limit) {
      written += 1;
      if (!response.write(CHUNK)) return void response.once('drain', write);
    }
    response.end();
  };
  write();
}

async function connect(port: number, request: string): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.write(request);
  return socket;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

t.test('a client that stops reading its response is closed once nothing has moved for stallMs', async (t) => {
  let answer!: (response: http.ServerResponse) => void;
  const responding = new Promise<http.ServerResponse>((resolve) => (answer = resolve));
  const f = await startServer(t, (_request, response) => {
    writeBig(response);
    answer(response);
  });
  const client = await connect(f.port, 'GET /big HTTP/1.1\r\nHost: a\r\n\r\n');
  client.pause();
  const response = await responding;
  const serverSocket = f.serverSockets[0]!;
  f.stalled.sweep();
  f.clock.advance(STALL_MS - 1);
  f.stalled.sweep();
  t.equal(serverSocket.destroyed, false, 'not before stallMs');
  // The kernel's buffers may still be taking bytes for a moment: each sweep that sees them move
  // starts the count again. Once they are full, the next stallMs closes the connection. More
  // written meanwhile (a writer that ignores backpressure) only waits in the stream: no progress.
  let rounds = 0;
  while (!serverSocket.destroyed && rounds < 20) {
    rounds += 1;
    response.write(CHUNK.subarray(0, 1024));
    await turn(); // (the response hands its write to the socket on the next tick)
    f.clock.advance(STALL_MS);
    f.stalled.sweep();
  }
  t.equal(serverSocket.destroyed, true, `closed after ${rounds} further sweeps, stallMs apart`);
  client.resume(); // (a paused socket never sees the end)
  await once(client, 'close');
  t.equal(f.stalled.size, 0, 'and forgotten');
});

t.test('a client that reads, however slowly, is never closed', async (t) => {
  const f = await startServer(t, (_request, response) => writeBig(response, 4096));
  const client = await connect(f.port, 'GET /big HTTP/1.1\r\nHost: a\r\n\r\n');
  client.pause();
  await once(client, 'readable');
  const serverSocket = f.serverSockets[0]!;
  // What the peer has taken: node counts a write once the kernel has all of it (like node's own
  // socket timeout, which a write's completion refreshes), so the client reads until one completes.
  const taken = () => serverSocket.bytesWritten - serverSocket.writableLength;
  for (let round = 0; round < 6; round += 1) {
    f.stalled.sweep();
    f.clock.advance(STALL_MS * 2);
    const before = taken();
    while (taken() === before) {
      if (client.read() === null) await once(client, 'readable');
    }
  }
  f.stalled.sweep();
  t.equal(serverSocket.destroyed, false, 'six sweeps each 2 × stallMs apart, and still open');
  client.destroy();
});

t.test('a request never answered is closed after stallMs, a timer of its own set or not', async (t) => {
  const f = await startServer(t, (request, response) => {
    // A timeout other than node's keep-alive wait does not take the connection out of the sweep.
    if (request.url === '/never') return void request.setTimeout(600_000);
    response.end('ok');
  });
  const client = await connect(f.port, 'GET /never HTTP/1.1\r\nHost: a\r\n\r\n');
  while (f.serverSockets.length === 0 || f.serverSockets[0]!.bytesRead === 0) await turn();
  f.stalled.sweep();
  f.clock.advance(STALL_MS - 1);
  f.stalled.sweep();
  t.equal(f.serverSockets[0]!.destroyed, false);
  f.clock.advance(1);
  f.stalled.sweep();
  t.equal(f.serverSockets[0]!.destroyed, true, 'stallMs without a byte');
  await once(client, 'close');
});

t.test("a connection waiting between requests is node's keep-alive timer's, not the sweep's", async (t) => {
  const f = await startServer(t, (_request, response) => response.end('ok'));
  const client = await connect(f.port, 'GET / HTTP/1.1\r\nHost: a\r\n\r\n');
  let answer = '';
  client.setEncoding('latin1');
  client.on('data', (chunk: string) => (answer += chunk));
  while (!answer.endsWith('ok')) await once(client, 'data');
  t.match(answer, /^HTTP\/1\.1 200 /);
  t.match(answer, /\r\nKeep-Alive: timeout=60\r\n/, 'the keep-alive time advertised');
  const serverSocket = f.serverSockets[0]!;
  for (let round = 0; round < 5; round += 1) {
    f.stalled.sweep();
    f.clock.advance(STALL_MS * 10);
  }
  f.stalled.sweep();
  t.equal(serverSocket.destroyed, false, 'idle for 50 × stallMs on the clock, still open');
  t.equal(serverSocket.timeout, 61_000, "node's keep-alive timer is armed (keepAliveTimeout plus its 1 s buffer)");

  // The next request on it is the sweep's again, from its own start.
  client.write('GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
  await once(client, 'close');
  t.match(answer.slice(answer.indexOf('ok') + 2), /^HTTP\/1\.1 200 /, 'the connection served a second request');
  f.stalled.sweep();
  t.equal(f.stalled.size, 0, 'a closed connection is forgotten at the next sweep');
});

t.test('a connection whose wait another part times (timedElsewhere: the request front waiting for a request) is left alone while it does', async (t) => {
  let timedElsewhere = true;
  const asked: net.Socket[] = [];
  const { port, clock, stalled, serverSockets } = await startServer(t, (_request, response) => response.end('ok'), {
    timedElsewhere: (socket) => {
      asked.push(socket);
      return timedElsewhere;
    },
  });
  // A connection that sends nothing at all: without the exemption, stalled after stallMs.
  const client = net.connect(port, '127.0.0.1');
  client.on('error', () => {});
  await once(client, 'connect');
  while (serverSockets.length === 0) await turn();
  const serverSocket = serverSockets[0]!;
  for (let round = 0; round < 5; round += 1) {
    stalled.sweep();
    clock.advance(STALL_MS * 10);
  }
  stalled.sweep();
  t.equal(serverSocket.destroyed, false, 'timed elsewhere: still open after 50 × stallMs');
  t.ok(asked.includes(serverSocket), 'the predicate was asked about that socket');
  // No longer timed elsewhere: the sweep's from then on, counted from the sweep that sees it so.
  timedElsewhere = false;
  stalled.sweep();
  clock.advance(STALL_MS - 1);
  stalled.sweep();
  t.equal(serverSocket.destroyed, false, 'not before stallMs');
  clock.advance(1);
  stalled.sweep();
  t.equal(serverSocket.destroyed, true, 'closed once nothing has moved for stallMs');
  client.destroy();
});
