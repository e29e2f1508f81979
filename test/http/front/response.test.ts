import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import type { ClientResponse } from '../../../src/gateway/client-exchange.ts';
import { FrontResponse } from '../../../src/http/front/response.ts';

// The request front's response beside node:http's ServerResponse: the same calls (the ones the
// gateway makes: forwarded answers through writeHead/write/end, its own through setHeader/end) must
// put the same bytes on the wire, Date aside.

type Scenario = (response: ClientResponse) => void;

const ownAnswer =
  (status: number, extra: [string, string][] = []): Scenario =>
  (response) => {
    const body = JSON.stringify({ error: { code: status, title: 'Title', message: 'A message.' } });
    response.statusCode = status;
    response.setHeader('x-openstack-request-id', 'req-own');
    for (const [name, value] of extra) response.setHeader(name, value);
    response.setHeader('Content-Type', 'application/json');
    response.setHeader('Content-Length', Buffer.byteLength(body));
    response.end(body);
  };

const scenarios: Record<string, Scenario> = {
  'forwarded, with a length': (response) => {
    response.writeHead(200, ['content-type', 'application/json', 'content-length', '2', 'x-openstack-request-id', 'req-1']);
    response.end(Buffer.from('{}'));
  },
  'forwarded, no length, one piece': (response) => {
    response.writeHead(200, ['content-type', 'text/plain', 'x-openstack-request-id', 'req-1']);
    response.end(Buffer.from('abc'));
  },
  'forwarded, no length, streamed': (response) => {
    response.writeHead(201, ['content-type', 'text/plain']);
    response.write(Buffer.from('a'));
    response.write(Buffer.alloc(0));
    response.write(Buffer.from('bc'.repeat(300)));
    response.end();
  },
  'forwarded, with a length, every byte value': (response) => {
    const body = Buffer.from(Array.from({ length: 256 }, (_, index) => index));
    response.writeHead(200, ['content-type', 'application/octet-stream', 'content-length', String(body.length)]);
    response.end(body);
  },
  'forwarded, with a length, too large for one write with its head': (response) => {
    const body = Buffer.alloc(20_000, 'x');
    response.writeHead(200, ['content-length', String(body.length)]);
    response.end(body);
  },
  'forwarded, no length, one large piece': (response) => {
    response.writeHead(200, ['content-type', 'text/plain']);
    response.end(Buffer.alloc(20_000, 'y'));
  },
  'forwarded, with a length, streamed': (response) => {
    response.writeHead(200, ['content-length', '4']);
    response.write(Buffer.from('ab'));
    response.end(Buffer.from('cd'));
  },
  '204': (response) => {
    response.writeHead(204, ['x-openstack-request-id', 'req-1']);
    response.end();
  },
  '304 with a body written anyway': (response) => {
    response.writeHead(304, ['etag', '"v1"']);
    response.write(Buffer.from('ignored'));
    response.end();
  },
  "the upstream's Date": (response) => {
    response.writeHead(200, ['date', 'Mon, 01 Jan 2001 00:00:00 GMT', 'content-length', '0']);
    response.end();
  },
  'repeated Set-Cookie kept apart': (response) => {
    response.writeHead(200, ['set-cookie', 'a=1', 'set-cookie', 'b=2', 'content-length', '0']);
    response.end();
  },
  'a status without a reason phrase': (response) => {
    response.writeHead(599, ['content-length', '0']);
    response.end();
  },
  'Latin-1 in a value': (response) => {
    response.writeHead(200, ['x-name', 'Z\u00fcrich', 'content-length', '0']);
    response.end();
  },
  'draining: Connection: close': (response) => {
    response.shouldKeepAlive = false;
    response.writeHead(200, ['content-length', '2']);
    response.end(Buffer.from('{}'));
  },
  'a 401 of our own': ownAnswer(401, [['WWW-Authenticate', 'Keystone uri="http://gateway/v3"']]),
  'a 503 of our own with Retry-After': ownAnswer(503, [['Retry-After', '5']]),
  'an answer of our own without a length': (response) => {
    response.statusCode = 404;
    response.setHeader('Content-Type', 'application/json');
    response.end('{"error":{}}');
  },
  'end() alone': (response) => {
    response.end();
  },
};

/** Collects what a server wrote on one connection, which the server ends once the response has closed. */
function exchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('end', () => {
      socket.destroy();
      resolve(received);
    });
  });
}

