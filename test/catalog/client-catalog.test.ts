import t from 'tap';
import type { CatalogEntry, Service } from '../../src/catalog/catalog-service.ts';
import { GatewayCatalog, type ServedTypes } from '../../src/catalog/client-catalog.ts';
import type { InternalEndpoint } from '../../src/catalog/internal-endpoints.ts';

// The gateway's view of a built catalog, without a database: which endpoints change, and when a view is made again.

const PUBLIC = 'https://cloud.example.com';

function service(type: string): Service {
  return { id: `${type}-id`, type, name: type, description: null, enabled: true, extra: {} } as Service;
}

function entry(type: string, endpoints: [id: string, endpointInterface: string, regionId: string | null, url: string][]): CatalogEntry {
  return { service: service(type), endpoints: endpoints.map(([id, endpointInterface, regionId, url]) => ({ id, interface: endpointInterface, regionId, url })) };
}

function internal(serviceType: string, url: string): InternalEndpoint {
  const parsed = new URL(url);
  return { serviceType, endpointId: `${serviceType}-internal`, origin: parsed.origin, host: parsed.host, basePath: parsed.pathname.replace(/\/+$/, '') };
}

const policyOf = (...types: string[]): ServedTypes => ({ hasService: (type) => types.includes(type) });

function world(registered: CatalogEntry[], table: Map<string, InternalEndpoint>, policy: ServedTypes) {
  const state = { registered, table, policy };
  const catalog = new GatewayCatalog(
    { catalog: async () => state.registered },
    { endpoints: () => state.table },
    { publicUrl: PUBLIC, region: 'RegionOne', policy: () => state.policy },
  );
  return { state, catalog };
}

const urls = (catalog: CatalogEntry[]) => catalog.flatMap(({ service, endpoints }) => endpoints.map((endpoint) => `${service.type} ${endpoint.id} ${endpoint.url}`));

t.test('which endpoints read the gateway, and how their path is kept', async (t) => {
  const registered = [
    entry('compute', [
      ['c-pub', 'public', 'RegionOne', 'http://nova:8774/v2.1/p1'],
      ['c-int', 'internal', 'RegionOne', 'http://nova-int:8774/v2.1/p1'],
      ['c-adm', 'admin', 'RegionOne', 'http://nova-adm:8774/v2.1'],
      ['c-two', 'public', 'RegionTwo', 'http://nova.two:8774/v2.1/p1'],
    ]),
    entry('placement', [['p-pub', 'public', null, 'http://placement:8778/?a=b']]),
    // Registered for a proxy mounting it at /echo; the internal endpoint's path does not start so.
    entry('echo', [['e-pub', 'public', 'RegionOne', 'http://old-gateway/echo/v1']]),
    entry('echoes', [['es-pub', 'public', 'RegionOne', 'http://echoes/echo/v1']]),
    // Mounted at /mounted on the service's own host, internally too: the mount is its path.
    entry('mounted', [['m-pub', 'public', 'RegionOne', 'http://ctl/mounted']]),
    entry('identity', [['i-pub', 'public', 'RegionOne', `${PUBLIC}/v3`]]),
    entry('volume', [['v-pub', 'public', 'RegionOne', 'http://cinder:8776/v3']]),
  ];
  const table = new Map(
    [
      internal('compute', 'http://nova-int:8774/v2.1'),
      internal('placement', 'http://placement-int:8778'),
      internal('echo', 'http://echo-int:9000/v1'),
      internal('echoes', 'http://echoes-int:9000/v1'),
      internal('mounted', 'http://ctl-int/mounted'),
      internal('identity', `${PUBLIC}/v3`),
      internal('volume', 'http://cinder-int:8776/v3'),
    ].map((endpoint) => [endpoint.serviceType, endpoint]),
  );
  const { catalog } = world(registered, table, policyOf('compute', 'placement', 'echo', 'echoes', 'mounted', 'identity'));
  t.same(urls(await catalog.catalog({ projectId: 'p1' })), [
    `compute c-pub ${PUBLIC}/compute/v2.1/p1`,
    'compute c-int http://nova-int:8774/v2.1/p1',
    'compute c-adm http://nova-adm:8774/v2.1',
    'compute c-two http://nova.two:8774/v2.1/p1',
    `placement p-pub ${PUBLIC}/placement/?a=b`,
    `echo e-pub ${PUBLIC}/echo/v1`,
    `echoes es-pub ${PUBLIC}/echoes/echo/v1`,
    `mounted m-pub ${PUBLIC}/mounted/mounted`,
    `identity i-pub ${PUBLIC}/v3`,
    'volume v-pub http://cinder:8776/v3',
  ]);
  const view = await catalog.catalog({ projectId: 'p1' });
  t.equal(view[0]!.service, registered[0]!.service, 'the service is the registered one');
  t.equal(view.at(-1), registered.at(-1), 'an entry not served is the registered one');
  t.same(Object.keys(view[0]!.endpoints[0]!), Object.keys(registered[0]!.endpoints[0]!), 'no field added');
  t.equal(registered[0]!.endpoints[0]!.url, 'http://nova:8774/v2.1/p1', 'the registered catalog (shared, cached) is not changed');
});

t.test('a view is kept for its catalog, policy and endpoint table, and made again when one changes', async (t) => {
  const registered = [entry('compute', [['c-pub', 'public', 'RegionOne', 'http://nova:8774/v2.1']])];
  const { state, catalog } = world(registered, new Map([['compute', internal('compute', 'http://nova-int:8774/v2.1')]]), policyOf());
  const first = await catalog.catalog({});
  t.same(urls(first), ['compute c-pub http://nova:8774/v2.1'], 'no policy file for compute');
  t.equal(await catalog.catalog({}), first, 'kept');

  state.policy = policyOf('compute');
  const reloaded = await catalog.catalog({});
  t.same(urls(reloaded), [`compute c-pub ${PUBLIC}/compute/v2.1`], 'a reloaded policy with compute');
  t.equal(await catalog.catalog({}), reloaded, 'kept');

  state.table = new Map();
  t.same(urls(await catalog.catalog({})), ['compute c-pub http://nova:8774/v2.1'], 'a new table without compute');

  state.registered = [entry('compute', [['c-pub2', 'public', 'RegionOne', 'http://nova2:8774/v2.1']])];
  state.table = new Map([['compute', internal('compute', 'http://nova-int:8774/v2.1')]]);
  t.same(urls(await catalog.catalog({})), [`compute c-pub2 ${PUBLIC}/compute/v2.1`], 'a new catalog');
});
