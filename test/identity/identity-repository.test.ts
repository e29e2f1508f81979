import t from 'tap';
import { Revocations } from '../../src/events/revocation.ts';
import { IdentityRepository, type IdentityBackend } from '../../src/identity/identity-repository.ts';
import { IdentityService } from '../../src/identity/identity-service.ts';
import { PasswordHasher } from '../../src/identity/password-hash.ts';
import { SqlIdentityBackend } from '../../src/identity/sql-identity-backend.ts';
import type { EntityManager } from '../../src/store/database.ts';
import { ResourceService } from '../../src/resource/resource-service.ts';
import { ForbiddenError, NotFoundError, statusOf } from '../../src/support/errors.ts';
import { ManualClock } from '../helpers/clock.ts';
import { openTestStore } from '../helpers/store.ts';

// The identity service over per-domain back ends: a domain whose back end is read-only (Keystone's
// LDAP driver) is read like any other, and every write to its users, groups and memberships is
// refused with Keystone's generic 403, changing nothing; the other domains stay writable.

const FORBIDDEN = 'You are not authorized to perform the requested action.';

/** The SQL driver's reads with no writes: a stand-in for a directory domain. */
function readOnly(backend: SqlIdentityBackend): IdentityBackend {
  return Object.assign(Object.create(backend) as IdentityBackend, { writes: null });
}

/** Domain `directory`'s users and groups are in the read-only back end; every other domain's in SQL. */
class TwoBackends extends IdentityRepository {
  readonly directoryIds = new Set<string>();
  constructor(
    sql: IdentityBackend,
    private readonly directory: IdentityBackend,
    private readonly directoryDomainId: string,
  ) {
    super(sql);
  }
  override backendFor(domainId: string): IdentityBackend {
    return domainId === this.directoryDomainId ? this.directory : this.defaultBackend;
  }
  override backendOf(id: string): IdentityBackend {
    return this.directoryIds.has(id) ? this.directory : this.defaultBackend;
  }
}

t.test('a read-only back end is read, and every write to it is a 403 that changes nothing', async (t) => {
  const store = await openTestStore(t);
  const clock = new ManualClock();
  const revocations = new Revocations(store, clock);
  await revocations.load();
  const resources = new ResourceService(store, revocations, clock);
  const sql = new SqlIdentityBackend();
  const sqlDomain = await resources.createDomain({ name: 'sql' });
  const directoryDomain = await resources.createDomain({ name: 'directory' });
  const repository = new TwoBackends(sql, readOnly(sql), directoryDomain.id);
  const identity = new IdentityService(store, resources, new PasswordHasher({ bcryptRounds: 4 }), revocations, clock, undefined, undefined, undefined, undefined, repository);

  // The directory's content (seeded through the SQL driver underneath the stand-in).
  await store.transaction(async (em) => {
    await sql.createUser(em, { id: 'dir-alice', domainId: directoryDomain.id, name: 'alice', enabled: true, defaultProjectId: null, extra: {}, options: {}, createdAt: new Date(clock.now()) });
    await sql.createGroup(em, { id: 'dir-staff', domainId: directoryDomain.id, name: 'staff', description: '', extra: {} });
    await sql.addMember(em, 'dir-alice', 'dir-staff');
  });
  repository.directoryIds.add('dir-alice').add('dir-staff');
  const sqlUser = await identity.createUser({ name: 'bob', domainId: sqlDomain.id, password: 'Secret-1' });
  const sqlGroup = await identity.createGroup({ name: 'ops', domainId: sqlDomain.id });

  // Reads.
  t.match(await identity.getUser('dir-alice'), { id: 'dir-alice', name: 'alice', domainId: directoryDomain.id, passwordExpiresAt: null });
  t.same((await identity.listUsers({ domainId: directoryDomain.id })).map((user) => user.id), ['dir-alice']);
  t.same((await identity.listGroups({ userId: 'dir-alice' })).map((group) => group.id), ['dir-staff']);
  t.same(await identity.membersOfGroups(['dir-staff', sqlGroup.id]), new Map([['dir-staff', ['dir-alice']]]), 'members of groups in both back ends');
  await identity.checkUserInGroup('dir-staff', 'dir-alice');
  t.equal((await identity.resolveUser({ name: 'alice', domainId: directoryDomain.id }))?.id, 'dir-alice');

  // Writes.
  const refused = async (name: string, write: Promise<unknown>) => {
    const error = await write.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    t.ok(error instanceof ForbiddenError, `${name}: forbidden`);
    if (error instanceof ForbiddenError) {
      t.equal(error.message, FORBIDDEN, `${name}: Keystone's generic message`);
      t.equal(statusOf(error), 403, `${name}: 403`);
    }
  };
  await refused('create user', identity.createUser({ name: 'carol', domainId: directoryDomain.id }));
  await refused('update user', identity.updateUser('dir-alice', { name: 'alicia' }));
  await refused('disable user', identity.updateUser('dir-alice', { enabled: false }));
  await refused('reset password', identity.updateUser('dir-alice', { password: 'Other-1' }));
  await refused('delete user', identity.deleteUser('dir-alice'));
  await refused('create group', identity.createGroup({ name: 'more', domainId: directoryDomain.id }));
  await refused('update group', identity.updateGroup('dir-staff', { name: 'everyone' }));
  await refused('delete group', identity.deleteGroup('dir-staff'));
  await refused('add member', identity.addUserToGroup('dir-staff', sqlUser.id));
  await refused('remove member', identity.removeUserFromGroup('dir-staff', 'dir-alice'));

  t.match(await identity.getUser('dir-alice'), { name: 'alice', enabled: true }, 'the user is unchanged');
  t.same(await sql.passwordHistory(store.reader(), 'dir-alice'), [], 'no password was stored');
  t.same((await identity.listUsers({ domainId: directoryDomain.id })).map((user) => user.name), ['alice'], 'no user was added');
  t.same((await identity.listGroups({ domainId: directoryDomain.id })).map((group) => group.name), ['staff'], 'the groups are unchanged');
  t.same(await identity.membersOfGroups(['dir-staff']), new Map([['dir-staff', ['dir-alice']]]), 'the memberships are unchanged');

  // A missing entity is still a 404 before the back end is asked to write.
  await t.rejects(identity.updateUser('no-such-user', { name: 'x' }), NotFoundError.of('user', 'no-such-user'));

  // The SQL domain stays writable through the same service.
  await identity.addUserToGroup(sqlGroup.id, sqlUser.id);
  t.same(await identity.membersOfGroups([sqlGroup.id]), new Map([[sqlGroup.id, [sqlUser.id]]]));
  t.equal((await identity.authenticatePassword({ id: sqlUser.id }, 'Secret-1')).id, sqlUser.id);
});

t.test('the default resolver sends every domain and id to the default back end', async (t) => {
  const sql = new SqlIdentityBackend();
  const repository = new IdentityRepository(sql);
  t.equal(repository.backendFor('any-domain'), sql);
  t.equal(repository.backendOf('any-id'), sql);
  t.equal(repository.backendOfQuery({}), sql);
  // Without directory domains no mapping is read: the entity manager is never used.
  const unused = {} as EntityManager;
  t.equal(await repository.resolve('any-id', unused), sql);
  t.same([...(await repository.byBackend(['a', 'b'], unused))], [[sql, ['a', 'b']]]);
  t.same((await repository.byBackend([], unused)).size, 0);
});
