import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { PUBLIC_URL } from '../helpers/app.ts';
import { gatewayWorld, type World } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// The catalog clients receive is the gateway's view (issue 25): the public endpoint of a service the
// gateway serves is {PUBLIC_URL}/{type}{registered path}; the registry and everything else stay as registered.

interface CatalogEndpoint {
  id: string;
  interface: string;
  region_id: string | null;
  url: string;
}
interface CatalogService {
  id: string;
  type: string;
  endpoints: CatalogEndpoint[];
}

/** Registers a service and its endpoints ([interface, url, region]); returns the service id. */
async function register(w: World, type: string, endpoints: [string, string, string | null][]): Promise<string> {
  const { call } = w.testApp;
  const service = (await call('POST', '/v3/services', { service: { type, name: type } })).json().service;
  for (const [endpointInterface, url, region] of endpoints) {
    const created = await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: endpointInterface, url, ...(region === null ? {} : { region_id: region }) } });
    if (created.statusCode !== 201) throw new Error(`endpoint not created: ${created.body}`);
  }
  return service.id;
}

/** "interface region url" of each endpoint of `type` in a catalog, sorted. */
function urlsOf(catalog: CatalogService[], type: string): string[] {
  const entry = catalog.find((service) => service.type === type);
  return (entry?.endpoints ?? []).map((endpoint) => `${endpoint.interface} ${endpoint.region_id ?? '-'} ${endpoint.url}`).sort();
}

/** The three catalogs a client is given for the member's token: issued, validated, GET /v3/auth/catalog. */
async function clientCatalogs(w: World): Promise<CatalogService[][]> {
  const { call, login } = w.testApp;
  const issued = await login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } });
  const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.member });
  const own = await call('GET', '/v3/auth/catalog', undefined, w.member);
  return [issued.body.token.catalog, validated.json().token.catalog, own.json().catalog];
}

const COMPUTE_RULES = 'p, member, project, /v2.1/{project_id}/**, GET, allow\n';

t.test('served services are reached through the gateway; the rest, and the registry, as registered', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  // echo (gatewayWorld): internal and public (http://gateway.test/echo/v1) in RegionOne, echo.csv.
  const echoId = (await call('GET', '/v3/services?type=echo')).json().services[0].id;
  await call('POST', '/v3/regions', { region: { id: 'RegionTwo' } });
  await call('POST', '/v3/endpoints', { endpoint: { service_id: echoId, interface: 'public', url: 'http://echo.two/v1', region_id: 'RegionTwo' } });
  await call('POST', '/v3/endpoints', { endpoint: { service_id: echoId, interface: 'admin', url: 'http://echo-admin:9000/v1', region_id: 'RegionOne' } });
  // A Keystone-style versioned URL with a project template, and a policy file for it.
  fs.writeFileSync(path.join(w.policies, 'compute.csv'), COMPUTE_RULES);
  await register(w, 'compute', [
    ['public', 'http://nova:8774/v2.1/%(tenant_id)s', 'RegionOne'],
    ['internal', 'http://nova-internal:8774/v2.1/$(project_id)s', 'RegionOne'],
    ['admin', 'http://nova-admin:8774/v2.1', 'RegionOne'],
  ]);
  // Not served: no policy file; an internal endpoint only in another region; a root-only URL served region-less.
  await register(w, 'volume', [
    ['public', 'http://cinder:8776/v3', 'RegionOne'],
    ['internal', 'http://cinder-internal:8776/v3', 'RegionOne'],
  ]);
  fs.writeFileSync(path.join(w.policies, 'image.csv'), 'p, member, project, /**, GET, allow\n');
  await register(w, 'image', [
    ['public', 'http://glance:9292', 'RegionOne'],
    ['internal', 'http://glance-internal:9292', 'RegionTwo'],
  ]);
  fs.writeFileSync(path.join(w.policies, 'placement.csv'), 'p, member, project, /**, GET, allow\n');
  await register(w, 'placement', [
    ['public', 'http://placement:8778', null],
    ['internal', 'http://placement-internal:8778', null],
  ]);
  t.equal(await w.testApp.app.reloadPolicy(), true, 'the policy files load');

  const gateway = (suffix: string) => `${PUBLIC_URL}${suffix}`;
  for (const catalog of await clientCatalogs(w)) {
    t.same(urlsOf(catalog, 'echo'), [
      'admin RegionOne http://echo-admin:9000/v1',
      `internal RegionOne ${w.upstream.url}/v1`,
      `public RegionOne ${gateway('/echo/v1')}`,
      'public RegionTwo http://echo.two/v1',
    ], 'echo: the public endpoint of the gateway\'s region goes through it (its /echo mount not repeated); another region\'s is that region\'s');
    t.same(urlsOf(catalog, 'compute'), [
      'admin RegionOne http://nova-admin:8774/v2.1',
      `internal RegionOne http://nova-internal:8774/v2.1/${w.projectId}`,
      `public RegionOne ${gateway(`/compute/v2.1/${w.projectId}`)}`,
    ], 'compute: the versioned path and the filled template are kept after /compute');
    t.same(urlsOf(catalog, 'placement'), ['internal - http://placement-internal:8778', `public - ${gateway('/placement')}`], 'a region-less endpoint the gateway uses');
    t.same(urlsOf(catalog, 'volume'), ['internal RegionOne http://cinder-internal:8776/v3', 'public RegionOne http://cinder:8776/v3'], 'no policy file: as registered');
    t.same(urlsOf(catalog, 'image'), ['internal RegionTwo http://glance-internal:9292', 'public RegionOne http://glance:9292'], 'no internal endpoint here: as registered');
    t.ok(urlsOf(catalog, 'identity').every((line) => line.endsWith(` ${PUBLIC_URL}/v3`)), 'identity as registered');
  }

  // Endpoint ids are the registered ones; the registry shows what operators registered.
  const registry = (await call('GET', '/v3/endpoints')).json().endpoints as { id: string; url: string; interface: string }[];
  const [catalog] = await clientCatalogs(w);
  const inCatalog = catalog!.flatMap((service) => service.endpoints);
  t.same(inCatalog.map((endpoint) => endpoint.id).sort(), registry.map((endpoint) => endpoint.id).sort(), 'the catalog\'s endpoint ids are the registry\'s');
  t.notOk(registry.some((endpoint) => endpoint.url.startsWith(PUBLIC_URL) && !endpoint.url.endsWith('/v3')), '/v3/endpoints is not rewritten');
  t.ok(registry.some((endpoint) => endpoint.url === 'http://gateway.test/echo/v1'));
  t.ok(registry.some((endpoint) => endpoint.url === 'http://nova:8774/v2.1/%(tenant_id)s'));
  t.ok(registry.some((endpoint) => endpoint.url === 'http://placement:8778'));
  const computeId = catalog!.find((service) => service.type === 'compute')!.id;
  t.same(
    Object.keys(catalog!.find((service) => service.type === 'compute')!.endpoints[0]!).sort(),
    Object.keys(catalog!.find((service) => service.type === 'volume')!.endpoints[0]!).sort(),
    'a rewritten entry has the fields of any other',
  );
  t.equal((await call('GET', `/v3/services/${computeId}`)).json().service.type, 'compute');

  // The URL a client is given reaches the service through the gateway (PUBLIC_URL stands for this port).
  const echoPublic = urlsOf(catalog!, 'echo').find((line) => line.startsWith('public RegionOne'))!.split(' ')[2]!;
  const response = await rawRequest(w.port, { path: `${new URL(echoPublic).pathname}/${w.projectId}/things`, headers: { 'x-auth-token': w.member } });
  t.equal(response.status, 200);
  t.equal(w.upstream.received.at(-1)!.url, `/v1/${w.projectId}/things`);
});

