import t from 'tap';
import type { AccessEpoch } from '../../src/events/access-epoch.ts';
import { ClusterSync, STALE_VALIDATION_MESSAGE } from '../../src/events/cluster-sync.ts';
import { RedisEventBus, type ClusterMessage, type EventBus } from '../../src/events/event-bus.ts';
import type { Revocations } from '../../src/events/revocation.ts';
import type { EntityManager, Store } from '../../src/store/database.ts';
import { DatabaseHealth } from '../../src/store/database-health.ts';
import { startOtherNode, startTestApp } from '../helpers/app.ts';
import { ManualClock } from '../helpers/clock.ts';
import { LOCAL_POSTGRES } from '../helpers/database.ts';
import { waitFor } from '../helpers/processes.ts';
import { TEST_REDIS_URL, testRedis } from '../helpers/redis.ts';
import { FakeBus } from '../helpers/event-bus.ts';

// A change that takes roles away without a revocation event (one of several roles removed) reaches
// the other nodes through its Redis message, which is best effort; the access_epoch counter it bumps
// is what their revocation poll reads, so a node that missed the message still re-reads roles.

t.test('a node that missed the message of a role removal re-reads roles within a poll interval', async (t) => {
  const redis = await testRedis(t);
  if (!redis) {
    t.fail('no Redis at TEST_REDIS_URL');
    return;
  }
  // The writer has no Redis: none of its commits is announced, as when its publisher is not ready.
  const writer = await startTestApp(t, {}, { databaseServer: process.env.TEST_DATABASE_URL || LOCAL_POSTGRES });
  const reader = await startOtherNode(t, writer, { REDIS_URL: TEST_REDIS_URL, REDIS_EVENTS_CHANNEL: `${redis.prefix}events`, REVOCATION_POLL_INTERVAL_MS: '100' });

  const { call, login } = writer;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'epoch-p' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'epoch-u', password: 'Pw-1' } })).json().user;
  for (const role of ['member', 'reader']) t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles[role]}`)).statusCode, 204);
  const session = await login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(session.status, 201);

  const validateOnReader = async () => {
    const answer = await reader.server.inject({
      method: 'GET',
      url: '/v3/auth/tokens',
      headers: { 'x-auth-token': writer.adminToken, 'x-subject-token': session.token },
    });
    return { status: answer.statusCode, roles: answer.statusCode === 200 ? answer.json().token.roles.map((r: { name: string }) => r.name).sort() : [] };
  };
  t.same(await validateOnReader(), { status: 200, roles: ['member', 'reader'] });
  const tokenService = reader.tokens;
  const hitsBefore = tokenService.validationStats.cacheHits;
  t.same(await validateOnReader(), { status: 200, roles: ['member', 'reader'] });
  t.ok(tokenService.validationStats.cacheHits > hitsBefore, 'the reader answers from its cache');

  t.equal((await call('DELETE', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  t.same((await call('GET', '/v3/OS-REVOKE/events')).json().events.filter((e: { user_id?: string }) => e.user_id === user.id), [], 'no revocation event');
  await waitFor(async () => (await validateOnReader()).roles.join() === 'reader', 'the reader to drop the removed role', 10_000);
  t.same(await validateOnReader(), { status: 200, roles: ['reader'] }, 'the reader carries the role that remains');
});

// ---- a node cut off from the database ------------------------------------------------------

t.test('while the database is unreachable, a newer access epoch from another node stops last-known validations until it is back', async (t) => {
  const listeners: ((em: EntityManager) => void)[] = [];
  const probe = { fails: false };
  const health = new DatabaseHealth(async () => {
    if (probe.fails) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  }, { probeIntervalMs: 1000 });
  health.start();
  t.teardown(() => health.stop());
  const store = { onCommit: (listener: (em: EntityManager) => void) => listeners.push(listener), health } as unknown as Store;
  const revocations = { catchUp: async () => 0, eventRecordedIn: () => undefined, eventsRecordedIn: () => [], apply: () => {} };
  const epoch = { value: 3, read: async () => epoch.value, bumpedIn: (em: object) => (em === bumping ? 4 : undefined) };
  const bumping = {};
  const bus = new FakeBus();
  const sync = new ClusterSync(store, revocations as unknown as Revocations, bus, { error: () => {} }, {
    clock: new ManualClock(),
    staleValidationMaxMs: 300_000,
    accessEpoch: epoch as unknown as AccessEpoch,
  });
  sync.start();

  // The poll reads the epoch: a new value drops what caches hold.
  let generation = sync.generation;
  await sync.checkAccessEpoch();
  t.not(sync.generation, generation, 'the first read drops caches');
  generation = sync.generation;
  await sync.checkAccessEpoch();
  t.equal(sync.generation, generation, 'the same value changes nothing');
  epoch.value = 4;
  await sync.checkAccessEpoch();
  t.not(sync.generation, generation, 'a newer one drops caches');

  // A commit that bumped the epoch says so in its message; one that did not, does not.
  listeners.forEach((listener) => listener(bumping as EntityManager));
  listeners.forEach((listener) => listener({} as EntityManager));
  t.same(bus.published, [{ type: 'changed', accessEpoch: 4 }, { type: 'changed' }]);

  probe.fails = true;
  health.markUnreachable('database read timeout');
  t.equal(sync.cachesReady, true, 'cut off from the database, Redis up: last-known validations served');
  bus.handlers!.message({ type: 'changed' });
  bus.handlers!.message({ type: 'changed', accessEpoch: 4 });
  t.equal(sync.cachesReady, true, 'a change that took nothing away, or an epoch already seen: still served');
  t.equal(await sync.prepareValidation(), true);

  bus.handlers!.message({ type: 'changed', accessEpoch: 5 });
  t.equal(sync.cachesReady, false, 'another node took access away: nothing served from what this node validated before');
  await t.rejects(sync.prepareValidation(), { message: STALE_VALIDATION_MESSAGE }, 'a 503 (UnavailableError)');

  probe.fails = false;
  await waitFor(async () => sync.cachesReady, 'the database to be reachable again', 10_000);
  t.equal(await sync.prepareValidation(), true, 'served again once the database is back');
});

t.test('every change that takes roles away without a revocation event bumps the access epoch; grants do not', async (t) => {
  const app = await startTestApp(t);
  const { call } = app;
  const epoch = async () => Number((await app.app.store.reader().execute<{ value: string }[]>('select value from access_epoch'))[0]!.value);
  const project = (await call('POST', '/v3/projects', { project: { name: 'epoch-paths' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'epoch-paths-u', password: 'Pw-1' } })).json().user;
  const group = (await call('POST', '/v3/groups', { group: { name: 'epoch-paths-g' } })).json().group;
  const role = async (name: string) => (await call('POST', '/v3/roles', { role: { name } })).json().role.id as string;
  const [a, b, c] = [await role('epoch-a'), await role('epoch-b'), await role('epoch-c')];
  const steps: [string, string, string, boolean][] = [
    ['PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${a}`, 'user project grant', false],
    ['PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${b}`, 'another', false],
    ['DELETE', `/v3/projects/${project.id}/users/${user.id}/roles/${b}`, 'user project grant removed, another left', true],
    ['PUT', `/v3/OS-INHERIT/domains/default/users/${user.id}/roles/${b}/inherited_to_projects`, 'inherited domain grant', false],
    ['DELETE', `/v3/OS-INHERIT/domains/default/users/${user.id}/roles/${b}/inherited_to_projects`, 'inherited domain grant removed', true],
    ['PUT', `/v3/domains/default/groups/${group.id}/roles/${c}`, 'group domain grant', false],
    ['DELETE', `/v3/domains/default/groups/${group.id}/roles/${c}`, 'group domain grant removed', true],
    ['PUT', `/v3/system/users/${user.id}/roles/${c}`, 'system grant', false],
    ['DELETE', `/v3/system/users/${user.id}/roles/${c}`, 'system grant removed', true],
    ['PUT', `/v3/groups/${group.id}/users/${user.id}`, 'membership', false],
    ['DELETE', `/v3/groups/${group.id}/users/${user.id}`, 'membership removed', true],
    ['PUT', `/v3/roles/${a}/implies/${c}`, 'implication', false],
    ['DELETE', `/v3/roles/${a}/implies/${c}`, 'implication removed', true],
    ['DELETE', `/v3/roles/${b}`, 'role deleted', true],
    ['DELETE', `/v3/groups/${group.id}`, 'group deleted', true],
    ['DELETE', `/v3/projects/${project.id}/users/${user.id}/roles/${a}`, 'the last role removed: a revocation event instead', false],
    ['PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${a}`, 'granted again', false],
  ];
  for (const [method, url, what, bumps] of steps) {
    const before = await epoch();
    const answer = await call(method as 'PUT' | 'DELETE', url);
    t.ok(answer.statusCode >= 200 && answer.statusCode < 300, `${what}: ${answer.statusCode} ${answer.body}`);
    t.equal(await epoch(), before + (bumps ? 1 : 0), `${what}: ${bumps ? 'bumped' : 'unchanged'}`);
  }

  // An application credential deleted: its tokens die without a revocation event.
  const session = await app.login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(session.status, 201);
  const before = await epoch();
  const credential = await call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'epoch-ac' } }, session.token);
  t.equal(credential.statusCode, 201);
  t.equal(await epoch(), before, 'a credential created: unchanged');
  const deleted = await call('DELETE', `/v3/users/${user.id}/application_credentials/${credential.json().application_credential.id}`, undefined, session.token);
  t.equal(deleted.statusCode, 204);
  t.equal(await epoch(), before + 1, 'a credential deleted: bumped');
});

