import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import t from 'tap';

const tap = t;
import { gatewayWorld, type World } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// How responses travel back: headers as the upstream sent them (repeated ones kept, hop-by-hop ones
// dropped), large bodies under backpressure, an upstream breaking off mid-body, a client going away.

const BIG = Buffer.alloc(8 * 1024 * 1024, 'keystone-gateway streaming test ');
const BIG_SHA = createHash('sha256').update(BIG).digest('hex');

interface RawUpstream {
  url: string;
  /** Resolves when a /v1/hang request's connection closes, with ms since it arrived. */
  hangClosed: Promise<number>;
  /** Resolves when a /v1/endless response closes, with the bytes it had written. */
  endlessClosed: Promise<number>;
  /** Bytes the /v1/endless response has written so far. */
  endlessWritten(): number;
  /** /v1/hang requests that have arrived. */
  hangs(): number;
  close(): Promise<void>;
}

async function startRawUpstream(): Promise<RawUpstream> {
  let hangClosed!: (ms: number) => void;
  const hang = new Promise<number>((resolve) => (hangClosed = resolve));
  let endlessClosed!: (bytes: number) => void;
  const endless = new Promise<number>((resolve) => (endlessClosed = resolve));
  let endlessWritten = 0;
  let hangs = 0;
  const server = http.createServer((request, response) => {
    request.resume();
    const url = request.url ?? '';
    if (url.startsWith('/v1/cookies')) {
      response.writeHead(200, [
        'Content-Type', 'application/json',
        'Set-Cookie', 'a=1; Path=/',
        'Set-Cookie', 'b=2; Path=/',
        'Keep-Alive', 'timeout=5',
        'X-Upstream', 'yes',
        'Content-Length', '2',
      ]);
      response.end('{}');
    } else if (url.startsWith('/v1/big')) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' }); // chunked
      let offset = 0;
      const write = () => {
        while (offset < BIG.length) {
          const chunk = BIG.subarray(offset, offset + 64 * 1024);
          offset += chunk.length;
          if (!response.write(chunk)) return void response.once('drain', write);
        }
        response.end();
      };
      write();
    } else if (url.startsWith('/v1/broken')) {
      response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100000' });
      response.write('only the beginning');
      setTimeout(() => response.socket?.destroy(), 100);
    } else if (url.startsWith('/v1/endless')) {
      // Writes for as long as it is read (backpressure honoured).
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      const write = () => {
        while (!response.destroyed) {
          endlessWritten += 64 * 1024;
          if (!response.write(BIG.subarray(0, 64 * 1024))) return void response.once('drain', write);
        }
      };
      response.on('close', () => endlessClosed(endlessWritten));
      write();
    } else if (url.startsWith('/v1/hang')) {
      hangs += 1;
      const arrived = Date.now();
      response.on('close', () => hangClosed(Date.now() - arrived));
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hangClosed: hang,
    endlessClosed: endless,
    endlessWritten: () => endlessWritten,
    hangs: () => hangs,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Registers service type `raw` (internal endpoint: the raw upstream) that members may use. */
async function withRawService(t: Pick<typeof tap, 'teardown' | 'equal'>, w: World): Promise<RawUpstream> {
  const upstream = await startRawUpstream();
  t.teardown(() => upstream.close());
  const { call, app } = w.testApp;
  const service = (await call('POST', '/v3/services', { service: { type: 'raw', name: 'raw' } })).json().service;
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'internal', region_id: 'RegionOne', url: `${upstream.url}/v1` } });
  fs.writeFileSync(`${w.policies}/raw.csv`, 'p, member, project, /v1/**, *, allow\n');
  t.equal(await app.reloadPolicy(), true, 'policy with the raw service loaded');
  return upstream;
}

