import t from 'tap';
import { LimitEntity, RegisteredLimitEntity } from '../../src/store/entities.ts';
import { describeWrite } from '../../src/http/audit.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

// Keystone's unified limits over HTTP: bodies and links as Keystone 22 answers, its errors, who may
// do what, and what the database holds after a refused list (nothing of it).

const expecting = (attribute: string, target: string) =>
  `Expecting to find ${attribute} in ${target}. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.`;

t.test('registered limits and limits', async (t) => {
  const { call, login, app } = await startTestApp(t);
  const countRegistered = () => app.store.reader().count(RegisteredLimitEntity, {});
  const countLimits = () => app.store.reader().count(LimitEntity, {});
  const service = (await call('POST', '/v3/services', { service: { type: 'compute' } })).json().service;
  await call('POST', '/v3/regions', { region: { id: 'RegionTwo' } });
  const project = (await call('POST', '/v3/projects', { project: { name: 'limited' } })).json().project;

  const model = await call('GET', '/v3/limits/model');
  t.equal(model.statusCode, 200);
  t.same(model.json(), { model: { name: 'flat', description: 'Limit enforcement and validation does not take project hierarchy into consideration.' } });

  // ---- registered limits -------------------------------------------------------------------------
  const created = await call('POST', '/v3/registered_limits', {
    registered_limits: [
      { service_id: service.id, resource_name: 'cores', default_limit: 10 },
      { service_id: service.id, region_id: 'RegionTwo', resource_name: 'ram', default_limit: 100, description: 'memory' },
    ],
  });
  t.equal(created.statusCode, 201);
  t.same(Object.keys(created.json()), ['registered_limits'], 'no collection links on a created list');
  const [cores, ram] = created.json().registered_limits;
  t.same(cores, {
    id: cores.id,
    service_id: service.id,
    region_id: null,
    resource_name: 'cores',
    default_limit: 10,
    description: null,
    links: { self: `${PUBLIC_URL}/v3/registered_limits/${cores.id}` },
  });
  t.same(Object.keys(cores), ['id', 'service_id', 'region_id', 'resource_name', 'default_limit', 'description', 'links'], "Keystone's key order");
  t.match(ram, { region_id: 'RegionTwo', description: 'memory' });

  const duplicate = await call('POST', '/v3/registered_limits', { registered_limits: [{ service_id: service.id, resource_name: 'cores', default_limit: 1 }] });
  t.equal(duplicate.statusCode, 409);
  t.equal(duplicate.json().error.message, 'Conflict occurred attempting to store registered_limit - Duplicate entry.');
  const halfBad = await call('POST', '/v3/registered_limits', {
    registered_limits: [
      { service_id: service.id, resource_name: 'disk', default_limit: 1 },
      { service_id: 'nope', resource_name: 'x', default_limit: 1 },
    ],
  });
  t.equal(halfBad.statusCode, 400);
  t.equal(halfBad.json().error.message, expecting('service_id', 'registered_limit'));
  const badRegion = await call('POST', '/v3/registered_limits', { registered_limits: [{ service_id: service.id, region_id: 'nope', resource_name: 'x', default_limit: 1 }] });
  t.equal(badRegion.json().error.message, expecting('region_id', 'registered_limit'));
  t.equal(await countRegistered(), 2, 'nothing of a refused list is written');
  for (const body of [
    { registered_limits: [] },
    { registered_limit: {} },
    { registered_limits: [{ service_id: service.id, resource_name: 'x', default_limit: -2 }] },
    { registered_limits: [{ service_id: service.id, resource_name: 'x', default_limit: 1.5 }] },
    { registered_limits: [{ service_id: service.id, resource_name: '', default_limit: 1 }] },
    { registered_limits: [{ service_id: service.id, resource_name: 'x' }] },
    { registered_limits: [{ service_id: service.id, resource_name: 'x', default_limit: 1, extra: 1 }] },
  ]) {
    t.equal((await call('POST', '/v3/registered_limits', body)).statusCode, 400, JSON.stringify(body));
  }
  t.equal((await call('POST', '/v3/registered_limits', { registered_limits: [{ service_id: service.id, resource_name: 'unlimited', default_limit: -1 }] })).statusCode, 201, '-1: no limit');

  const list = await call('GET', `/v3/registered_limits?service_id=${service.id}&resource_name=cores`);
  t.equal(list.statusCode, 200);
  t.same(list.json().registered_limits.map((r: { id: string }) => r.id), [cores.id]);
  t.same(list.json().links, { self: `${PUBLIC_URL}/v3/registered_limits?service_id=${service.id}&resource_name=cores`, previous: null, next: null });
  t.same((await call('GET', '/v3/registered_limits?region_id=RegionTwo')).json().registered_limits.map((r: { id: string }) => r.id), [ram.id]);
  t.same((await call('GET', `/v3/registered_limits/${ram.id}`)).json().registered_limit, ram);
  const missing = await call('GET', '/v3/registered_limits/nope');
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, 'Could not find registered limit for nope.');

  const patched = await call('PATCH', `/v3/registered_limits/${ram.id}`, { registered_limit: { default_limit: 200, region_id: null, description: null } });
  t.equal(patched.statusCode, 200);
  t.match(patched.json().registered_limit, { default_limit: 200, region_id: null, description: null });
  t.equal((await call('PATCH', `/v3/registered_limits/${ram.id}`, { registered_limit: { id: 'x' } })).statusCode, 400);
  t.equal((await call('PATCH', `/v3/registered_limits/${ram.id}`, { registered_limit: { resource_name: 'cores' } })).statusCode, 409);
  t.equal((await call('PATCH', '/v3/registered_limits/nope', { registered_limit: { default_limit: 1 } })).statusCode, 404);

  // ---- limits ------------------------------------------------------------------------------------
  const limits = await call('POST', '/v3/limits', {
    limits: [
      { project_id: project.id, service_id: service.id, resource_name: 'cores', resource_limit: 5 },
      { domain_id: 'default', service_id: service.id, resource_name: 'ram', resource_limit: 50, description: 'domain' },
    ],
  });
  t.equal(limits.statusCode, 201);
  t.same(Object.keys(limits.json()), ['limits']);
  const [mine, ofDomain] = limits.json().limits;
  t.same(Object.keys(mine), ['id', 'project_id', 'domain_id', 'resource_limit', 'description', 'service_id', 'region_id', 'resource_name', 'links']);
  t.match(mine, { project_id: project.id, domain_id: null, resource_limit: 5, description: null, region_id: null, links: { self: `${PUBLIC_URL}/v3/limits/${mine.id}` } });
  t.match(ofDomain, { project_id: null, domain_id: 'default', description: 'domain' });

  const noRegistered = await call('POST', '/v3/limits', { limits: [{ project_id: project.id, service_id: service.id, resource_name: 'gpus', resource_limit: 1 }] });
  t.equal(noRegistered.statusCode, 403);
  t.equal(noRegistered.json().error.message, 'Unable to create a limit that has no corresponding registered limit.');
  const again = await call('POST', '/v3/limits', { limits: [{ project_id: project.id, service_id: service.id, resource_name: 'cores', resource_limit: 1 }] });
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.message, 'Conflict occurred attempting to store limit - Duplicate entry.');
  const unknownProject = await call('POST', '/v3/limits', {
    limits: [
      { domain_id: 'default', service_id: service.id, resource_name: 'unlimited', resource_limit: 1 },
      { project_id: 'nope', service_id: service.id, resource_name: 'cores', resource_limit: 1 },
    ],
  });
  t.equal(unknownProject.statusCode, 400);
  t.equal(unknownProject.json().error.message, expecting('project_id', 'limit'));
  t.equal((await call('POST', '/v3/limits', { limits: [{ domain_id: project.id, service_id: service.id, resource_name: 'cores', resource_limit: 1 }] })).json().error.message, expecting('domain_id', 'limit'));
  for (const body of [
    { limits: [{ project_id: project.id, domain_id: 'default', service_id: service.id, resource_name: 'cores', resource_limit: 1 }] },
    { limits: [{ service_id: service.id, resource_name: 'cores', resource_limit: 1 }] },
    { limits: [{ project_id: project.id, service_id: service.id, region_id: null, resource_name: 'cores', resource_limit: 1 }] },
    { limits: [] },
  ]) {
    t.equal((await call('POST', '/v3/limits', body)).statusCode, 400, JSON.stringify(body));
  }
  t.equal(await countLimits(), 2, 'nothing of a refused list is written');

  // The admin's token is scoped to the admin project: Keystone lists only that project's limits.
  t.same((await call('GET', '/v3/limits')).json().limits, []);
  t.same((await call('GET', `/v3/limits/${mine.id}`)).json().limit, mine, 'but reads any one');
  const missingLimit = await call('GET', '/v3/limits/nope');
  t.equal(missingLimit.statusCode, 404);
  t.equal(missingLimit.json().error.message, 'Could not find limit for nope.');

  const patchedLimit = await call('PATCH', `/v3/limits/${mine.id}`, { limit: { resource_limit: 7, description: 'seven' } });
  t.match(patchedLimit.json().limit, { resource_limit: 7, description: 'seven' });
  t.equal((await call('PATCH', `/v3/limits/${mine.id}`, { limit: { resource_name: 'x' } })).statusCode, 400);
  t.equal((await call('PATCH', `/v3/limits/${mine.id}`, { limit: {} })).statusCode, 200);

  const held = await call('PATCH', `/v3/registered_limits/${cores.id}`, { registered_limit: { default_limit: 11 } });
  t.equal(held.statusCode, 403);
  t.equal(held.json().error.message, `Unable to update or delete registered limit ${cores.id} because there are project limits associated with it.`);
  t.equal((await call('DELETE', `/v3/registered_limits/${cores.id}`)).statusCode, 403);

  // A member of the project reads registered limits and its own limits, and changes nothing.
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const user = (await call('POST', '/v3/users', { user: { name: 'limited-user', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`);
  const member = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  t.same((await call('GET', '/v3/limits', undefined, member)).json().limits.map((l: { id: string }) => l.id), [mine.id]);
  t.equal((await call('GET', `/v3/registered_limits/${cores.id}`, undefined, member)).statusCode, 200);
  t.equal((await call('GET', '/v3/limits/model', undefined, member)).statusCode, 200);
  const denied = await call('POST', '/v3/limits', { limits: [{ project_id: project.id, service_id: service.id, resource_name: 'unlimited', resource_limit: 1 }] }, member);
  t.equal(denied.statusCode, 403);
  t.equal(denied.json().error.message, 'You are not authorized to perform the requested action: identity:create_limits.');
  t.equal((await call('DELETE', `/v3/limits/${mine.id}`, undefined, member)).statusCode, 403);
  t.equal((await call('GET', '/v3/limits', undefined, null)).statusCode, 401);

  t.equal((await call('DELETE', `/v3/limits/${mine.id}`)).statusCode, 204);
  t.equal((await call('DELETE', `/v3/limits/${mine.id}`)).statusCode, 404);
  t.equal((await call('DELETE', `/v3/registered_limits/${cores.id}`)).statusCode, 204);

  // A project deleted takes its limits.
  const [gone] = (await call('POST', '/v3/limits', { limits: [{ project_id: project.id, service_id: service.id, resource_name: 'unlimited', resource_limit: 1 }] })).json().limits;
  await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: false } });
  t.equal((await call('DELETE', `/v3/projects/${project.id}`)).statusCode, 204);
  t.equal((await call('GET', `/v3/limits/${gone.id}`)).statusCode, 404);
});

t.test('audit: one event per limit made, as Keystone sends them', async (t) => {
  const body = () => ({ limits: [{ id: 'a' }, { id: 'b' }] });
  t.same(describeWrite('POST', '/v3/limits', {}, body), [
    { kind: 'resource', operation: 'created', type: 'limit', id: 'a' },
    { kind: 'resource', operation: 'created', type: 'limit', id: 'b' },
  ]);
  t.same(describeWrite('POST', '/v3/registered_limits', {}, () => ({ registered_limits: [{ id: 'r' }] })), [
    { kind: 'resource', operation: 'created', type: 'registered_limit', id: 'r' },
  ]);
  t.same(describeWrite('PATCH', '/v3/registered_limits/:registered_limit_id', { registered_limit_id: 'r' }, () => undefined), {
    kind: 'resource',
    operation: 'updated',
    type: 'registered_limit',
    id: 'r',
  });
  t.same(describeWrite('DELETE', '/v3/limits/:limit_id', { limit_id: 'a' }, () => undefined), { kind: 'resource', operation: 'deleted', type: 'limit', id: 'a' });
});