t.test('the access epoch crosses Redis with the commit message; a malformed one is dropped', async (t) => {
  const redis = await testRedis(t);
  if (!redis) {
    t.fail('no Redis at TEST_REDIS_URL');
    return;
  }
  const log = { warn: () => {}, info: () => {} };
  const channel = `${redis.prefix}events`;
  const receiver = new RedisEventBus(TEST_REDIS_URL, log, { channel });
  const sender = new RedisEventBus(TEST_REDIS_URL, log, { channel });
  t.teardown(async () => {
    await receiver.close();
    await sender.close();
  });
  const received: ClusterMessage[] = [];
  let subscribed = 0;
  receiver.subscribe({ message: (message) => received.push(message), reconnected: () => subscribed++ });
  sender.subscribe({ message: () => {}, reconnected: () => {} });
  await waitFor(async () => receiver.connected && sender.connected && subscribed >= 1, 'both buses to subscribe', 10_000);
  sender.publish({ type: 'changed', accessEpoch: 7 });
  sender.publish({ type: 'revoked', eventId: 3, accessEpoch: 8 });
  sender.publish({ type: 'changed', accessEpoch: 'nine' as unknown as number });
  await waitFor(async () => received.length === 3, 'three messages', 5_000);
  t.same(received, [{ type: 'changed', accessEpoch: 7 }, { type: 'revoked', eventId: 3, accessEpoch: 8 }, { type: 'changed' }]);
});
