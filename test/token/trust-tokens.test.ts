import t from 'tap';
import { NotFoundError } from '../../src/support/errors.ts';
import { startTestApp } from '../helpers/app.ts';

// Trust-scoped tokens at the token service: how long they live, what the token method does with a
// trust scope, and what takes them away (test/http/trusts.test.ts has the API's side).

t.test('a trust token: expiry within the trust, the token method, expiry of the trust, the trustee revoked', async (t) => {
  const { call, login, clock, app } = await startTestApp(t);
  const roles: Record<string, string> = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'tok-trust' } })).json().project.id as string;
  const trustor = (await call('POST', '/v3/users', { user: { name: 'tok-trustor', password: 'Pw-1' } })).json().user.id as string;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'tok-trustee', password: 'Pw-2' } })).json().user.id as string;
  await call('PUT', `/v3/projects/${project}/users/${trustor}/roles/${roles.member}`);
  const trustorToken = (await login({ id: trustor }, 'Pw-1', { project: { id: project } })).token;
  const expiresAt = new Date(Math.floor(clock.now() / 1000) * 1000 + 600_000);
  const created = await call(
    'POST',
    '/v3/OS-TRUST/trusts',
    { trust: { trustor_user_id: trustor, trustee_user_id: trustee, project_id: project, impersonation: false, roles: [{ name: 'reader' }], expires_at: expiresAt.toISOString() } },
    trustorToken,
  );
  t.equal(created.statusCode, 201);
  const trustId = created.json().trust.id as string;

  // With the token method: the unscoped token's expiry and methods carry over, the trust's expiry caps it.
  const unscoped = await login({ id: trustee }, 'Pw-2');
  const viaToken = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: unscoped.token } }, scope: { 'OS-TRUST:trust': { id: trustId } } } }, null);
  t.equal(viaToken.statusCode, 201);
  // As this service lists re-scoped methods everywhere (Keystone's validation order; its issue answer says password, token).
  t.same(viaToken.json().token.methods, ['token', 'password']);
  t.equal(viaToken.json().token.expires_at, expiresAt.toISOString().replace('.000Z', '.000000Z'), 'never past the trust (the default hour is longer)');
  t.same(viaToken.json().token.roles.map((r: { name: string }) => r.name), ['reader']);
  const token = viaToken.headers['x-subject-token'] as string;
  const context = await app.tokens.validate(token);
  t.same(context.trust && { ...context.trust, roles: context.trust.roles.map((role) => role.name) }, { id: trustId, trustorUserId: trustor, trusteeUserId: trustee, impersonation: false, roles: ['reader'] });
  t.equal(context.user.id, trustee);
  t.equal(app.tokens.validateCached(token)?.id, token, 'cached for the gateway');

  // The trustee's password changes: a user_id event revokes its trust tokens too.
  clock.advance(1000);
  const second = await login({ id: trustee }, 'Pw-2', { 'OS-TRUST:trust': { id: trustId } });
  t.equal(second.status, 201);
  t.equal((await call('POST', `/v3/users/${trustee}/password`, { user: { original_password: 'Pw-2', password: 'Pw-3' } }, null)).statusCode, 204);
  await t.rejects(app.tokens.validate(second.token), NotFoundError);
  t.equal(app.tokens.validateCached(second.token), undefined);

  // Past the trust's expiry: no new token, and (had one outlived it) no validation.
  clock.advance(2000);
  t.equal((await login({ id: trustee }, 'Pw-3', { 'OS-TRUST:trust': { id: trustId } })).status, 201);
  clock.set(expiresAt.getTime() + 1000);
  t.equal((await login({ id: trustee }, 'Pw-3', { 'OS-TRUST:trust': { id: trustId } })).status, 401, 'an expired trust gives no token');
});
