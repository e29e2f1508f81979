import t from 'tap';
import { Revocations } from '../../src/events/revocation.ts';
import { ResourceRepository } from '../../src/resource/resource-repository.ts';
import { MAX_PROJECT_DEPTH, ResourceService } from '../../src/resource/resource-service.ts';
import { ManualClock } from '../helpers/clock.ts';
import { openTestStore } from '../helpers/store.ts';

// The resource service on a real (embedded) database, without an app: its rules, its errors and
// what it leaves in the database (read back through the repository, not the service).

const store = await openTestStore(t);
const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 0));
const revocations = new Revocations(store, clock);
await revocations.load();
const resources = new ResourceService(store, revocations, clock);
const repository = new ResourceRepository();
/** The row as stored now (a fresh unit of work: nothing the service holds). */
const stored = (id: string) => repository.find(store.reader(), id);

let unique = 0;
/** Names differ between subtests: they share the database. */
const named = (prefix: string) => `${prefix}-${++unique}`;

t.test('domains: create, read, update, disable, delete', async (t) => {
  const name = named('domain');
  const domain = await resources.createDomain({ name, description: 'first', tags: ['a'] });
  t.match(await stored(domain.id), { name, isDomain: true, domainId: null, parentId: null, enabled: true, description: 'first', tags: ['a'] });
  t.equal((await resources.getDomain(domain.id)).name, name);
  t.equal((await resources.findDomainByName(name))?.id, domain.id);
  t.equal(await resources.findDomainByName(named('nobody')), null);
  t.same((await resources.listDomains({ ids: [domain.id] })).map((row) => row.id), [domain.id]);

  await t.rejects(resources.createDomain({ name }), { name: 'ConflictError', message: new RegExp(`two projects acting as domains with the same name: ${name}`) });
  await t.rejects(async () => resources.createDomain({ name: 'Federated' }), { name: 'ValidationError', message: /reserved for federated users/ });
  await t.rejects(resources.getDomain('no-such-domain'), { name: 'NotFoundError', message: 'Could not find domain: no-such-domain.' });

  const project = await resources.createProject({ name: named('project'), domainId: domain.id });
  await t.rejects(resources.getDomain(project.id), { name: 'NotFoundError' }, 'a project is no domain');

  await resources.updateDomain(domain.id, { description: 'second', extra: { colour: 'blue' } });
  t.match(await stored(domain.id), { description: 'second', extra: { colour: 'blue' } });

  await t.rejects(resources.deleteDomain(domain.id), { name: 'ForbiddenError', message: /disable it first/ });
  t.ok(await stored(domain.id), 'an enabled domain stays');

  const before = (await revocations.list()).length;
  await resources.updateDomain(domain.id, { enabled: false });
  t.equal((await stored(domain.id))?.enabled, false);
  const disabled = (await revocations.list()).slice(before);
  t.match(disabled, [{ domainId: domain.id }], 'disabling a domain revokes its tokens');

  await resources.deleteDomain(domain.id);
  t.equal(await stored(domain.id), null);
  t.equal(await stored(project.id), null, 'its projects go with it');
  t.match((await revocations.list()).slice(before + 1), [{ domainId: domain.id }], 'deleting writes a domain event too');
});

