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
  close(): Promise<void>;
}

async function startRawUpstream(): Promise<RawUpstream> {
  let hangClosed!: (ms: number) => void;
  const hang = new Promise<number>((resolve) => (hangClosed = resolve));
  let endlessClosed!: (bytes: number) => void;
  const endless = new Promise<number>((resolve) => (endlessClosed = resolve));
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
      let written = 0;
      const write = () => {
        while (!response.destroyed) {
          written += 64 * 1024;
          if (!response.write(BIG.subarray(0, 64 * 1024))) return void response.once('drain', write);
        }
      };
      response.on('close', () => endlessClosed(written));
      write();
    } else if (url.startsWith('/v1/hang')) {
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

t.test('a client that stops reading for good: its connection and the upstream exchange are closed once stalled for twice the request timeout', async (t) => {
  // The service's clock decides when (REQUEST_TIMEOUT_MS × 2 = 2 s on it, src/http/stalled-connections.ts);
  // its sweep runs every 250 ms of real time, so each move of the clock is seen within that.
  const w = await gatewayWorld(t, { UPSTREAM_RESPONSE_TIMEOUT_MS: '30000', REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '1000' });
  const upstream = await withRawService(t, w);
  t.equal(w.testApp.app.server.server.timeout, 0, "no socket timer of node's: refreshed on every read and write, it cost ~2,000 instructions per request");
  const client = net.connect(w.port, '127.0.0.1');
  client.on('error', () => {});
  await once(client, 'connect');
  client.write(`GET /raw/v1/endless HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.member}\r\n\r\n`);
  client.pause();
  await once(client, 'readable'); // the response has begun
  // The gateway's side of the connection closing cuts the upstream exchange off: that is what is
  // waited for (a paused socket sees its own end only once it reads).
  let upstreamWrote = -1;
  let rounds = 0;
  while (upstreamWrote < 0 && rounds < 40) {
    rounds += 1;
    w.testApp.clock.advance(2000);
    upstreamWrote = await Promise.race([upstream.endlessClosed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 300))]);
  }
  t.ok(upstreamWrote > 0, `the upstream exchange was cut off (the clock moved ${rounds} × 2 s)`);
  t.ok(upstreamWrote < 256 * 1024 * 1024, `the upstream was held back meanwhile (${upstreamWrote} bytes written)`);
  client.resume();
  const clientClosed = await Promise.race([once(client, 'close').then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 5000))]);
  t.ok(clientClosed, "and the client's connection closed");
  t.equal((await rawRequest(w.port, { path: '/raw/v1/cookies', headers: { 'x-auth-token': w.member } })).status, 200, 'the gateway serves on');
});
