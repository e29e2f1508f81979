import t from 'tap';
import { PasswordEntity, UserEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('users', async (t) => {
  const { call, app, login } = await startTestApp(t);
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'ud' } })).json().domain;

  const created = await call('POST', '/v3/users', { user: { name: 'alice', domain_id: domain.id, password: 'Secret-1', email: 'a@example.org' } });
  t.equal(created.statusCode, 201);
  const alice = created.json().user;
  t.match(alice, { name: 'alice', domain_id: domain.id, enabled: true, password_expires_at: null, options: {}, email: 'a@example.org' });
  t.notOk('password' in alice, 'password is write-only');
  t.notOk('default_project_id' in alice, 'absent when null');
  t.equal(alice.links.self, `${PUBLIC_URL}/v3/users/${alice.id}`);
  const stored = await app.store.reader().findOne(PasswordEntity, { userId: alice.id });
  t.match(stored?.passwordHash, /^\$2b\$04\$/, 'bcrypt like Keystone');

  const inDefault = await call('POST', '/v3/users', { user: { name: 'alice' } });
  t.equal(inDefault.statusCode, 201);
  t.equal(inDefault.json().user.domain_id, 'default');

  const duplicate = await call('POST', '/v3/users', { user: { name: 'alice', domain_id: domain.id } });
  t.equal(duplicate.statusCode, 409);
  t.equal(duplicate.json().error.message, `Conflict occurred attempting to store user - Duplicate entry found with name alice at domain ID ${domain.id}.`);
  t.equal((await call('POST', '/v3/users', { user: { name: 'x', domain_id: 'nope' } })).statusCode, 404);

  // The CLI looks a name up as an id first and needs a clean 404 before it lists by name.
  const byName = await call('GET', '/v3/users/alice');
  t.equal(byName.statusCode, 404);
  t.equal(byName.json().error.message, 'Could not find user: alice.');
  const listed = await call('GET', `/v3/users?name=alice&domain_id=${domain.id}`);
  t.same(listed.json().users.map((u: { id: string }) => u.id), [alice.id]);
  t.equal((await call('GET', '/v3/users?name=alice')).json().users.length, 2);
  t.equal((await call('GET', '/v3/users?enabled=0')).json().users.length, 0);

  const patched = await call('PATCH', `/v3/users/${alice.id}`, { user: { description: 'ops', email: 'b@example.org' } });
  t.equal(patched.statusCode, 200);
  t.match(patched.json().user, { description: 'ops', email: 'b@example.org', extra: { description: 'ops', email: 'b@example.org' } });
  t.notOk('extra' in (await call('GET', `/v3/users/${alice.id}`)).json().user);
  t.equal((await call('PATCH', `/v3/users/${alice.id}`, { user: { domain_id: 'default' } })).statusCode, 400);

  const project = (await call('POST', '/v3/projects', { project: { name: 'up', domain_id: domain.id } })).json().project;
  const role = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${alice.id}/roles/${role.id}`)).statusCode, 204);
  const projects = await call('GET', `/v3/users/${alice.id}/projects`);
  t.same(projects.json().projects.map((p: { id: string }) => p.id), [project.id]);

  const session = await login({ id: alice.id }, 'Secret-1', { project: { id: project.id } });
  t.equal(session.status, 201);
  const self = await call('GET', `/v3/users/${alice.id}`, undefined, session.token);
  t.equal(self.statusCode, 200, 'a user may read itself');
  const other = await call('GET', `/v3/users/${inDefault.json().user.id}`, undefined, session.token);
  t.equal(other.statusCode, 403);
  t.equal(other.json().error.message, 'You are not authorized to perform the requested action: identity:get_user.');
  t.equal((await call('GET', `/v3/users/${alice.id}/projects`, undefined, session.token)).statusCode, 200);

  const disabled = await call('PATCH', `/v3/users/${alice.id}`, { user: { enabled: false } });
  t.equal(disabled.statusCode, 200);
  t.equal((await call('GET', '/v3/auth/catalog', undefined, session.token)).statusCode, 401, 'tokens of a disabled user stop working');
  t.equal((await login({ id: alice.id }, 'Secret-1')).status, 401);

  t.equal((await call('DELETE', `/v3/users/${alice.id}`)).statusCode, 204);
  t.equal((await call('DELETE', `/v3/users/${alice.id}`)).statusCode, 404);
  t.equal(await app.store.reader().count(UserEntity, { id: alice.id }), 0);
  t.equal(await app.store.reader().count(PasswordEntity, { userId: alice.id }), 0);
});

t.test('self-service password change', async (t) => {
  const { call, login, clock } = await startTestApp(t);
  const user = (await call('POST', '/v3/users', { user: { name: 'bob', password: 'Old-pass-1' } })).json().user;
  const before = await login({ id: user.id }, 'Old-pass-1');
  t.equal(before.status, 201);

  const wrong = await call('POST', `/v3/users/${user.id}/password`, { user: { original_password: 'nope', password: 'New-pass-2' } }, null);
  t.equal(wrong.statusCode, 401);
  const extra = await call('POST', `/v3/users/${user.id}/password`, { user: { original_password: 'Old-pass-1', password: 'x', other: 1 } }, null);
  t.equal(extra.statusCode, 400, 'the body schema forbids other keys');
  const missing = await call('POST', `/v3/users/${user.id}/password`, { user: { password: 'x' } }, null);
  t.equal(missing.statusCode, 400);
  t.equal((await call('GET', `/v3/users/${user.id}/password`)).statusCode, 405);

  clock.advance(2000);
  const changed = await call('POST', `/v3/users/${user.id}/password`, { user: { original_password: 'Old-pass-1', password: 'New-pass-2' } }, null);
  t.equal(changed.statusCode, 204);
  t.equal((await login({ id: user.id }, 'Old-pass-1')).status, 401);
  t.equal((await login({ id: user.id }, 'New-pass-2')).status, 201);
  const validate = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': before.token });
  t.equal(validate.statusCode, 404, 'tokens issued before the change are revoked');

  const disabled = await call('PATCH', `/v3/users/${user.id}`, { user: { enabled: false } });
  t.equal(disabled.statusCode, 200);
  const whileDisabled = await call('POST', `/v3/users/${user.id}/password`, { user: { original_password: 'New-pass-2', password: 'Third-3' } }, null);
  t.equal(whileDisabled.statusCode, 401);
  t.equal(whileDisabled.json().error.message, `The account is disabled for user: ${user.id}.`);
});

t.test('password hashes from a Keystone database verify', async (t) => {
  const { call, app, login } = await startTestApp(t);
  const user = (await call('POST', '/v3/users', { user: { name: 'migrated' } })).json().user;
  // passlib bcrypt of "password" at cost 12, as Keystone 22 writes it.
  const keystoneHash = '$2b$12$oGC49VpnErhsZGyRNEDgA.90Ffr8fi3sHnRberb5RpdTJF8S8IgOe';
  await app.store.transaction(async (em) => {
    em.create(PasswordEntity, { userId: user.id, passwordHash: keystoneHash, createdAt: new Date(), expiresAt: null, selfService: false });
    await em.flush();
  });
  t.equal((await login({ id: user.id }, 'wrong')).status, 401);
  t.equal((await login({ name: 'migrated', domain: { id: 'default' } }, 'password')).status, 201);
});
