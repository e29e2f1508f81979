import t from 'tap';
import { AssignmentRepository } from '../../src/assignment/assignment-repository.ts';
import { AssignmentService, SYSTEM_TARGET_ID, type Grant, type Role } from '../../src/assignment/assignment-service.ts';
import { AccessEpoch } from '../../src/events/access-epoch.ts';
import { Revocations } from '../../src/events/revocation.ts';
import { IdentityService } from '../../src/identity/identity-service.ts';
import { PasswordHasher } from '../../src/identity/password-hash.ts';
import { ResourceService } from '../../src/resource/resource-service.ts';
import { ManualClock } from '../helpers/clock.ts';
import { openTestStore } from '../helpers/store.ts';

// The assignment service on a real (embedded) database, without an app: roles, implied roles,
// grants and the effective roles a token carries (groups, inheritance, implications), with what it
// leaves in the database read back through the repository.

const store = await openTestStore(t);
const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 0));
const revocations = new Revocations(store, clock);
await revocations.load();
const accessEpoch = new AccessEpoch(store);
const resources = new ResourceService(store, revocations, clock);
const identity = new IdentityService(store, resources, new PasswordHasher({ bcryptRounds: 4 }), revocations, clock);
const assignments = new AssignmentService(store, identity, resources, revocations, undefined, accessEpoch);
const repository = new AssignmentRepository();

let unique = 0;
/** Names differ between subtests: they share the database. */
const named = (prefix: string) => `${prefix}-${++unique}`;
const names = (roles: Role[]) => roles.map((role) => role.name).sort();
/** The user's direct and group grants as stored now. */
const storedGrants = (actorIds: string[]) =>
  repository.findAssignments(store.reader(), { actors: [{ type: 'user', ids: actorIds }, { type: 'group', ids: actorIds }] });

/** A domain with a project tree top → middle → leaf, a user and a group holding the user. */
async function world() {
  const domain = await resources.createDomain({ name: named('domain') });
  const top = await resources.createProject({ name: 'top', domainId: domain.id });
  const middle = await resources.createProject({ name: 'middle', domainId: domain.id, parentId: top.id });
  const leaf = await resources.createProject({ name: 'leaf', domainId: domain.id, parentId: middle.id });
  const user = await identity.createUser({ name: named('user'), domainId: domain.id });
  const group = await identity.createGroup({ name: named('group'), domainId: domain.id });
  await identity.addUserToGroup(group.id, user.id);
  const role = (name: string, domainId?: string) => assignments.createRole({ name: named(name), ...(domainId ? { domainId } : {}) });
  return { domain, top, middle, leaf, user, group, role };
}

t.test('roles: create, update, delete', async (t) => {
  const { domain } = await world();
  const name = named('role');
  const role = await assignments.createRole({ name, description: 'first', options: { immutable: true } });
  t.match(await repository.findRole(store.reader(), role.id), { name, domainId: null, description: 'first', options: { immutable: true } });
  t.same((await assignments.listRoles({ name: [{ operator: 'equals', value: name }] })).map((row) => row.id), [role.id]);

  await t.rejects(assignments.createRole({ name }), { name: 'ConflictError', message: new RegExp(`Duplicate entry found with name ${name}`) });
  const scoped = await assignments.createRole({ name, domainId: domain.id });
  t.equal((await repository.findRole(store.reader(), scoped.id))?.domainId, domain.id, 'the same name in a domain is another role');
  await t.rejects(assignments.createRole({ name, domainId: domain.id }), { name: 'ConflictError', message: new RegExp(`at domain ID ${domain.id}`) });
  await t.rejects(assignments.createRole({ name: named('role'), domainId: 'no-such-domain' }), { name: 'NotFoundError', message: 'Could not find domain: no-such-domain.' });
  t.same((await assignments.listRoles({ domainId: domain.id })).map((row) => row.id), [scoped.id]);

  await t.rejects(assignments.updateRole(role.id, { description: 'second' }), { name: 'ForbiddenError', message: /Unable to update immutable role resource/ });
  await assignments.updateRole(role.id, { description: 'second', options: { immutable: false } });
  t.match(await repository.findRole(store.reader(), role.id), { description: 'second', options: { immutable: false } });
  await t.rejects(assignments.updateRole(role.id, { id: 'other' }), { name: 'ValidationError', message: 'Cannot change role ID' });
  await t.rejects(assignments.updateRole(role.id, { domainId: domain.id }), { name: 'ValidationError', message: 'Update of `domain_id` is not allowed.' });
  const other = await assignments.createRole({ name: named('role') });
  await t.rejects(assignments.updateRole(role.id, { name: other.name }), { name: 'ConflictError', message: new RegExp(`Duplicate entry found with name ${other.name}`) });
  t.equal((await repository.findRole(store.reader(), role.id))?.name, name, 'the refused rename wrote nothing');
  await t.rejects(assignments.getRole('no-such-role'), { name: 'NotFoundError', message: 'Could not find role: no-such-role.' });

  const epoch = await accessEpoch.read();
  await assignments.deleteRole(role.id);
  t.equal(await repository.findRole(store.reader(), role.id), null);
  t.equal(await accessEpoch.read(), epoch + 1, 'deleting a role takes access away: the access epoch moves');
});

