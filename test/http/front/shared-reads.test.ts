import net from 'node:net';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { SharedReads } from '../../../src/http/front/shared-reads.ts';

// SharedReads on real sockets: an accepted socket's reads go to the callback, in the shared
// buffer, until detach() hands them back to the stream as copies of their own.

interface Pair {
  client: net.Socket;
  accepted: net.Socket;
}

/** A listening server; each call of the answer connects a client and gives both ends. */
async function listen(t: { teardown(fn: () => unknown): void }): Promise<() => Promise<Pair>> {
  const waiting: ((socket: net.Socket) => void)[] = [];
  // (A connection no test waits for is closed.)
  const server = net.createServer((socket) => {
    const waiter = waiting.shift();
    if (waiter) waiter(socket);
    else socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const sockets: net.Socket[] = [];
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return async () => {
    const accepting = new Promise<net.Socket>((resolve) => waiting.push(resolve));
    const client = net.connect(port, '127.0.0.1');
    const accepted = await accepting;
    sockets.push(client, accepted);
    return { client, accepted };
  };
}

const until = async (condition: () => boolean) => {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
};

t.test('an accepted socket reads into the shared buffer, handed to the callback; its stream sees nothing', async (t) => {
  const { client, accepted } = await (await listen(t))();
  const reads = new SharedReads();
  const seen: string[] = [];
  t.equal(reads.attach(accepted, (length, buffer) => {
    t.equal(buffer, reads.buffer, 'the shared buffer');
    seen.push(buffer.toString('latin1', 0, length));
  }), true);
  let streamed = 0;
  accepted.on('data', () => streamed++);
  client.write('hello');
  await until(() => seen.length === 1);
  t.same(seen, ['hello']);
  t.equal(streamed, 0);
  // The stream still ends when the client does.
  let ended = false;
  accepted.on('end', () => (ended = true));
  client.end();
  await until(() => ended);
  t.pass('ended');
});

t.test('pause() stops the reads and resume() starts them again', async (t) => {
  const { client, accepted } = await (await listen(t))();
  const reads = new SharedReads();
  const seen: string[] = [];
  reads.attach(accepted, (length, buffer) => seen.push(buffer.toString('latin1', 0, length)));
  accepted.pause();
  client.write('held');
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.same(seen, [], 'not read while paused');
  accepted.resume();
  await until(() => seen.length === 1);
  t.same(seen, ['held']);
});

t.test('after detach(), reads are the stream\'s again, each a copy that outlives other sockets\' reads', async (t) => {
  const connect = await listen(t);
  const { client, accepted } = await connect();
  const reads = new SharedReads();
  const first: string[] = [];
  reads.attach(accepted, (length, buffer) => first.push(buffer.toString('latin1', 0, length)));
  const other = await connect();
  const second: string[] = [];
  reads.attach(other.accepted, (length, buffer) => second.push(buffer.toString('latin1', 0, length)));
  client.write('before');
  await until(() => first.length === 1);
  reads.detach(accepted);
  const chunks: Buffer[] = [];
  accepted.on('data', (chunk: Buffer) => chunks.push(chunk));
  client.write('after detach');
  await until(() => chunks.length === 1);
  other.client.write('x'.repeat(100));
  await until(() => second.length === 1);
  t.same(first, ['before'], 'the callback no longer hears of this socket');
  t.equal(Buffer.concat(chunks).toString('latin1'), 'after detach', 'a copy: the other socket\'s read did not overwrite it');
  t.not(chunks[0]!.buffer, reads.buffer.buffer);
});

t.test('a socket that reads into a buffer of its own (net.connect\'s onread) is left alone', async (t) => {
  const { accepted } = await (await listen(t))();
  const reads = new SharedReads();
  t.equal(reads.attach(accepted, () => undefined), true);
  const { port } = accepted.address() as net.AddressInfo; // the server's own port
  const own = net.connect({ port, host: '127.0.0.1', onread: { buffer: Buffer.alloc(16), callback: () => true } });
  own.on('error', () => undefined);
  t.teardown(() => own.destroy());
  t.equal(reads.attach(own, () => undefined), false);
  t.equal(reads.attach(accepted, () => undefined), false, 'nor one attached already');
});

t.test('a stream without a TCP handle is refused, and does not turn shared reads off for the sockets after it', async (t) => {
  const { accepted } = await (await listen(t))();
  const reads = new SharedReads();
  t.equal(reads.attach(new PassThrough() as unknown as net.Socket, () => undefined), false);
  t.equal(reads.attach(accepted, () => undefined), true);
});
