import t from 'tap';
import { startTestApp } from '../helpers/app.ts';
import { ServiceEntity } from '../../src/store/entities.ts';

// Typed change events on a real service and database: a committed write drops the caches holding
// what it changed (read from the statements the transaction sent: flushes, native deletes and raw
// SQL alike), and only those.

t.test('a catalog write keeps validated tokens; identity and membership writes drop them', async (t) => {
  const testApp = await startTestApp(t);
  const { app, call, login } = testApp;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'p' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'u', password: 'Pw-1' } })).json().user;
  const group = (await call('POST', '/v3/groups', { group: { name: 'g' } })).json().group;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  t.equal((await call('PUT', `/v3/groups/${group.id}/users/${user.id}`)).statusCode, 204);
  const bystander = (await call('POST', '/v3/users', { user: { name: 'bystander' } })).json().user;
  const { token } = await login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  const stats = app.tokens.validationStats;

  /** Validates the token; true when the cache answered. */
  const cached = async () => {
    const hits = stats.cacheHits;
    const misses = stats.cacheMisses;
    await app.tokens.validate(token);
    t.equal(stats.cacheHits + stats.cacheMisses, hits + misses + 1, 'one cacheable validation');
    return stats.cacheHits === hits + 1;
  };
  await cached();
  t.ok(await cached(), 'validated once: cached');

  const service = (await call('POST', '/v3/services', { service: { type: 'other', name: 'other' } })).json().service;
  t.equal((await call('PATCH', `/v3/services/${service.id}`, { service: { description: 'changed' } })).statusCode, 200);
  t.equal((await call('POST', '/v3/regions', { region: { id: 'RegionTwo' } })).statusCode, 201);
  t.ok(await cached(), 'catalog writes (service, region): still cached');

  t.equal((await call('POST', '/v3/projects', { project: { name: 'new' } })).statusCode, 201);
  t.equal((await call('POST', '/v3/users', { user: { name: 'new' } })).statusCode, 201);
  t.ok(await cached(), 'a new project and a new user: still cached (no validated token can refer to them)');

  t.equal((await call('PATCH', `/v3/users/${bystander.id}`, { user: { description: 'changed' } })).statusCode, 200);
  t.notOk(await cached(), 'an identity write: dropped');
  t.ok(await cached(), 'and cached again');

  // Removing a membership is a native delete (no flush): seen all the same. (The bystander's: the
  // user's own would revoke the token, as Keystone does.)
  t.equal((await call('PUT', `/v3/groups/${group.id}/users/${bystander.id}`)).statusCode, 204);
  t.notOk(await cached(), 'a membership added: dropped');
  t.ok(await cached(), 'and cached again');
  t.equal((await call('DELETE', `/v3/groups/${group.id}/users/${bystander.id}`)).statusCode, 204);
  t.notOk(await cached(), 'a membership removed: dropped');
  t.equal((await call('DELETE', `/v3/groups/${group.id}/users/${user.id}`)).statusCode, 204);
  await t.rejects(app.tokens.validate(token), 'the user removed from a group: the token is revoked');
});

t.test('identity writes keep the catalog caches; catalog writes drop them', async (t) => {
  const testApp = await startTestApp(t);
  const { app, call } = testApp;
  const project = (await call('POST', '/v3/projects', { project: { name: 'p' } })).json().project;
  const service = (await call('POST', '/v3/services', { service: { type: 'compute', name: 'nova' } })).json().service;
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'public', region_id: 'RegionOne', url: 'http://nova.test/v2.1/$(project_id)s' } });
  const stats = app.catalog.cacheStats;
  const cached = async () => {
    const hits = stats.hits;
    const catalog = await app.catalog.catalog({ projectId: project.id });
    t.ok(catalog.some((entry) => entry.service.id === service.id), 'the catalog has the service');
    return stats.hits === hits + 1;
  };
  await cached();
  t.ok(await cached(), 'built once: cached');
  const user = (await call('POST', '/v3/users', { user: { name: 'u' } })).json().user;
  t.equal((await call('PATCH', `/v3/users/${user.id}`, { user: { description: 'changed' } })).statusCode, 200);
  t.equal((await call('PATCH', `/v3/projects/${project.id}`, { project: { description: 'changed' } })).statusCode, 200);
  t.ok(await cached(), 'user and project writes: still cached');
  t.equal((await call('PATCH', `/v3/services/${service.id}`, { service: { description: 'changed' } })).statusCode, 200);
  t.notOk(await cached(), 'a catalog write: built again');
});

t.test('a change left to the commit to flush raises its topic too', async (t) => {
  const { app, call } = await startTestApp(t);
  const service = (await call('POST', '/v3/services', { service: { type: 'compute', name: 'nova' } })).json().service;
  const heard: string[][] = [];
  app.store.onCommit((_em, writes) => heard.push([...(writes?.tables.keys() ?? [])]));
  // A managed entity changed and not flushed by the work itself: MikroORM flushes it on commit.
  await app.store.transaction(async (em) => {
    const row = await em.findOneOrFail(ServiceEntity, { id: service.id });
    row.description = 'changed without a flush';
  });
  t.same(heard.at(-1), ['service'], 'the commit listeners heard the service written');
  const stored = await app.store.reader().findOneOrFail(ServiceEntity, { id: service.id });
  t.equal(stored.description, 'changed without a flush', 'and it was written');
});
