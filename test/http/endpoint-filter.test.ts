import t from 'tap';
import { EndpointGroupEntity, ProjectEndpointEntity, ProjectEndpointGroupEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';
import { gatewayWorld } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

const EP = '/v3/OS-EP-FILTER';

interface CatalogService {
  id: string;
  type: string;
  endpoints: { id: string; interface: string }[];
}

/** A project in Default with the admin holding `admin` on it, two services, three endpoints. */
async function world(test: TestApp) {
  const { call } = test;
  const project = (await call('POST', '/v3/projects', { project: { name: 'filtered', domain_id: 'default' } })).json().project;
  const admin = (await call('GET', '/v3/users?name=admin')).json().users[0];
  const role = (await call('GET', '/v3/roles?name=admin')).json().roles[0];
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${admin.id}/roles/${role.id}`)).statusCode, 204);
  const compute = (await call('POST', '/v3/services', { service: { type: 'compute', name: 'nova' } })).json().service;
  const volume = (await call('POST', '/v3/services', { service: { type: 'volume', name: 'cinder' } })).json().service;
  const endpoint = async (service: string, face: string, url: string) =>
    (await call('POST', '/v3/endpoints', { endpoint: { service_id: service, interface: face, url, region_id: 'RegionOne' } })).json().endpoint;
  const computePublic = await endpoint(compute.id, 'public', 'http://nova.test/v2.1');
  const computeInternal = await endpoint(compute.id, 'internal', 'http://nova.internal/v2.1');
  const volumePublic = await endpoint(volume.id, 'public', 'http://cinder.test/v3/$(project_id)s');
  const token = async () => test.login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { project: { id: project.id } });
  return { project, admin, compute, volume, computePublic, computeInternal, volumePublic, token };
}

async function catalogOf(test: TestApp, token: string): Promise<CatalogService[]> {
  const answer = await test.call('GET', '/v3/auth/catalog', undefined, token);
  t.equal(answer.statusCode, 200);
  return answer.json().catalog;
}

const ids = (list: { id: string }[]) => list.map((item) => item.id).sort();
const endpointIds = (catalog: CatalogService[]) => catalog.flatMap((service) => service.endpoints.map((endpoint) => endpoint.id)).sort();

t.test('endpoint groups: CRUD as Keystone 22 answers it', async (t) => {
  const test = await startTestApp(t);
  const { call, app } = test;
  const w = await world(test);

  t.same((await call('GET', `${EP}/endpoint_groups`)).json(), {
    endpoint_groups: [],
    links: { self: `${PUBLIC_URL}${EP}/endpoint_groups`, previous: null, next: null },
  });
  const created = await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'g1', description: 'd', filters: { interface: 'public' } } });
  t.equal(created.statusCode, 201);
  const group = created.json().endpoint_group;
  t.match(group.id, /^[0-9a-f]{32}$/);
  t.same(group, { id: group.id, name: 'g1', description: 'd', filters: { interface: 'public' }, links: { self: `${PUBLIC_URL}${EP}/endpoint_groups/${group.id}` } });
  t.same((await call('GET', `${EP}/endpoint_groups/${group.id}`)).json().endpoint_group, group);

  const refusals: [unknown, RegExp | string][] = [
    [{ name: 'x' }, /filters/],
    [{ filters: { interface: 'public' } }, /name/],
    [{ name: 'x', filters: { foo: 'public' } }, 'Expecting to find service_id or region_id or interface in endpoint_group. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.'],
    [{ name: 'x', filters: {} }, 'filters field is required and cannot be empty'],
    [{ name: 'x', filters: { interface: 'bogus' }, extra1: 'e' }, "'extra1' is an invalid keyword argument for EndpointGroup"],
  ];
  for (const [body, message] of refusals) {
    const answer = await call('POST', `${EP}/endpoint_groups`, { endpoint_group: body });
    t.equal(answer.statusCode, 400, JSON.stringify(body));
    if (typeof message === 'string') t.equal(answer.json().error.message, message);
    else t.match(answer.json().error.message, message);
  }
  t.equal(await app.store.reader().count(EndpointGroupEntity, {}), 1, 'nothing refused was stored');

  const missing = await call('GET', `${EP}/endpoint_groups/nope`);
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, 'Could not find Endpoint Group: nope.');

  const patched = await call('PATCH', `${EP}/endpoint_groups/${group.id}`, { endpoint_group: { description: 'd2' } });
  t.equal(patched.statusCode, 200);
  t.same(patched.json().endpoint_group, { ...group, description: 'd2' });
  const badPatch = await call('PATCH', `${EP}/endpoint_groups/${group.id}`, { endpoint_group: { filters: { bad: 'x' } } });
  t.equal(badPatch.statusCode, 400);
  t.match(badPatch.json().error.message, /^Expecting to find service_id or region_id or interface in endpoint_group/);

  const byName = await call('GET', `${EP}/endpoint_groups?name=g1`);
  t.same(ids(byName.json().endpoint_groups), [group.id]);
  t.equal(byName.json().links.self, `${PUBLIC_URL}${EP}/endpoint_groups?name=g1`);
  t.same((await call('GET', `${EP}/endpoint_groups?name=other`)).json().endpoint_groups, []);

  // The endpoints its filters match (every filter must match), enabled or not.
  const computeGroup = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'nova', filters: { service_id: w.compute.id } } })).json().endpoint_group;
  const matched = await call('GET', `${EP}/endpoint_groups/${computeGroup.id}/endpoints`);
  t.equal(matched.statusCode, 200);
  t.same(ids(matched.json().endpoints), ids([w.computePublic, w.computeInternal]));
  t.match(matched.json().endpoints.find((e: { id: string }) => e.id === w.computePublic.id), {
    interface: 'public', region_id: 'RegionOne', region: 'RegionOne', service_id: w.compute.id, url: 'http://nova.test/v2.1', enabled: true,
    links: { self: `${PUBLIC_URL}/v3/endpoints/${w.computePublic.id}` },
  });
  await call('PATCH', `/v3/endpoints/${w.computeInternal.id}`, { endpoint: { enabled: false } });
  const both = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'np', filters: { service_id: w.compute.id, interface: 'internal' } } })).json().endpoint_group;
  t.same(ids((await call('GET', `${EP}/endpoint_groups/${both.id}/endpoints`)).json().endpoints), [w.computeInternal.id], 'a disabled endpoint still matches');
  t.equal((await call('GET', `${EP}/endpoint_groups/nope/endpoints`)).statusCode, 404);
  t.same((await call('GET', `${EP}/endpoint_groups/${group.id}/projects`)).json().projects, []);

  t.equal((await call('DELETE', `${EP}/endpoint_groups/${group.id}`)).statusCode, 204);
  t.equal((await call('GET', `${EP}/endpoint_groups/${group.id}`)).statusCode, 404);
  const again = await call('DELETE', `${EP}/endpoint_groups/${group.id}`);
  t.equal(again.statusCode, 404);
  t.equal(again.json().error.message, `Could not find Endpoint Group: ${group.id}.`);
});

t.test('project ↔ endpoint and project ↔ endpoint group associations', async (t) => {
  const test = await startTestApp(t);
  const { call, app } = test;
  const w = await world(test);
  const P = w.project.id;
  const E = w.computeInternal.id;
  const db = () => app.store.reader();

  const absent = await call('GET', `${EP}/projects/${P}/endpoints/${E}`);
  t.equal(absent.statusCode, 404);
  t.equal(absent.json().error.message, `Endpoint ${E} not found in project ${P}`);
  t.equal((await call('HEAD', `${EP}/projects/${P}/endpoints/${E}`)).statusCode, 404);
  t.equal((await call('PUT', `${EP}/projects/${P}/endpoints/${E}`)).statusCode, 204);
  t.equal(await db().count(ProjectEndpointEntity, { projectId: P, endpointId: E }), 1);
  const duplicate = await call('PUT', `${EP}/projects/${P}/endpoints/${E}`);
  t.equal(duplicate.statusCode, 409);
  t.equal(duplicate.json().error.message, 'Conflict occurred attempting to store project_endpoint - Duplicate entry.');
  t.equal((await call('GET', `${EP}/projects/${P}/endpoints/${E}`)).statusCode, 204);
  const head = await call('HEAD', `${EP}/projects/${P}/endpoints/${E}`);
  t.equal(head.statusCode, 204);
  t.equal(head.body, '');
  const noProject = await call('PUT', `${EP}/projects/nope/endpoints/${E}`);
  t.equal(noProject.statusCode, 404);
  t.equal(noProject.json().error.message, 'Could not find project: nope.');
  const noEndpoint = await call('PUT', `${EP}/projects/${P}/endpoints/nope`);
  t.equal(noEndpoint.statusCode, 404);
  t.equal(noEndpoint.json().error.message, 'Could not find endpoint: nope.');

  const listed = await call('GET', `${EP}/projects/${P}/endpoints`);
  t.equal(listed.statusCode, 200);
  t.same(ids(listed.json().endpoints), [E]);
  t.same(listed.json().links, { self: `${PUBLIC_URL}${EP}/projects/${P}/endpoints`, previous: null, next: null });
  t.equal((await call('GET', `${EP}/projects/nope/endpoints`)).json().error.message, 'Could not find project: nope.');
  const projects = await call('GET', `${EP}/endpoints/${E}/projects`);
  t.equal(projects.statusCode, 200);
  t.match(projects.json().projects, [{ id: P, name: 'filtered', domain_id: 'default', links: { self: `${PUBLIC_URL}/v3/projects/${P}` } }]);
  t.equal((await call('GET', `${EP}/endpoints/nope/projects`)).json().error.message, 'Could not find endpoint: nope.');

  // Endpoint groups.
  const group = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'public', filters: { interface: 'public' } } })).json().endpoint_group;
  const G = group.id;
  t.equal((await call('PUT', `${EP}/endpoint_groups/${G}/projects/${P}`)).statusCode, 204);
  t.equal(await db().count(ProjectEndpointGroupEntity, { projectId: P, endpointGroupId: G }), 1);
  const dup = await call('PUT', `${EP}/endpoint_groups/${G}/projects/${P}`);
  t.equal(dup.statusCode, 409);
  t.equal(dup.json().error.message, 'Conflict occurred attempting to store project_endpoint_group - Duplicate entry.');
  const association = await call('GET', `${EP}/endpoint_groups/${G}/projects/${P}`);
  t.equal(association.statusCode, 200);
  t.same(association.json(), {
    project_endpoint_group: { endpoint_group_id: G, project_id: P, links: { self: `/OS-EP-FILTER/endpoint_groups/${G}/projects/${P}` } },
  });
  t.equal((await call('HEAD', `${EP}/endpoint_groups/${G}/projects/${P}`)).statusCode, 200);
  t.equal((await call('PUT', `${EP}/endpoint_groups/nope/projects/${P}`)).json().error.message, 'Could not find Endpoint Group: nope.');
  t.equal((await call('PUT', `${EP}/endpoint_groups/${G}/projects/nope`)).json().error.message, 'Could not find project: nope.');
  t.equal((await call('GET', `${EP}/endpoint_groups/${G}/projects/nope`)).json().error.message, 'Could not find project: nope.');
  t.match((await call('GET', `${EP}/endpoint_groups/${G}/projects`)).json().projects, [{ id: P }]);
  const groups = await call('GET', `${EP}/projects/${P}/endpoint_groups`);
  t.same(groups.json().endpoint_groups, [group]);
  t.equal((await call('GET', `${EP}/projects/nope/endpoint_groups`)).json().error.message, 'Could not find project: nope.');
  // A project's endpoints: the direct ones, then its groups'.
  const all = (await call('GET', `${EP}/projects/${P}/endpoints`)).json().endpoints;
  t.equal(all[0].id, E, 'direct associations first');
  t.ok(ids(all).includes(w.computePublic.id) && ids(all).includes(w.volumePublic.id));
  t.ok(all.every((endpoint: { id: string; interface: string }) => endpoint.id === E || endpoint.interface === 'public'));

  t.equal((await call('DELETE', `${EP}/endpoint_groups/${G}/projects/${P}`)).statusCode, 204);
  const gone = await call('DELETE', `${EP}/endpoint_groups/${G}/projects/${P}`);
  t.equal(gone.statusCode, 404);
  t.equal(gone.json().error.message, 'Endpoint Group Project Association not found');
  t.equal((await call('GET', `${EP}/endpoint_groups/${G}/projects/${P}`)).json().error.message, 'Endpoint Group Project Association not found');
  t.equal((await call('DELETE', `${EP}/projects/${P}/endpoints/${E}`)).statusCode, 204);
  const goneToo = await call('DELETE', `${EP}/projects/${P}/endpoints/${E}`);
  t.equal(goneToo.statusCode, 404);
  t.equal(goneToo.json().error.message, `Endpoint ${E} not found in project ${P}`);
  t.same((await call('GET', `${EP}/projects/${P}/endpoints`)).json().endpoints, []);

  // Deleting an endpoint, a group or a project takes its associations with it (as Keystone's callbacks do).
  await call('PUT', `${EP}/projects/${P}/endpoints/${E}`);
  await call('PUT', `${EP}/endpoint_groups/${G}/projects/${P}`);
  t.equal((await call('DELETE', `/v3/endpoints/${E}`)).statusCode, 204);
  t.equal(await db().count(ProjectEndpointEntity, {}), 0, 'the endpoint took its associations');
  t.equal((await call('DELETE', `${EP}/endpoint_groups/${G}`)).statusCode, 204);
  t.equal(await db().count(ProjectEndpointGroupEntity, {}), 0, 'the group took its associations');
  const again = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'again', filters: { interface: 'public' } } })).json().endpoint_group;
  await call('PUT', `${EP}/endpoint_groups/${again.id}/projects/${P}`);
  await call('PUT', `${EP}/projects/${P}/endpoints/${w.computePublic.id}`);
  t.equal((await call('DELETE', `/v3/projects/${P}`)).statusCode, 204);
  t.equal(await db().count(ProjectEndpointEntity, {}), 0, 'the project took its endpoint associations');
  t.equal(await db().count(ProjectEndpointGroupEntity, {}), 0, 'and its group associations');
  t.equal((await call('GET', `${EP}/endpoint_groups/${again.id}`)).statusCode, 200, 'the group stays');
});

t.test('a project-scoped catalog holds only the endpoints associated with its project', async (t) => {
  const test = await startTestApp(t);
  const { call } = test;
  const w = await world(test);
  const P = w.project.id;
  const { token, body } = await w.token();
  const full = await catalogOf(test, token);
  t.ok(full.some((service) => service.id === w.volume.id), 'no association: the whole catalog');
  t.same(endpointIds(body.token.catalog), endpointIds(full), 'the token body carries the same catalog');

  // One endpoint: only it, and only its service.
  await call('PUT', `${EP}/projects/${P}/endpoints/${w.computeInternal.id}`);
  let catalog = await catalogOf(test, token);
  t.same(catalog.map((service) => service.id), [w.compute.id], 'services left without endpoints are dropped');
  t.same(endpointIds(catalog), [w.computeInternal.id]);
  const issued = await w.token();
  t.same(endpointIds(issued.body.token.catalog), [w.computeInternal.id], 'a new token body too');

  // And a group: the union.
  const group = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'volume', filters: { service_id: w.volume.id } } })).json().endpoint_group;
  await call('PUT', `${EP}/endpoint_groups/${group.id}/projects/${P}`);
  catalog = await catalogOf(test, token);
  t.same(endpointIds(catalog), [w.computeInternal.id, w.volumePublic.id].sort());
  const volume = catalog.find((service) => service.id === w.volume.id)!;
  t.match(volume.endpoints[0], { url: `http://cinder.test/v3/${P}` }, 'templates still filled');

  // Other projects and domain-scoped tokens are not filtered.
  const adminCatalog = await catalogOf(test, test.adminToken);
  t.same(endpointIds(adminCatalog), endpointIds(full), 'the admin project is not filtered');
  const domainToken = await test.login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { domain: { id: 'default' } });
  if (domainToken.status === 201) {
    const domainCatalog = await catalogOf(test, domainToken.token);
    t.ok(domainCatalog.some((service) => service.type === 'identity'), 'a domain token sees the whole catalog');
  }

  // Associated endpoints that are all disabled: filtered, and empty.
  await call('DELETE', `${EP}/endpoint_groups/${group.id}/projects/${P}`);
  await call('PATCH', `/v3/endpoints/${w.computeInternal.id}`, { endpoint: { enabled: false } });
  t.same(await catalogOf(test, token), [], 'only a disabled endpoint associated: an empty catalog');
  // A group that matches nothing associates nothing: the whole catalog again.
  await call('DELETE', `${EP}/projects/${P}/endpoints/${w.computeInternal.id}`);
  const nothing = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'none', filters: { region_id: 'Nowhere' } } })).json().endpoint_group;
  await call('PUT', `${EP}/endpoint_groups/${nothing.id}/projects/${P}`);
  t.ok((await catalogOf(test, token)).some((service) => service.type === 'identity'), 'a group matching no endpoint filters nothing');
});

