import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import type { ClientRequest } from '../../../src/gateway/client-exchange.ts';
import { RequestFront, type RequestFrontOptions } from '../../../src/http/front/request-front.ts';
import type { FrontResponse } from '../../../src/http/front/response.ts';

// The request front between the listening socket and node:http: which requests it answers itself,
// which connections it hands over (with every byte it read), and what it owes a connection that
// node:http would have given it (keep-alive, pipelining, a half-close, closing idle ones).

interface Harness {
  port: number;
  front: RequestFront;
  server: http.Server;
  /** What each side answered: "front GET /svc/a" or "node POST /other body=…". */
  seen: string[];
  /** The front's responses, in order (a test may hold one open). */
  responses: FrontResponse[];
  /** The server's side of each connection, in the order accepted. */
  sockets: net.Socket[];
}

async function harness(t: { teardown(fn: () => unknown): void }, options: Partial<RequestFrontOptions> & { hold?: (url: string) => boolean } = {}): Promise<Harness> {
  const seen: string[] = [];
  const responses: FrontResponse[] = [];
  const server = http.createServer({ maxHeaderSize: 1024 }, (request, response) => {
    let body = '';
    request.setEncoding('latin1');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      seen.push(`node ${request.method} ${request.url}${body ? ` body=${body}` : ''}`);
      response.end(`node:${request.url}`);
    });
  });
  server.keepAliveTimeout = 5000;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: net.Socket) => {
    seen.push(`node refused ${error.code}`);
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
  const front = new RequestFront(server, {
    limits: { maxHeaderBytes: 1024, maxHeaders: 100 },
    headersTimeoutMs: 10_000,
    keepAliveTimeoutMs: server.keepAliveTimeout,
    now: () => Date.UTC(2026, 11, 1, 12, 0, 0),
    takes: (head) => head.target.startsWith('/svc/'),
    handle: (request: ClientRequest, response: FrontResponse) => {
      seen.push(`front ${request.method} ${request.url} token=${request.headers['x-auth-token'] ?? ''}`);
      responses.push(response);
      if (options.hold?.(request.url!)) return;
      response.writeHead(200, ['content-type', 'text/plain', 'content-length', String(`front:${request.url}`.length)]);
      response.end(Buffer.from(`front:${request.url}`));
    },
    ...options,
  });
  const sockets: net.Socket[] = [];
  server.on('connection', (socket: net.Socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    front.closeAllConnections();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as net.AddressInfo).port, front, server, seen, responses, sockets };
}

/** A client connection that collects what comes back; `until(n)` waits for n complete bodies' worth of text. */
function connect(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  let ended = false;
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((waiter) => waiter());
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
    wake();
  });
  socket.on('end', () => {
    ended = true;
    wake();
  });
  socket.on('error', () => undefined);
  const until = (test: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => (test() ? resolve() : waiters.push(check));
      check();
    });
  return {
    socket,
    send: (text: string) => socket.write(Buffer.from(text, 'latin1')),
    received: () => received,
    ended: () => ended,
    /** Waits until `count` responses have come whole (each of these has a Content-Length body). */
    responses: (count: number) => until(() => (received.match(/\r\n\r\n(front|node):\S*/g) ?? []).length >= count || ended),
    end: () => until(() => ended),
  };
}

