import t from 'tap';
import { SqlIdentityBackend } from '../../src/identity/sql-identity-backend.ts';
import type { NewUser } from '../../src/identity/identity-repository.ts';
import type { Store } from '../../src/store/database.ts';
import { openTestStore } from '../helpers/store.ts';

// The SQL identity driver against a real database: what the identity service relies on a back end
// for (reads, writes stored within the caller's transaction, password history, lockout bookkeeping).

const NOW = new Date(Date.UTC(2026, 0, 1, 10, 0, 0));

async function freshStore(t: { teardown(fn: () => unknown): void }): Promise<Store> {
  const store = await openTestStore(t);
  await store.transaction((em) =>
    em.execute(
      `insert into project (id, name, domain_id, parent_id, is_domain, enabled, description, extra, options, tags, created_at)
       values ('d1', 'one', null, null, true, true, '', '{}', '{}', '[]', now()), ('d2', 'two', null, null, true, true, '', '{}', '{}', '[]', now())`,
    ),
  );
  return store;
}

function newUser(id: string, name: string, domainId = 'd1'): NewUser {
  return { id, name, domainId, enabled: true, defaultProjectId: null, extra: {}, options: {}, createdAt: NOW };
}

t.test('users: created, found by id and by name in a domain, listed by name then id, updated, deleted', async (t) => {
  const store = await freshStore(t);
  const sql = new SqlIdentityBackend();
  t.equal(sql.writes, sql, 'the SQL driver is writable');
  await store.transaction(async (em) => {
    await sql.createUser(em, newUser('u2', 'bob'));
    await sql.createUser(em, newUser('u1', 'bob', 'd2'));
    await sql.createUser(em, newUser('u3', 'alice'));
  });

  const found = await sql.findUser(store.reader(), 'u2');
  t.match(found, { id: 'u2', name: 'bob', domainId: 'd1', enabled: true, failedAuthCount: 0, failedAuthAt: null, lastActiveAt: null });
  t.equal((await sql.findUserByName(store.reader(), 'bob', 'd2'))?.id, 'u1', 'a name is looked up in its domain');
  t.equal(await sql.findUserByName(store.reader(), 'carol', 'd1'), null);
  t.equal(await sql.findUser(store.reader(), 'nobody'), null);

  const ids = async (query: Parameters<SqlIdentityBackend['listUsers']>[1], page?: Parameters<SqlIdentityBackend['listUsers']>[2]) =>
    (await sql.listUsers(store.reader(), query, page)).map((user) => user.id);
  t.same(await ids({}), ['u3', 'u1', 'u2'], 'by name, then id');
  t.same(await ids({ domainId: 'd1' }), ['u3', 'u2']);
  t.same(await ids({ name: [{ operator: 'equals', value: 'bob' }] }), ['u1', 'u2']);
  t.same(await ids({ ids: ['u2', 'u3'] }), ['u3', 'u2']);
  t.same(await ids({}, { limit: 2, after: undefined }), ['u3', 'u1'], 'a page');
  const [, last] = await sql.listUsers(store.reader(), {}, { limit: 2, after: undefined });
  t.same(await ids({}, { limit: 2, after: last! }), ['u2'], 'the page after');

  await store.transaction(async (em) => {
    const user = (await sql.findUser(em, 'u2'))!;
    const updated = await sql.updateUser(em, user, { name: 'robert', enabled: false });
    t.match(updated, { id: 'u2', name: 'robert', enabled: false });
  });
  t.match(await sql.findUser(store.reader(), 'u2'), { name: 'robert', enabled: false }, 'the update is stored');
  t.same(await ids({ enabled: false }), ['u2']);

  await store.transaction(async (em) => sql.deleteUser(em, (await sql.findUser(em, 'u2'))!));
  t.equal(await sql.findUser(store.reader(), 'u2'), null, 'deleted');
});

t.test('writes land with the caller\'s transaction, or not at all', async (t) => {
  const store = await freshStore(t);
  const sql = new SqlIdentityBackend();
  await t.rejects(
    store.transaction(async (em) => {
      await sql.createUser(em, newUser('u1', 'alice'));
      await sql.createGroup(em, { id: 'g1', domainId: 'd1', name: 'admins', description: '', extra: {} });
      t.ok(await sql.findUser(em, 'u1'), 'visible inside the transaction');
      throw new Error('rolled back');
    }),
    /rolled back/,
  );
  t.equal(await sql.findUser(store.reader(), 'u1'), null);
  t.equal(await sql.findGroup(store.reader(), 'g1'), null);
});