t.test('implied roles', async (t) => {
  const { domain, role } = await world();
  const prior = await role('prior');
  const implied = await role('implied');
  const further = await role('further');
  const scoped = await role('scoped', domain.id);

  t.same(await assignments.createImplication(prior.id, implied.id), { prior, implied });
  await assignments.createImplication(prior.id, implied.id);
  await assignments.createImplication(implied.id, further.id);
  t.same(
    (await repository.implications(store.reader(), prior.id)).map((row) => row.impliedRoleId),
    [implied.id],
    'one row, however often it is created',
  );

  const admin = await assignments.createRole({ name: 'admin' });
  await t.rejects(assignments.createImplication(prior.id, admin.id), { name: 'ForbiddenError', message: `${admin.id} cannot be an implied roles.` });
  // As Keystone 22: only a global role implying a domain-specific one is refused, in the words above.
  await t.rejects(assignments.createImplication(prior.id, scoped.id), { name: 'ForbiddenError', message: `${scoped.id} cannot be an implied roles.` });
  await t.rejects(assignments.createImplication(prior.id, 'no-such-role'), { name: 'NotFoundError' });
  t.ok(await assignments.createImplication(scoped.id, implied.id), 'a domain-specific role may imply a global one');
  const sameDomain = await role('same-domain', domain.id);
  const otherDomain = await role('other-domain', (await resources.createDomain({ name: named('domain') })).id);
  t.ok(await assignments.createImplication(scoped.id, sameDomain.id), 'a domain-specific role may imply one of its domain');
  t.ok(await assignments.createImplication(scoped.id, otherDomain.id), 'and one of another domain');

  t.same(await assignments.getImplication(prior.id, implied.id), { prior, implied });
  await t.rejects(assignments.getImplication(prior.id, further.id), { name: 'NotFoundError', message: `${prior.id} does not imply ${further.id}.` });
  t.same(
    (await assignments.listImplications(prior.id)).map((entry) => [entry.prior.id, entry.implied.map((row) => row.id)]),
    [[prior.id, [implied.id]]],
  );
  t.same(await assignments.listImplications(further.id), [{ prior: further, implied: [] }], 'a role that implies nothing');

  const epoch = await accessEpoch.read();
  await assignments.deleteImplication(implied.id, further.id);
  t.equal(await repository.findImplication(store.reader(), implied.id, further.id), null);
  t.equal(await accessEpoch.read(), epoch + 1);
  await t.rejects(assignments.deleteImplication(implied.id, further.id), { name: 'NotFoundError' });
});