async function listen(t: { teardown(fn: () => unknown): void }, server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

const scenarioOf = (target: string) => scenarios[decodeURIComponent(target.slice(1))]!;
const undated = (bytes: string) => bytes.replace(/\r\nDate: [^\r]*\r\n/, '\r\nDate: (now)\r\n');
/**
 * A chunked body as its data: where node:http puts chunk boundaries depends on its corking (writes in
 * one tick become one chunk), and no receiver may read meaning into them. Anything that is not
 * well-formed chunking is left as it is, so the comparison fails.
 */
function dechunked(bytes: string): string {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0 || !/\r\nTransfer-Encoding: chunked\r\n/i.test(bytes.slice(0, headEnd + 2))) return bytes;
  let at = headEnd + 4;
  let data = '';
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at);
    if (lineEnd < 0 || !/^[0-9a-f]+$/.test(bytes.slice(at, lineEnd))) return bytes;
    const size = parseInt(bytes.slice(at, lineEnd), 16);
    if (bytes.slice(lineEnd + 2 + size, lineEnd + 4 + size) !== '\r\n') return bytes;
    data += bytes.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 4 + size;
    if (size === 0) return at === bytes.length ? `${bytes.slice(0, headEnd + 4)}(chunked) ${data}` : bytes;
  }
}

t.test('each call sequence puts the same bytes on the wire as node:http (Date aside), for GET and HEAD, kept alive or not', async (t) => {
  const sockets = new Set<net.Socket>();
  const node = http.createServer((request, response) => {
    response.on('close', () => request.socket.end());
    scenarioOf(request.url!)(response);
  });
  node.keepAliveTimeout = 72_000;
  node.on('connection', (socket: net.Socket) => sockets.add(socket));
  const front = net.createServer((socket) => {
    socket.once('data', (chunk: Buffer) => {
      const [method, target] = chunk.toString('latin1').split(' ') as [string, string];
      const keepAlive = !/\r\nConnection: close\r\n/i.test(chunk.toString('latin1'));
      const response = new FrontResponse(socket, method === 'HEAD', keepAlive, { keepAliveTimeoutSeconds: 72, date: () => new Date().toUTCString() }, (next) => {
        if (next !== 'keep-alive') socket.end();
      });
      response.on('close', () => socket.end());
      scenarioOf(target)(response);
    });
  });
  const nodePort = await listen(t, node);
  const frontPort = await listen(t, front);
  for (const name of Object.keys(scenarios)) {
    for (const method of ['GET', 'HEAD']) {
      for (const connection of ['', 'Connection: close\r\n']) {
        const request = `${method} /${encodeURIComponent(name)} HTTP/1.1\r\nHost: gateway\r\n${connection}\r\n`;
        const [expected, actual] = await Promise.all([exchange(nodePort, request), exchange(frontPort, request)]);
        t.equal(dechunked(undated(actual)), dechunked(undated(expected)), `${name}, ${method}${connection ? ', Connection: close' : ''}`);
      }
    }
  }
  t.match(await exchange(frontPort, 'GET /end()%20alone HTTP/1.1\r\nHost: gateway\r\n\r\n'), /\r\nDate: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n/, 'a Date of the same form');
});

t.test('a header node:http would not send is refused the same way, before anything is written', async (t) => {
  const cases: [string, string[]][] = [
    ['a line break in a value', ['x-bad', 'a\r\nx-injected: 1']],
    ['a NUL in a value', ['x-bad', 'a\u0000b']],
    ['a name that is not a token', ['bad name', 'x']],
    ['an empty name', ['', 'x']],
  ];
  for (const [name, headers] of cases) {
    const node = new http.ServerResponse(new http.IncomingMessage(new net.Socket()));
    let nodeError: NodeJS.ErrnoException | undefined;
    try {
      node.writeHead(200, headers);
    } catch (error) {
      nodeError = error as NodeJS.ErrnoException;
    }
    const written: string[] = [];
    const ours = new FrontResponse({ write: (data) => (written.push(String(data)), true), cork() {}, uncork() {}, writableLength: 0 }, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'now' }, () => undefined);
    let ourError: NodeJS.ErrnoException | undefined;
    try {
      ours.writeHead(200, headers);
    } catch (error) {
      ourError = error as NodeJS.ErrnoException;
    }
    t.ok(nodeError, `${name}: node:http refuses it`);
    t.equal(ourError?.code, nodeError?.code, `${name}: with node's code (${nodeError?.code})`);
    t.same(written, [], `${name}: nothing written`);
    t.equal(ours.headersSent, false, `${name}: the response can still answer`);
  }
});