t.test('passwords: the newest is current; a new one keeps `keep` earlier ones as history, expired now', async (t) => {
  const store = await freshStore(t);
  const sql = new SqlIdentityBackend();
  await store.transaction(async (em) => {
    await sql.createUser(em, newUser('u1', 'alice'));
    await sql.createUser(em, newUser('u2', 'bob'));
  });
  const at = (minutes: number) => new Date(NOW.getTime() + minutes * 60_000);
  const later = at(60 * 24 * 365);
  for (const [minute, hash] of [
    [1, 'h1'],
    [2, 'h2'],
    [3, 'h3'],
  ] as const) {
    await store.transaction((em) => sql.setPassword(em, 'u1', { passwordHash: hash, createdAt: at(minute), expiresAt: later, selfService: false }, 1));
  }
  await store.transaction((em) => sql.setPassword(em, 'u2', { passwordHash: 'b1', createdAt: at(1), expiresAt: null, selfService: true }, 1));

  const history = await sql.passwordHistory(store.reader(), 'u1');
  t.same(
    history.map((row) => [row.passwordHash, row.expiresAt?.getTime()]),
    [
      ['h3', later.getTime()],
      ['h2', at(3).getTime()],
    ],
    'newest first; one earlier password kept, expired when the next was set; older ones deleted',
  );
  const current = await sql.currentPasswords(store.reader(), ['u1', 'u2', 'nobody']);
  t.same([...current.keys()].sort(), ['u1', 'u2']);
  t.equal(current.get('u1')?.passwordHash, 'h3');
  t.match(current.get('u2'), { passwordHash: 'b1', expiresAt: null, selfService: true });
  t.equal((await sql.currentPasswords(store.reader(), [])).size, 0);
});

t.test('lockout and activity bookkeeping are single statements outside any transaction', async (t) => {
  const store = await freshStore(t);
  const sql = new SqlIdentityBackend();
  await store.transaction((em) => sql.createUser(em, newUser('u1', 'alice')));
  const lock = { attempts: 2, expiredBefore: new Date(NOW.getTime() - 60_000) };
  await sql.recordFailedAuth(store.reader(), 'u1', NOW, lock);
  await sql.recordFailedAuth(store.reader(), 'u1', NOW, lock);
  await sql.recordFailedAuth(store.reader(), 'nobody', NOW, lock);
  t.match(await sql.findUser(store.reader(), 'u1'), { failedAuthCount: 2, failedAuthAt: NOW });
  // Once the lock has run out, the next failure starts a new count.
  const later = new Date(NOW.getTime() + 120_000);
  await sql.recordFailedAuth(store.reader(), 'u1', later, { attempts: 2, expiredBefore: new Date(later.getTime() - 60_000) });
  t.match(await sql.findUser(store.reader(), 'u1'), { failedAuthCount: 1, failedAuthAt: later });
  await sql.resetFailedAuth(store.reader(), 'u1');
  await sql.recordActivity(store.reader(), 'u1', later);
  t.match(await sql.findUser(store.reader(), 'u1'), { failedAuthCount: 0, failedAuthAt: null, lastActiveAt: later });
});

t.test('groups and memberships', async (t) => {
  const store = await freshStore(t);
  const sql = new SqlIdentityBackend();
  await store.transaction(async (em) => {
    await sql.createUser(em, newUser('u1', 'alice'));
    await sql.createUser(em, newUser('u2', 'bob'));
    await sql.createGroup(em, { id: 'g2', domainId: 'd1', name: 'staff', description: 'everyone', extra: {} });
    await sql.createGroup(em, { id: 'g1', domainId: 'd1', name: 'admins', description: '', extra: { x: 1 } });
    await sql.createGroup(em, { id: 'g3', domainId: 'd2', name: 'admins', description: '', extra: {} });
    await sql.addMember(em, 'u1', 'g1');
    await sql.addMember(em, 'u1', 'g2');
    await sql.addMember(em, 'u2', 'g2');
  });
  t.match(await sql.findGroup(store.reader(), 'g1'), { id: 'g1', name: 'admins', domainId: 'd1', extra: { x: 1 } });
  const ids = async (query: Parameters<SqlIdentityBackend['listGroups']>[1]) => (await sql.listGroups(store.reader(), query)).map((group) => group.id);
  t.same(await ids({}), ['g1', 'g3', 'g2'], 'by name, then id');
  t.same(await ids({ domainId: 'd1' }), ['g1', 'g2']);
  t.same(await ids({ userId: 'u2' }), ['g2']);
  t.same((await sql.groupIdsOfUser(store.reader(), 'u1')).sort(), ['g1', 'g2']);
  t.ok(await sql.isMember(store.reader(), 'u2', 'g2'));
  t.notOk(await sql.isMember(store.reader(), 'u2', 'g1'));
  const members = await sql.userIdsInGroups(store.reader(), ['g1', 'g2', 'g3']);
  t.same(members.get('g1'), ['u1']);
  t.same(members.get('g2')?.sort(), ['u1', 'u2']);
  t.notOk(members.has('g3'), 'a group without members is absent');
  t.same((await sql.listUsers(store.reader(), { groupId: 'g2' })).map((user) => user.id), ['u1', 'u2'], 'users of a group');

  await store.transaction(async (em) => {
    await sql.updateGroup(em, (await sql.findGroup(em, 'g1'))!, { name: 'operators', description: 'ops' });
    await sql.removeMember(em, 'u1', 'g2');
  });
  t.match(await sql.findGroup(store.reader(), 'g1'), { name: 'operators', description: 'ops' });
  t.same(await sql.groupIdsOfUser(store.reader(), 'u1'), ['g1']);

  await store.transaction(async (em) => sql.deleteGroup(em, (await sql.findGroup(em, 'g1'))!));
  t.equal(await sql.findGroup(store.reader(), 'g1'), null);
  t.same(await sql.groupIdsOfUser(store.reader(), 'u1'), [], 'its memberships go with it');
});
