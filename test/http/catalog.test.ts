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
  t.equal(cycle.json().error.message, 'The specified parent region RegionThree would create a circular region hierarchy.');
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
  t.equal((await call('GET', '/v3/regions/RegionThree')).json().region.parent_region_id, null);
});
