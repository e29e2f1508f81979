import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import t from 'tap';
import { Forwarder, type ForwardResult, type PoolFactory } from '../../src/gateway/forwarder.ts';
import { UpstreamPool, type UpstreamHandler, type UpstreamPoolOptions, type UpstreamRequest } from '../../src/gateway/upstream-pool.ts';

// The forwarder on its own, between a node:http front and a node:http upstream: its deadlines (the
// response headers owed, each pause in the body) are its own, not timers per request.

const BIG = Buffer.alloc(8 * 1024 * 1024, 'forwarder deadline test ');
const BIG_SHA = createHash('sha256').update(BIG).digest('hex');

const HOP_BY_HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding']);

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

interface Upstream {
  origin: string;
  /** Request bodies as received, by path. */
  bodies: Map<string, string>;
  /** Resolves with the path of each request whose connection the forwarder closed before its answer was whole. */
  cut: Promise<string>;
  /** Connections the forwarder has opened to it so far. */
  connections(): number;
}

async function startUpstream(t: { teardown(fn: () => unknown): void }): Promise<Upstream> {
  const bodies = new Map<string, string>();
  let cutOne!: (path: string) => void;
  const cut = new Promise<string>((resolve) => (cutOne = resolve));
  const server = http.createServer((request, response) => {
    const path = request.url ?? '';
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      bodies.set(path, body);
      response.on('close', () => {
        if (!response.writableFinished) cutOne(path);
      });
      if (path === '/slow-headers') return; // never answers
      if (path === '/pausing-body') {
        response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
        response.write('the first part'); // and nothing more
        return;
      }
      if (path === '/trickle') {
        // A steady body: a piece every 50 ms for ~1.2 s, so neither deadline ever passes.
        response.writeHead(200, { 'content-type': 'text/plain' });
        let pieces = 0;
        const timer = setInterval(() => {
          response.write(`piece ${pieces}\n`);
          if (++pieces === 24) {
            clearInterval(timer);
            response.end();
          }
        }, 50);
        response.on('close', () => clearInterval(timer));
        return;
      }
      if (path === '/sized') {
        response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '11' });
        response.end('sized body.');
        return;
      }
      if (path === '/big') {
        response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BIG.length) });
        response.end(BIG);
        return;
      }
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end(`received ${body.length} bytes`);
    });
  });
  let connections = 0;
  server.on('connection', () => connections++);
  const origin = await listen(server);
  t.teardown(() => closeServer(server));
  return { origin, bodies, cut, connections: () => connections };
}

/** A front server that forwards every request to `origin` and records each outcome. */
async function startFront(
  t: { teardown(fn: () => unknown): void },
  origin: string,
  timeouts: { responseTimeoutMs: number; bodyTimeoutMs: number; connectionsPerUpstream?: number },
  createPool?: PoolFactory,
  /** Sees each client response before it is forwarded (to watch what the forwarder calls on it). */
  watch?: (path: string, response: http.ServerResponse) => void,
): Promise<{ url: string; results: ForwardResult[]; forwarder: Forwarder; forwarded(): number }> {
  const forwarder = new Forwarder({ connectTimeoutMs: 1000, connectionsPerUpstream: 4, ...timeouts }, createPool);
  const results: ForwardResult[] = [];
  let forwarded = 0;
  const server = http.createServer((request, response) => {
    forwarded++;
    watch?.(request.url ?? '/', response);
    const headers = Object.entries(request.headers).flatMap(([name, value]) => (HOP_BY_HOP.has(name) ? [] : [name, value as string]));
    forwarder.forward(
      request,
      response,
      { origin, path: request.url ?? '/', headers, responseHeaders: [] },
      (location) => location,
      (result) => {
        results.push(result);
        if (result.failure) response.writeHead(result.failure.kind === 'timeout' || result.failure.kind === 'busy' ? 504 : 502).end();
      },
      () => response.writeHead(500).end(),
    );
  });
  const url = await listen(server);
  t.teardown(async () => {
    await closeServer(server);
    await forwarder.close();
  });
  return { url, results, forwarder, forwarded: () => forwarded };
}