t.test('projects: the hierarchy rules', async (t) => {
  const domain = await resources.createDomain({ name: named('domain') });
  const other = await resources.createDomain({ name: named('domain') });

  const top = await resources.createProject({ name: 'top', domainId: domain.id });
  t.match(await stored(top.id), { domainId: domain.id, parentId: domain.id, isDomain: false }, 'the domain is the default parent');
  const child = await resources.createProject({ name: 'child', domainId: domain.id, parentId: top.id });
  t.match(await stored(child.id), { domainId: domain.id, parentId: top.id });

  await t.rejects(resources.createProject({ name: 'x', domainId: 'no-such-domain' }), { name: 'ValidationError', message: 'Could not find domain: no-such-domain.' });
  await t.rejects(resources.createProject({ name: 'x', domainId: top.id }), { name: 'ValidationError', message: `Could not find domain: ${top.id}.` }, 'a project is no domain');
  await t.rejects(resources.createProject({ name: 'x', domainId: domain.id, parentId: 'nowhere' }), { name: 'ValidationError', message: 'Could not find project: nowhere.' });
  await t.rejects(resources.createProject({ name: 'x', domainId: other.id, parentId: top.id }), {
    name: 'ValidationError',
    message: 'Cannot create project, the parent and the project must be in the same domain.',
  });
  await t.rejects(resources.createProject({ name: 'top', domainId: domain.id }), { name: 'ConflictError', message: /same name or same id in the same domain: name is top/ });
  t.ok(await resources.createProject({ name: 'top', domainId: other.id }), 'the same name in another domain');
  t.equal((await resources.findProjectByName('top', domain.id))?.id, top.id);

  // Depth: the domain is not counted; MAX_PROJECT_DEPTH projects deep at most.
  let parent = child;
  for (let depth = 3; depth <= MAX_PROJECT_DEPTH; depth++) {
    parent = await resources.createProject({ name: `level-${depth}`, domainId: domain.id, parentId: parent.id });
  }
  await t.rejects(resources.createProject({ name: 'too-deep', domainId: domain.id, parentId: parent.id }), {
    name: 'ForbiddenError',
    message: `Max hierarchy depth reached for ${parent.id} branch.`,
  });
  t.equal(await resources.findProjectByName('too-deep', domain.id), null, 'nothing written');

  t.same((await resources.ancestors(parent)).map((row) => row.name), ['level-4', 'level-3', 'child', 'top', domain.name], 'nearest first, up to the domain');
  t.same((await resources.descendants(top.id)).map((row) => row.name), ['child', 'level-3', 'level-4', 'level-5'], 'breadth first');

  // Disabling needs a disabled subtree; enabling needs enabled parents.
  await t.rejects(resources.updateProject(child.id, { enabled: false }), { name: 'ForbiddenError', message: /its subtree contains enabled projects/ });
  t.equal((await stored(child.id))?.enabled, true);
  const leafDisabled = (await revocations.list()).length;
  await resources.updateProject(parent.id, { enabled: false });
  t.match((await revocations.list()).slice(leafDisabled), [{ projectId: parent.id }], 'disabling a project revokes its tokens');
  const disabledParent = await resources.getProject(parent.id);
  await t.rejects(resources.createProject({ name: 'below-disabled', domainId: domain.id, parentId: disabledParent.id }), { name: 'ForbiddenError', message: /as a disabled project/ });

  const four = (await resources.findProjectByName('level-4', domain.id))!;
  await resources.updateProject(four.id, { enabled: false });
  await t.rejects(resources.updateProject(parent.id, { enabled: true }), { name: 'ForbiddenError', message: `Cannot enable project ${parent.id} since it has disabled parents: ${four.id}` });
  await resources.updateProject(four.id, { enabled: true });
  await resources.updateProject(parent.id, { enabled: true });
  t.equal((await stored(parent.id))?.enabled, true);

  // What never changes.
  await t.rejects(resources.updateProject(top.id, { id: 'other' }), { name: 'ValidationError', message: 'Cannot change ID' });
  await t.rejects(resources.updateProject(top.id, { domainId: other.id }), { name: 'ValidationError', message: 'Cannot change Domain ID' });
  await t.rejects(resources.updateProject(top.id, { isDomain: true }), { name: 'ValidationError', message: 'Update of `is_domain` is not allowed.' });
  await t.rejects(resources.updateProject(child.id, { parentId: domain.id }), { name: 'ForbiddenError', message: 'Update of `parent_id` is not allowed.' });
  await t.rejects(resources.updateProject(child.id, { name: 'top' }), { name: 'ConflictError' }, 'renaming onto a sibling name');
  t.equal((await stored(child.id))?.name, 'child');
  await t.rejects(resources.getProject('no-such-project'), { name: 'NotFoundError', message: 'Could not find project: no-such-project.' });

  // Only leaves are deleted.
  await t.rejects(resources.deleteProject(top.id), { name: 'ForbiddenError', message: /is not a leaf in the hierarchy/ });
  const beforeDelete = (await revocations.list()).length;
  await resources.deleteProject(parent.id);
  t.equal(await stored(parent.id), null);
  t.match((await revocations.list()).slice(beforeDelete), [{ projectId: parent.id }]);
  await t.rejects(resources.deleteProject(parent.id), { name: 'NotFoundError' });
});

