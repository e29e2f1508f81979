import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { startTestApp } from '../helpers/app.ts';
import { debianPython } from '../helpers/debian-packages.ts';
import { OIDC_CLIENT, startOidcPeer } from '../helpers/oidc-peer.ts';

// The whole OIDC federated login, nothing stood in: the real OpenID Provider of ../shared/peers/oidc
// issues alice's access token (password grant); this service verifies it with the provider's
// published keys (OidcAssertionVerifier, the default verifier), maps her groups and issues a
// federated token, which keystoneauth's own v3oidcpassword plugin also obtains.

const FED = '/v3/OS-FEDERATION';

t.test('a bearer token from the real OpenID Provider gives a federated token; its group grants its roles', async (t) => {
  const op = await startOidcPeer(t);
  const test = await startTestApp(t);
  await test.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = test.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const { call } = test;
  const ok = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, 201, `${method} ${url}`);
    return answer.json();
  };
  const domain = (await ok('POST', '/v3/domains', { domain: { name: 'oidc-users' } })).domain.id as string;
  const developers = (await ok('POST', '/v3/groups', { group: { name: 'developers', domain_id: domain } })).group.id as string;
  const project = (await ok('POST', '/v3/projects', { project: { name: 'oidc-dev', domain_id: domain } })).project.id as string;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
  t.equal((await call('PUT', `/v3/projects/${project}/groups/${developers}/roles/${member}`)).statusCode, 204);
  await ok('PUT', `${FED}/identity_providers/oidc-idp`, { identity_provider: { remote_ids: [op.issuer], enabled: true, domain_id: domain } });
  await ok('PUT', `${FED}/mappings/oidc-mapping`, {
    mapping: {
      rules: [
        {
          local: [{ user: { id: '{0}', name: '{1}', email: '{2}' } }, { groups: '{3}', domain: { id: domain } }],
          remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_PREFERRED_USERNAME' }, { type: 'HTTP_OIDC_EMAIL' }, { type: 'HTTP_OIDC_GROUPS' }],
        },
      ],
    },
  });
  await ok('PUT', `${FED}/identity_providers/oidc-idp/protocols/openid`, { protocol: { mapping_id: 'oidc-mapping', remote_id_attribute: 'HTTP_OIDC_ISS' } });
  const login = `${base}${FED}/identity_providers/oidc-idp/protocols/openid/auth`;
  // The provider stamps its tokens with the real time (iat), and the service refuses one issued more
  // than OIDC_CLOCK_SKEW_SECONDS after its own clock: the test's clock, set when the app started, is
  // moved to the real time before each token is used (on a loaded machine this test has run 97 s).
  const realTime = () => test.clock.set(Date.now());

  realTime();

  const { access_token: accessToken } = await op.tokens('alice');
  const answer = await fetch(login, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } });
  t.equal(answer.status, 201);
  const unscoped = answer.headers.get('x-subject-token')!;
  const body = (await answer.json()) as { token: { methods: string[]; user: { name: string; domain: { id: string }; 'OS-FEDERATION': { groups: { id: string }[]; identity_provider: { id: string }; protocol: { id: string } } } } };
  t.same(body.token.methods, ['openid']);
  t.equal(body.token.user.name, 'alice');
  t.equal(body.token.user.domain.id, domain);
  t.same(body.token.user['OS-FEDERATION'], { groups: [{ id: developers }], identity_provider: { id: 'oidc-idp' }, protocol: { id: 'openid' } }, 'admins is no group here: skipped, as Keystone');

  const projects = await call('GET', '/v3/auth/projects', undefined, unscoped);
  t.same(projects.json().projects.map((p: { id: string }) => p.id), [project], 'the project of her mapped group');
  const rescoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: unscoped } }, scope: { project: { id: project } } } }, null);
  t.equal(rescoped.statusCode, 201);
  t.same([...rescoped.json().token.methods].sort(), ['openid', 'token']);
  t.same(rescoped.json().token.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader'], "the group's role and what it implies");

  // What must not work: no bearer, OIDC-* headers alone, a forged token, another issuer.
  const refused = async (headers: Record<string, string>) => (await fetch(login, { method: 'POST', headers })).status;
  t.equal(await refused({}), 401);
  t.equal(await refused({ 'OIDC-Iss': op.issuer, 'OIDC-Sub': 'alice', 'OIDC-Preferred-Username': 'alice', 'OIDC-Groups': 'developers' }), 401, 'claims in headers are never believed');
  const [head, payload] = accessToken.split('.');
  const forged = `${head}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), sub: 'mallory' })).toString('base64url')}.${accessToken.split('.')[2]}`;
  t.equal(await refused({ authorization: `Bearer ${forged}` }), 401, 'a changed payload');
  const other = await startOidcPeer(t);
  realTime();
  t.equal(await refused({ authorization: `Bearer ${(await other.tokens('alice')).access_token}` }), 403, "an issuer that is not one of the provider's remote ids");

  // keystoneauth's own OIDC plugin (the one `openstack --os-auth-type v3oidcpassword` loads).
  const python = debianPython(['python3-keystoneauth1']);
  realTime();
  const script = `
import sys
from keystoneauth1 import session
from keystoneauth1.identity.v3 import OidcPassword
auth = OidcPassword(auth_url=sys.argv[1], identity_provider='oidc-idp', protocol='openid', client_id=sys.argv[2],
    client_secret=sys.argv[3], discovery_endpoint=sys.argv[4] + '/.well-known/openid-configuration',
    username='alice', password='alice-pass', scope='openid email groups profile', project_id=sys.argv[5])
s = session.Session(auth=auth)
print(s.get_token())
print(auth.get_access(s).project_id)
`;
  // Asynchronously: the service answering it runs in this process.
  const { stdout } = await promisify(execFile)(python, ['-c', script, `${base}/v3`, OIDC_CLIENT.id, OIDC_CLIENT.secret, op.issuer, project], { encoding: 'utf8', timeout: 60_000 });
  const [token, scopedProject] = stdout.trim().split('\n');
  t.equal(scopedProject, project, 'keystoneauth v3oidcpassword: a project token through the federated login');
  const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token! });
  t.equal(validated.statusCode, 200);
  t.same([...validated.json().token.methods].sort(), ['openid', 'token']);
});
