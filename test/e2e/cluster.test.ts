import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { firstPassingSend } from '../helpers/keystone-client.ts';
import { startRedis, startService, waitFor } from '../helpers/processes.ts';

const ADMIN_PASSWORD = 'cluster-admin-secret';

async function json(url: string, init: RequestInit & { token?: string; subject?: string; body?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (init.token) headers['x-auth-token'] = init.token;
  if (init.subject) headers['x-subject-token'] = init.subject;
  const response = await fetch(url, { ...init, headers });
  const text = await response.text();
  return { status: response.status, token: response.headers.get('x-subject-token') ?? '', body: text ? JSON.parse(text) : undefined };
}

// Two service processes sharing PostgreSQL and Redis, as nodes behind a load balancer.
t.test('revocation reaches every node, through Redis and without it', async (t) => {
  // Each teardown right after what it undoes (tap runs them last first), so a failed start leaves nothing running.
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  t.teardown(() => database.drop());
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-cluster-'));
  t.teardown(() => fs.rmSync(shared, { recursive: true, force: true }));
  const environment = {
    DATABASE_URL: database.url!,
    REDIS_URL: redis.url,
    ADMIN_PASSWORD,
    DATA_DIR: shared,
    FERNET_KEY_REPOSITORY: path.join(shared, 'fernet-keys'),
    SECRET_PEPPER: 'a-pepper-every-node-of-this-cluster-shares-0123456789',
  };
  // The first node creates the schema and bootstraps; the second joins it.
  const nodeA = await startService(environment);
  t.teardown(() => nodeA.stop());
  const nodeB = await startService(environment);
  t.teardown(() => nodeB.stop());

  const adminAuth = { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } }, scope: { system: { all: true } } } };
  const admin = (await json(`${nodeA.url}/v3/auth/tokens`, { method: 'POST', body: JSON.stringify(adminAuth) })).token;
  t.ok(admin);
  const member = (await json(`${nodeA.url}/v3/roles?name=member`, { token: admin })).body.roles[0];
  const project = (await json(`${nodeA.url}/v3/projects`, { method: 'POST', token: admin, body: JSON.stringify({ project: { name: 'cluster' } }) })).body.project;
  const user = (await json(`${nodeA.url}/v3/users`, { method: 'POST', token: admin, body: JSON.stringify({ user: { name: 'roamer', password: 'Pw-1' } }) })).body.user;
  await json(`${nodeA.url}/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`, { method: 'PUT', token: admin });
  const userAuth = JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { id: user.id, password: 'Pw-1' } } }, scope: { project: { id: project.id } } } });
  const issue = async (url: string) => (await json(`${url}/v3/auth/tokens`, { method: 'POST', body: userAuth })).token;
  const validateOn = async (url: string, subject: string) => (await json(`${url}/v3/auth/tokens`, { token: admin, subject })).status;

  // A token from one node is good on the other (same keys, same database).
  const token = await issue(nodeA.url);
  t.equal(await validateOn(nodeB.url, token), 200, 'valid on B, and now cached there');
  t.equal(await validateOn(nodeB.url, token), 200);

  // Revoked on A: B refuses it within 100 ms although it had it cached.
  t.equal((await json(`${nodeA.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: token })).status, 204);
  // When requests start being refused: the send time of the earliest refused one (its own latency on
  // a loaded test machine is not propagation).
  const refusedAfter = await firstPassingSend(async () => (await validateOn(nodeB.url, token)) === 404, Date.now());
  t.ok(refusedAfter >= 0, 'B refuses the revoked token');
  t.ok(refusedAfter < 100, `B refused it ${refusedAfter} ms after the revocation on A`);

  // Other changes travel too: disabling the user on B ends its cached tokens on A.
  const second = await issue(nodeA.url);
  t.equal(await validateOn(nodeA.url, second), 200);
  await new Promise((resolve) => setTimeout(resolve, 1100));
  t.equal((await json(`${nodeB.url}/v3/users/${user.id}`, { method: 'PATCH', token: admin, body: JSON.stringify({ user: { enabled: false } }) })).status, 200);
  await waitFor(async () => (await validateOn(nodeA.url, second)) === 404, 'A to see the disabled user', 5000);
  t.pass('A refuses tokens of the user disabled on B');
  await json(`${nodeB.url}/v3/users/${user.id}`, { method: 'PATCH', token: admin, body: JSON.stringify({ user: { enabled: true } }) });
  await new Promise((resolve) => setTimeout(resolve, 1100));

  // Redis goes away: the nodes read revocations from the database on every validation instead.
  await redis.stop();
  // (Until B has seen its connection close, it trusts its cache, as it should.)
  await waitFor(async () => nodeB.output().includes('Redis connection lost'), 'B to notice Redis is gone', 10_000);
  const third = await issue(nodeA.url);
  t.equal(await validateOn(nodeB.url, third), 200);
  t.equal(await validateOn(nodeB.url, third), 200);
  t.equal((await json(`${nodeA.url}/v3/auth/tokens`, { method: 'DELETE', token: admin, subject: third })).status, 204);
  t.equal(await validateOn(nodeB.url, third), 404, 'refused at once through the database, Redis being down');
});
