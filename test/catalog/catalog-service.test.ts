import t from 'tap';
import { CatalogRepository } from '../../src/catalog/catalog-repository.ts';
import { CatalogService, substitute } from '../../src/catalog/catalog-service.ts';
import { openTestStore } from '../helpers/store.ts';

// The catalog service on a real (embedded) database, without an app: regions, services, endpoints,
// their rules and errors, the catalog a token carries, and what is left in the database (read back
// through the repository).

const store = await openTestStore(t);
// No generation: nothing is cached, every call reads the database.
const catalog = new CatalogService(store);
const repository = new CatalogRepository();

let unique = 0;
/** Ids and types differ between subtests: they share the database. */
const named = (prefix: string) => `${prefix}-${++unique}`;

t.test('regions: a tree without cycles', async (t) => {
  const root = await catalog.createRegion({ id: named('root'), description: 'the root' });
  const child = await catalog.createRegion({ id: named('child'), parentRegionId: root.id });
  const grandchild = await catalog.createRegion({ id: named('grandchild'), parentRegionId: child.id });
  t.match(await repository.findRegion(store.reader(), grandchild.id), { parentRegionId: child.id, description: '', extra: {} });
  t.same((await catalog.listRegions({ parentRegionId: root.id })).map((row) => row.id), [child.id]);
  t.ok((await catalog.listRegions({})).some((row) => row.id === grandchild.id));
  t.ok((await catalog.createRegion({})).id, 'an id is made up when none is given');

  await t.rejects(catalog.createRegion({ id: root.id }), { name: 'ConflictError', message: `Conflict occurred attempting to store region - Duplicate ID, ${root.id}..` });
  await t.rejects(catalog.createRegion({ id: named('orphan'), parentRegionId: 'nowhere' }), { name: 'NotFoundError', message: 'Could not find region: nowhere.' });
  await t.rejects(catalog.getRegion('nowhere'), { name: 'NotFoundError' });

  await t.rejects(catalog.updateRegion(root.id, { parentRegionId: grandchild.id }), {
    name: 'ValidationError',
    message: `The specified parent region ${root.id} would create a circular region hierarchy.`,
  });
  await t.rejects(catalog.updateRegion(root.id, { parentRegionId: root.id }), { name: 'ValidationError', message: /circular region hierarchy/ }, 'its own parent');
  t.equal((await repository.findRegion(store.reader(), root.id))?.parentRegionId, null, 'a refused parent is not written');
  await t.rejects(catalog.updateRegion(root.id, { id: 'other' }), { name: 'ValidationError', message: 'Cannot change ID' });
  await t.rejects(catalog.updateRegion(root.id, { parentRegionId: 'nowhere' }), { name: 'NotFoundError' });

  await catalog.updateRegion(grandchild.id, { parentRegionId: root.id, description: 'moved', extra: { tier: 1 } });
  t.match(await repository.findRegion(store.reader(), grandchild.id), { parentRegionId: root.id, description: 'moved', extra: { tier: 1 } });
  await catalog.updateRegion(grandchild.id, { parentRegionId: null });
  t.equal((await repository.findRegion(store.reader(), grandchild.id))?.parentRegionId, null);

  // A region whose family holds endpoints stays; otherwise its subtree is deleted with it (as in Keystone).
  const service = await catalog.createService({ type: named('type') });
  const endpoint = await catalog.createEndpoint({ serviceId: service.id, interface: 'public', url: 'http://x', regionId: child.id });
  await t.rejects(catalog.deleteRegion(root.id), { name: 'ForbiddenError', message: `Unable to delete region ${root.id} because it or its child regions have associated endpoints.` });
  t.ok(await repository.findRegion(store.reader(), root.id));
  await catalog.deleteEndpoint(endpoint.id);
  await catalog.deleteRegion(root.id);
  t.equal(await repository.findRegion(store.reader(), root.id), null);
  t.equal(await repository.findRegion(store.reader(), child.id), null, 'the child went with it');
  await t.rejects(catalog.deleteRegion(root.id), { name: 'NotFoundError' });
});

