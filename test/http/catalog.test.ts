import t from 'tap';
import { EndpointEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('regions, services, endpoints', async (t) => {
  const { call, app } = await startTestApp(t);

  const region = await call('POST', '/v3/regions', { region: { id: 'RegionTwo', description: 'second' } });
  t.equal(region.statusCode, 201);
  t.same(region.json().region, { id: 'RegionTwo', description: 'second', parent_region_id: null, links: { self: `${PUBLIC_URL}/v3/regions/RegionTwo` } });
  const duplicate = await call('POST', '/v3/regions', { region: { id: 'RegionTwo' } });
  t.equal(duplicate.statusCode, 409);
  t.equal(duplicate.json().error.message, 'Conflict occurred attempting to store region - Duplicate ID, RegionTwo..');
  const generated = await call('POST', '/v3/regions', {});
  t.match(generated.json().region.id, /^[0-9a-f]{32}$/);
  const put = await call('PUT', '/v3/regions/RegionThree', { region: { parent_region_id: 'RegionTwo' } });
  t.equal(put.statusCode, 201);
  t.equal(put.json().region.parent_region_id, 'RegionTwo');
  t.equal((await call('POST', '/v3/regions', { region: { id: 'x', parent_region_id: 'nope' } })).statusCode, 404);
  const cycle = await call('PATCH', '/v3/regions/RegionTwo', { region: { parent_region_id: 'RegionThree' } });
  t.equal(cycle.statusCode, 400);
  t.equal(cycle.json().error.message, 'The specified parent region RegionTwo would create a circular region hierarchy.');
  t.same((await call('GET', '/v3/regions?parent_region_id=RegionTwo')).json().regions.map((r: { id: string }) => r.id), ['RegionThree']);

  const service = await call('POST', '/v3/services', { service: { type: 'compute' } });
  t.equal(service.statusCode, 201);
  const compute = service.json().service;
  t.match(compute, { type: 'compute', name: '', enabled: true });
  t.notOk('description' in compute);
  t.same((await call('GET', '/v3/services?type=compute')).json().services.map((s: { id: string }) => s.id), [compute.id]);

  const badInterface = await call('POST', '/v3/endpoints', { endpoint: { service_id: compute.id, interface: 'bogus', url: 'http://nova' } });
  t.equal(badInterface.statusCode, 400);
  t.match(badInterface.json().error.message, /interface/);
  const badService = await call('POST', '/v3/endpoints', { endpoint: { service_id: 'nope', interface: 'public', url: 'http://nova' } });
  t.equal(badService.statusCode, 400);
  t.match(badService.json().error.message, /^Expecting to find endpoint service_id in service table/);
  const badRegion = await call('POST', '/v3/endpoints', { endpoint: { service_id: compute.id, interface: 'public', url: 'http://nova', region_id: 'nope' } });
  t.equal(badRegion.statusCode, 400);
  t.equal((await call('POST', '/v3/endpoints', { endpoint: { service_id: compute.id, interface: 'public', url: 'no scheme' } })).statusCode, 400);

  const endpoint = await call('POST', '/v3/endpoints', {
    endpoint: { service_id: compute.id, interface: 'internal', url: 'http://nova:8774/v2.1/$(project_id)s', region_id: 'RegionTwo' },
  });
  t.equal(endpoint.statusCode, 201);
  t.match(endpoint.json().endpoint, { interface: 'internal', region_id: 'RegionTwo', region: 'RegionTwo', service_id: compute.id, enabled: true });
  const legacy = await call('POST', '/v3/endpoints', { endpoint: { service_id: compute.id, interface: 'public', url: 'http://nova', region: 'Elsewhere' } });
  t.equal(legacy.statusCode, 201);
  t.match(legacy.json().endpoint, { region_id: 'Elsewhere', region: 'Elsewhere' });

  t.equal((await call('GET', `/v3/endpoints?service_id=${compute.id}&interface=internal`)).json().endpoints.length, 1);

  const regionInUse = await call('DELETE', '/v3/regions/RegionTwo');
  t.equal(regionInUse.statusCode, 403);
  t.equal(regionInUse.json().error.message, 'Unable to delete region RegionTwo because it or its child regions have associated endpoints.');

  // The catalog of a project token fills in the template; domain tokens drop such endpoints.
  const scoped = await call('GET', '/v3/auth/catalog');
  t.equal(scoped.statusCode, 200);
  const entry = scoped.json().catalog.find((s: { id: string }) => s.id === compute.id);
  const adminProject = (await call('GET', '/v3/projects?name=admin')).json().projects[0];
  t.ok(entry.endpoints.some((e: { url: string }) => e.url === `http://nova:8774/v2.1/${adminProject.id}`));
  const identity = scoped.json().catalog.find((s: { type: string }) => s.type === 'identity');
  t.same(identity.endpoints.map((e: { interface: string }) => e.interface).sort(), ['admin', 'internal', 'public']);
  t.ok(identity.endpoints.every((e: { url: string }) => e.url === `${PUBLIC_URL}/v3`));

  t.equal((await call('PATCH', `/v3/services/${compute.id}`, { service: { enabled: false } })).statusCode, 200);
  t.notOk((await call('GET', '/v3/auth/catalog')).json().catalog.some((s: { id: string }) => s.id === compute.id), 'disabled services leave the catalog');

  t.equal((await call('DELETE', `/v3/services/${compute.id}`)).statusCode, 204);
  t.equal(await app.store.reader().count(EndpointEntity, { serviceId: compute.id }), 0, 'endpoints go with their service');
  t.equal((await call('DELETE', '/v3/regions/RegionTwo')).statusCode, 204);
  t.equal((await call('GET', '/v3/regions/RegionThree')).statusCode, 404, 'its child went with it, as in Keystone');
});

// As the real Keystone 22 answered these (test/e2e/catalog-keystone.test.ts asks it the same).
t.test('regions and endpoints as Keystone 22 answers them', async (t) => {
  const { call } = await startTestApp(t);
  const service = (await call('POST', '/v3/services', { service: { type: 'volume' } })).json().service;
  const endpoint = (body: Record<string, unknown>) => call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'public', url: 'http://cinder', ...body } });

  // A region created with an id (POST or PUT) takes endpoints by region_id and by the legacy region.
  t.equal((await call('POST', '/v3/regions', { region: { id: 'Posted' } })).statusCode, 201);
  t.equal((await call('PUT', '/v3/regions/Put', { region: { description: 'put' } })).statusCode, 201);
  for (const [body, region] of [[{ region_id: 'Posted' }, 'Posted'], [{ region: 'Put' }, 'Put'], [{ region_id: 'Put', region: 'Other' }, 'Put']] as const) {
    const created = await endpoint(body);
    t.equal(created.statusCode, 201, JSON.stringify(body));
    t.match(created.json().endpoint, { region_id: region, region });
  }
  const conflicting = await call('PUT', '/v3/regions/Put2', { region: { id: 'Other' } });
  t.equal(conflicting.statusCode, 400);
  t.equal(conflicting.json().error.message, 'Conflicting region IDs specified: "Put2" != "Other"');
  t.equal((await call('GET', '/v3/regions/Other')).statusCode, 404, 'a legacy region beside a region_id is ignored');

  // The legacy region alone creates the region when it does not exist, on create and on update.
  const legacy = await endpoint({ region: 'Legacy' });
  t.equal(legacy.statusCode, 201);
  t.match(legacy.json().endpoint, { region_id: 'Legacy', region: 'Legacy' });
  t.same((await call('GET', '/v3/regions/Legacy')).json().region, { id: 'Legacy', description: '', parent_region_id: null, links: { self: `${PUBLIC_URL}/v3/regions/Legacy` } });
  const moved = await call('PATCH', `/v3/endpoints/${legacy.json().endpoint.id}`, { endpoint: { region: 'Legacy2' } });
  t.match(moved.json().endpoint, { region_id: 'Legacy2', region: 'Legacy2' });
  t.equal((await call('GET', '/v3/regions/Legacy2')).statusCode, 200);
  const unknown = await endpoint({ region_id: 'Unknown' });
  t.equal(unknown.statusCode, 400);
  t.match(unknown.json().error.message, /^Expecting to find endpoint region_id in region table/);
  for (const body of [{ region_id: null }, { region: null }]) {
    t.equal((await endpoint(body)).statusCode, 400, `create with ${JSON.stringify(body)}`);
    t.equal((await call('PATCH', `/v3/endpoints/${legacy.json().endpoint.id}`, { endpoint: body })).statusCode, 400, `update with ${JSON.stringify(body)}`);
  }
  for (const enabled of ['true', 'False', 1, 0, null, 'yes']) {
    t.equal((await endpoint({ enabled })).statusCode, 400, `enabled ${JSON.stringify(enabled)}`);
  }
  t.equal((await call('PATCH', `/v3/endpoints/${legacy.json().endpoint.id}`, { endpoint: { id: 'other' } })).json().error.message, 'Cannot change ID');

  // Parents: a cycle names the region being updated; deleting a region deletes its subtree.
  await call('POST', '/v3/regions', { region: { id: 'A' } });
  await call('POST', '/v3/regions', { region: { id: 'B', parent_region_id: 'A' } });
  await call('PUT', '/v3/regions/C', { region: { parent_region_id: 'B' } });
  const cycle = await call('PATCH', '/v3/regions/A', { region: { parent_region_id: 'C' } });
  t.equal(cycle.statusCode, 400);
  t.equal(cycle.json().error.message, 'The specified parent region A would create a circular region hierarchy.');
  t.equal((await call('PATCH', '/v3/regions/A', { region: { id: 'Z' } })).json().error.message, 'Cannot change ID');
  t.equal((await call('DELETE', '/v3/regions/B')).statusCode, 204);
  t.equal((await call('GET', '/v3/regions/C')).statusCode, 404, 'the child went with its parent');
  t.equal((await call('GET', '/v3/regions/A')).statusCode, 200);
});
