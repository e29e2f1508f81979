import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { adminToken, call, eventually, passwordAuth } from '../helpers/keystone-client.ts';
import { startRedis, startService, type ServiceProcess } from '../helpers/processes.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';
import { auditWrites, startUserWriter } from '../helpers/write-load.ts';

const ADMIN_PASSWORD = 'faults-admin-secret';
// Generous: a request that needs the database must be answered (503) well before a client gives up.
const FAST_FAILURE_MS = 5000;

// Two service processes (WORKERS=1 each) reaching PostgreSQL and Redis through relays the test
// cuts; the machine's servers are never touched (Redis is a private redis-server).
t.test('PostgreSQL and Redis cut under load', async (t) => {
  // Each teardown right after what it undoes (tap runs them last first): a start that fails must not
  // leave a relay or a private Redis holding the process open until tap's timeout.
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  t.teardown(() => database.drop());
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const postgresUrl = new URL(database.url!);
  const postgresRelay = await startTcpRelay(postgresUrl.hostname, Number(postgresUrl.port || 5432));
  t.teardown(() => postgresRelay.close());
  const redisUrl = new URL(redis.url);
  const redisRelay = await startTcpRelay(redisUrl.hostname, Number(redisUrl.port));
  t.teardown(() => redisRelay.close());
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-faults-'));
  t.teardown(() => fs.rmSync(shared, { recursive: true, force: true }));
  const environment = {
    DATABASE_URL: postgresRelay.urlFor(database.url!),
    REDIS_URL: redisRelay.urlFor(redis.url),
    ADMIN_PASSWORD,
    DATA_DIR: shared,
    FERNET_KEY_REPOSITORY: path.join(shared, 'fernet-keys'),
    SECRET_PEPPER: 'a-pepper-every-node-of-this-cluster-shares-0123456789',
    AUTH_RATE_LIMIT_PER_USER: '3',
    // Tight bounds so a partition is noticed quickly here; the defaults are seconds.
    DATABASE_CONNECT_TIMEOUT_MS: '1000',
    DATABASE_ACQUIRE_TIMEOUT_MS: '2000',
    DATABASE_QUERY_TIMEOUT_MS: '1500',
  };
  const nodeA = await startService(environment, { startTimeoutMs: 60_000 });
  t.teardown(() => stopNode(nodeA));
  const nodeB = await startService(environment, { startTimeoutMs: 60_000 });
  t.teardown(() => stopNode(nodeB));
  // The relays pass traffic again first, so each node can shut down cleanly.
  t.teardown(() => {
    postgresRelay.restore();
    redisRelay.restore();
  });
  async function stopNode(node: ServiceProcess) {
    if (!t.passing()) t.comment(node.output().split('\n').slice(-40).join('\n'));
    await node.stop();
  }
  const nodes = [nodeA.url, nodeB.url];

  const admin = await adminToken(nodeA.url, ADMIN_PASSWORD);
  const member = (await call(`${nodeA.url}/v3/roles?name=member`, { token: admin })).body.roles[0];
  const project = (await call(`${nodeA.url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'faults' } } })).body.project;
  const user = (await call(`${nodeA.url}/v3/users`, { method: 'POST', token: admin, body: { user: { name: 'faulty', password: 'Pw-faulty' } } })).body.user;
  t.equal((await call(`${nodeA.url}/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`, { method: 'PUT', token: admin })).status, 204);
  const issue = async (url: string) => (await call(`${url}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id: user.id }, 'Pw-faulty', { project: { id: project.id } }) })).token;
  const validateOn = async (url: string, subject: string) => (await call(`${url}/v3/auth/tokens`, { token: admin, subject })).status;

  await t.test('PostgreSQL reset under load: fast 503s, cached tokens still valid, recovery, no lost or half-done write', async (t) => {
    const token = await issue(nodeA.url);
    for (const url of nodes) t.equal(await validateOn(url, token), 200, 'validated (and cached) before the cut');

    const writer = startUserWriter(nodes, admin, { prefix: 'reset-', concurrency: 4 });
    t.ok(await eventually(() => writer.acknowledged() >= 10, 30_000), 'writes are acknowledged before the cut');

    const cutAt = Date.now();
    postgresRelay.cut('reset');
    t.ok(await eventually(() => writer.outcomes.some((outcome) => outcome.sentAt > cutAt && outcome.status === 503), 10_000), 'writes are refused with 503');

    for (const url of nodes) {
      const list = await call(`${url}/v3/projects`, { token: admin });
      t.equal(list.status, 503, 'a read that needs the database: 503');
      t.same(Object.keys(list.body.error).sort(), ['code', 'message', 'title'], 'Keystone error shape');
      t.match(list.body.error, { code: 503, title: 'Service Unavailable', message: /database/ });
      t.ok(list.ms < FAST_FAILURE_MS, `answered in ${list.ms} ms`);
      t.equal(await validateOn(url, token), 200, 'a token validated before the cut is still valid');
      t.equal((await call(`${url}/readyz`)).status, 503, 'not ready without the database');
    }
    // A revocation is a write: refused whole, so the token stays valid everywhere.
    const revoke = await call(`${nodeA.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token });
    t.equal(revoke.status, 503, 'a revocation cannot be written: 503');
    for (const url of nodes) t.equal(await validateOn(url, token), 200);
    // Keep it down a while under load.
    await eventually(() => writer.outcomes.filter((outcome) => outcome.sentAt > cutAt && outcome.status === 503).length >= 20, 3000);

    postgresRelay.restore();
    const restoredAt = Date.now();
    for (const url of nodes) {
      t.ok(await eventually(async () => (await call(`${url}/v3/projects`, { token: admin })).status === 200, 20_000), 'recovers by itself');
    }
    const acknowledgedAtRestore = writer.acknowledged();
    t.ok(await eventually(() => writer.acknowledged() >= acknowledgedAtRestore + 10, 30_000), 'writes are acknowledged again');
    await writer.stop();

    const during = writer.outcomes.filter((outcome) => outcome.sentAt >= cutAt && outcome.sentAt + outcome.ms <= restoredAt);
    t.ok(during.length > 0, `${during.length} requests were sent and answered while PostgreSQL was cut`);
    t.same(during.filter((outcome) => outcome.status !== 503).map((outcome) => `${outcome.name}: ${outcome.status}`), [], 'every one of them got a 503');
    const slowest = Math.max(...during.map((outcome) => outcome.ms));
    t.ok(slowest < FAST_FAILURE_MS, `slowest answer during the cut: ${slowest} ms`);
    t.same(writer.outcomes.filter((outcome) => ![201, 503].includes(outcome.status)).map((outcome) => `${outcome.name}: ${outcome.status}`), [], 'no 500s, no lost answers');

    const audit = await auditWrites(database.url!, 'reset-', writer.outcomes);
    t.ok(audit.acknowledged.length >= 20, `${audit.acknowledged.length} writes acknowledged`);
    t.same(audit.lost, [], 'no acknowledged write is lost');
    t.same(audit.halfDone, [], 'no user without its password');
    t.same(audit.unexplained, [], 'nothing stored that was refused for another reason');
    // Only a commit under way at the cut can have landed while its answer said 503: one per writer.
    t.ok(audit.committedUnacknowledged.length <= 4, `${audit.committedUnacknowledged.length} committed but answered 503 (cut mid-commit)`);
    t.equal(audit.stored.length, audit.acknowledged.length + audit.committedUnacknowledged.length, 'stored = acknowledged + committed-but-refused');

    t.equal((await call(`${nodeB.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token })).status, 204, 'revocation works again');
    for (const url of nodes) t.ok(await eventually(async () => (await validateOn(url, token)) === 404, 2000), 'revoked everywhere');
  });

  await t.test('PostgreSQL partition (blackhole): 503 within the query timeout, cached tokens valid, recovery', async (t) => {
    const token = await issue(nodeB.url);
    for (const url of nodes) t.equal(await validateOn(url, token), 200);
    postgresRelay.cut('blackhole');
    for (const url of nodes) {
      const list = await call(`${url}/v3/projects`, { token: admin });
      t.equal(list.status, 503, 'a request that needs the database: 503, not a hang');
      t.ok(list.ms < FAST_FAILURE_MS, `answered in ${list.ms} ms`);
      t.match(list.body, { error: { code: 503, title: 'Service Unavailable' } });
      const created = await call(`${url}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: `partitioned-${url.slice(-5)}` } } });
      t.equal(created.status, 503, 'a write: 503');
      t.ok(created.ms < FAST_FAILURE_MS, `answered in ${created.ms} ms`);
      t.equal(await validateOn(url, token), 200, 'a cached token is still valid');
    }
    postgresRelay.restore();
    for (const url of nodes) {
      t.ok(await eventually(async () => (await call(`${url}/v3/projects`, { token: admin })).status === 200, 20_000), 'recovers by itself');
      t.equal((await call(`${url}/readyz`)).status, 200);
    }
    const names = (await call(`${nodeA.url}/v3/projects`, { token: admin })).body.projects.map((project: { name: string }) => project.name);
    t.notOk(names.some((name: string) => name.startsWith('partitioned-')), 'the refused creations left nothing');
  });

  await t.test('Redis cut: revocation through the database, rate limits per node', async (t) => {
    // One at a time: concurrent logins of one user would meet its (low) per-user limit here.
    const tokens: string[] = [];
    for (let index = 0; index < 6; index++) tokens.push(await issue(nodes[index % 2]!));
    for (const token of tokens) for (const url of nodes) t.equal(await validateOn(url, token), 200, 'cached everywhere');
    // Past the second the tokens were issued in: a revocation covers tokens issued up to its second.
    await new Promise((resolve) => setTimeout(resolve, 1100));

    redisRelay.cut('reset');
    // Revoked on one node, each checked at once on the other: never accepted.
    let accepted = 0;
    for (const [index, token] of tokens.entries()) {
      const revoker = nodes[index % 2]!;
      const checker = nodes[(index + 1) % 2]!;
      t.equal((await call(`${revoker}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token })).status, 204);
      for (const url of [checker, revoker]) if ((await validateOn(url, token)) !== 404) accepted++;
    }
    t.equal(accepted, 0, 'zero revoked tokens accepted while Redis is down');
    const fresh = await issue(nodeA.url);
    t.equal(await validateOn(nodeB.url, fresh), 200, 'tokens are still issued and validated');

    // Per-user limit 3: the fourth wrong password in the window is 429 on this node's own counters.
    // (A user that does not exist: the budget is per user, so guessing at 'faulty' would lock out
    // the logins below by id too.)
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
      statuses.push((await call(`${nodeA.url}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ name: 'no-such-faulty', domainId: 'default' }, 'wrong') })).status);
    }
    t.same(statuses, [401, 401, 401, 429, 429], 'login attempts are still limited, in process');

    redisRelay.restore();
    // Back on Redis: a revocation on one node reaches the other's cache through pub/sub again.
    const later = await issue(nodeA.url);
    t.ok(await eventually(async () => (await validateOn(nodeB.url, later)) === 200, 5000));
    await new Promise((resolve) => setTimeout(resolve, 1100));
    t.equal((await call(`${nodeA.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: later })).status, 204);
    t.ok(await eventually(async () => (await validateOn(nodeB.url, later)) === 404, 5000), 'refused on the other node after Redis is back');
  });
});
