import t from 'tap';
import { startTestApp } from '../helpers/app.ts';
import { startOidcPeer } from '../helpers/oidc-peer.ts';

// The openid method of POST /v3/auth/tokens without a token id, with the real OIDC verifier and the
// real OpenID Provider of ../shared/peers/oidc: the Bearer access token is what proves who logs in
// (Keystone reads its web server's environment there; nothing sits in front of this service).

const FED = '/v3/OS-FEDERATION';

t.test('the openid method believes a verified Bearer token only', async (t) => {
  const [peer, other] = await Promise.all([startOidcPeer(t), startOidcPeer(t)]);
  // The real verifier (no assertionVerifiers given), access tokens' audience checked.
  const app = await startTestApp(t, { OIDC_AUDIENCES: 'urn:keystone' });
  const created = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const domainId = (await created('POST', '/v3/domains', { domain: { name: 'oidc-users' } })).domain.id as string;
  const developers = (await created('POST', '/v3/groups', { group: { name: 'developers', domain_id: domainId } })).group.id as string;
  const projectId = (await created('POST', '/v3/projects', { project: { name: 'oidc-dev', domain_id: domainId } })).project.id as string;
  const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
  t.equal((await app.call('PUT', `/v3/projects/${projectId}/groups/${developers}/roles/${member}`)).statusCode, 204);
  await created('PUT', `${FED}/identity_providers/oidc-idp`, { identity_provider: { remote_ids: [peer.issuer], enabled: true, domain_id: domainId } });
  await created('PUT', `${FED}/mappings/oidc-mapping`, {
    mapping: {
      rules: [
        {
          local: [{ user: { id: '{0}', name: '{1}' } }, { groups: '{2}', domain: { id: domainId } }],
          remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_PREFERRED_USERNAME' }, { type: 'HTTP_OIDC_GROUPS' }],
        },
      ],
    },
  });
  await created('PUT', `${FED}/identity_providers/oidc-idp/protocols/openid`, { protocol: { mapping_id: 'oidc-mapping', remote_id_attribute: 'HTTP_OIDC_ISS' } });

  const openid = { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } };
  const issue = (identity: unknown, scope: unknown, headers: Record<string, string> = {}) =>
    app.request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ auth: { identity, ...(scope === undefined ? {} : { scope }) } }),
    });

  const alice = await peer.tokens('alice');
  const scoped = await issue(openid, { project: { id: projectId } }, { authorization: `Bearer ${alice.access_token}` });
  t.equal(scoped.statusCode, 201, scoped.body);
  const body = scoped.json().token;
  t.equal(body.user.name, 'alice');
  t.strictSame(body.methods, ['openid']);
  t.equal(body.project.id, projectId);
  t.strictSame(body.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader']);
  t.strictSame(body.user['OS-FEDERATION'].groups, [{ id: developers }], 'admins is no group here: skipped');
  const validated = await app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': String(scoped.headers['x-subject-token']) });
  t.equal(validated.statusCode, 200);

  // The login URL's unscoped token, rescoped through the method with its id.
  const login = await app.request({ method: 'POST', url: `${FED}/identity_providers/oidc-idp/protocols/openid/auth`, headers: { authorization: `Bearer ${alice.access_token}` } });
  t.equal(login.statusCode, 201);
  const rescoped = await issue({ methods: ['openid'], openid: { id: String(login.headers['x-subject-token']) } }, { project: { id: projectId } });
  t.equal(rescoped.statusCode, 201, rescoped.body);
  t.equal(rescoped.json().token.user.id, body.user.id);

  // Refusals.
  const generic = { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' };
  t.strictSame((await issue(openid, undefined)).json().error, generic, 'no Bearer token');
  t.strictSame((await issue(openid, undefined, { authorization: 'Bearer not-a-token' })).json().error, generic, 'a made-up token');
  const headersOnly = await issue(openid, { project: { id: projectId } }, {
    'OIDC-iss': peer.issuer,
    'OIDC-sub': 'alice',
    'OIDC-preferred_username': 'alice',
    'OIDC-groups': 'developers',
    'Remote-User': 'alice',
  });
  t.strictSame(headersOnly.json().error, generic, 'OIDC-* headers alone get nothing');
  const tampered = alice.access_token.split('.');
  const claims = JSON.parse(Buffer.from(tampered[1]!, 'base64url').toString());
  tampered[1] = Buffer.from(JSON.stringify({ ...claims, groups: ['developers', 'admins'], sub: 'mallory' })).toString('base64url');
  t.equal((await issue(openid, undefined, { authorization: `Bearer ${tampered.join('.')}` })).statusCode, 401, 'claims changed: the signature fails');
  const foreign = await other.tokens('alice');
  t.equal((await issue(openid, undefined, { authorization: `Bearer ${foreign.access_token}` })).statusCode, 403, "another provider's token");
  const bob = await peer.tokens('bob');
  t.equal((await issue(openid, { project: { id: projectId } }, { authorization: `Bearer ${bob.access_token}` })).statusCode, 401, 'bob: no role on the project');
  t.equal((await issue(openid, undefined, { authorization: `Bearer ${bob.access_token}` })).statusCode, 201, 'bob: an unscoped token');
});
