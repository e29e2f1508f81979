import t from 'tap';
import { CatalogService } from '../../src/catalog/catalog-service.ts';
import { Revocations } from '../../src/events/revocation.ts';
import { LimitRepository } from '../../src/limit/limit-repository.ts';
import { LimitService } from '../../src/limit/limit-service.ts';
import { ResourceService } from '../../src/resource/resource-service.ts';
import { ManualClock } from '../helpers/clock.ts';
import { openTestStore } from '../helpers/store.ts';

// The limit service on a real (embedded) database, without an app: Keystone's rules for registered
// limits and limits, its errors, and what is left in the database after a refused write (read back
// through the repository).

const store = await openTestStore(t);
const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 0));
const revocations = new Revocations(store, clock);
await revocations.load();
const resources = new ResourceService(store, revocations, clock);
const catalog = new CatalogService(store);
const limits = new LimitService(store);
const repository = new LimitRepository();

let unique = 0;
const named = (prefix: string) => `${prefix}-${++unique}`;
const expecting = (attribute: string, target: string) =>
  `Expecting to find ${attribute} in ${target}. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.`;

const domain = await resources.createDomain({ name: named('domain') });
const project = await resources.createProject({ name: named('project'), domainId: domain.id });
const otherDomain = await resources.createDomain({ name: named('domain') });
const other = await resources.createProject({ name: named('other'), domainId: otherDomain.id });

t.test('the enforcement model is flat', async (t) => {
  t.same(limits.model, { name: 'flat', description: 'Limit enforcement and validation does not take project hierarchy into consideration.' });
});

t.test('registered limits: created all or none, unique per service, region and resource', async (t) => {
  const service = await catalog.createService({ type: named('compute') });
  const region = await catalog.createRegion({ id: named('region') });
  const [cores, ram] = await limits.createRegisteredLimits([
    { serviceId: service.id, resourceName: 'cores', defaultLimit: 10 },
    { serviceId: service.id, regionId: region.id, resourceName: 'ram', defaultLimit: 100, description: 'memory' },
  ]);
  t.match(cores, { serviceId: service.id, regionId: null, resourceName: 'cores', defaultLimit: 10, description: null });
  t.match(ram!, { regionId: region.id, description: 'memory' });

  const count = async () => (await limits.listRegisteredLimits({ serviceId: service.id })).length;
  await t.rejects(limits.createRegisteredLimits([{ serviceId: service.id, resourceName: 'cores', defaultLimit: 1 }]), {
    name: 'ConflictError',
    message: 'Conflict occurred attempting to store registered_limit - Duplicate entry.',
  });
  await t.rejects(
    limits.createRegisteredLimits([
      { serviceId: service.id, resourceName: 'disk', defaultLimit: 1 },
      { serviceId: service.id, resourceName: 'disk', defaultLimit: 2 },
    ]),
    { name: 'ConflictError' },
    'a duplicate within the list',
  );
  await t.rejects(
    limits.createRegisteredLimits([
      { serviceId: service.id, resourceName: 'gpus', defaultLimit: 1 },
      { serviceId: 'nope', resourceName: 'x', defaultLimit: 2 },
    ]),
    { name: 'ValidationError', message: expecting('service_id', 'registered_limit') },
  );
  await t.rejects(limits.createRegisteredLimits([{ serviceId: service.id, regionId: 'nope', resourceName: 'x', defaultLimit: 2 }]), {
    name: 'ValidationError',
    message: expecting('region_id', 'registered_limit'),
  });
  t.equal(await count(), 2, 'a refused list writes nothing');
  t.same(
    (await limits.listRegisteredLimits({ serviceId: service.id, regionId: region.id })).map((row) => row.id),
    [ram!.id],
  );
  t.same((await limits.listRegisteredLimits({ resourceName: 'cores', serviceId: service.id })).map((row) => row.id), [cores!.id]);

  const updated = await limits.updateRegisteredLimit(cores!.id, { defaultLimit: 20, description: 'cpus', regionId: region.id });
  t.match(updated, { defaultLimit: 20, description: 'cpus', regionId: region.id });
  await t.rejects(limits.updateRegisteredLimit(cores!.id, { resourceName: 'ram' }), { name: 'ConflictError' }, 'onto another one');
  t.equal((await repository.findRegisteredLimit(store.reader(), cores!.id))?.resourceName, 'cores');
  await t.rejects(limits.updateRegisteredLimit('nope', { defaultLimit: 1 }), { name: 'NotFoundError', message: 'Could not find registered limit for nope.' });
  await t.rejects(limits.updateRegisteredLimit(cores!.id, { serviceId: 'nope' }), { name: 'ValidationError', message: expecting('service_id', 'registered_limit') });
  t.match(await limits.updateRegisteredLimit(cores!.id, { regionId: null }), { regionId: null }, 'back to every region');

  await limits.deleteRegisteredLimit(ram!.id);
  await t.rejects(limits.getRegisteredLimit(ram!.id), { name: 'NotFoundError' });
  await t.rejects(limits.deleteRegisteredLimit(ram!.id), { name: 'NotFoundError' });
});