t.test('response headers, bodies and broken exchanges', async (t) => {
  // A long response timeout, so that only the client going away can end the hanging request early.
  const w = await gatewayWorld(t, { UPSTREAM_RESPONSE_TIMEOUT_MS: '30000' });
  const upstream = await withRawService(t, w);
  const headers = { 'x-auth-token': w.member };

  const cookies = await rawRequest(w.port, { path: '/raw/v1/cookies', headers });
  t.equal(cookies.status, 200);
  t.same(cookies.headers['set-cookie'], ['a=1; Path=/', 'b=2; Path=/'], 'repeated headers stay apart');
  t.equal(cookies.headers['x-upstream'], 'yes');
  t.not(cookies.headers['keep-alive'], 'timeout=5', 'the upstream’s hop-by-hop headers are not passed on');
  t.match(cookies.headers['x-openstack-request-id'], /^req-/);
  t.equal(cookies.body, '{}');

  const head = await rawRequest(w.port, { method: 'HEAD', path: '/raw/v1/cookies', headers });
  t.equal(head.status, 200);
  t.equal(head.headers['content-length'], '2');
  t.equal(head.body, '');

  const refused = await rawRequest(w.port, { path: '/raw/v1/cookies' });
  t.equal(refused.status, 401);
  t.match(refused.headers['x-openstack-request-id'], /^req-/, 'our own answers carry the request id too');

  // 8 MiB through a client that stops reading for a while: the gateway waits for it, nothing lost.
  const big = await new Promise<{ status: number; sha: string; length: number }>((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port: w.port, path: '/raw/v1/big', headers }, (response) => {
      const hash = createHash('sha256');
      let length = 0;
      let paused = false;
      response.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        length += chunk.length;
        if (!paused) {
          paused = true;
          response.pause();
          setTimeout(() => response.resume(), 500);
        }
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, sha: hash.digest('hex'), length }));
      response.on('error', reject);
    });
    request.on('error', reject);
  });
  t.equal(big.status, 200);
  t.equal(big.length, BIG.length);
  t.equal(big.sha, BIG_SHA, 'the body arrives whole and in order');

  // The upstream breaks off mid-body: the client must not see a complete response.
  const broken = await new Promise<{ status: number; complete: boolean; length: number }>((resolve) => {
    const request = http.get({ host: '127.0.0.1', port: w.port, path: '/raw/v1/broken', headers }, (response) => {
      let length = 0;
      response.on('data', (chunk: Buffer) => (length += chunk.length));
      const done = () => resolve({ status: response.statusCode ?? 0, complete: response.complete, length });
      response.on('end', done);
      response.on('error', done);
      response.on('aborted', done);
    });
    request.on('error', () => resolve({ status: 0, complete: false, length: 0 }));
  });
  t.equal(broken.status, 200);
  t.equal(broken.complete, false, 'the truncated body is not passed off as whole');
  t.ok(broken.length < 100_000);

  // A client that goes away releases the upstream request at once, not when it would have timed out.
  const client = http.get({ host: '127.0.0.1', port: w.port, path: '/raw/v1/hang', headers });
  client.on('error', () => {});
  setTimeout(() => client.destroy(), 300);
  const closedAfter = await Promise.race([upstream.hangClosed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 15_000))]);
  t.ok(closedAfter >= 0 && closedAfter < 15_000, `the upstream connection closed ${closedAfter} ms after the request arrived`);

  // The gateway still works afterwards (the pool is not left holding a dead exchange).
  t.equal((await rawRequest(w.port, { path: '/raw/v1/cookies', headers })).status, 200);
});

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

t.test('a client that stops reading for good: its connection and the upstream exchange are closed once stalled (on the service clock)', async (t) => {
  // Stalled after max(2 × REQUEST_TIMEOUT_MS, UPSTREAM_RESPONSE_TIMEOUT_MS + 3 s) = 5 s on the
  // service's clock (src/http/stalled-connections.ts), swept every 625 ms of real time.
  const stallMs = 5000;
  const w = await gatewayWorld(t, { UPSTREAM_RESPONSE_TIMEOUT_MS: '2000', REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '1000' });
  const upstream = await withRawService(t, w);
  t.equal(w.testApp.app.server.server.timeout, 0, "no socket timer of node's: refreshed on every read and write, it cost ~1,000 instructions per request");
  const client = net.connect(w.port, '127.0.0.1');
  client.on('error', () => {});
  await once(client, 'connect');
  client.write(`GET /raw/v1/endless HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.member}\r\n\r\n`);
  client.pause();
  await once(client, 'readable'); // the response has begun
  // Until every buffer between the upstream and the client is full: the upstream is held back. Its
  // count must stand still over four polls (1.2 s), not one: a byte moved after the clock is advanced
  // below restarts the stall time, and on a loaded machine one 300 ms gap is not yet a full pipe
  // (CI's PostgreSQL run, 2026-11-30: neither end closed).
  let written = -1;
  for (let unchanged = 0; unchanged < 4; ) {
    const now = upstream.endlessWritten();
    unchanged = now === written ? unchanged + 1 : 0;
    written = now;
    await pause(300);
  }
  let cutOff = false;
  void upstream.endlessClosed.then(() => (cutOff = true));
  w.testApp.clock.advance(stallMs - 1);
  await pause(1500); // two sweeps and more
  t.equal(cutOff, false, 'not before the stall time');
  w.testApp.clock.advance(1);
  const upstreamWrote = await Promise.race([upstream.endlessClosed, pause(4000).then(() => -1)]);
  t.ok(upstreamWrote > 0, 'at the stall time the client connection is closed, and the upstream exchange cut off with it');
  t.ok(upstreamWrote < 256 * 1024 * 1024, `the upstream was held back meanwhile (${upstreamWrote} bytes written)`);
  client.resume(); // (a paused socket sees its own end only once it reads)
  const clientClosed = await Promise.race([once(client, 'close').then(() => true), pause(5000).then(() => false)]);
  t.ok(clientClosed, "the client's connection closed");

  // A silent upstream: its 504 reaches the client, although the connection has sat past twice the
  // request timeout (the stall time leaves the upstream's deadline room).
  const hangsBefore = upstream.hangs();
  const hung = rawRequest(w.port, { path: '/raw/v1/hang', headers: { 'x-auth-token': w.member } });
  while (upstream.hangs() === hangsBefore) await pause(20);
  await pause(700); // a sweep has seen the request come
  w.testApp.clock.advance(stallMs - 1);
  t.equal((await hung).status, 504, 'the 504, not a closed connection');
  t.equal((await rawRequest(w.port, { path: '/raw/v1/cookies', headers: { 'x-auth-token': w.member } })).status, 200, 'the gateway serves on');
});