t.test('the gateway refuses a project the service is hidden from, as it refuses an unknown service', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  const things = (token: string) => rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } });
  t.equal((await things(w.member)).status, 200, 'no association: every service');
  const seen = w.upstream.received.length;

  // The project sees only the identity service's public endpoint: echo is not in its catalog.
  const identityEndpoint = (await call('GET', '/v3/endpoints?interface=public')).json().endpoints.find((e: { url: string }) => e.url.endsWith('/v3'));
  t.equal((await call('PUT', `${EP}/projects/${w.projectId}/endpoints/${identityEndpoint.id}`)).statusCode, 204);
  const catalog = await catalogOf(w.testApp, w.member);
  t.same(catalog.map((service) => service.type), ['identity'], 'the token\'s catalog has no echo');
  const refused = await things(w.member);
  t.equal(refused.status, 404);
  const unknown = await rawRequest(w.port, { path: '/nothing/v1/x', headers: { 'x-auth-token': w.member } });
  t.equal(unknown.status, 404);
  t.same(JSON.parse(refused.body).error, { code: 404, title: 'Not Found', message: 'Could not find an internal endpoint for service type: echo.' });
  t.same(Object.keys(JSON.parse(refused.body).error), Object.keys(JSON.parse(unknown.body).error), 'the same answer as for a service that does not exist');
  t.equal(w.upstream.received.length, seen, 'nothing reached the upstream');
  // Another project is not filtered; the admin's project neither.
  const other = await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.otherProjectId } });
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.otherProjectId}/things`, headers: { 'x-auth-token': other.token } })).status, 200);

  // A group showing echo's public endpoint: echo is in the catalog again, and reachable (the same token).
  const echo = (await call('GET', '/v3/services?type=echo')).json().services[0];
  const group = (await call('POST', `${EP}/endpoint_groups`, { endpoint_group: { name: 'echo', filters: { service_id: echo.id, interface: 'public' } } })).json().endpoint_group;
  t.equal((await call('PUT', `${EP}/endpoint_groups/${group.id}/projects/${w.projectId}`)).statusCode, 204);
  t.ok((await catalogOf(w.testApp, w.member)).some((service) => service.type === 'echo'));
  t.equal((await things(w.member)).status, 200, 'visible again at once (the association is a catalog write)');
  // Removed again: hidden again.
  t.equal((await call('DELETE', `${EP}/endpoint_groups/${group.id}/projects/${w.projectId}`)).statusCode, 204);
  t.equal((await things(w.member)).status, 404);
  // No association left: the whole catalog.
  t.equal((await call('DELETE', `${EP}/projects/${w.projectId}/endpoints/${identityEndpoint.id}`)).statusCode, 204);
  t.equal((await things(w.member)).status, 200);
});

t.test('the gateway decides from a cache: no database query per request on a hit', async (t) => {
  const w = await gatewayWorld(t);
  const { call, app } = w.testApp;
  const identityEndpoint = (await call('GET', '/v3/endpoints?interface=public')).json().endpoints.find((e: { url: string }) => e.url.endsWith('/v3'));
  await call('PUT', `${EP}/projects/${w.projectId}/endpoints/${identityEndpoint.id}`);
  const things = () => rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.member } });
  t.equal((await things()).status, 404);
  const reader = app.store.reader();
  const queries: string[] = [];
  const knex = (reader as unknown as { getConnection(): { getKnex(): { on(event: string, fn: (q: { sql: string }) => void): void; off(event: string, fn: unknown): void } } }).getConnection().getKnex();
  const listen = (query: { sql: string }) => queries.push(query.sql);
  knex.on('query', listen);
  t.teardown(() => knex.off('query', listen));
  for (let i = 0; i < 5; i++) t.equal((await things()).status, 404);
  t.same(queries, [], 'five refusals, no query');
  const visible = app.catalog.projectServiceTypes(w.projectId);
  t.notOk(visible instanceof Promise, 'answered at once, without a promise (the gateway continues in the same turn)');
  t.same([...(visible as ReadonlySet<string>)], ['identity']);
  // (Awaited: a read left running would outlive the test's database under a slow machine.)
  const unasked = app.catalog.projectServiceTypes(w.otherProjectId);
  t.equal(unasked instanceof Promise, true, 'a project not asked about yet is read once');
  t.equal(await unasked, null, 'not filtered');
  t.equal(app.catalog.projectServiceTypes(w.otherProjectId), null, 'then cached too');
  await call('GET', `${EP}/endpoint_groups`);
  t.ok(queries.length > 0, 'the listener does see the queries of an uncached read');
});
