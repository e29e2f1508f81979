import t from 'tap';
import { ApplicationCredentialRepository } from '../../src/identity/application-credential-repository.ts';
import { SqlIdentityBackend } from '../../src/identity/sql-identity-backend.ts';
import type { ApplicationCredentialRow } from '../../src/store/entities.ts';
import { openTestStore } from '../helpers/store.ts';

// The application-credential repository against a real database: credentials with their roles and
// access rules, lookups by user and name, access rules in use, and what a deletion takes with it.

const NOW = new Date(Date.UTC(2026, 0, 1, 10, 0, 0));

t.test('credentials, their roles and access rules', async (t) => {
  const store = await openTestStore(t);
  const repository = new ApplicationCredentialRepository();
  const users = new SqlIdentityBackend();
  await store.transaction(async (em) => {
    await em.execute(
      `insert into project (id, name, domain_id, parent_id, is_domain, enabled, description, extra, options, tags, created_at)
       values ('d1', 'one', null, null, true, true, '', '{}', '{}', '[]', now())`,
    );
    await em.execute(
      `insert into role (id, name, domain_id, description, options, extra)
       values ('r1', 'reader', null, null, '{}', '{}'), ('r2', 'member', null, null, '{}', '{}'), ('r3', 'reader', 'd1', null, '{}', '{}')`,
    );
    for (const id of ['u1', 'u2']) {
      await users.createUser(em, { id, name: id, domainId: 'd1', enabled: true, defaultProjectId: null, extra: {}, options: {}, createdAt: NOW });
    }
  });

  t.same((await repository.findRoles(store.reader(), ['r1', 'r2', 'nope'])).map((role) => role.id).sort(), ['r1', 'r2']);
  t.equal((await repository.findRole(store.reader(), 'r3'))?.domainId, 'd1');
  t.equal((await repository.findGlobalRoleByName(store.reader(), 'reader'))?.id, 'r1', 'a global role, not the domain-specific one');

  const credential = (id: string, name: string, userId = 'u1'): ApplicationCredentialRow => ({
    id,
    name,
    userId,
    projectId: null,
    secretHash: `hash-${id}`,
    description: null,
    expiresAt: null,
    expiresAtMicroseconds: null,
    unrestricted: null,
    createdAt: NOW,
  });
  await store.transaction(async (em) => {
    await repository.createCredential(em, credential('c1', 'zeta'));
    const rule = await repository.createAccessRule(em, { id: 'a1', userId: 'u1', service: 'compute', path: '/servers', method: 'GET' });
    t.equal(rule.id, 'a1');
    await repository.linkCredential(em, 'c1', ['r1', 'r2'], ['a1']);
    await repository.createCredential(em, credential('c2', 'alpha'));
    await repository.createCredential(em, credential('c3', 'alpha', 'u2'));
  });

  t.equal((await repository.findCredential(store.reader(), 'c1'))?.secretHash, 'hash-c1');
  t.equal(await repository.findCredentialOfUser(store.reader(), 'u2', 'c1'), null, "another user's credential is not found");
  t.equal((await repository.findCredentialByName(store.reader(), 'u2', 'alpha'))?.id, 'c3');
  t.same((await repository.listCredentials(store.reader(), 'u1')).map((row) => row.id), ['c2', 'c1'], 'by name');
  t.same((await repository.listCredentials(store.reader(), 'u1', 'zeta')).map((row) => row.id), ['c1']);
  t.same((await repository.rolesOf(store.reader(), 'c1')).map((role) => role.id).sort(), ['r1', 'r2']);
  t.same(await repository.rolesOf(store.reader(), 'c2'), []);
  t.same((await repository.accessRulesOf(store.reader(), 'c1')).map((rule) => rule.id), ['a1']);

  t.same((await repository.listAccessRules(store.reader(), 'u1', { service: 'compute' })).map((rule) => rule.id), ['a1']);
  t.same(await repository.listAccessRules(store.reader(), 'u1', { method: 'POST' }), []);
  t.equal(await repository.findAccessRule(store.reader(), 'u2', 'a1'), null, "another user's rule is not found");
  t.equal((await repository.findMatchingAccessRule(store.reader(), { userId: 'u1', service: 'compute', path: '/servers', method: 'GET' }))?.id, 'a1');
  t.ok(await repository.isAccessRuleInUse(store.reader(), 'a1'));

  await store.transaction(async (em) => repository.deleteCredential(em, (await repository.findCredential(em, 'c1'))!));
  t.equal(await repository.findCredential(store.reader(), 'c1'), null);
  t.same(await repository.rolesOf(store.reader(), 'c1'), [], 'its role links go with it');
  t.notOk(await repository.isAccessRuleInUse(store.reader(), 'a1'), 'its access rule is no longer in use');
  await store.transaction(async (em) => repository.deleteAccessRule(em, (await repository.findAccessRule(em, 'u1', 'a1'))!));
  t.same(await repository.listAccessRules(store.reader(), 'u1'), []);
});