/** Polls `check` every 10 ms, for at most 5 s. */
async function waitUntil(check: () => boolean): Promise<void> {
  for (let waited = 0; !check(); waited += 10) {
    if (waited > 5000) throw new Error('waited 5 s in vain');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

interface Received {
  status: number;
  complete: boolean;
  length: number;
  sha: string;
  body: string;
}

/** GET (or a body sent in `pieces`, `gapMs` apart); the client stops reading for `pauseMs` after the first piece of the answer. */
function call(url: string, path: string, options: { pauseMs?: number; pieces?: string[]; gapMs?: number } = {}): Promise<Received> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${url}${path}`, { method: options.pieces ? 'POST' : 'GET' }, (response) => {
      const hash = createHash('sha256');
      const chunks: Buffer[] = [];
      let paused = false;
      response.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        chunks.push(chunk);
        if (options.pauseMs && !paused) {
          paused = true;
          response.pause();
          setTimeout(() => response.resume(), options.pauseMs);
        }
      });
      const done = () => {
        const body = Buffer.concat(chunks);
        resolve({ status: response.statusCode ?? 0, complete: response.complete, length: body.length, sha: hash.digest('hex'), body: body.toString() });
      };
      response.on('end', done);
      response.on('aborted', done);
      response.on('error', () => undefined);
    });
    request.on('error', reject);
    const pieces = [...(options.pieces ?? [])];
    const next = () => {
      const piece = pieces.shift();
      if (piece === undefined) return void request.end();
      request.write(piece);
      setTimeout(next, options.gapMs ?? 0);
    };
    next();
  });
}

t.test('one pool per origin, asked for no timer per exchange: the deadlines are the forwarder’s', async (t) => {
  const upstream = await startUpstream(t);
  const asked: { pool: UpstreamPoolOptions[]; dispatch: UpstreamRequest[] } = { pool: [], dispatch: [] };
  class RecordingPool extends UpstreamPool {
    override dispatch(request: UpstreamRequest, handler: UpstreamHandler): void {
      asked.dispatch.push(request);
      super.dispatch(request, handler);
    }
  }
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 5000, bodyTimeoutMs: 5000 }, (origin, options, parsers) => {
    asked.pool.push(options);
    return new RecordingPool(origin, options, parsers);
  });
  t.equal((await call(front.url, '/hello')).body, 'received 0 bytes');
  t.equal((await call(front.url, '/again')).body, 'received 0 bytes');
  t.equal(asked.pool.length, 1, 'one pool for the origin');
  t.same(asked.pool[0], { connections: 4, connectTimeoutMs: 1000, keepAliveTimeoutMs: 30_000 });
  t.match(asked.dispatch, [{ path: '/hello', method: 'GET', body: null }, { path: '/again', method: 'GET', body: null }]);
});

t.test('an upstream that does not answer in time: a timeout, and its connection closed', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 200, bodyTimeoutMs: 60_000 });
  const answer = await call(front.url, '/slow-headers');
  t.equal(answer.status, 504);
  t.equal(front.results.length, 1);
  t.equal(front.results[0]!.failure?.kind, 'timeout');
  t.equal(await upstream.cut, '/slow-headers', 'the upstream request was abandoned');
});

t.test('a request waiting for a connection owes its answer from when it came: past its deadline it is answered 504 and never sent', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 300, bodyTimeoutMs: 60_000, connectionsPerUpstream: 1 });
  let firstDone = false;
  const first = call(front.url, '/trickle').finally(() => (firstDone = true));
  await waitUntil(() => upstream.bodies.has('/trickle'));
  // The one connection carries the trickle for ~1.2 s: this request waits for it.
  const waiting = await call(front.url, '/hello');
  t.equal(waiting.status, 504);
  t.notOk(firstDone, 'answered when its deadline passed, while the trickle still held the connection');
  t.match(front.results.find((result) => result.failure), { status: 0, failure: { kind: 'busy' } }, 'busy: never sent, not held against the upstream');
  const whole = await first;
  t.equal(whole.status, 200);
  t.equal(whole.body.split('\n').length, 25, 'the exchange under way was not disturbed');
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.notOk(upstream.bodies.has('/hello'), 'the request past its deadline never reached the upstream');
  t.equal(upstream.connections(), 1);
});

t.test('a client that goes away while its request waits for a connection: reported at once, never sent, and the connection kept', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 5_000, bodyTimeoutMs: 60_000, connectionsPerUpstream: 1 });
  let firstDone = false;
  const first = call(front.url, '/trickle').finally(() => (firstDone = true));
  await waitUntil(() => upstream.bodies.has('/trickle'));
  const gone = http.get(`${front.url}/hello`);
  gone.on('error', () => undefined);
  await waitUntil(() => front.forwarded() === 2);
  gone.destroy();
  await waitUntil(() => front.results.length === 2);
  t.match(
    front.results.find((result) => result.failure),
    { status: 0, failure: { kind: 'aborted' } },
  );
  t.notOk(firstDone, 'reported while the trickle still held the connection');
  t.equal((await first).status, 200);
  const next = await call(front.url, '/again');
  t.equal(next.status, 200);
  t.notOk(upstream.bodies.has('/hello'), 'never sent');
  t.equal(upstream.connections(), 1, 'the connection the abandoned request would have taken is reused, not closed');
});

/**
 * A pool that hands each exchange a connection, then takes it back as a retry does (the abort it
 * gave becomes a dead one), and never gives another.
 */
class RetryingPool extends UpstreamPool {
  override dispatch(_request: UpstreamRequest, handler: UpstreamHandler): void {
    handler.onConnect(() => undefined);
  }
}
const retryingPool: PoolFactory = (origin, options, parsers) => new RetryingPool(origin, options, parsers);

t.test('a request whose connection is dropped for a retry, then waits past its deadline for another: answered 504 (busy), not left hanging', async (t) => {
  const front = await startFront(t, 'http://127.0.0.1:9', { responseTimeoutMs: 200, bodyTimeoutMs: 60_000 }, retryingPool);
  const answer = await Promise.race([call(front.url, '/hello'), new Promise<'no answer'>((resolve) => setTimeout(() => resolve('no answer'), 3000))]);
  t.match(answer, { status: 504 });
  t.match(front.results, [{ status: 0, failure: { kind: 'busy' } }]);
});

t.test('a client that goes away while its request, dropped for a retry, waits for another connection: reported at once', async (t) => {
  const front = await startFront(t, 'http://127.0.0.1:9', { responseTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }, retryingPool);
  const gone = http.get(`${front.url}/hello`);
  gone.on('error', () => undefined);
  await waitUntil(() => front.forwarded() === 1);
  gone.destroy();
  await waitUntil(() => front.results.length === 1);
  t.match(front.results, [{ status: 0, failure: { kind: 'aborted' } }]);
});

t.test('closing lets the exchanges under way finish on their deadlines: a silent upstream is still answered 504', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 300, bodyTimeoutMs: 60_000 });
  const answer = call(front.url, '/slow-headers');
  await waitUntil(() => upstream.bodies.has('/slow-headers'));
  let closed = false;
  const closing = front.forwarder.close().then(() => (closed = true));
  const outcome = await Promise.race([answer, new Promise<'no answer'>((resolve) => setTimeout(() => resolve('no answer'), 3000))]);
  t.match(outcome, { status: 504 }, 'the deadline still ran while the forwarder closed');
  await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, 1000))]);
  t.ok(closed, 'and the close completed once that exchange ended');
});

t.test('an upstream body that pauses longer than the body timeout: the client’s response is cut, not ended', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 60_000, bodyTimeoutMs: 200 });
  const answer = await call(front.url, '/pausing-body');
  t.equal(answer.status, 200, 'the headers had gone out');
  t.equal(answer.body, 'the first part');
  t.equal(answer.complete, false, 'the client cannot take it for a whole body');
  t.same(front.results, [{ status: 200 }]);
  t.equal(await upstream.cut, '/pausing-body');
});

t.test('a client that stops reading is no upstream pause: the body arrives whole', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 60_000, bodyTimeoutMs: 200 });
  const answer = await call(front.url, '/big', { pauseMs: 700 });
  t.equal(answer.status, 200);
  t.equal(answer.length, BIG.length);
  t.equal(answer.sha, BIG_SHA);
  t.equal(answer.complete, true);
});

t.test('a body of known length ends the response with its last piece, in one call; one of unknown length is written as it comes', async (t) => {
  const upstream = await startUpstream(t);
  // Per path: the pieces passed to write(), and the lengths of what end() was given.
  const calls = new Map<string, { writes: number[]; ends: number[] }>();
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }, undefined, (path, response) => {
    const seen = { writes: [] as number[], ends: [] as number[] };
    calls.set(path, seen);
    const write = response.write.bind(response) as (chunk: Buffer) => boolean;
    const end = response.end.bind(response) as (chunk?: Buffer) => http.ServerResponse;
    Object.assign(response, {
      write: (chunk: Buffer) => (seen.writes.push(chunk.length), write(chunk)),
      end: (chunk?: Buffer) => (seen.ends.push(chunk?.length ?? 0), end(chunk)),
    });
  });

  // The upstream answers with its Content-Length, body and head in one read.
  const sized = await call(front.url, '/sized');
  t.equal(sized.body, 'sized body.');
  t.equal(sized.complete, true);
  t.same(calls.get('/sized'), { writes: [], ends: [11] }, 'no write(): the body went with end()');

  // 8 MB with a Content-Length: written as it comes (the client's backpressure holds the upstream),
  // the last piece with end(); whole, byte for byte.
  const big = await call(front.url, '/big', { pauseMs: 200 });
  t.equal(big.sha, BIG_SHA);
  t.equal(big.complete, true);
  const bigCalls = calls.get('/big')!;
  t.equal(bigCalls.ends.length, 1);
  t.ok(bigCalls.ends[0]! > 0, 'the last piece went with end()');
  t.equal(bigCalls.writes.reduce((sum, length) => sum + length, 0) + bigCalls.ends[0]!, BIG.length, 'every byte once');

  // No Content-Length (chunked): each piece written, then an empty end().
  const small = await call(front.url, '/small');
  t.equal(small.body, 'received 0 bytes');
  t.same(calls.get('/small'), { writes: ['received 0 bytes'.length], ends: [0] });
  const trickle = await call(front.url, '/trickle');
  t.equal(trickle.body, Array.from({ length: 24 }, (_, piece) => `piece ${piece}\n`).join(''));
  const trickleCalls = calls.get('/trickle')!;
  t.ok(trickleCalls.writes.length > 1);
  t.same(trickleCalls.ends, [0]);

  // A body cut short of its Content-Length is never ended as if whole.
  const front2 = await startFront(t, upstream.origin, { responseTimeoutMs: 60_000, bodyTimeoutMs: 200 }, undefined, (path, response) => {
    const seen = { writes: [] as number[], ends: [] as number[] };
    calls.set(`cut${path}`, seen);
    const end = response.end.bind(response) as (chunk?: Buffer) => http.ServerResponse;
    Object.assign(response, { end: (chunk?: Buffer) => (seen.ends.push(chunk?.length ?? 0), end(chunk)) });
  });
  const cut = await call(front2.url, '/pausing-body');
  t.equal(cut.complete, false, 'the client sees a truncated body');
  t.same(calls.get('cut/pausing-body')!.ends, [], 'end() was never called');
});

t.test('a slow upload is no slow upstream: the response is owed from when the body is all sent', async (t) => {
  const upstream = await startUpstream(t);
  const front = await startFront(t, upstream.origin, { responseTimeoutMs: 200, bodyTimeoutMs: 60_000 });
  const pieces = ['one,', 'two,', 'three,', 'four'];
  const answer = await call(front.url, '/upload', { pieces, gapMs: 150 });
  t.equal(answer.status, 200);
  t.equal(answer.body, `received ${pieces.join('').length} bytes`);
  t.equal(upstream.bodies.get('/upload'), pieces.join(''));
  t.same(front.results, [{ status: 200 }]);
});

// A handler can outlive its exchange (its pool connection keeps its last closures, the response its
// listeners). If it kept the request's objects with it, every exchange's objects outlived two
// young-generation collections: 700+ bytes promoted per request and mark-compacts under load.
t.test('an ended exchange lets go of its request, response and callbacks, though its handler is kept', async (t) => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const kept: UpstreamHandler[] = [];
  // A pool that answers at once and keeps every handler it was given, as an idle connection keeps its last.
  const keepingPool: PoolFactory = () => ({
    dispatch(_request: UpstreamRequest, handler: UpstreamHandler) {
      kept.push(handler);
      handler.onConnect(() => undefined);
      handler.onHeaders(200, ['content-type', 'text/plain'], () => undefined);
      handler.onData(Buffer.from('answered'));
      handler.onComplete();
    },
    close: async () => undefined,
  });
  const forwarder = new Forwarder({ connectTimeoutMs: 1000, responseTimeoutMs: 1000, bodyTimeoutMs: 1000, connectionsPerUpstream: 1 }, keepingPool);
  const references: { request?: WeakRef<object>; response?: WeakRef<object>; settled?: WeakRef<object> } = {};
  const results: ForwardResult[] = [];
  let forwarded = 0;
  const server = http.createServer((request, response) => {
    forwarded++;
    const settled = (result: ForwardResult) => results.push(result);
    references.request = new WeakRef(request);
    references.response = new WeakRef(response);
    references.settled = new WeakRef(settled);
    forwarder.forward(request, response, { origin: 'http://upstream.invalid', path: '/', headers: [], responseHeaders: [] }, (location) => location, settled, () => undefined);
  });
  const url = await listen(server);
  const answer = await call(url, '/things');
  t.equal(answer.status, 200);
  t.equal(answer.body, 'answered');
  t.same(results, [{ status: 200 }]);
  // The connection closed, so node:http holds nothing of the request either.
  await closeServer(server);
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  t.equal(kept.length, 1, 'the handler is still held');
  t.equal(references.response?.deref(), undefined, 'the response is not retained');
  t.equal(references.request?.deref(), undefined, 'the request is not retained');
  t.equal(references.settled?.deref(), undefined, 'the settle callback (and what it closes over) is not retained');
  await forwarder.close();
});