t.test('grants: the parties must exist and agree', async (t) => {
  const { domain, top, user, group, role } = await world();
  const member = await role('member');
  const grant: Grant = { actorType: 'user', actorId: user.id, targetType: 'project', targetId: top.id, roleId: member.id };

  await assignments.grant(grant);
  await assignments.grant(grant);
  t.match(await storedGrants([user.id]), [{ ...grant, inherited: false }], 'granted once');
  await assignments.checkGrant(grant);
  t.same(names(await assignments.listGrantedRoles('user', user.id, 'project', top.id)), [member.name]);
  await t.rejects(assignments.checkGrant({ ...grant, inherited: true }), { name: 'NotFoundError', message: /Could not find role assignment with role/ });

  await t.rejects(assignments.grant({ ...grant, roleId: 'no-such-role' }), { name: 'NotFoundError', message: 'Could not find role: no-such-role.' });
  await t.rejects(assignments.grant({ ...grant, actorId: 'no-such-user' }), { name: 'NotFoundError', message: /no-such-user/ });
  await t.rejects(assignments.grant({ ...grant, actorType: 'group', actorId: 'no-such-group' }), { name: 'NotFoundError', message: /no-such-group/ });
  await t.rejects(assignments.grant({ ...grant, targetId: 'no-such-project' }), { name: 'NotFoundError', message: 'Could not find project: no-such-project.' });
  await t.rejects(assignments.grant({ ...grant, targetType: 'domain', targetId: top.id }), { name: 'NotFoundError', message: `Could not find domain: ${top.id}.` });

  // As Keystone 22: a domain-specific role goes to the projects of its domain and to any domain,
  // never to the system; checking or removing a refused grant is only a missing grant.
  const elsewhere = await resources.createDomain({ name: named('domain') });
  const scoped = await role('scoped', elsewhere.id);
  await t.rejects(assignments.grant({ ...grant, roleId: scoped.id }), {
    name: 'ForbiddenError',
    message: `Project ${top.id} must be in the same domain as the role ${scoped.id} being assigned.`,
  });
  await t.rejects(assignments.checkGrant({ ...grant, roleId: scoped.id }), { name: 'NotFoundError' });
  await t.rejects(assignments.revokeGrant({ ...grant, roleId: scoped.id }), { name: 'NotFoundError' });
  const system = { targetType: 'system', targetId: SYSTEM_TARGET_ID } as const;
  await t.rejects(assignments.grant({ ...grant, ...system, roleId: scoped.id }), {
    name: 'ValidationError',
    message: `Role ${scoped.id} is a domain-specific role. Unable to use a domain-specific role in a system assignment.`,
  });
  await t.rejects(assignments.grant({ ...grant, ...system, actorType: 'group', actorId: group.id, roleId: scoped.id }), { name: 'ValidationError' });
  await assignments.grant({ ...grant, roleId: scoped.id, targetType: 'domain', targetId: domain.id });
  await assignments.checkGrant({ ...grant, roleId: scoped.id, targetType: 'domain', targetId: domain.id });
  await assignments.grant({ ...grant, roleId: scoped.id, targetType: 'domain', targetId: domain.id, inherited: true });
  await assignments.grant({ ...grant, actorType: 'group', actorId: group.id, roleId: scoped.id, targetType: 'domain', targetId: elsewhere.id });
  t.equal((await storedGrants([group.id])).length, 1);
  t.equal((await storedGrants([user.id])).length, 3, 'the domain grants (of another domain than the role), nothing of the refused ones');
});

t.test('effective roles: direct, group, inherited and implied', async (t) => {
  const { domain, top, middle, leaf, user, group, role } = await world();
  const direct = await role('direct');
  const viaGroup = await role('via-group');
  const fromDomain = await role('from-domain');
  const fromTop = await role('from-top');
  const implied = await role('implied');
  const impliedAgain = await role('implied-again');
  const scoped = await role('scoped', domain.id);
  const impliedByScoped = await role('implied-by-scoped');
  await assignments.createImplication(direct.id, implied.id);
  await assignments.createImplication(implied.id, impliedAgain.id);
  await assignments.createImplication(impliedAgain.id, direct.id); // a cycle: Keystone allows it
  await assignments.createImplication(scoped.id, impliedByScoped.id);

  const userGrant = { actorType: 'user', actorId: user.id } as const;
  await assignments.grant({ ...userGrant, targetType: 'project', targetId: middle.id, roleId: direct.id });
  await assignments.grant({ actorType: 'group', actorId: group.id, targetType: 'project', targetId: middle.id, roleId: viaGroup.id });
  await assignments.grant({ ...userGrant, targetType: 'domain', targetId: domain.id, roleId: fromDomain.id, inherited: true });
  await assignments.grant({ ...userGrant, targetType: 'project', targetId: top.id, roleId: fromTop.id, inherited: true });
  await assignments.grant({ ...userGrant, targetType: 'project', targetId: middle.id, roleId: scoped.id });

  t.same(
    names(await assignments.effectiveRoles(user.id, 'project', middle.id)),
    names([direct, viaGroup, fromDomain, fromTop, implied, impliedAgain, impliedByScoped]),
    'the domain-specific role itself is left out, what it implies is not',
  );
  t.same(names(await assignments.effectiveRoles(user.id, 'project', top.id)), names([fromDomain]), 'an inherited grant is not on its own target');
  t.same(names(await assignments.effectiveRoles(user.id, 'project', leaf.id)), names([fromDomain, fromTop]), 'direct grants are not inherited');
  t.same(await assignments.effectiveRoles(user.id, 'domain', domain.id), [], 'inherited to projects only');
  t.same(await assignments.effectiveRoles(user.id, 'project', 'no-such-project'), []);
  t.same(await assignments.effectiveRoles(user.id, 'project', domain.id), [], 'a domain id is no project');
  t.equal(await assignments.hasSystemRole(user.id), false);
  await assignments.grant({ ...userGrant, targetType: 'system', targetId: SYSTEM_TARGET_ID, roleId: direct.id });
  t.equal(await assignments.hasSystemRole(user.id), true);
  t.same((await assignments.targetsOfUser(user.id, 'project')).sort(), [top.id, middle.id, leaf.id].sort());

  // The group's members lose the group's roles when they leave it.
  await identity.removeUserFromGroup(group.id, user.id);
  t.notOk(names(await assignments.effectiveRoles(user.id, 'project', middle.id)).includes(viaGroup.name));
});

