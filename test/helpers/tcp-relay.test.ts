import net from 'node:net';
import t from 'tap';
import { startTcpRelay } from './tcp-relay.ts';

/** An echo server standing in for PostgreSQL or Redis. */
async function echoServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

interface Client {
  socket: net.Socket;
  received(): string;
  closed: Promise<void>;
}

async function connect(port: number): Promise<Client> {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return { socket, received: () => received, closed };
}

async function until(check: () => boolean, timeoutMs = 2000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return check();
}

t.test('relays, cuts (reset and blackhole) and restores', async (t) => {
  const echo = await echoServer();
  const relay = await startTcpRelay('127.0.0.1', echo.port);
  t.teardown(async () => {
    await relay.close();
    await echo.close();
  });
  t.equal(relay.urlFor('postgres://postgres@db.example:5432/kg?x=1'), `postgres://postgres@127.0.0.1:${relay.port}/kg?x=1`);

  const live = await connect(relay.port);
  live.socket.write('hello');
  t.ok(await until(() => live.received() === 'hello'), 'bytes pass both ways');
  t.equal(relay.connections, 1);

  relay.cut();
  await live.closed;
  t.pass('a reset cut ends live connections');
  t.equal(relay.connections, 0);
  const refused = await connect(relay.port);
  await refused.closed;
  t.equal(refused.received(), '', 'new connections are accepted and ended at once');

  relay.restore();
  const again = await connect(relay.port);
  again.socket.write('back');
  t.ok(await until(() => again.received() === 'back'), 'traffic passes again after restore');

  relay.cut('blackhole');
  again.socket.write('lost');
  const held = await connect(relay.port);
  held.socket.write('also lost');
  t.notOk(await until(() => again.received() !== 'back' || held.received() !== '', 300), 'nothing passes in a blackhole');
  t.notOk(again.socket.destroyed || held.socket.destroyed, 'connections stay open in a blackhole');
  // Accepted and dropped, not left unread: megabytes go out without backing up (a paused relay
  // would stop reading once the socket buffers filled).
  let flushed = true;
  for (let chunk = 0; chunk < 32; chunk++) flushed = held.socket.write(Buffer.alloc(256 * 1024));
  if (!flushed) await new Promise((resolve) => held.socket.once('drain', resolve));
  t.pass('the blackhole reads and drops what is sent');
  t.equal(held.received(), '', 'and answers nothing');

  relay.restore();
  await Promise.all([again.closed, held.closed]);
  t.pass('restore ends the connections the blackhole held');
  const fresh = await connect(relay.port);
  fresh.socket.write('fresh');
  t.ok(await until(() => fresh.received() === 'fresh'));
  fresh.socket.destroy();
});