t.test('two writers racing for one registered limit: one wins, the other gets Keystone\'s 409', async (t) => {
  const service = await catalog.createService({ type: named('race') });
  const create = () => limits.createRegisteredLimits([{ serviceId: service.id, resourceName: 'cores', defaultLimit: 1 }]);
  const results = await Promise.allSettled([create(), create(), create()]);
  t.equal(results.filter((result) => result.status === 'fulfilled').length, 1);
  for (const result of results) {
    if (result.status === 'rejected') t.match(result.reason, { name: 'ConflictError', message: 'Conflict occurred attempting to store registered_limit - Duplicate entry.' });
  }
  t.equal((await limits.listRegisteredLimits({ serviceId: service.id })).length, 1);
});

t.test('limits: need their registered limit, which they then hold in place', async (t) => {
  const service = await catalog.createService({ type: named('volume') });
  const region = await catalog.createRegion({ id: named('region') });
  const [gigabytes] = await limits.createRegisteredLimits([
    { serviceId: service.id, resourceName: 'gigabytes', defaultLimit: 10 },
    { serviceId: service.id, regionId: region.id, resourceName: 'volumes', defaultLimit: 5 },
  ]);

  const [mine, ofDomain] = await limits.createLimits([
    { projectId: project.id, serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 5 },
    { domainId: domain.id, serviceId: service.id, regionId: region.id, resourceName: 'volumes', resourceLimit: 3, description: 'd' },
  ]);
  t.match(mine, { projectId: project.id, domainId: null, regionId: null, resourceLimit: 5, description: null });
  t.match(ofDomain, { projectId: null, domainId: domain.id, regionId: region.id, description: 'd' });
  const [byDomainId] = await limits.createLimits([{ projectId: otherDomain.id, serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 1 }]);
  t.match(byDomainId, { projectId: null, domainId: otherDomain.id }, 'a project id naming a domain makes a domain limit');

  const ofService = async () => (await limits.listLimits({ serviceId: service.id }, { type: 'system' })).length;
  t.equal(await ofService(), 3);
  await t.rejects(limits.createLimits([{ projectId: project.id, serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 1 }]), {
    name: 'ConflictError',
    message: 'Conflict occurred attempting to store limit - Duplicate entry.',
  });
  await t.rejects(
    limits.createLimits([
      { projectId: other.id, serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 1 },
      { projectId: other.id, serviceId: service.id, resourceName: 'snapshots', resourceLimit: 1 },
    ]),
    { name: 'ForbiddenError', message: 'Unable to create a limit that has no corresponding registered limit.' },
  );
  await t.rejects(limits.createLimits([{ projectId: other.id, serviceId: service.id, regionId: region.id, resourceName: 'gigabytes', resourceLimit: 1 }]), {
    name: 'ForbiddenError',
  }, 'the registered limit is for every region, not this one');
  await t.rejects(limits.createLimits([{ projectId: 'nope', serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 1 }]), {
    name: 'ValidationError',
    message: expecting('project_id', 'limit'),
  });
  await t.rejects(limits.createLimits([{ domainId: project.id, serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 1 }]), {
    name: 'ValidationError',
    message: expecting('domain_id', 'limit'),
  }, 'a project is not a domain');
  await t.rejects(limits.createLimits([{ projectId: other.id, serviceId: 'nope', resourceName: 'gigabytes', resourceLimit: 1 }]), {
    message: expecting('service_id', 'limit'),
  });
  await t.rejects(limits.createLimits([{ projectId: other.id, serviceId: service.id, regionId: 'nope', resourceName: 'gigabytes', resourceLimit: 1 }]), {
    message: expecting('region_id', 'limit'),
  });
  t.equal(await ofService(), 3, 'a refused list writes nothing');

  // Who sees what.
  t.same((await limits.listLimits({ serviceId: service.id }, { type: 'project', projectId: project.id })).map((row) => row.id), [mine!.id]);
  t.same(await limits.listLimits({ serviceId: service.id, projectId: other.id }, { type: 'project', projectId: project.id }), []);
  t.same(
    (await limits.listLimits({ serviceId: service.id }, { type: 'domain', domainId: domain.id })).map((row) => row.id).sort(),
    [mine!.id, ofDomain!.id].sort(),
  );
  t.same(await limits.listLimits({ serviceId: service.id }, { type: 'none' }), []);
  t.same((await limits.listLimits({ serviceId: service.id, domainId: otherDomain.id }, { type: 'system' })).map((row) => row.id), [byDomainId!.id]);

  // A registered limit that limits refer to is neither changed nor deleted.
  const held = `Unable to update or delete registered limit ${gigabytes!.id} because there are project limits associated with it.`;
  await t.rejects(limits.updateRegisteredLimit(gigabytes!.id, { defaultLimit: 11 }), { name: 'ForbiddenError', message: held });
  await t.rejects(limits.deleteRegisteredLimit(gigabytes!.id), { name: 'ForbiddenError', message: held });

  t.match(await limits.updateLimit(mine!.id, { resourceLimit: 7, description: 'x' }), { resourceLimit: 7, description: 'x' });
  t.match(await repository.findLimit(store.reader(), mine!.id), { resourceLimit: 7, description: 'x' });
  await t.rejects(limits.updateLimit('nope', { resourceLimit: 1 }), { name: 'NotFoundError', message: 'Could not find limit for nope.' });
  await limits.deleteLimit(byDomainId!.id);
  await t.rejects(limits.getLimit(byDomainId!.id), { name: 'NotFoundError' });

  // A project's (and a domain's) limits go with it.
  await resources.updateProject(project.id, { enabled: false });
  await resources.deleteProject(project.id);
  t.equal(await repository.findLimit(store.reader(), mine!.id), null);
  await limits.deleteLimit(ofDomain!.id);

  // A domain deleted leaves its limits (Keystone 22 does).
  const doomed = await resources.createDomain({ name: named('doomed') });
  const [ofDoomed] = await limits.createLimits([{ domainId: doomed.id, serviceId: service.id, resourceName: 'gigabytes', resourceLimit: 1 }]);
  await resources.updateDomain(doomed.id, { enabled: false });
  await resources.deleteDomain(doomed.id);
  t.ok(await repository.findLimit(store.reader(), ofDoomed!.id), "a deleted domain's limit stays");
  await limits.deleteLimit(ofDoomed!.id);

  // A service or region deleted leaves its registered limits (Keystone 22 does).
  await limits.deleteRegisteredLimit(gigabytes!.id);
  t.pass('with no limit left, the registered limit goes');
  const [kept] = await limits.createRegisteredLimits([{ serviceId: service.id, regionId: region.id, resourceName: 'backups', defaultLimit: 1 }]);
  await catalog.deleteService(service.id);
  t.ok(await repository.findRegisteredLimit(store.reader(), kept!.id), 'still there');
});
