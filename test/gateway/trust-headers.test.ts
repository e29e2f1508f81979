import t from 'tap';
import { gatewayWorld, IDENTITY_HEADER } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// A trust-scoped token at the gateway: keystonemiddleware's headers describe the token as Keystone's
// body does (the trustee, or the trustor when impersonating; the trust's project and roles). It sets
// no trust header of its own (auth_token/_request.py): the trust travels only in the token body.

t.test('an upstream receives the identity headers of a trust-scoped token', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const trustorId = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.member })).json().token.user.id;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'gw-trustee', password: 'Pw-2' } })).json().user;
  const trustScoped = async (impersonation: boolean) => {
    const trust = await call(
      'POST',
      '/v3/OS-TRUST/trusts',
      { trust: { trustor_user_id: trustorId, trustee_user_id: trustee.id, project_id: w.projectId, impersonation, roles: [{ name: 'reader' }] } },
      w.member,
    );
    t.equal(trust.statusCode, 201);
    const issued = await login({ id: trustee.id }, 'Pw-2', { 'OS-TRUST:trust': { id: trust.json().trust.id } });
    t.equal(issued.status, 201);
    return { token: issued.token, trustId: trust.json().trust.id as string };
  };

  for (const impersonation of [false, true]) {
    const { token } = await trustScoped(impersonation);
    const response = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } });
    t.equal(response.status, 200, 'reader through the trust may GET things');
    const received = w.upstream.received.at(-1)!;
    const identity = Object.fromEntries(Object.entries(received.headers).filter(([name]) => IDENTITY_HEADER.test(name)));
    const user = impersonation ? { id: trustorId, name: 'gw-member' } : { id: trustee.id, name: 'gw-trustee' };
    t.same(identity, {
      'x-identity-status': 'Confirmed',
      'x-user-id': user.id,
      'x-user-name': user.name,
      'x-user-domain-id': 'default',
      'x-user-domain-name': 'Default',
      'x-roles': 'reader',
      'x-project-id': w.projectId,
      'x-project-name': 'gw',
      'x-project-domain-id': 'default',
      'x-project-domain-name': 'Default',
      'x-is-admin-project': 'True',
    }, impersonation ? 'impersonating: the trustor' : 'the trustee');
    t.equal(received.headers['x-auth-token'], token, 'the trust token reaches keystonemiddleware behind us unchanged');
    const posted = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token, 'content-length': '0' } });
    t.equal(posted.status, 403, 'only the delegated reader role counts, not the trustor\'s member role');
  }

  const { token, trustId } = await trustScoped(false);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } })).status, 200);
  t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${trustId}`, undefined, w.member)).statusCode, 204);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } })).status, 401, 'the trust deleted: its token is refused');
});