/** Turns of the event loop until `condition` holds (what it waits for comes over loopback). */
async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: gateway\r\nX-Auth-Token: tok\r\n${extra}\r\n`;

t.test('a plain request on a taken path is answered by the front; any other goes to node:http on the same listening socket', async (t) => {
  const h = await harness(t);
  const a = connect(h.port);
  a.send(get('/svc/a'));
  await a.responses(1);
  t.match(a.received(), /^HTTP\/1\.1 200 OK\r\ncontent-type: text\/plain\r\ncontent-length: 12\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nfront:\/svc\/a$/);
  const b = connect(h.port);
  b.send(get('/v3/auth/tokens'));
  await b.responses(1);
  t.match(b.received(), /\r\n\r\nnode:\/v3\/auth\/tokens$/);
  t.same(h.seen, ['front GET /svc/a token=tok', 'node GET /v3/auth/tokens']);
  a.socket.destroy();
  b.socket.destroy();
});

t.test('a keep-alive connection: requests answered by the front until one is not plain; from then on node:http has the connection', async (t) => {
  const h = await harness(t);
  const c = connect(h.port);
  c.send(get('/svc/1'));
  await c.responses(1);
  c.send(get('/svc/2'));
  await c.responses(2);
  t.equal(h.front.size, 1, 'the front holds the connection between requests');
  c.send('POST /svc/3 HTTP/1.1\r\nHost: gateway\r\nContent-Length: 5\r\n\r\nhel');
  c.send('lo');
  await c.responses(3);
  c.send(get('/svc/4'));
  await c.responses(4);
  t.same(h.seen, ['front GET /svc/1 token=tok', 'front GET /svc/2 token=tok', 'node POST /svc/3 body=hello', 'node GET /svc/4']);
  t.equal(h.front.size, 0, 'handed over: no longer the front\'s');
  c.socket.destroy();
});

t.test('pipelined requests are answered in order, the front\'s and then node:http\'s', async (t) => {
  const h = await harness(t);
  const c = connect(h.port);
  c.send(get('/svc/1') + get('/svc/2') + 'DELETE /svc/3 HTTP/1.1\r\nHost: gateway\r\nContent-Length: 0\r\n\r\n' + 'PUT /svc/4 HTTP/1.1\r\nHost: gateway\r\nContent-Length: 1\r\n\r\nx' + get('/svc/5'));
  await c.responses(5);
  t.same(h.seen, ['front GET /svc/1 token=tok', 'front GET /svc/2 token=tok', 'front DELETE /svc/3 token=', 'node PUT /svc/4 body=x', 'node GET /svc/5']);
  t.same(c.received().match(/(front|node):\/svc\/\d/g), ['front:/svc/1', 'front:/svc/2', 'front:/svc/3', 'node:/svc/4', 'node:/svc/5']);
  c.socket.destroy();
});

t.test('the next pipelined request waits for the answer under way', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/slow' });
  const c = connect(h.port);
  c.send(get('/svc/slow') + get('/svc/next'));
  await waitFor(() => h.seen.length > 0 && h.sockets[0]!.bytesRead === Buffer.byteLength(get('/svc/slow') + get('/svc/next')));
  await new Promise((resolve) => setImmediate(resolve));
  t.same(h.seen, ['front GET /svc/slow token=tok'], 'not read while the first is unanswered');
  const slow = h.responses[0]!;
  slow.writeHead(200, ['content-length', '4']);
  slow.end(Buffer.from('slow'));
  await c.responses(1);
  t.same(h.seen, ['front GET /svc/slow token=tok', 'front GET /svc/next token=tok']);
  t.match(c.received(), /slow.*front:\/svc\/next$/s);
  c.socket.destroy();
});

t.test('heads that are not the front\'s go to node:http with the bytes already read, refusals included', async (t) => {
  const h = await harness(t);
  const pieces = connect(h.port);
  pieces.send('GET /svc/split HTTP/1.1\r\nHo');
  await waitFor(() => h.sockets[0] !== undefined && h.sockets[0].bytesRead > 0);
  pieces.send('st: gateway\r\n\r\n');
  await pieces.responses(1);
  const smuggling = connect(h.port);
  smuggling.send('GET /svc/x HTTP/1.1\r\nHost: gateway\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
  await smuggling.end();
  const oversized = connect(h.port);
  oversized.send(`GET /svc/big HTTP/1.1\r\nHost: gateway\r\nX-Big: ${'b'.repeat(2000)}\r\n\r\n`);
  await oversized.end();
  const old = connect(h.port);
  old.send('GET /svc/old HTTP/1.0\r\nHost: gateway\r\n\r\n');
  await old.end();
  t.same(h.seen, ['node GET /svc/split', 'node refused HPE_INVALID_TRANSFER_ENCODING', 'node refused HPE_HEADER_OVERFLOW', 'node GET /svc/old']);
  t.match(smuggling.received(), /^HTTP\/1\.1 400 /);
  t.match(old.received(), /node:\/svc\/old$/);
});

t.test('Connection: close ends the connection after the answer', async (t) => {
  const h = await harness(t);
  const closing = connect(h.port);
  closing.send(get('/svc/close', 'Connection: close\r\n'));
  await closing.end();
  t.match(closing.received(), /\r\nConnection: close\r\n\r\nfront:\/svc\/close$/);
  t.equal(h.front.size, 0);
});

t.test('a client that half-closes while its answer is under way abandons it, as with node:http: the answer hears of it at once', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/half' });
  const halfClosed = connect(h.port);
  halfClosed.send(get('/svc/half'));
  await waitFor(() => h.responses.length === 1);
  let closed = false;
  h.responses[0]!.on('close', () => (closed = true));
  halfClosed.socket.end();
  await halfClosed.end();
  await waitFor(() => closed);
  t.equal(h.responses[0]!.destroyed, true);
  t.equal(halfClosed.received(), '', 'nothing written');
  t.equal(h.front.size, 0);
  // Idle when it half-closes: closed at once.
  const idle = connect(h.port);
  idle.send(get('/svc/idle'));
  await idle.responses(1);
  idle.socket.end();
  await idle.end();
  t.match(idle.received(), /front:\/svc\/idle$/);
});

t.test('between requests a connection waits on the front (which the stalled-connection sweep leaves alone); idle ones close on demand', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/busy' });
  const idle = connect(h.port);
  idle.send(get('/svc/a'));
  await idle.responses(1);
  const busy = connect(h.port);
  busy.send(get('/svc/busy'));
  await waitFor(() => h.seen.length === 2);
  t.equal(h.front.size, 2);
  t.equal(h.front.waitsForRequest(h.sockets[0]!), true, "idle: the front's wait (StalledConnections leaves it alone)");
  t.equal(h.front.waitsForRequest(h.sockets[1]!), false, 'answering: not waiting for a request (StalledConnections times it)');
  h.front.closeIdleConnections();
  await idle.end();
  t.equal(h.front.size, 1, 'the busy one stays');
  let closed = false;
  h.responses[1]!.on('close', () => (closed = true));
  h.front.closeAllConnections();
  await busy.end();
  await new Promise((resolve) => setImmediate(resolve));
  t.ok(closed, "the answer under way hears that its client is gone");
  t.equal(h.responses[1]!.destroyed, true);
  t.equal(h.front.size, 0);
});

t.test('a connection the front closes keeps an error listener: a reset while its last bytes go is not an uncaught error', async (t) => {
  const h = await harness(t);
  const closing = connect(h.port);
  closing.send(get('/svc/close', 'Connection: close\r\n'));
  await closing.end();
  t.doesNotThrow(() => h.sockets[0]!.emit('error', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })));
});

t.test('an answer cut off mid-body cuts the connection: no keep-alive, no end of the chunked body', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/cut' });
  const c = connect(h.port);
  c.send(get('/svc/cut'));
  await waitFor(() => h.responses.length === 1);
  const response = h.responses[0]!;
  response.writeHead(200, ['content-type', 'text/plain']);
  response.write(Buffer.from('partial'));
  await waitFor(() => c.received().includes('partial'));
  response.destroy();
  await c.end();
  t.match(c.received(), /Transfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n$/, 'no last chunk');
  t.equal(h.front.size, 0);
});

t.test('a client that pipelines more than a head\'s worth behind an answer under way is node:http\'s after it; nothing is lost', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/slow' });
  const c = connect(h.port);
  const flood = Array.from({ length: 200 }, (_, index) => get(`/svc/p${index}`)).join('');
  t.ok(flood.length > 1024 * 4, 'several heads\' worth');
  c.send(get('/svc/slow'));
  await waitFor(() => h.responses.length === 1);
  c.send(flood);
  await waitFor(() => h.sockets[0]!.isPaused());
  t.ok(h.sockets[0]!.bytesRead < Buffer.byteLength(get('/svc/slow')) + flood.length + 65_536 * 2, 'not read on without bound');
  const slow = h.responses[0]!;
  slow.writeHead(200, ['content-length', '4']);
  slow.end(Buffer.from('slow'));
  await c.responses(201);
  t.equal(h.seen.length, 201);
  t.same(h.seen.slice(1, 3), ['node GET /svc/p0', 'node GET /svc/p1'], 'node:http answers the rest');
  t.equal(h.seen.at(-1), 'node GET /svc/p199');
  t.equal(h.front.size, 0);
  c.socket.destroy();
});

t.test('a connection closing after its last answer stays the front\'s until it has closed: closeAllConnections cuts a client that does not read it', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/big' });
  const c = connect(h.port);
  c.socket.pause();
  c.send(get('/svc/big', 'Connection: close\r\n'));
  await waitFor(() => h.responses.length === 1);
  const big = h.responses[0]!;
  big.writeHead(200, ['content-length', String(32 * 1024 * 1024)]);
  big.end(Buffer.alloc(32 * 1024 * 1024, 'x'));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(h.front.size, 1, 'still held while its last bytes wait');
  t.equal(h.sockets[0]!.isPaused(), true, 'and not read on: a client that sends on without reading stalls, and is swept');
  h.front.closeIdleConnections();
  t.equal(h.sockets[0]!.destroyed, false, 'not idle: closeIdleConnections leaves it');
  h.front.closeAllConnections();
  await waitFor(() => h.sockets[0]!.destroyed);
  await waitFor(() => h.front.size === 0);
  t.pass('cut, and forgotten once closed');
  c.socket.destroy();
});

t.test('a keep-alive answer still being written is not cut by closeIdleConnections', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/big' });
  const c = connect(h.port);
  c.socket.pause();
  c.send(get('/svc/big'));
  await waitFor(() => h.responses.length === 1);
  h.responses[0]!.writeHead(200, ['content-length', String(32 * 1024 * 1024)]);
  h.responses[0]!.end(Buffer.alloc(32 * 1024 * 1024, 'x'));
  await new Promise((resolve) => setImmediate(resolve));
  t.ok(h.sockets[0]!.writableLength > 0, 'bytes still wait to be written');
  h.front.closeIdleConnections();
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(h.sockets[0]!.destroyed, false, 'not idle yet');
  h.front.closeAllConnections();
  await waitFor(() => h.front.size === 0);
  c.socket.destroy();
});

t.test('a pipelined request that arrives in many small pieces behind an answer is read whole, in order', async (t) => {
  const h = await harness(t, { hold: (url) => url === '/svc/slow' });
  const c = connect(h.port);
  c.socket.setNoDelay(true);
  c.send(get('/svc/slow'));
  await waitFor(() => h.responses.length === 1);
  const next = get('/svc/next');
  let sent = Buffer.byteLength(get('/svc/slow'));
  for (let at = 0; at < next.length; at += 7) {
    c.send(next.slice(at, at + 7));
    sent += Math.min(7, next.length - at);
    await waitFor(() => h.sockets[0]!.bytesRead >= sent);
  }
  h.responses[0]!.writeHead(200, ['content-length', '4']);
  h.responses[0]!.end(Buffer.from('slow'));
  await c.responses(1);
  t.same(h.seen, ['front GET /svc/slow token=tok', 'front GET /svc/next token=tok']);
  c.socket.destroy();
});

t.test("the waits for a request are swept on the front's clock, never early, and no socket has a timer of its own", async (t) => {
  let now = 1_000_000;
  const h = await harness(t, { clock: () => now, sweepEveryMs: 0, hold: (url) => url === '/svc/busy' });
  const keepAliveWait = h.server.keepAliveTimeout + 1000;

  // A connection that never sends its first request: closed after headersTimeoutMs without a byte.
  const silent = connect(h.port);
  await waitFor(() => h.front.size === 1);
  h.front.sweep();
  now += 10_000 - 1;
  h.front.sweep();
  t.equal(h.sockets[0]!.destroyed, false, 'not before headersTimeoutMs');
  now += 1;
  h.front.sweep();
  await silent.end();
  t.equal(h.front.size, 0, 'closed once it has waited headersTimeoutMs for its first request');

  // Between requests: node's keep-alive wait (keepAliveTimeout plus its 1 s buffer), from the sweep that first sees it.
  const idle = connect(h.port);
  idle.send(get('/svc/a'));
  await idle.responses(1);
  h.front.sweep();
  now += keepAliveWait - 1;
  h.front.sweep();
  t.equal(h.sockets[1]!.destroyed, false, 'not before the keep-alive wait');
  t.notOk(h.sockets[1]!.timeout, 'no per-socket timer (socket.setTimeout) between requests');
  // A request meanwhile starts the wait again after its answer.
  idle.send(get('/svc/b'));
  await idle.responses(2);
  h.front.sweep();
  now += keepAliveWait - 1;
  h.front.sweep();
  t.equal(h.sockets[1]!.destroyed, false, 'the second request restarted the wait');
  now += 1;
  h.front.sweep();
  await idle.end();
  t.match(idle.received(), /front:\/svc\/b$/, 'both answered before it closed');

  // While a request is answered the front times nothing, however long (StalledConnections does).
  const busy = connect(h.port);
  busy.send(get('/svc/busy'));
  await waitFor(() => h.responses.length === 3);
  t.notOk(h.sockets[2]!.timeout, 'no per-socket timer while answering');
  h.front.sweep();
  now += 100 * keepAliveWait;
  h.front.sweep();
  t.equal(h.sockets[2]!.destroyed, false, 'an answer under way is not the front\'s to time');
  t.equal(h.front.waitsForRequest(h.sockets[2]!), false);
  h.responses[2]!.writeHead(200, ['content-length', '2']);
  h.responses[2]!.end(Buffer.from('ok'));
  await busy.responses(0);
  await waitFor(() => h.front.waitsForRequest(h.sockets[2]!));
  h.front.sweep();
  now += keepAliveWait;
  h.front.sweep();
  await busy.end();
  t.equal(h.front.size, 0, 'idle after its answer, then closed after the keep-alive wait');
});

// Reads into the front's one shared buffer (shared-reads.ts): what a connection keeps past a read
// (a pipelined request, bytes handed to node:http) must be its own copy, since the next read of any
// connection overwrites the buffer. Another connection's longer request is read in between.
const padded = (path: string) => get(path, `X-Padding: ${'p'.repeat(300)}\r\n`);

t.test('on this runtime the front reads its connections into one shared buffer, not through their streams', async (t) => {
  const h = await harness(t);
  t.ok(h.front.sharedReads, 'shared reads are on by default');
  const c = connect(h.port);
  c.send(get('/svc/a'));
  await c.responses(1);
  t.equal(h.sockets[0]!.listenerCount('data'), 0, 'no \'data\' listener: each read goes to the front directly');
  t.same(h.seen, ['front GET /svc/a token=tok']);
  c.socket.destroy();
});

/** A held answer on connection a, its next request sent by `send`; b's longer request read before the answer ends. */
async function nextRequestAcrossOtherReads(t: Parameters<typeof harness>[0] & { same(a: unknown, b: unknown): void }, send: (a: ReturnType<typeof connect>, h: Harness) => Promise<void>) {
  const h = await harness(t, { hold: (url) => url === '/svc/slow' });
  const a = connect(h.port);
  await send(a, h);
  const b = connect(h.port);
  b.send(padded('/svc/other'));
  await b.responses(1);
  h.responses[0]!.writeHead(200, ['content-length', '4']);
  h.responses[0]!.end(Buffer.from('slow'));
  await a.responses(1);
  t.same(h.seen, ['front GET /svc/slow token=tok', 'front GET /svc/other token=tok', 'front GET /svc/next token=tok']);
  a.socket.destroy();
  b.socket.destroy();
}

t.test('a pipelined request read with the one before it is still whole after other connections\' reads', (t) =>
  nextRequestAcrossOtherReads(t, async (a, h) => {
    a.send(get('/svc/slow') + get('/svc/next'));
    await waitFor(() => h.responses.length === 1);
  }),
);

t.test('a request read while the answer before it is under way is still whole after other connections\' reads', (t) =>
  nextRequestAcrossOtherReads(t, async (a, h) => {
    a.send(get('/svc/slow'));
    await waitFor(() => h.responses.length === 1);
    a.send(get('/svc/next'));
    await waitFor(() => h.sockets[0]!.bytesRead === Buffer.byteLength(get('/svc/slow') + get('/svc/next')));
  }),
);

t.test('a connection handed to node:http mid-body gets its later reads, with other connections read meanwhile', async (t) => {
  const h = await harness(t);
  const a = connect(h.port);
  // Handed over at once (a body), and the body's second piece comes after other connections' reads.
  a.send('POST /svc/body HTTP/1.1\r\nHost: gateway\r\nContent-Length: 10\r\n\r\nhello');
  await waitFor(() => h.sockets[0] !== undefined && h.sockets[0].bytesRead > 0 && h.front.size === 0);
  const b = connect(h.port);
  b.send(padded('/svc/other'));
  await b.responses(1);
  a.send('world');
  await a.responses(1);
  a.send(get('/svc/after'));
  await a.responses(2);
  t.same(h.seen, ['front GET /svc/other token=tok', 'node POST /svc/body body=helloworld', 'node GET /svc/after']);
  a.socket.destroy();
  b.socket.destroy();
});

t.test('with shared reads off, the front reads \'data\' events and answers the same', async (t) => {
  const h = await harness(t, { sharedReads: false, hold: (url) => url === '/svc/slow' });
  t.equal(h.front.sharedReads, undefined);
  const a = connect(h.port);
  a.send(get('/svc/slow') + get('/svc/next'));
  await waitFor(() => h.responses.length === 1);
  t.equal(h.sockets[0]!.listenerCount('data'), 1);
  h.responses[0]!.writeHead(200, ['content-length', '4']);
  h.responses[0]!.end(Buffer.from('slow'));
  await a.responses(1);
  a.send('POST /svc/body HTTP/1.1\r\nHost: gateway\r\nContent-Length: 2\r\n\r\nhi');
  await a.responses(2);
  t.same(h.seen, ['front GET /svc/slow token=tok', 'front GET /svc/next token=tok', 'node POST /svc/body body=hi']);
  a.socket.destroy();
});