t.test('role assignment listings', async (t) => {
  const { domain, top, middle, leaf, user, group, role } = await world();
  const member = await role('member');
  const reader = await role('reader');
  await assignments.createImplication(member.id, reader.id);
  await assignments.grant({ actorType: 'group', actorId: group.id, targetType: 'project', targetId: middle.id, roleId: member.id });
  await assignments.grant({ actorType: 'user', actorId: user.id, targetType: 'domain', targetId: domain.id, roleId: reader.id, inherited: true });

  const direct = await assignments.listAssignments({ projectId: middle.id });
  t.match(direct, [{ actorType: 'group', actorId: group.id, roleId: member.id, targetId: middle.id, inherited: false }]);
  t.equal(direct.length, 1);
  t.match(await assignments.listAssignments({ domainId: domain.id, inheritedOnly: true }), [{ actorId: user.id, roleId: reader.id, inherited: true }]);

  const effective = await assignments.listAssignments({ userId: user.id, projectId: middle.id, effective: true });
  const entries = effective.map((entry) => [entry.roleId, entry.targetId, entry.viaGroupId ?? null, entry.priorRoleId ?? null]);
  t.same(
    entries.sort(),
    [
      [member.id, middle.id, group.id, null],
      [reader.id, middle.id, group.id, member.id],
      [reader.id, middle.id, null, null],
    ].sort(),
    'the group grant per member, the implied role, the domain grant placed on the project',
  );
  const subtree = await assignments.listAssignments({ projectId: top.id, includeSubtree: true, effective: true, userId: user.id });
  t.same([...new Set(subtree.map((entry) => entry.targetId))].sort(), [top.id, middle.id, leaf.id].sort());

  const pages: number[] = [];
  for await (const page of await assignments.assignmentPages({ userId: user.id, effective: true }, 1)) pages.push(page.rows.length);
  t.ok(pages.length >= 2, 'one grant per page');
  t.equal(pages.reduce((sum, count) => sum + count, 0), (await assignments.listAssignments({ userId: user.id, effective: true })).length, 'the pages hold the whole listing');

  await t.rejects(assignments.listAssignments({ projectId: top.id, domainId: domain.id }), { name: 'ValidationError', message: 'Specify a domain or project, not both' });
  await t.rejects(assignments.listAssignments({ system: true, projectId: top.id }), { name: 'ValidationError', message: 'Specify system or project, not both' });
  await t.rejects(assignments.listAssignments({ userId: user.id, groupId: group.id }), { name: 'ValidationError', message: 'Specify a user or group, not both' });
  await t.rejects(assignments.listAssignments({ groupId: group.id, effective: true }), { name: 'ValidationError', message: /always result in an empty list/ });
  await t.rejects(assignments.listAssignments({ includeSubtree: true }), { name: 'ValidationError', message: /include_subtree/ });
});

t.test('revoking grants: a revocation event for the last project role, the access epoch otherwise', async (t) => {
  const { top, user, role } = await world();
  const member = await role('member');
  const reader = await role('reader');
  const grant = (roleId: string): Grant => ({ actorType: 'user', actorId: user.id, targetType: 'project', targetId: top.id, roleId });
  await assignments.grant(grant(member.id));
  await assignments.grant(grant(reader.id));

  const events = (await revocations.list()).length;
  const epoch = await accessEpoch.read();
  await assignments.revokeGrant(grant(member.id));
  t.same((await storedGrants([user.id])).map((row) => row.roleId), [reader.id]);
  t.equal((await revocations.list()).length, events, 'a role is left: no event');
  t.equal(await accessEpoch.read(), epoch + 1, 'but the epoch moves');

  await assignments.revokeGrant(grant(reader.id));
  t.same(await storedGrants([user.id]), []);
  t.match((await revocations.list()).slice(events), [{ userId: user.id, projectId: top.id }], 'nothing left: the event');
  t.equal(await accessEpoch.read(), epoch + 1, 'the event tells the other nodes: the epoch stays');

  await t.rejects(assignments.revokeGrant(grant(reader.id)), { name: 'NotFoundError', message: /Could not find role assignment/ });
  t.same(names(await assignments.effectiveRoles(user.id, 'project', top.id)), []);
});