t.test('services and endpoints', async (t) => {
  const type = named('compute');
  const service = await catalog.createService({ type, name: 'nova' });
  t.match(await repository.findService(store.reader(), service.id), { type, name: 'nova', description: null, enabled: true, extra: {} });
  t.same((await catalog.listServices({ type })).map((row) => row.id), [service.id]);
  t.same(await catalog.listServices({ type, name: 'other' }), []);

  await catalog.updateService(service.id, { name: 'nova2', enabled: false, extra: { a: 1 } });
  t.match(await repository.findService(store.reader(), service.id), { name: 'nova2', enabled: false, extra: { a: 1 } });
  await t.rejects(catalog.updateService(service.id, { id: 'other' }), { name: 'ValidationError', message: 'Cannot change ID' });
  await t.rejects(catalog.getService('nowhere'), { name: 'NotFoundError', message: 'Could not find service: nowhere.' });

  const region = await catalog.createRegion({ id: named('region') });
  const endpoint = await catalog.createEndpoint({ serviceId: service.id, interface: 'internal', url: 'http://nova:8774', regionId: region.id });
  t.match(await repository.findEndpoint(store.reader(), endpoint.id), { serviceId: service.id, interface: 'internal', regionId: region.id, enabled: true });
  const legacy = await catalog.createEndpoint({ serviceId: service.id, interface: 'public', url: 'http://nova', legacyRegion: 'unchecked' });
  t.equal((await repository.findEndpoint(store.reader(), legacy.id))?.regionId, 'unchecked', 'the legacy region is the region id');
  t.match(await repository.findRegion(store.reader(), 'unchecked'), { id: 'unchecked', description: '', parentRegionId: null }, 'and is created when missing');
  t.same((await catalog.listEndpoints({ serviceId: service.id })).map((row) => row.id), [endpoint.id, legacy.id], 'by service, interface, id');
  t.same((await catalog.listEndpoints({ serviceId: service.id, interface: 'public' })).map((row) => row.id), [legacy.id]);
  t.same((await catalog.listEndpoints({ regionId: region.id })).map((row) => row.id), [endpoint.id]);

  await t.rejects(catalog.createEndpoint({ serviceId: 'nowhere', interface: 'public', url: 'http://x' }), { name: 'ValidationError', message: /^Expecting to find endpoint service_id in service table/ });
  await t.rejects(catalog.createEndpoint({ serviceId: service.id, interface: 'public', url: 'http://x', regionId: 'nowhere' }), {
    name: 'ValidationError',
    message: /^Expecting to find endpoint region_id in region table/,
  });
  await t.rejects(catalog.updateEndpoint(endpoint.id, { serviceId: 'nowhere' }), { name: 'ValidationError', message: /endpoint service_id/ });
  await t.rejects(catalog.updateEndpoint(endpoint.id, { id: 'other' }), { name: 'ValidationError', message: 'Cannot change ID' });
  await t.rejects(catalog.getEndpoint('nowhere'), { name: 'NotFoundError', message: 'Could not find endpoint: nowhere.' });

  const other = await catalog.createService({ type: named('other') });
  await catalog.updateEndpoint(endpoint.id, { serviceId: other.id, regionId: null, url: 'http://moved', enabled: false });
  t.match(await repository.findEndpoint(store.reader(), endpoint.id), { serviceId: other.id, regionId: null, url: 'http://moved', enabled: false });

  // Deleting a service takes its endpoints with it.
  await catalog.deleteService(service.id);
  t.equal(await repository.findService(store.reader(), service.id), null);
  t.equal(await repository.findEndpoint(store.reader(), legacy.id), null);
  t.ok(await repository.findEndpoint(store.reader(), endpoint.id), 'the other service keeps its endpoint');
  await t.rejects(catalog.deleteService(service.id), { name: 'NotFoundError' });
  await catalog.deleteEndpoint(endpoint.id);
  t.equal(await repository.findEndpoint(store.reader(), endpoint.id), null);
});

t.test('the catalog a token carries', async (t) => {
  // This subtest owns the enabled rows: earlier subtests leave only disabled or deleted ones.
  for (const service of await catalog.listServices({})) await catalog.updateService(service.id, { enabled: false });
  const identity = await catalog.createService({ type: 'identity', name: 'keystone' });
  const storage = await catalog.createService({ type: 'object-store', name: 'swift' });
  const hidden = await catalog.createService({ type: 'hidden', enabled: false });
  await catalog.createEndpoint({ serviceId: identity.id, interface: 'public', url: 'https://keystone/v3', regionId: null });
  const perProject = await catalog.createEndpoint({ serviceId: storage.id, interface: 'public', url: 'https://swift/v1/AUTH_$(project_id)s' });
  const perUser = await catalog.createEndpoint({ serviceId: storage.id, interface: 'admin', url: 'https://swift/$(tenant_id)s/$(user_id)s' });
  await catalog.createEndpoint({ serviceId: storage.id, interface: 'internal', url: 'https://swift-off', enabled: false });
  await catalog.createEndpoint({ serviceId: hidden.id, interface: 'public', url: 'https://hidden' });

  const urls = (entries: Awaited<ReturnType<CatalogService['catalog']>>) =>
    Object.fromEntries(entries.map((entry) => [entry.service.type, entry.endpoints.map((endpoint) => `${endpoint.interface} ${endpoint.url}`)]));
  t.same(urls(await catalog.catalog({ projectId: 'p1', userId: 'u1' })), {
    identity: ['public https://keystone/v3'],
    'object-store': ['admin https://swift/p1/u1', 'public https://swift/v1/AUTH_p1'],
  });
  t.same(
    urls(await catalog.catalog({ userId: 'u1' })),
    { identity: ['public https://keystone/v3'], 'object-store': [] },
    'without a project (domain and system tokens) the endpoints that need one are left out',
  );

  // Every call reads the database again (no generation given): a change shows at once.
  await catalog.updateEndpoint(perProject.id, { enabled: false });
  await catalog.deleteEndpoint(perUser.id);
  t.same(urls(await catalog.catalog({ projectId: 'p1' })), { identity: ['public https://keystone/v3'], 'object-store': [] });
  await catalog.updateService(storage.id, { enabled: false });
  t.same(Object.keys(urls(await catalog.catalog({ projectId: 'p1' }))), ['identity']);
  t.same(catalog.cacheStats, { hits: 0, misses: 0 });
});

t.test('URL templates', async (t) => {
  t.equal(substitute('https://x/$(project_id)s/$(user_id)s', { projectId: 'p', userId: 'u' }), 'https://x/p/u');
  t.equal(substitute('https://x/$(tenant_id)s', { projectId: 'p' }), 'https://x/p');
  t.equal(substitute('https://x/$(project_id)s', {}), undefined);
  t.equal(substitute('https://x/$(unknown)s', { projectId: 'p' }), undefined, 'an unknown template cannot be filled');
  t.equal(substitute('https://x/plain', {}), 'https://x/plain');
  // Keystone applies Python's %-formatting after turning $( into %(: both spellings are filled.
  t.equal(substitute('http://nova:8774/v2.1/%(tenant_id)s', { projectId: 'p' }), 'http://nova:8774/v2.1/p');
  t.equal(substitute('https://x/%(project_id)s/%(user_id)s', { projectId: 'p', userId: 'u' }), 'https://x/p/u');
  t.equal(substitute('https://x/%(project_id)s', {}), undefined);
});