t.test('a policy file added or removed is reflected in the next catalog', async (t) => {
  const w = await gatewayWorld(t);
  await register(w, 'compute', [
    ['public', 'http://nova:8774/v2.1', 'RegionOne'],
    ['internal', 'http://nova-internal:8774/v2.1', 'RegionOne'],
  ]);
  const publicUrls = async () => (await clientCatalogs(w)).map((catalog) => urlsOf(catalog, 'compute').find((line) => line.startsWith('public'))!.split(' ')[2]);
  t.same(await publicUrls(), Array(3).fill('http://nova:8774/v2.1'), 'no policy file: not served, as registered');
  t.same(await publicUrls(), Array(3).fill('http://nova:8774/v2.1'), 'asked again (cached): the same');

  fs.writeFileSync(path.join(w.policies, 'compute.csv'), COMPUTE_RULES);
  t.equal(await w.testApp.app.reloadPolicy(), true);
  t.same(await publicUrls(), Array(3).fill(`${PUBLIC_URL}/compute/v2.1`), 'a policy file added: through the gateway');

  fs.rmSync(path.join(w.policies, 'echo.csv'));
  t.equal(await w.testApp.app.reloadPolicy(), true);
  const echo = async () => urlsOf((await clientCatalogs(w))[2]!, 'echo').find((line) => line.startsWith('public'));
  t.equal(await echo(), 'public RegionOne http://gateway.test/echo/v1', 'a policy file removed: as registered');

  // A catalog change shows at once too: the internal endpoint gone, compute is no longer served.
  const { call } = w.testApp;
  const internal = (await call('GET', '/v3/endpoints?interface=internal')).json().endpoints.find((endpoint: { url: string }) => endpoint.url === 'http://nova-internal:8774/v2.1');
  t.equal((await call('DELETE', `/v3/endpoints/${internal.id}`)).statusCode, 204);
  t.same(await publicUrls(), Array(3).fill('http://nova:8774/v2.1'), 'no internal endpoint: as registered');
});

t.test('GATEWAY_PUBLIC_CATALOG: on by default; false gives the registered catalog, as Keystone serves it', async (t) => {
  for (const [setting, publicUrl] of [
    [undefined, `${PUBLIC_URL}/echo/v1`],
    ['false', 'http://gateway.test/echo/v1'],
  ] as const) {
    const w = await gatewayWorld(t, setting === undefined ? {} : { GATEWAY_PUBLIC_CATALOG: setting });
    for (const catalog of await clientCatalogs(w)) {
      t.same(urlsOf(catalog, 'echo'), [`internal RegionOne ${w.upstream.url}/v1`, `public RegionOne ${publicUrl}`], `GATEWAY_PUBLIC_CATALOG=${setting ?? '(unset)'}`);
    }
    await w.testApp.close();
  }
});
