import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import t, { type Test } from 'tap';
import { buildApplication, type Application } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { LOCAL_POSTGRES } from '../helpers/database.ts';
import { ECHO_RULES } from '../helpers/gateway.ts';
import { call, eventually, type Answer } from '../helpers/keystone-client.ts';
import { ROOT, startRedis } from '../helpers/processes.ts';
import { startTcpRelay, type TcpRelay } from '../helpers/tcp-relay.ts';
import { startEchoUpstream } from '../helpers/upstream.ts';

// A partition between this node and PostgreSQL: the relay drops every byte and ends no connection,
// so only the node's own timeouts can tell. After the first one, cached answers must come at cache
// speed and what needs the database must be refused at once.
const SERVER = process.env.TEST_DATABASE_URL || LOCAL_POSTGRES;
const QUERY_TIMEOUT_MS = 1000;
const STALE_VALIDATION_MAX_SECONDS = 300;

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

interface Partitioned {
  testApp: TestApp;
  url: string;
  postgres: TcpRelay;
  redis: { relay: TcpRelay; url: string; channel: string } | undefined;
  projectId: string;
  member: string;
  /** A second token of the member, cached like the first (one variant revokes it). */
  spare: string;
  /** A token with the service role: as X-Service-Token it lets the user token be expired (allow_expired). */
  serviceToken: string;
  upstreamReceived(): number;
  logs: LogLine[];
  directUrl: string;
}