/** A socket that records its calls; `waiting` is what it reports as not yet taken by the kernel. */
function recordingSocket(events: string[], callbacks: (() => void)[]) {
  return {
    waiting: 0,
    get writableLength() {
      return this.waiting;
    },
    write(data: string | Buffer, _encoding?: BufferEncoding, written?: () => void) {
      events.push(`write ${JSON.stringify(String(data))}${written ? ' with a callback' : ''}`);
      if (written) callbacks.push(written);
      return true;
    },
    cork: () => events.push('cork'),
    uncork: () => events.push('uncork'),
  };
}

t.test("'close' comes after end() has returned, once the bytes are written; the connection hears of the end at once", async (t) => {
  const events: string[] = [];
  const callbacks: (() => void)[] = [];
  const socket = recordingSocket(events, callbacks);
  const response = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, (next) => events.push(`ended ${next}`));
  response.on('close', () => events.push('close'));
  response.writeHead(200, ['content-length', '2']);
  t.same(events, [], 'writeHead writes nothing: the head goes with the body');
  response.end(Buffer.from('{}'));
  t.same(
    events,
    ['write "HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\nDate: D\\r\\nConnection: keep-alive\\r\\nKeep-Alive: timeout=5\\r\\n\\r\\n{}"', 'ended keep-alive'],
    'a small answer goes as one write, head and body together, with no callback: the kernel took it at once',
  );
  t.same(callbacks, [], 'no write callback (node would defer it with a tick)');
  await Promise.resolve();
  t.same(events.slice(-1), ['close'], 'closed once the code that ended it has returned');
  response.end();
  t.same(events.slice(-1), ['close'], 'a second end() does nothing');
  response.destroy();
  await new Promise((resolve) => process.nextTick(resolve));
  t.same(events.slice(-1), ['close'], 'destroy() after the end neither ends the connection nor closes again');
  t.equal(events.filter((event) => event === 'close').length, 1);
});

t.test("bytes the kernel has not taken yet hold 'close' back until they have gone", async (t) => {
  for (const [name, answer] of [
    ['an answer with a length', (response: FrontResponse) => (response.writeHead(200, ['content-length', '2']), response.end(Buffer.from('{}')))],
    ['a chunked answer', (response: FrontResponse) => (response.writeHead(200, []), response.end(Buffer.from('{}')))],
    ['an end with nothing more to write', (response: FrontResponse) => (response.writeHead(200, ['content-length', '1']), response.write(Buffer.from('x')), response.end())],
  ] as const) {
    const events: string[] = [];
    const callbacks: (() => void)[] = [];
    const socket = recordingSocket(events, callbacks);
    socket.waiting = 2;
    const response = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, (next) => events.push(`ended ${next}`));
    response.on('close', () => events.push('close'));
    answer(response);
    t.same(events.slice(-2), ['write "" with a callback', 'ended keep-alive'], `${name}: an empty write follows the bytes, before the connection hears of the end`);
    await new Promise((resolve) => setImmediate(resolve));
    t.notOk(events.includes('close'), `${name}: not closed while the bytes wait`);
    t.equal(callbacks.length, 1);
    callbacks[0]!();
    t.same(events.slice(-1), ['close'], `${name}: closed once they have gone`);
  }
});

t.test("on a real connection, 'close' comes at once for an answer the kernel takes, and only once a client that does not read has taken a large one", async (t) => {
  let serverSocket: net.Socket | undefined;
  const server = net.createServer((socket) => (serverSocket = socket));
  const port = await listen(t, server);
  const client = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => client.once('connect', resolve));
  while (!serverSocket) await new Promise((resolve) => setImmediate(resolve));
  const socket = serverSocket;
  t.teardown(() => (client.destroy(), socket.destroy()));
  client.pause();
  const answer = (body: Buffer) => {
    const response = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, () => undefined);
    let closed = false;
    response.on('close', () => (closed = true));
    response.writeHead(200, ['content-length', String(body.length)]);
    response.end(body);
    return () => closed;
  };
  const small = answer(Buffer.from('{}'));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(small(), true, 'a small answer: closed once written');
  // More than loopback's buffers hold while nobody reads: the kernel takes part, node keeps the rest.
  const large = answer(Buffer.alloc(64 * 1024 * 1024, 'x'));
  t.ok(socket.writableLength > 0, 'the kernel did not take it all');
  for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve));
  t.equal(large(), false, 'not closed while the client has not read it');
  let received = 0;
  client.on('data', (chunk: Buffer) => (received += chunk.length));
  client.resume();
  while (!large()) await new Promise((resolve) => setImmediate(resolve));
  t.equal(socket.writableLength, 0, 'closed once every byte has gone to the kernel');
  t.ok(received > 0);
});

