import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { buildApplication, type Application } from '../../src/app.ts';
import { bootstrap } from '../../src/cli/bootstrap.ts';
import { LoadingCache, type CacheEpoch } from '../../src/support/cache.ts';
import { loadConfig } from '../../src/config.ts';
import { ADMIN_PASSWORD, startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { startRedis, waitFor } from '../helpers/processes.ts';

// Token issue and validation read users, passwords, domains, projects and application credentials
// from caches of the current data generation. Each test changes the data through the API and checks
// that the very next issue (or validation) sees it, after the caches were warmed.

const DAY = 86_400_000;
const NO_RATE_LIMITS = { AUTH_RATE_LIMIT_PER_ADDRESS: '0', AUTH_RATE_LIMIT_PER_USER: '0' };

interface World {
  app: TestApp;
  domain: { id: string; name: string };
  project: { id: string; name: string };
  user: { id: string; name: string };
  member: string;
  credential: { id: string; secret: string };
  /** POST /v3/auth/tokens with an application credential (by id unless `byName`). */
  apiKey(byName?: { credential: string; user: string; domain: string }, secret?: string): Promise<{ status: number; body: any; token: string }>;
  /** POST /v3/auth/tokens with a password; user and project named by name and domain name. */
  password(names: { user: string; domain: string; project: string }, password: string): Promise<{ status: number; body: any; token: string }>;
}

async function world(t: { teardown(fn: () => unknown): void }, overrides: Record<string, string> = {}): Promise<World> {
  const app = await startTestApp(t, { ...NO_RATE_LIMITS, ...overrides });
  const ok = (response: { statusCode: number; body: string }, what: string) => {
    if (response.statusCode >= 300) throw new Error(`${what}: ${response.statusCode} ${response.body}`);
    return JSON.parse(response.body || '{}');
  };
  const domain = ok(await app.call('POST', '/v3/domains', { domain: { name: 'cache-domain' } }), 'domain').domain;
  const project = ok(await app.call('POST', '/v3/projects', { project: { name: 'cache-project', domain_id: domain.id } }), 'project').project;
  const user = ok(await app.call('POST', '/v3/users', { user: { name: 'cache-user', domain_id: domain.id, password: 'Pw-1' } }), 'user').user;
  const member = ok(await app.call('GET', '/v3/roles?name=member'), 'roles').roles[0].id;
  ok(await app.call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member}`), 'grant');
  const session = await app.login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  const credential = ok(
    await app.call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'cache-key' } }, session.token),
    'application credential',
  ).application_credential;
  const post = async (auth: unknown) => {
    const response = await app.request({ method: 'POST', url: '/v3/auth/tokens', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ auth }) });
    return { status: response.statusCode, body: response.json(), token: String(response.headers['x-subject-token'] ?? '') };
  };
  return {
    app,
    domain,
    project,
    user,
    member,
    credential,
    apiKey: (byName, secret = credential.secret) =>
      post({
        identity: {
          methods: ['application_credential'],
          application_credential: byName
            ? { name: byName.credential, user: { name: byName.user, domain: { name: byName.domain } }, secret }
            : { id: credential.id, secret },
        },
      }),
    password: (names, password) =>
      post({
        identity: { methods: ['password'], password: { user: { name: names.user, domain: { name: names.domain }, password } } },
        scope: { project: { name: names.project, domain: { name: names.domain } } },
      }),
  };
}

t.test('API-key issue sees every change to what it reads, at once', async (t) => {
  const w = await world(t);
  const { app } = w;
  const patch = async (url: string, body: unknown) => t.equal((await app.call('PATCH', url, body)).statusCode, 200, `PATCH ${url}`);
  const byName = () => ({ credential: 'cache-key', user: w.user.name, domain: w.domain.name });
  for (let i = 0; i < 3; i++) t.equal((await w.apiKey()).status, 201, 'warm');
  t.equal((await w.apiKey(byName())).status, 201, 'by name, warm');

  await patch(`/v3/users/${w.user.id}`, { user: { name: 'renamed-user' } });
  let issued = await w.apiKey();
  t.equal(issued.body.token.user.name, 'renamed-user', 'a renamed user');
  t.equal((await w.apiKey({ credential: 'cache-key', user: 'cache-user', domain: w.domain.name })).status, 401, 'not under its old name');
  w.user.name = 'renamed-user';
  t.equal((await w.apiKey(byName())).status, 201, 'but under its new one');

  await patch(`/v3/projects/${w.project.id}`, { project: { name: 'renamed-project' } });
  await patch(`/v3/domains/${w.domain.id}`, { domain: { name: 'renamed-domain' } });
  issued = await w.apiKey();
  t.equal(issued.body.token.project.name, 'renamed-project', 'a renamed project');
  t.equal(issued.body.token.project.domain.name, 'renamed-domain', 'a renamed domain');
  t.equal(issued.body.token.user.domain.name, 'renamed-domain');
  t.equal((await w.apiKey({ credential: 'cache-key', user: w.user.name, domain: 'cache-domain' })).status, 401, 'not in the old domain name');
  w.domain.name = 'renamed-domain';
  t.equal((await w.apiKey(byName())).status, 201);

  for (const [url, kind] of [
    [`/v3/users/${w.user.id}`, 'user'],
    [`/v3/projects/${w.project.id}`, 'project'],
    [`/v3/domains/${w.domain.id}`, 'domain'],
  ] as const) {
    await patch(url, { [kind]: { enabled: false } });
    t.equal((await w.apiKey()).status, 401, `${kind} disabled: refused at once`);
    t.equal((await w.apiKey(byName())).status, 401, `${kind} disabled: by name too`);
    await patch(url, { [kind]: { enabled: true } });
    t.equal((await w.apiKey()).status, 201, `${kind} enabled again`);
  }

  t.equal((await app.call('DELETE', `/v3/projects/${w.project.id}/users/${w.user.id}/roles/${w.member}`)).statusCode, 204);
  t.equal((await w.apiKey()).status, 401, 'role unassigned: refused at once');
  t.equal((await app.call('PUT', `/v3/projects/${w.project.id}/users/${w.user.id}/roles/${w.member}`)).statusCode, 204);
  t.equal((await w.apiKey()).status, 201, 'role assigned again');

  t.equal((await w.apiKey(undefined, 'not-the-secret')).status, 401, 'a wrong secret, with the credential cached');

  // Expiry is a matter of time, not of a change. (A second later: the unassignment revoked the
  // user's tokens on the project issued up to now.)
  app.clock.advance(1000);
  const session = await app.login({ id: w.user.id }, 'Pw-1', { project: { id: w.project.id } });
  const expiresAt = new Date(app.clock.now() + 60_000).toISOString();
  const created = await app.call('POST', `/v3/users/${w.user.id}/application_credentials`, { application_credential: { name: 'short', expires_at: expiresAt } }, session.token);
  t.equal(created.statusCode, 201, created.body);
  const shortLived = created.json().application_credential;
  const useShortLived = () => w.apiKey({ credential: 'short', user: w.user.name, domain: w.domain.name }, shortLived.secret);
  t.equal((await useShortLived()).status, 201);
  app.clock.advance(61_000);
  t.equal((await useShortLived()).status, 401, 'an expired credential, cached before it expired');

  t.equal((await app.call('DELETE', `/v3/users/${w.user.id}/application_credentials/${w.credential.id}`)).statusCode, 204);
  t.equal((await w.apiKey()).status, 401, 'a deleted credential: refused at once');
  t.equal((await w.apiKey(byName())).status, 401, 'by name too');
});

t.test('password issue sees every change to what it reads, at once', async (t) => {
  const w = await world(t);
  const { app } = w;
  const names = { user: 'cache-user', domain: 'cache-domain', project: 'cache-project' };
  for (let i = 0; i < 3; i++) t.equal((await w.password(names, 'Pw-1')).status, 201, 'warm');

  t.equal((await app.call('PATCH', `/v3/users/${w.user.id}`, { user: { password: 'Pw-2' } })).statusCode, 200);
  t.equal((await w.password(names, 'Pw-1')).status, 401, 'the old password is refused at once');
  t.equal((await w.password(names, 'Pw-2')).status, 201, 'the new one works');

  await app.call('PATCH', `/v3/users/${w.user.id}`, { user: { name: 'other-name' } });
  t.equal((await w.password(names, 'Pw-2')).status, 401, 'old user name');
  names.user = 'other-name';
  t.equal((await w.password(names, 'Pw-2')).status, 201, 'new user name');

  await app.call('PATCH', `/v3/domains/${w.domain.id}`, { domain: { name: 'other-domain' } });
  t.equal((await w.password(names, 'Pw-2')).status, 401, 'old domain name');
  names.domain = 'other-domain';
  t.equal((await w.password(names, 'Pw-2')).status, 201, 'new domain name');

  await app.call('PATCH', `/v3/projects/${w.project.id}`, { project: { name: 'other-project' } });
  t.equal((await w.password(names, 'Pw-2')).status, 401, 'old project name');
  names.project = 'other-project';
  t.equal((await w.password(names, 'Pw-2')).status, 201, 'new project name');

  await app.call('PATCH', `/v3/projects/${w.project.id}`, { project: { enabled: false } });
  t.equal((await w.password(names, 'Pw-2')).status, 401, 'a disabled project');
  await app.call('PATCH', `/v3/projects/${w.project.id}`, { project: { enabled: true } });
  await app.call('PATCH', `/v3/domains/${w.domain.id}`, { domain: { enabled: false } });
  t.equal((await w.password(names, 'Pw-2')).status, 401, 'a disabled domain');
  await app.call('PATCH', `/v3/domains/${w.domain.id}`, { domain: { enabled: true } });
  t.equal((await w.password(names, 'Pw-2')).status, 201);

  t.equal((await app.call('DELETE', `/v3/users/${w.user.id}`)).statusCode, 204);
  t.equal((await w.password(names, 'Pw-2')).status, 401, 'a deleted user');
});

t.test('a lockout takes effect at once (its counters change outside transactions)', async (t) => {
  const w = await world(t, { IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '2', IDENTITY_LOCKOUT_DURATION: '600' });
  const names = { user: 'cache-user', domain: 'cache-domain', project: 'cache-project' };
  for (let i = 0; i < 3; i++) t.equal((await w.password(names, 'Pw-1')).status, 201, 'warm');
  t.equal((await w.password(names, 'wrong')).status, 401);
  t.equal((await w.password(names, 'Pw-1')).status, 201, 'one failure does not lock, and a success resets the count');
  t.equal((await w.password(names, 'wrong')).status, 401);
  t.equal((await w.password(names, 'wrong')).status, 401);
  t.equal((await w.password(names, 'Pw-1')).status, 401, 'locked: the right password is refused');
  w.app.clock.advance(601_000);
  t.equal((await w.password(names, 'Pw-1')).status, 201, 'the lock runs out');
});

t.test('inactivity: a login recorded outside transactions is seen by cached user lookups', async (t) => {
  const w = await world(t, { IDENTITY_DISABLE_USER_ACCOUNT_DAYS_INACTIVE: '2' });
  const { app } = w;
  // The admin must stay usable across the days this test skips.
  await app.call('PATCH', '/v3/users/' + (await app.call('GET', '/v3/users?name=admin')).json().users[0].id, { user: { options: { ignore_user_inactivity: true } } });
  const names = { user: 'cache-user', domain: 'cache-domain', project: 'cache-project' };
  const noon = Math.floor(app.clock.now() / DAY) * DAY + DAY / 2;
  app.clock.set(noon);
  t.equal((await w.password(names, 'Pw-1')).status, 201, 'day 0: a login');
  t.equal((await w.apiKey()).status, 201, 'day 0: the user row is cached with that activity');
  app.clock.set(noon + DAY);
  t.equal((await w.password(names, 'Pw-1')).status, 201, 'day 1: a login (no new data generation)');
  app.clock.set(noon + 2 * DAY);
  t.equal((await w.apiKey()).status, 201, 'day 2: active since day 1, although the cached row says day 0');
  app.clock.set(noon + 3 * DAY);
  t.equal((await w.apiKey()).status, 401, 'day 3: inactive for 2 days');
  t.equal((await w.password(names, 'Pw-1')).status, 401);
});

t.test('validation and API-key issue make no database query on a cache hit', async (t) => {
  const w = await world(t);
  const { app } = w;
  const issued = await w.apiKey();
  t.equal(issued.status, 201);
  const validate = () => app.request({ method: 'GET', url: '/v3/auth/tokens', headers: { 'x-auth-token': app.adminToken, 'x-subject-token': issued.token } });
  const catalog = () => app.request({ method: 'GET', url: '/v3/auth/catalog', headers: { 'x-auth-token': issued.token } });
  const names = { user: 'cache-user', domain: 'cache-domain', project: 'cache-project' };
  for (let i = 0; i < 2; i++) {
    t.equal((await w.password(names, 'Pw-1')).status, 201);
    t.equal((await w.apiKey()).status, 201);
    t.equal((await validate()).statusCode, 200);
    t.equal((await catalog()).statusCode, 200);
  }
  const queries: string[] = [];
  const config = app.app.store.orm.config;
  const previous = config.get('onQuery');
  config.set('onQuery', (sql: string, params: readonly unknown[]) => {
    queries.push(sql);
    return previous(sql, params as unknown[]);
  });
  t.teardown(() => config.set('onQuery', previous));
  t.equal((await w.apiKey()).status, 201);
  t.same(queries, [], 'API-key issue');
  t.equal((await validate()).statusCode, 200);
  t.same(queries, [], 'validation');
  t.equal((await catalog()).statusCode, 200);
  t.same(queries, [], 'catalog');
  t.equal((await w.password(names, 'Pw-1')).status, 201);
  t.ok(queries.length > 0 && queries.every((sql) => /identity_user/.test(sql)), `password issue reads only the user row (lockout counters): ${queries.join('; ')}`);
});

t.test('LoadingCache: one load per key and generation, nothing kept across a change', async (t) => {
  const epoch = { generation: 1, cachesTrusted: true };
  const cache = new LoadingCache<string, number>(2, epoch satisfies CacheEpoch);
  let loads = 0;
  let release: () => void = () => {};
  const slow = () => {
    loads++;
    return new Promise<number>((resolve) => {
      release = () => resolve(loads);
    });
  };
  const first = cache.get('a', slow);
  const second = cache.get('a', slow);
  release();
  t.same(await Promise.all([first, second]), [1, 1], 'concurrent misses share one load');
  t.equal(await cache.get('a', slow), 1, 'then it is a hit');
  t.equal(loads, 1);

  epoch.generation++;
  const straddling = cache.get('a', slow);
  epoch.generation++;
  const afterChange = cache.get('a', slow);
  t.equal(loads, 3, 'a miss after a change does not join a load of the previous generation');
  release();
  t.equal(await afterChange, 3);
  t.equal(loads, 3);

  epoch.generation++;
  const straddler = cache.get('b', async () => {
    loads++;
    epoch.generation++;
    return 7;
  });
  t.equal(await straddler, 7, 'a load that straddled a change is returned');
  t.equal(await cache.get('b', async () => 8), 8, 'but not kept');
  void straddling;

  await t.rejects(cache.get('c', async () => Promise.reject(new Error('down'))));
  t.equal(await cache.get('c', async () => 9), 9, 'a failed load is not kept');
  t.equal(await cache.reload('c', async () => 10), 10, 'reload replaces');
  t.equal(await cache.get('c', async () => 11), 10);

  epoch.cachesTrusted = false;
  t.equal(await cache.get('c', async () => 12), 12, 'nothing is used while caches are not trusted');
  t.equal(await cache.get('c', async () => 13), 13);
  epoch.cachesTrusted = true;
  t.ok(cache.size <= 2, 'bounded');

  const uncached = new LoadingCache<string, number>(10, undefined);
  let n = 0;
  await uncached.get('x', async () => ++n);
  t.equal(await uncached.get('x', async () => ++n), 2, 'no epoch: no caching');
});

t.test('two nodes sharing PostgreSQL and Redis: a change on one reaches the other node\'s issue caches', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const redis = await startRedis();
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-issue-caches-'));
  const nodes: Application[] = [];
  t.teardown(async () => {
    for (const node of nodes) await node.close();
    await redis.stop();
    await database.drop();
    fs.rmSync(shared, { recursive: true, force: true });
  });
  const config = loadConfig({
    ...NO_RATE_LIMITS,
    DATABASE_URL: database.url!,
    REDIS_URL: redis.url,
    DATA_DIR: shared,
    PASSWORD_HASH_ROUNDS: '4',
    LOG_LEVEL: 'silent',
    SECRET_PEPPER: 'a-pepper-both-nodes-of-this-test-share-0123456789',
  });
  nodes.push(await buildApplication(config, { logger: false }));
  await bootstrap(nodes[0]!, { adminPassword: ADMIN_PASSWORD, publicUrl: config.publicUrl });
  nodes.push(await buildApplication(config, { logger: false }));
  const [a, b] = nodes as [Application, Application];
  const call = async (node: Application, method: 'GET' | 'POST' | 'PATCH' | 'PUT', url: string, body?: unknown, token?: string) => {
    const response = await node.server.inject({
      method,
      url,
      headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...(token ? { 'x-auth-token': token } : {}) },
      ...(body ? { payload: JSON.stringify(body) } : {}),
    });
    return { status: response.statusCode, body: response.body ? response.json() : undefined, token: String(response.headers['x-subject-token'] ?? '') };
  };
  const passwordAuth = (user: Record<string, unknown>, password: string, scope: unknown) => ({
    auth: { identity: { methods: ['password'], password: { user: { ...user, password } } }, scope },
  });
  const adminLogin = await call(a, 'POST', '/v3/auth/tokens', passwordAuth({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { system: { all: true } }));
  t.equal(adminLogin.status, 201, 'the admin logs in on A', { body: adminLogin.body });
  const admin = adminLogin.token;
  const member = (await call(a, 'GET', '/v3/roles?name=member', undefined, admin)).body.roles[0].id;
  const project = (await call(a, 'POST', '/v3/projects', { project: { name: 'two-nodes' } }, admin)).body.project;
  const user = (await call(a, 'POST', '/v3/users', { user: { name: 'two-nodes-user', password: 'Pw-1' } }, admin)).body.user;
  await call(a, 'PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member}`, undefined, admin);
  const session = (await call(a, 'POST', '/v3/auth/tokens', passwordAuth({ id: user.id }, 'Pw-1', { project: { id: project.id } }))).token;
  const credential = (await call(a, 'POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'k' } }, session)).body
    .application_credential;
  const apiKey = async (node: Application) =>
    (await call(node, 'POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: credential.secret } } } }))
      .status;
  const password = async (node: Application, secret: string) =>
    (await call(node, 'POST', '/v3/auth/tokens', passwordAuth({ name: 'two-nodes-user', domain: { id: 'default' } }, secret, { project: { id: project.id } }))).status;

  await waitFor(async () => (await apiKey(b)) === 201, 'B to issue for the credential created on A');
  t.equal(await apiKey(b), 201, 'B has the credential, user and project cached');
  t.equal(await password(b, 'Pw-1'), 201);

  t.equal((await call(a, 'PATCH', `/v3/users/${user.id}`, { user: { password: 'Pw-2' } }, admin)).status, 200);
  await waitFor(async () => (await password(b, 'Pw-1')) === 401, 'B to refuse the password changed on A', 2000);
  t.equal(await password(b, 'Pw-2'), 201, 'and to accept the new one');

  t.equal((await call(a, 'PATCH', `/v3/projects/${project.id}`, { project: { enabled: false } }, admin)).status, 200);
  await waitFor(async () => (await apiKey(b)) === 401, 'B to refuse API keys of the project disabled on A', 2000);
  t.pass('B refuses the API key of a project disabled on A');
});
