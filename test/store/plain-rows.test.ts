import t from 'tap';
import { AssignmentRepository } from '../../src/assignment/assignment-repository.ts';
import { SqlIdentityBackend } from '../../src/identity/sql-identity-backend.ts';
import { ResourceRepository } from '../../src/resource/resource-repository.ts';
import type { EntityManager } from '../../src/store/database.ts';
import { AssignmentEntity, PasswordEntity, ProjectEntity, UserEntity } from '../../src/store/entities.ts';
import { plainRows } from '../../src/store/plain-rows.ts';
import { openTestStore } from '../helpers/store.ts';

// List reads return plain rows (src/store/plain-rows.ts): the same values an entity read gives,
// without a unit of work holding every row of a long list.

const store = await openTestStore(t);
const at = (second: number) => new Date(Date.UTC(2026, 0, 1, 10, 0, second, 123));

await store.transaction(async (em) => {
  await em.execute(
    `insert into project (id, name, domain_id, parent_id, is_domain, enabled, description, extra, options, tags, created_at)
     values ('d1', 'one', null, null, true, true, '', '{}', '{}', '[]', ?),
            ('p1', 'alpha', 'd1', 'd1', false, false, 'first', '{"colour": "blue", "n": [1, {"x": null}]}', '{"immutable": true}', '["a", "b"]', ?)`,
    [at(0), at(1)],
  );
  await em.execute(
    `insert into identity_user (id, domain_id, name, enabled, default_project_id, extra, options, failed_auth_count, failed_auth_at, last_active_at, created_at)
     values ('u1', 'd1', 'ann', true, 'p1', '{"email": "ann@example.org"}', '{}', 2, ?, null, ?),
            ('u2', 'd1', 'bob', false, null, '{}', '{"lock_password": true}', 0, null, ?, ?)`,
    [at(2), at(3), at(4), at(5)],
  );
  await em.execute(
    `insert into password (user_id, password_hash, created_at, expires_at, self_service)
     values ('u1', 'old', ?, ?, false), ('u1', 'new', ?, null, true), ('u2', null, ?, null, false)`,
    [at(6), at(7), at(7), at(8)],
  );
  await em.execute(`insert into role (id, name, domain_id, description, options, extra) values ('r1', 'reader', null, null, '{}', '{}'), ('r9', 'other', null, null, '{}', '{}')`);
  await em.execute(
    `insert into role_assignment (actor_type, actor_id, target_type, target_id, role_id, inherited)
     values ('user', 'u1', 'project', 'p1', 'r1', false), ('user', 'u1', 'domain', 'd1', 'r1', true)`,
  );
});

/** The entities an entity read gives, as plain objects with the same properties. */
async function entityRead(entity: Parameters<typeof plainRows>[1], orderBy: Record<string, 'asc' | 'desc'>): Promise<object[]> {
  const rows = (await store.reader().find(entity, {}, { orderBy })) as object[];
  return rows.map((row) => ({ ...row }));
}

const managedCount = (em: EntityManager) => em.getUnitOfWork().getIdentityMap().values().length;

t.test('plain rows hold the values an entity read gives (dates, JSON, booleans, nulls, integers)', async (t) => {
  const cases = [
    [UserEntity, { name: 'asc' }],
    [ProjectEntity, { id: 'asc' }],
    [PasswordEntity, { id: 'asc' }],
    [AssignmentEntity, { targetType: 'asc' }],
  ] as const;
  for (const [entity, orderBy] of cases) {
    const em = store.reader();
    const plain = await plainRows(em, entity as Parameters<typeof plainRows>[1], {}, { orderBy });
    t.strictSame(plain, await entityRead(entity as Parameters<typeof plainRows>[1], orderBy), `${entity.meta.className}: the same rows and values`);
    t.ok(plain.length >= 2, `${entity.meta.className}: rows were read`);
    for (const row of plain) t.equal(Object.getPrototypeOf(row), Object.prototype, `${entity.meta.className}: a plain object`);
    t.equal(managedCount(em), 0, `${entity.meta.className}: nothing registered in the unit of work`);
  }
  const [ann] = await plainRows(store.reader(), UserEntity, { id: 'u1' }, { orderBy: { id: 'asc' } });
  t.ok(ann!.failedAuthAt instanceof Date, 'a timestamp is a Date');
  t.equal(ann!.failedAuthAt!.getTime(), at(2).getTime(), 'to the millisecond');
  t.same(ann!.extra, { email: 'ann@example.org' }, 'JSON is parsed');
  t.equal(ann!.lastActiveAt, null);
});

t.test('a limit, a condition and an order are applied', async (t) => {
  const rows = await plainRows(store.reader(), PasswordEntity, { userId: 'u1' }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: 1 });
  t.same(rows.map((row) => row.passwordHash), ['new']);
});

t.test('inside a transaction, plain rows see what it has written', async (t) => {
  await t.rejects(
    store.transaction(async (em) => {
      await em.execute(`insert into role_assignment (actor_type, actor_id, target_type, target_id, role_id, inherited) values ('user', 'u2', 'project', 'p1', 'r9', false)`);
      const rows = await plainRows(em, AssignmentEntity, { roleId: 'r9' }, { orderBy: { actorId: 'asc' } });
      t.same(rows, [{ actorType: 'user', actorId: 'u2', targetType: 'project', targetId: 'p1', roleId: 'r9', inherited: false }]);
      throw new Error('roll back');
    }),
    { message: 'roll back' },
  );
  t.same(await plainRows(store.reader(), AssignmentEntity, { roleId: 'r9' }, { orderBy: { actorId: 'asc' } }), [], 'rolled back');
});

t.test("the list reads of users, passwords, projects and assignments leave nothing in the reader's unit of work", async (t) => {
  const identity = new SqlIdentityBackend();
  const resources = new ResourceRepository();
  const assignments = new AssignmentRepository();
  const reads: [string, (em: EntityManager) => Promise<unknown[]>][] = [
    ['users', (em) => identity.listUsers(em, {})],
    ['a page of users', (em) => identity.listUsers(em, { domainId: 'd1' }, { limit: 1, after: undefined })],
    ['current passwords', async (em) => [...(await identity.currentPasswords(em, ['u1', 'u2'])).values()]],
    ['projects', (em) => resources.list(em, {})],
    ['assignments', (em) => assignments.findAssignments(em, { actors: [{ type: 'user', ids: ['u1'] }] })],
  ];
  for (const [name, read] of reads) {
    const em = store.reader();
    const rows = await read(em);
    t.ok(rows.length > 0, `${name}: read`);
    t.equal(managedCount(em), 0, `${name}: no entity registered`);
  }
  const passwords = await identity.currentPasswords(store.reader(), ['u1', 'u2']);
  t.same(Object.fromEntries([...passwords].map(([userId, row]) => [userId, row.passwordHash])), { u1: 'new', u2: null }, 'the newest password of each user');
});
