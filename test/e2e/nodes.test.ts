import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { builtService } from '../helpers/build.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { adminToken, call, eventually, firstPassingSend, passwordAuth } from '../helpers/keystone-client.ts';
import { ROOT, startRedis, startService, type ServiceProcess } from '../helpers/processes.ts';
import { startTcpRelay, type TcpRelay } from '../helpers/tcp-relay.ts';
import { auditWrites, startUserWriter } from '../helpers/write-load.ts';

const run = promisify(execFile);
const ADMIN_PASSWORD = 'nodes-admin-secret';

interface Node {
  name: string;
  service: ServiceProcess;
  url: string;
  postgres: TcpRelay;
  redis: TcpRelay;
}

// The docker-compose topology without Docker: three service processes (WORKERS=1) sharing one
// PostgreSQL database and one Redis, each through relays of its own, behind the test's round-robin
// client (nginx's part). Each node has its own DATA_DIR: the token keys are shared through the
// database (KEY_ENCRYPTION_KEY), not through files.
t.test('three nodes behind a round-robin client', async (t) => {
  // Each teardown right after what it undoes (tap runs them last first), so a failed start leaves nothing running.
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  t.teardown(() => database.drop());
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const postgresTarget = new URL(database.url!);
  const redisTarget = new URL(redis.url);
  const directories: string[] = [];
  const nodes: Node[] = [];
  const shared = {
    ADMIN_PASSWORD,
    SECRET_PEPPER: 'a-pepper-every-node-of-this-cluster-shares-0123456789',
    KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    // Redis announces rotations at once; the poll is the fallback.
    KEY_RELOAD_INTERVAL_MS: '2000',
    FERNET_MAX_ACTIVE_KEYS: '3',
    DATABASE_CONNECT_TIMEOUT_MS: '1000',
    DATABASE_ACQUIRE_TIMEOUT_MS: '2000',
    DATABASE_QUERY_TIMEOUT_MS: '2000',
    REVOCATION_POLL_INTERVAL_MS: '500',
  };
  t.teardown(() => {
    for (const directory of directories) fs.rmSync(directory, { recursive: true, force: true });
  });
  const environmentOf = async (name: string) => {
    const postgres = await startTcpRelay(postgresTarget.hostname, Number(postgresTarget.port || 5432));
    t.teardown(() => postgres.close());
    const redisRelay = await startTcpRelay(redisTarget.hostname, Number(redisTarget.port));
    t.teardown(() => redisRelay.close());
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), `kg-${name}-`));
    directories.push(directory);
    const environment = { ...shared, DATABASE_URL: postgres.urlFor(database.url!), REDIS_URL: redisRelay.urlFor(redis.url), DATA_DIR: directory };
    return { postgres, redis: redisRelay, environment };
  };
  const start = async (name: string) => {
    const { postgres, redis: redisRelay, environment } = await environmentOf(name);
    const service = await startService(environment, { startTimeoutMs: 90_000 });
    const node = { name, service, url: service.url, postgres, redis: redisRelay };
    t.teardown(async () => {
      if (!t.passing()) t.comment(`${name}:\n${service.output().split('\n').slice(-30).join('\n')}`);
      // The relays pass traffic again first, so the node can shut down cleanly.
      postgres.restore();
      redisRelay.restore();
      await service.stop();
    });
    nodes.push(node);
    return node;
  };
  // The first node migrates, creates the keys in the database and bootstraps; the others join.
  await start('node1');
  await Promise.all([start('node2'), start('node3')]);
  const urls = nodes.map((node) => node.url);
  let turn = 0;
  /** The test's load balancer: each request to the next node. */
  const next = () => urls[turn++ % urls.length]!;

  let admin = await adminToken(next(), ADMIN_PASSWORD);
  const member = (await call(`${next()}/v3/roles?name=member`, { token: admin })).body.roles[0];
  const project = (await call(`${next()}/v3/projects`, { method: 'POST', token: admin, body: { project: { name: 'nodes' } } })).body.project;
  const user = (await call(`${next()}/v3/users`, { method: 'POST', token: admin, body: { user: { name: 'traveller', password: 'Pw-traveller' } } })).body.user;
  t.equal((await call(`${next()}/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`, { method: 'PUT', token: admin })).status, 204);
  const issue = async (url = next()) => {
    const answer = await call(`${url}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id: user.id }, 'Pw-traveller', { project: { id: project.id } }) });
    if (answer.status !== 201) throw new Error(`token request failed on ${url}: ${answer.status}`);
    return answer.token;
  };
  const validateOn = async (url: string, subject: string) => (await call(`${url}/v3/auth/tokens`, { token: admin, subject })).status;
  /** A token validating itself: 200, or 401 once the node cannot decrypt it. */
  const selfValidateOn = async (url: string, token: string) => (await call(`${url}/v3/auth/tokens`, { token, subject: token })).status;
  /** Statuses of validating `subject` on every node, in node order. */
  const everywhere = (subject: string) => Promise.all(urls.map((url) => validateOn(url, subject)));
  // Revocations cover tokens issued up to their second: wait out the second of the last issue.
  const nextSecond = () => new Promise((resolve) => setTimeout(resolve, 1100 - (Date.now() % 1000)));

  // Every node probed from the moment the revocation was answered (firstPassingSend: every 10 ms,
  // not waiting on answers); what counts is the send time of each node's earliest refused probe (its
  // own latency on a loaded machine is not propagation). -1: still accepted after 2 s.
  const refusalDelays = (targets: readonly Node[], token: string) => {
    const revokedAt = Date.now();
    return Promise.all(targets.map((node) => firstPassingSend(async () => (await validateOn(node.url, token)) === 404, revokedAt)));
  };

  await t.test('a token issued on any node is valid on every node', async (t) => {
    for (let index = 0; index < 6; index++) {
      const token = await issue();
      t.same(await everywhere(token), [200, 200, 200], `token ${index + 1} (issued on node${(index % 3) + 1})`);
    }
  });

  await t.test('a revocation on one node is refused by every node within 100 ms', async (t) => {
    for (const revoker of nodes) {
      const token = await issue();
      t.same(await everywhere(token), [200, 200, 200], 'valid (and cached) everywhere');
      await nextSecond();
      t.equal((await call(`${revoker.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token })).status, 204);
      const refusedAfter = await refusalDelays(nodes, token);
      for (const [index, node] of nodes.entries()) {
        t.ok(refusedAfter[index]! >= 0 && refusedAfter[index]! < 100, `revoked on ${revoker.name}: ${node.name} refuses it after ${refusedAfter[index]} ms`);
      }
      t.same(await everywhere(token), [404, 404, 404], 'and keeps refusing it');
    }
  });

  await t.test('a key rotation is picked up by every node', async (t) => {
    const before = await issue();
    t.same(await everywhere(before), [200, 200, 200]);
    // Two rotations with 3 active keys retire the primary key `before` was encrypted with: every
    // node refusing it proves each one reloaded the keys.
    // keystone-manage on an operator's machine: the same database, key and Redis as the nodes.
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-rotate-'));
    directories.push(directory);
    const environment = { ...shared, DATABASE_URL: database.url!, REDIS_URL: redis.url, DATA_DIR: directory };
    for (let rotation = 0; rotation < 2; rotation++) {
      const { stdout } = await run(process.execPath, [...(await builtService()).manage, 'fernet_rotate'], {
        cwd: ROOT,
        env: { ...process.env, ...environment, LOG_LEVEL: 'warn' },
        timeout: 60_000,
      });
      t.match(stdout, /rotated the fernet keys in the database/);
    }
    const waits = await Promise.all(
      nodes.map(async (node) => {
        const started = Date.now();
        return (await eventually(async () => (await selfValidateOn(node.url, before)) === 401, 15_000)) ? Date.now() - started : -1;
      }),
    );
    for (const [index, node] of nodes.entries()) t.ok(waits[index]! >= 0, `${node.name} no longer accepts the retired key (after ${waits[index]} ms)`);
    // Every token issued before is gone with that key, the admin's too.
    admin = await adminToken(next(), ADMIN_PASSWORD);
    for (const node of nodes) {
      const after = await issue(node.url);
      t.same(await everywhere(after), [200, 200, 200], `a token issued by ${node.name} after the rotations is valid everywhere`);
    }
  });

  await t.test('PostgreSQL cut and restored under load: zero lost writes', async (t) => {
    const token = await issue();
    t.same(await everywhere(token), [200, 200, 200]);
    const writer = startUserWriter(urls, admin, { prefix: 'nodes-', concurrency: 6 });
    t.ok(await eventually(() => writer.acknowledged() >= 15, 30_000), 'writes are acknowledged');
    const cutAt = Date.now();
    for (const node of nodes) node.postgres.cut('reset');
    t.ok(await eventually(() => writer.outcomes.filter((outcome) => outcome.sentAt > cutAt && outcome.status === 503).length >= 15, 10_000), 'writes are refused with 503');
    t.same(await everywhere(token), [200, 200, 200], 'a token validated before the cut is valid everywhere');
    for (const node of nodes) node.postgres.restore();
    const restoredAt = Date.now();
    for (const node of nodes) {
      t.ok(await eventually(async () => (await call(`${node.url}/v3/projects`, { token: admin })).status === 200, 20_000), `${node.name} recovers by itself`);
    }
    const acknowledged = writer.acknowledged();
    t.ok(await eventually(() => writer.acknowledged() >= acknowledged + 15, 30_000), 'writes are acknowledged again');
    await writer.stop();

    const during = writer.outcomes.filter((outcome) => outcome.sentAt >= cutAt && outcome.sentAt + outcome.ms <= restoredAt);
    t.same(during.filter((outcome) => outcome.status !== 503).map((outcome) => `${outcome.name}: ${outcome.status}`), [], `all ${during.length} answers during the cut were 503`);
    t.same(writer.outcomes.filter((outcome) => ![201, 503].includes(outcome.status)).map((outcome) => `${outcome.name}: ${outcome.status}`), [], 'no other status');
    const audit = await auditWrites(database.url!, 'nodes-', writer.outcomes);
    t.ok(audit.acknowledged.length >= 30, `${audit.acknowledged.length} writes acknowledged, ${writer.outcomes.length - audit.acknowledged.length} refused`);
    t.same(audit.lost, [], 'zero acknowledged writes lost');
    t.same(audit.halfDone, [], 'zero half-done writes');
    t.same(audit.unexplained, [], 'nothing stored that was not sent or was refused before the database');
    t.ok(audit.committedUnacknowledged.length <= 6, `${audit.committedUnacknowledged.length} committed at the cut but answered 503 (at most one per writer)`);
  });

  await t.test('Redis cut: zero revoked tokens accepted', async (t) => {
    const tokens: string[] = [];
    for (let index = 0; index < 9; index++) tokens.push(await issue());
    for (const token of tokens) t.same(await everywhere(token), [200, 200, 200], 'valid (and cached) everywhere');
    await nextSecond();
    for (const node of nodes) node.redis.cut('reset');
    let accepted = 0;
    for (const token of tokens) {
      t.equal((await call(`${next()}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token })).status, 204);
      accepted += (await everywhere(token)).filter((status) => status !== 404).length;
    }
    t.equal(accepted, 0, 'no node accepted a revoked token while Redis was down');
    const fresh = await issue();
    t.same(await everywhere(fresh), [200, 200, 200], 'tokens are still issued and validated');
    for (const node of nodes) node.redis.restore();
    await nextSecond();
    t.equal((await call(`${next()}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: fresh })).status, 204);
    t.ok(await eventually(async () => (await everywhere(fresh)).every((status) => status === 404), 3000), 'revocations still reach every node after Redis is back');
  });

  await t.test('Redis cut for one node only: its revocations reach the others by polling, theirs reach it at once', async (t) => {
    const [connected, peer, isolated] = nodes as [Node, Node, Node];
    const revokedByOthers = await issue();
    const revokedByIsolated = await issue();
    for (const token of [revokedByOthers, revokedByIsolated]) t.same(await everywhere(token), [200, 200, 200], 'valid (and cached) everywhere');
    await nextSecond();
    const logged = isolated.service.output().split('Redis connection lost').length;
    isolated.redis.cut('reset');
    // A revocation published before the node even sees its connection close is one it could miss.
    t.ok(await eventually(() => isolated.service.output().split('Redis connection lost').length > logged, 5000), 'the isolated node notices');

    t.equal((await call(`${connected.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: revokedByOthers })).status, 204);
    // The isolated node reads the database on each validation; the connected peer hears it by Redis.
    const [byIsolated, byPeer] = await refusalDelays([isolated, peer], revokedByOthers);
    t.ok(byIsolated! >= 0 && byIsolated! < 20, `the isolated node refuses it at once (${byIsolated} ms)`);
    t.ok(byPeer! >= 0 && byPeer! < 100, `the connected peer refuses it after ${byPeer} ms`);
    t.same(await everywhere(revokedByOthers), [404, 404, 404], 'and every node keeps refusing it');

    t.equal((await call(`${isolated.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: revokedByIsolated })).status, 204);
    const revokedAt = Date.now();
    t.equal(await validateOn(isolated.url, revokedByIsolated), 404, 'refused at once where it was revoked');
    // Nobody could be told: the connected nodes find the event within REVOCATION_POLL_INTERVAL_MS.
    t.ok(await eventually(async () => (await everywhere(revokedByIsolated)).every((status) => status === 404), 5000), 'refused everywhere');
    t.ok(Date.now() - revokedAt < 3000, `within ${Date.now() - revokedAt} ms (poll every 500 ms)`);
    isolated.redis.restore();
  });
});
