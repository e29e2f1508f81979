import t from 'tap';
import { aliceAssertion, FixedAssertionVerifier } from '../helpers/federation.ts';
import { gatewayWorld, IDENTITY_HEADER } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// A federated token at the gateway (issue 17): the shadow user, the project and the roles its mapped
// group holds there, as keystonemiddleware sets them from Keystone's token body. Groups are no
// header of keystonemiddleware's; a disabled identity provider's token is refused.

const ISSUER = 'http://127.0.0.1:19000';
const FED = '/v3/OS-FEDERATION';

t.test('an upstream receives the identity headers of a federated token', async (t) => {
  const w = await gatewayWorld(t, {}, { assertionVerifiers: [new FixedAssertionVerifier(aliceAssertion(ISSUER))] });
  const { call } = w.testApp;
  const ok = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, 201, `${method} ${url}`);
    return answer.json();
  };
  const developers = (await ok('POST', '/v3/groups', { group: { name: 'developers' } })).group.id as string;
  const reader = (await call('GET', '/v3/roles?name=reader')).json().roles[0].id as string;
  t.equal((await call('PUT', `/v3/projects/${w.projectId}/groups/${developers}/roles/${reader}`)).statusCode, 204);
  await ok('PUT', `${FED}/identity_providers/oidc-idp`, { identity_provider: { remote_ids: [ISSUER], enabled: true, domain_id: 'default' } });
  await ok('PUT', `${FED}/mappings/oidc-mapping`, {
    mapping: { rules: [{ local: [{ user: { id: '{0}', name: '{1}' } }, { groups: '{2}', domain: { id: 'default' } }], remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_PREFERRED_USERNAME' }, { type: 'HTTP_OIDC_GROUPS' }] }] },
  });
  await ok('PUT', `${FED}/identity_providers/oidc-idp/protocols/openid`, { protocol: { mapping_id: 'oidc-mapping', remote_id_attribute: 'HTTP_OIDC_ISS' } });

  const login = await call('POST', `${FED}/identity_providers/oidc-idp/protocols/openid/auth`, undefined, null);
  t.equal(login.statusCode, 201);
  const unscoped = String(login.headers['x-subject-token']);
  const userId = login.json().token.user.id as string;
  const scoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: unscoped } }, scope: { project: { id: w.projectId } } } }, null);
  t.equal(scoped.statusCode, 201);
  const token = String(scoped.headers['x-subject-token']);

  const response = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } });
  t.equal(response.status, 200, "reader through the mapped group may GET things");
  const received = w.upstream.received.at(-1)!;
  const identity = Object.fromEntries(Object.entries(received.headers).filter(([name]) => IDENTITY_HEADER.test(name)));
  t.same(identity, {
    'x-identity-status': 'Confirmed',
    'x-user-id': userId,
    'x-user-name': 'alice',
    'x-user-domain-id': 'default',
    'x-user-domain-name': 'Default',
    'x-roles': 'reader',
    'x-project-id': w.projectId,
    'x-project-name': 'gw',
    'x-project-domain-id': 'default',
    'x-project-domain-name': 'Default',
    'x-is-admin-project': 'True',
  });
  const posted = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token, 'content-length': '0' } });
  t.equal(posted.status, 403, "only the group's reader role");
  const unscopedAtGateway = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': unscoped } });
  t.equal(unscopedAtGateway.status, 401, 'an unscoped federated token, as any unscoped token, is refused');

  t.equal((await call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: false } })).statusCode, 200);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } })).status, 401, 'the provider disabled: its tokens are refused');
});