t.test('each write of a body without a length is a chunk of its own', async (t) => {
  const written: string[] = [];
  const socket = { write: (data: string | Buffer) => (written.push(String(data)), true), cork() {}, uncork() {}, writableLength: 0 };
  const response = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, () => undefined);
  response.writeHead(200, []);
  response.write(Buffer.from('a'));
  response.write(Buffer.alloc(0));
  response.write(Buffer.from('b'.repeat(17)));
  response.end(Buffer.from('cd'));
  t.same(written.slice(1), ['1\r\n', 'a', '\r\n', '11\r\n', 'b'.repeat(17), '\r\n', '2\r\n', 'cd', '\r\n', '0\r\n\r\n']);
});

t.test('destroy() ends the connection and closes the response on the next tick; a client gone closes it at once', async (t) => {
  const ends: string[] = [];
  const socket = { write: () => true, cork() {}, uncork() {}, writableLength: 0 };
  const destroyed = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, (next) => ends.push(next));
  let closed = 0;
  destroyed.on('close', () => closed++);
  destroyed.writeHead(200, []);
  destroyed.destroy();
  t.equal(closed, 0, 'not from inside destroy()');
  t.same(ends, ['cut'], 'the connection is told to cut');
  await new Promise((resolve) => process.nextTick(resolve));
  t.equal(closed, 1);
  t.equal(destroyed.destroyed, true);

  const abandoned = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, (next) => ends.push(next));
  let drains = 0;
  abandoned.on('close', () => closed++);
  abandoned.once('drain', () => drains++);
  abandoned.socketClosed();
  t.equal(closed, 2);
  t.equal(abandoned.destroyed, true);
  abandoned.drained();
  t.equal(drains, 0, 'no drain after close');
  t.equal(abandoned.write(Buffer.from('x')), false, 'nothing more is written');
});

t.test('a full socket makes write() answer false; drained() calls the drain listeners once', async (t) => {
  let room = false;
  const socket = { write: () => room, cork() {}, uncork() {}, writableLength: 0 };
  const response = new FrontResponse(socket, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, () => undefined);
  response.writeHead(200, []);
  t.equal(response.write(Buffer.from('abc')), false);
  let drains = 0;
  response.once('drain', () => drains++);
  room = true;
  response.drained();
  response.drained();
  t.equal(drains, 1);
  t.equal(response.write(Buffer.from('abc')), true);
});

t.test('writeCheckedHead tests the entries from `checked` on (the forwarder passes the upstream\'s, which llhttp has read strictly, as checked)', async (t) => {
  const written: string[] = [];
  const make = () => new FrontResponse({ write: (data) => (written.push(String(data)), true), cork() {}, uncork() {}, writableLength: 0 }, false, true, { keepAliveTimeoutSeconds: 5, date: () => 'D' }, () => undefined);
  t.throws(() => make().writeCheckedHead(200, ['x-openstack-request-id', 'req-1', 'location', 'http://gateway/x\r\nSet-Cookie: a=1'], 2), { code: 'ERR_INVALID_CHAR' }, 'a rewritten Location past `checked` is tested');
  t.throws(() => make().writeHead(200, ['x-ok', '1', 'bad name', 'x']), { code: 'ERR_INVALID_HTTP_TOKEN' }, 'by default every entry is');
  const trusting = make();
  trusting.writeCheckedHead(200, ['x-a', 'caf\u00e9', 'content-length', '0'], 4);
  trusting.end();
  t.match(written.join(''), /^HTTP\/1\.1 200 OK\r\nx-a: caf\u00e9\r\ncontent-length: 0\r\n/);
});