async function partitionedWorld(t: Test, withRedis: boolean): Promise<Partitioned> {
  const server = new URL(SERVER);
  // Each teardown right after what it undoes (tap runs them last first), so a failed start leaves nothing running.
  const postgres = await startTcpRelay(server.hostname, Number(server.port || 5432));
  t.teardown(() => postgres.close());
  let redis: Partitioned['redis'];
  if (withRedis) {
    const started = await startRedis();
    t.teardown(() => started.stop());
    const target = new URL(started.url);
    const relay = await startTcpRelay(target.hostname, Number(target.port));
    t.teardown(() => relay.close());
    redis = { relay, url: relay.urlFor(started.url), channel: `kg-partition-${process.pid}-${Date.now()}` };
  }
  const policies = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-policy-'));
  t.teardown(() => fs.rmSync(policies, { recursive: true, force: true }));
  fs.copyFileSync(path.join(ROOT, 'policies', 'model.conf'), path.join(policies, 'model.conf'));
  fs.writeFileSync(path.join(policies, 'echo.csv'), ECHO_RULES);
  const logs: LogLine[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) });
  let directUrl = '';
  const testApp = await startTestApp(
    t,
    {
      POLICY_DIR: policies,
      DATABASE_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
      DATABASE_CONNECT_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
      DATABASE_ACQUIRE_TIMEOUT_MS: '2000',
      STALE_VALIDATION_MAX_SECONDS: String(STALE_VALIDATION_MAX_SECONDS),
      // One variant also builds X-Service-Catalog from the catalog for every proxied request.
      GATEWAY_SERVICE_CATALOG_HEADER: withRedis ? 'true' : 'false',
      ...(redis ? { REDIS_URL: redis.url, REDIS_EVENTS_CHANNEL: redis.channel } : {}),
    },
    {
      logger,
      databaseServer: SERVER,
      databaseUrl: (url) => {
        directUrl = url;
        return postgres.urlFor(url);
      },
    },
  );
  const upstream = await startEchoUpstream();
  t.teardown(async () => {
    if (!t.passing()) t.comment(logs.filter((line) => line.level >= 40).map((line) => JSON.stringify(line)).join('\n'));
    postgres.restore();
    redis?.relay.restore();
    await testApp.close();
    await upstream.close();
  });
  const { call: api, login, app } = testApp;
  const service = (await api('POST', '/v3/services', { service: { type: 'echo', name: 'echo' } })).json().service;
  await api('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'internal', region_id: 'RegionOne', url: `${upstream.url}/v1` } });
  await api('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'public', region_id: 'RegionOne', url: 'http://gateway.test/echo/v1' } });
  const memberRole = (await api('GET', '/v3/roles?name=member')).json().roles[0].id;
  const project = (await api('POST', '/v3/projects', { project: { name: 'partitioned' } })).json().project;
  const user = (await api('POST', '/v3/users', { user: { name: 'partitioned-member', password: 'Pw-1' } })).json().user;
  await api('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${memberRole}`);
  const member = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const spare = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const serviceRole = (await api('POST', '/v3/roles', { role: { name: 'service' } })).json().role;
  const nova = (await api('POST', '/v3/users', { user: { name: 'partitioned-nova', password: 'Pw-1' } })).json().user;
  await api('PUT', `/v3/projects/${project.id}/users/${nova.id}/roles/${serviceRole.id}`);
  const serviceToken = (await login({ id: nova.id }, 'Pw-1', { project: { id: project.id } })).token;
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return { testApp, url, postgres, redis, projectId: project.id, member, spare, serviceToken, upstreamReceived: () => upstream.received.length, logs, directUrl };
}

/** A gateway request with X-Service-Token (call() sends no such header). */
async function withServiceToken(url: string, token: string, serviceToken: string): Promise<Answer> {
  const started = Date.now();
  const response = await fetch(url, { headers: { 'x-auth-token': token, 'x-service-token': serviceToken }, signal: AbortSignal.timeout(20_000) });
  const text = await response.text();
  return { status: response.status, token: '', body: text ? JSON.parse(text) : undefined, ms: Date.now() - started };
}

/** The requests a partition must not slow down: the gateway (also with a service token), and /v3 validation with and without the catalog. */
function cachedRequests(world: Partitioned): Record<string, () => Promise<Answer>> {
  const { url, member, projectId, testApp } = world;
  return {
    gateway: () => call(`${url}/echo/v1/${projectId}/things`, { token: member }),
    'gateway with a service token': () => withServiceToken(`${url}/echo/v1/${projectId}/things`, member, world.serviceToken),
    'validation with catalog': () => call(`${url}/v3/auth/tokens`, { token: testApp.adminToken, subject: member }),
    'validation ?nocatalog': () => call(`${url}/v3/auth/tokens?nocatalog`, { token: testApp.adminToken, subject: member }),
  };
}

/**
 * Each request `times` times: every answer, and by name the time of all but the slowest (one
 * outlier allowed: on a busy machine any single request may wait for the CPU).
 */
async function measure(requests: Record<string, () => Promise<{ ms: number }>>, times: number): Promise<Record<string, { answers: Answer[]; typical: number }>> {
  const result: Record<string, { answers: Answer[]; typical: number }> = {};
  for (const [name, send] of Object.entries(requests)) {
    const answers: Answer[] = [];
    for (let index = 0; index < times; index++) answers.push((await send()) as Answer);
    const sorted = answers.map((answer) => answer.ms).sort((a, b) => a - b);
    result[name] = { answers, typical: sorted[sorted.length - 2] ?? sorted[0]! };
  }
  return result;
}

/** Cache speed: under 100 ms, or within twice the same requests' time before the partition when the machine is slower than that. */
function cacheSpeed(before: number): number {
  return Math.max(100, 2 * before);
}

/** A request with its headers (Retry-After). */
async function send(url: string, init: { method: string; token: string; body?: unknown }): Promise<{ status: number; body: any; retryAfter: string | null; ms: number }> {
  const started = Date.now();
  const response = await fetch(url, {
    method: init.method,
    headers: { 'x-auth-token': init.token, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, retryAfter: response.headers.get('retry-after'), ms: Date.now() - started };
}

async function metric(url: string, name: string): Promise<number | undefined> {
  const text = (await call(`${url}/metrics`)).body as string;
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `) || entry.startsWith(`${name}{`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

for (const withRedis of [true, false]) {
  t.test(`PostgreSQL partitioned after a write (${withRedis ? 'with' : 'without'} Redis): cached answers at cache speed, writes refused at once, recovery`, async (t) => {
    const world = await partitionedWorld(t, withRedis);
    const { url, testApp } = world;
    const admin = testApp.adminToken;
    const requests = cachedRequests(world);

    // Warm: each answer cached, then the same requests measured before the partition.
    await measure(requests, 3);
    t.equal((await call(`${url}/echo/v1/${world.projectId}/things`, { token: world.spare })).status, 200, 'the spare token is cached too');
    const before = await measure(requests, 5);
    for (const [name, { answers }] of Object.entries(before)) t.same(answers.map((answer) => answer.status), [200, 200, 200, 200, 200], `${name}: 200 before`);
    // What needs the database, before the partition: the baseline of the 503s during it.
    const databaseRequests = {
      write: () => send(`${url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: `before-${Math.random()}` } } }),
      read: () => send(`${url}/v3/projects`, { method: 'GET', token: admin }),
    };
    const databaseBefore = await measure(databaseRequests, 5);
    t.equal((await call(`${url}/readyz`)).status, 200, 'ready before');
    t.equal(await metric(url, 'keystone_gateway_database_reachable'), 1);

    // Writes just before the partition: every cache generation moves on. Caches follow the topics
    // they hold: a new project moves none the requests below use, a region the catalog's, and a
    // project changed (last: each request validates its token first) the validations'.
    const written = await send(`${url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'just-before' } } });
    t.equal(written.status, 201);
    await send(`${url}/v3/regions`, { method: 'POST', token: admin, body: { region: { id: 'just-before' } } });
    await send(`${url}/v3/projects/${world.projectId}`, { method: 'PATCH', token: admin, body: { project: { description: 'just-before' } } });
    world.postgres.cut('blackhole');

    // The first request that needs the database finds out: a 503 within one query timeout and the
    // probe's confirmation (half a probe interval, 500 ms), with 1 s more for a loaded machine (a run
    // took 1,514 ms; waiting out the pool's acquire timeout instead would take 1 + 2 s).
    // Cached validations sent meanwhile (one with the write, waiting out its own query; one while the
    // probe decides, waiting for its verdict) are answered from the cache once the partition is known.
    const firstPending = send(`${url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'during-1' } } });
    const alongside = requests['validation with catalog']!();
    const whileDeciding = new Promise<Answer>((resolve, reject) => {
      setTimeout(() => requests['validation with catalog']!().then(resolve, reject), QUERY_TIMEOUT_MS + 100);
    });
    const first = await firstPending;
    t.same([(await alongside).status, (await whileDeciding).status], [200, 200], 'validations racing the discovery: 200 from the cache');
    t.equal(first.status, 503, 'a write during the partition: 503');
    t.same(Object.keys(first.body.error).sort(), ['code', 'message', 'title'], 'Keystone error shape');
    t.match(first.body.error, { code: 503, title: 'Service Unavailable', message: /database/ });
    t.ok(first.retryAfter !== null && Number(first.retryAfter) >= 1, `Retry-After: ${first.retryAfter}`);
    t.ok(first.ms < QUERY_TIMEOUT_MS + 1500, `answered in ${first.ms} ms (query timeout ${QUERY_TIMEOUT_MS} ms)`);
    // The timeout set the probe off: its failure, within one probe interval, makes the partition known.
    t.ok(await eventually(async () => (await call(`${url}/readyz`)).status === 503, 1000 + 500, 10), 'not ready once the probe confirms the partition');

    // Known unreachable: cached answers at cache speed, whatever the write did to the generations.
    const during = await measure(requests, 5);
    for (const [name, { answers, typical }] of Object.entries(during)) {
      const bound = cacheSpeed(before[name]!.typical);
      t.same(answers.map((answer) => answer.status), [200, 200, 200, 200, 200], `${name}: 200 during the partition`);
      t.ok(typical < bound, `${name}: ${typical} ms (all but the slowest of 5) during the partition, ${before[name]!.typical} ms before (bound ${bound} ms)`);
    }
    t.equal(during['gateway with a service token']!.answers[0]!.body.url, `/v1/${world.projectId}/things`, 'a privileged service token’s request forwarded too');
    const body = during['validation with catalog']!.answers[0]!.body;
    t.ok(body.token.catalog.some((entry: { type: string }) => entry.type === 'echo'), 'the token body carries the last catalog read');
    t.notOk('catalog' in during['validation ?nocatalog']!.answers[0]!.body.token, '?nocatalog has none');
    t.equal(during.gateway!.answers[0]!.body.url, `/v1/${world.projectId}/things`, 'the upstream received the request');
    if (withRedis) t.match(during.gateway!.answers[0]!.body.headers['x-service-catalog'], /"type":"echo"/, 'with X-Service-Catalog from the last catalog read');

    const refused = await measure(
      { write: () => send(`${url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'during-2' } } }), read: databaseRequests.read },
      5,
    );
    for (const [name, { answers, typical }] of Object.entries(refused)) {
      const bound = cacheSpeed(databaseBefore[name]!.typical);
      t.same(answers.map((answer) => answer.status), [503, 503, 503, 503, 503], `${name}: 503 during the partition`);
      t.ok(typical < bound, `${name}: refused at once, ${typical} ms (all but the slowest of 5; ${databaseBefore[name]!.typical} ms with the database, bound ${bound} ms)`);
    }
    t.equal((refused.write!.answers[0] as unknown as { retryAfter: string }).retryAfter, '1');
    t.equal(await metric(url, 'keystone_gateway_database_reachable'), 0, 'metric: unreachable');
    t.equal(await metric(url, 'keystone_gateway_database_partitions_total'), 1, 'metric: one partition');

    if (world.redis) {
      // Another node, which reaches the database, revokes the spare token: the event comes through
      // Redis and is applied to what this node serves.
      const other = await otherNode(t, world);
      const revoked = await other.server.inject({ method: 'DELETE', url: '/v3/auth/tokens', headers: { 'x-auth-token': admin, 'x-subject-token': world.spare } });
      t.equal(revoked.statusCode, 204, 'revoked on the other node');
      t.ok(await eventually(async () => (await call(`${url}/echo/v1/${world.projectId}/things`, { token: world.spare })).status === 401, 5000), 'the gateway refuses the revoked token');
      t.equal((await call(`${url}/v3/auth/tokens`, { token: admin, subject: world.spare })).status, 404, 'validation refuses it');
      t.equal((await requests.gateway!()).status, 200, 'the other token is still served');

      // Redis lost as well: served for STALE_VALIDATION_MAX_SECONDS after the node last heard from either.
      world.redis.relay.cut('reset');
      t.ok(await eventually(() => world.logs.some((line) => line.msg.startsWith('Redis connection lost')), 5000), 'the node lost Redis');
    }
    // Neither database nor Redis (or no Redis at all): still served within the bound...
    testApp.clock.advance((STALE_VALIDATION_MAX_SECONDS - 10) * 1000);
    t.equal((await requests.gateway!()).status, 200, 'served within STALE_VALIDATION_MAX_SECONDS');
    t.equal((await requests['validation ?nocatalog']!()).status, 200);
    // ...then refused.
    testApp.clock.advance(20_000);
    const stale = await send(`${url}/echo/v1/${world.projectId}/things`, { method: 'GET', token: world.member });
    t.equal(stale.status, 503, 'the gateway refuses a validation unconfirmed for too long');
    t.equal(stale.retryAfter, '1');
    t.match(stale.body.error, { code: 503, title: 'Service Unavailable' });
    t.equal((await requests['validation ?nocatalog']!()).status, 503, 'so does /v3 validation');

    const receivedBefore = world.upstreamReceived();
    if (world.redis) {
      // Redis back before the database: what was revoked while it was away cannot be read, so cached
      // tokens are not trusted again (though Redis now brings revocations) until the database is back.
      world.redis.relay.restore();
      t.ok(await eventually(() => world.logs.some((line) => line.msg.startsWith('Redis is back')), 10_000), 'Redis reconnected');
      const behind = await send(`${url}/echo/v1/${world.projectId}/things`, { method: 'GET', token: world.member });
      t.equal(behind.status, 503, 'still refused: revocations made while Redis was away are unknown');
      t.equal(behind.retryAfter, '1');
      t.equal((await requests['validation ?nocatalog']!()).status, 503);
    }

    // The partition heals: ready again within about one probe interval (1 s: the probe under way gives up, the next
    // starts at once), bounded here by two; everything served without a restart.
    world.postgres.restore();
    const healedAt = Date.now();
    t.ok(await eventually(async () => (await call(`${url}/readyz`)).status === 200, 5000, 20), 'ready again');
    t.ok(Date.now() - healedAt < 2 * 1000, `ready ${Date.now() - healedAt} ms after the partition ended`);
    t.ok(await eventually(async () => (await requests.gateway!()).status === 200, 10_000), 'the gateway forwards again');
    t.ok(world.upstreamReceived() > receivedBefore);
    t.equal((await send(`${url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'after' } } })).status, 201, 'writes work again');
    for (const [name, send] of Object.entries(requests)) t.equal((await send()).status, 200, `${name}: 200 after`);
    if (world.redis) t.equal((await call(`${url}/v3/auth/tokens`, { token: admin, subject: world.spare })).status, 404, 'the revocation holds after recovery');
    const names = (await testApp.call('GET', '/v3/projects')).json().projects.map((project: { name: string }) => project.name);
    t.notOk(names.some((name: string) => name.startsWith('during-')), 'the refused writes left nothing');
    t.equal(await metric(url, 'keystone_gateway_database_reachable'), 1);

    const lost = world.logs.filter((line) => line.msg.startsWith('database unreachable'));
    const back = world.logs.filter((line) => line.msg.startsWith('database reachable again'));
    t.equal(lost.length, 1, 'one log line when the partition began');
    t.equal(back.length, 1, 'one when it ended');
    t.equal(world.logs.filter((line) => line.msg === 'database unreachable: answered 503').length, 0, 'no line per refused request');

    // With no request to find out, the probe does: not ready within two probe intervals (the probe gives up after one).
    world.postgres.cut('blackhole');
    const idleCutAt = Date.now();
    t.ok(await eventually(async () => (await call(`${url}/readyz`)).status === 503, 10_000, 20), 'an idle node notices the partition');
    const noticedMs = Date.now() - idleCutAt;
    t.ok(noticedMs < 2 * 1000 + 1000, `not ready ${noticedMs} ms after the partition began (probe every 1000 ms, giving up after as long)`);
    world.postgres.restore();
    t.ok(await eventually(async () => (await call(`${url}/readyz`)).status === 200, 5000, 20), 'and ready again after it');
    t.equal(await metric(url, 'keystone_gateway_database_partitions_total'), 2, 'metric: two partitions');
    t.equal(world.logs.filter((line) => line.msg.startsWith('database unreachable')).length, 2, 'one line each');
  });
}

/** A second node on the same database (reached directly) and Redis channel. */
async function otherNode(t: Test, world: Partitioned): Promise<Application> {
  const config = loadConfig({
    ...Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined)),
    DATA_DIR: world.testApp.config.dataDir,
    DATABASE_URL: world.directUrl,
    REDIS_URL: world.redis!.url,
    REDIS_EVENTS_CHANNEL: world.redis!.channel,
    POLICY_DIR: world.testApp.config.policyDirectory,
    LOG_LEVEL: 'silent',
    PASSWORD_HASH_ROUNDS: '4',
  });
  const app = await buildApplication(config, { clock: world.testApp.clock, embeddedDirectory: 'memory', logger: false, migrate: false });
  t.teardown(() => app.close());
  return app;
}