t.test('a project acting as a domain', async (t) => {
  const name = named('as-domain');
  // As Keystone: only a root acts as a domain (the route passes no domain for one).
  await t.rejects(resources.createProject({ name, domainId: 'default', isDomain: true }), { name: 'ValidationError', message: 'only root projects are allowed to act as domains.' });
  const created = await resources.createProject({ name, domainId: '', isDomain: true });
  t.match(await stored(created.id), { isDomain: true, domainId: null, parentId: null });
  await t.rejects(resources.createProject({ name: named('under'), domainId: '', parentId: created.id, isDomain: true }), { name: 'ValidationError', message: 'only root projects are allowed to act as domains.' });
  await t.rejects(resources.deleteProject(created.id), { name: 'ForbiddenError', message: 'Cannot delete a domain that is enabled, please disable it first.' });
  await resources.updateProject(created.id, { enabled: false });
  await resources.deleteProject(created.id);
  t.equal(await stored(created.id), null);
});

t.test('immutable domains and projects', async (t) => {
  const domain = await resources.createDomain({ name: named('domain'), options: { immutable: true } });
  await t.rejects(resources.updateDomain(domain.id, { description: 'changed' }), { name: 'ForbiddenError', message: /Unable to update immutable domain resource/ });
  const project = await resources.createProject({ name: 'fixed', domainId: domain.id, options: { immutable: true } });
  await t.rejects(resources.deleteProject(project.id), { name: 'ForbiddenError', message: /Unable to delete immutable project resource/ });
  await t.rejects(resources.updateProject(project.id, { tags: ['x'] }), { name: 'ForbiddenError' });
  t.same((await stored(project.id))?.tags, []);

  // Clearing the option is the one update accepted; a null option is removed.
  await resources.updateProject(project.id, { options: { immutable: false, other: 1 } });
  t.same((await stored(project.id))?.options, { immutable: false, other: 1 });
  await resources.updateProject(project.id, { options: { other: null } });
  t.same((await stored(project.id))?.options, { immutable: false });
  await resources.deleteProject(project.id);
  t.equal(await stored(project.id), null);
});

t.test('project tags', async (t) => {
  const domain = await resources.createDomain({ name: named('domain') });
  const project = await resources.createProject({ name: 'tagged', domainId: domain.id, tags: ['one'] });

  t.same(await resources.replaceTags(project.id, ['two', 'three']), ['two', 'three']);
  await resources.addTag(project.id, 'four');
  await resources.addTag(project.id, 'four');
  t.same((await stored(project.id))?.tags, ['two', 'three', 'four'], 'adding a present tag changes nothing');
  await resources.removeTag(project.id, 'two');
  t.same((await stored(project.id))?.tags, ['three', 'four']);

  await t.rejects(resources.removeTag(project.id, 'two'), { name: 'NotFoundError', message: 'Could not find project tag: two.' });
  await t.rejects(resources.addTag(project.id, 'a/b'), { name: 'ValidationError', message: /Invalid project tag 'a\/b'/ });
  await t.rejects(resources.replaceTags(project.id, ['x', 'x']), { name: 'ValidationError', message: 'Tags must be unique.' });
  await t.rejects(resources.replaceTags(project.id, Array.from({ length: 81 }, (_, index) => `t${index}`)), { name: 'ValidationError', message: /at most 80 tags/ });
  await t.rejects(resources.addTag('no-such-project', 'x'), { name: 'NotFoundError' });
  t.same((await stored(project.id))?.tags, ['three', 'four'], 'refused changes write nothing');

  const other = await resources.createProject({ name: 'other', domainId: domain.id, tags: ['three'] });
  const names = async (filter: Parameters<ResourceService['listProjects']>[0]) => (await resources.listProjects({ domainId: domain.id, ...filter })).map((row) => row.name);
  t.same(await names({ tagsAll: ['three', 'four'] }), ['tagged']);
  t.same(await names({ tagsAny: ['three', 'four'] }), ['other', 'tagged']);
  t.same(await names({ notTagsAny: ['four'] }), ['other']);
  t.same(await names({ notTagsAll: ['three', 'four'] }), ['other']);
  t.same(await names({ parentId: domain.id, enabled: true }), ['other', 'tagged']);
  t.same(await names({ name: [{ operator: 'startswith', value: 'ot' }] }), ['other']);
  t.same(await names({ ids: [other.id] }), ['other']);
});

t.test('project pages', async (t) => {
  const domain = await resources.createDomain({ name: named('domain') });
  for (const name of ['e', 'a', 'd', 'c', 'b']) await resources.createProject({ name, domainId: domain.id });
  const pages: string[][] = [];
  for await (const page of resources.listProjectPages({ domainId: domain.id }, 2)) pages.push(page.rows.map((row) => row.name));
  t.same(pages, [['a', 'b'], ['c', 'd'], ['e']], 'by name, two at a time');
});
