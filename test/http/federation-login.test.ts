import { createHash } from 'node:crypto';
import t from 'tap';
import { pino } from 'pino';
import type { AuditNotification } from '../../src/events/audit.ts';
import { FederatedUserEntity } from '../../src/store/federation-entities.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { aliceAssertion, FixedAssertionVerifier, registerOidcProvider } from '../helpers/federation.ts';

// OS-FEDERATION's login as Keystone 22's mapped plugin runs it, driven by a test verifier that
// stands in for the OIDC one (the claims mod_auth_openidc would give Keystone for the OIDC peer's alice).

const FED = '/v3/OS-FEDERATION';
const ISSUER = 'http://127.0.0.1:19000';
const LOGIN = `${FED}/identity_providers/oidc-idp/protocols/openid/auth`;

interface World {
  app: TestApp;
  verifier: FixedAssertionVerifier;
  domainId: string;
  groups: Record<'developers' | 'admins' | 'viewers', string>;
  roles: Record<'member' | 'reader', string>;
  projectId: string;
  audit: () => AuditNotification[];
}

async function world(t: Parameters<typeof startTestApp>[0] & { equal: (a: unknown, b: unknown) => void }, rules?: unknown[], overrides: Record<string, string> = {}): Promise<World> {
  const verifier = new FixedAssertionVerifier(aliceAssertion(ISSUER));
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const app = await startTestApp(t, overrides, { assertionVerifiers: [verifier], logger });
  const created = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const domainId = (await created('POST', '/v3/domains', { domain: { name: 'federated-users' } })).domain.id as string;
  const group = async (name: string) => (await created('POST', '/v3/groups', { group: { name, domain_id: domainId } })).group.id as string;
  const groups = { developers: await group('developers'), admins: await group('admins'), viewers: await group('viewers') };
  const roleId = async (name: string) => ((await app.call('GET', `/v3/roles?name=${name}`)).json().roles[0]?.id as string | undefined) ?? (await created('POST', '/v3/roles', { role: { name } })).role.id;
  const roles = { member: await roleId('member'), reader: await roleId('reader') };
  const projectId = (await created('POST', '/v3/projects', { project: { name: 'dev-project', domain_id: domainId } })).project.id as string;
  t.equal((await app.call('PUT', `/v3/projects/${projectId}/groups/${groups.developers}/roles/${roles.member}`)).statusCode, 204);
  t.equal((await app.call('PUT', `/v3/projects/${projectId}/groups/${groups.admins}/roles/${roles.reader}`)).statusCode, 204);
  await registerOidcProvider(app, { issuer: ISSUER, domainId, rules });
  const audit = () =>
    lines
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.msg === 'audit')
      .map((entry) => entry.notification as AuditNotification);
  return { app, verifier, domainId, groups, roles, projectId, audit };
}

function keystoneUserId(domainId: string, uniqueId: string): string {
  return createHash('sha256').update(`${domainId}user${uniqueId}`).digest('hex');
}

const rescope = (w: World, token: string, scope: unknown) =>
  w.app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ auth: { identity: { methods: ['token'], token: { id: token } }, scope } }),
  });
const validate = (w: World, token: string) => w.app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });

t.test('login → unscoped federated token → projects → rescope with group roles → provider disabled: tokens dead', async (t) => {
  const w = await world(t);
  const login = await w.app.request({ method: 'POST', url: LOGIN, headers: { authorization: 'Bearer opaque' } });
  t.equal(login.statusCode, 201, login.body);
  const unscoped = String(login.headers['x-subject-token']);
  t.ok(unscoped);
  t.equal(w.verifier.requests.at(-1)?.headers.authorization, 'Bearer opaque', 'the verifier sees the request headers');
  const userId = keystoneUserId(w.domainId, 'alice');
  const body = login.json().token;
  t.strictSame(body.methods, ['openid']);
  t.strictSame(body.user, {
    domain: { id: w.domainId, name: 'federated-users' },
    id: userId,
    name: 'alice',
    'OS-FEDERATION': { groups: [{ id: w.groups.developers }, { id: w.groups.admins }], identity_provider: { id: 'oidc-idp' }, protocol: { id: 'openid' } },
  });
  t.notOk(body.roles);
  t.notOk(body.catalog);

  // Stored: a federated_user row and a user; no group membership.
  const rows = await w.app.app.store.reader().find(FederatedUserEntity, { userId });
  t.match(rows, [{ idpId: 'oidc-idp', protocolId: 'openid', uniqueId: 'alice', displayName: 'alice' }]);
  t.equal(rows.length, 1);
  const user = (await w.app.call('GET', `/v3/users/${userId}`)).json().user;
  t.match(user, { id: userId, name: 'alice', domain_id: w.domainId, enabled: true, email: 'alice@example.org' });
  t.strictSame((await w.app.call('GET', `/v3/users/${userId}/groups`)).json().groups, [], 'groups live in the token only');

  // Validation of the unscoped token.
  const validated = await validate(w, unscoped);
  t.equal(validated.statusCode, 200);
  t.strictSame(validated.json().token.user, body.user);

  // What the groups reach.
  const projects = await w.app.call('GET', '/v3/auth/projects', undefined, unscoped);
  t.equal(projects.statusCode, 200);
  t.strictSame(projects.json().projects.map((project: { id: string }) => project.id), [w.projectId]);
  const fedProjects = await w.app.call('GET', `${FED}/projects`, undefined, unscoped);
  t.strictSame(fedProjects.json().projects.map((project: { id: string }) => project.id), [w.projectId]);
  t.strictSame((await w.app.call('GET', '/v3/auth/domains', undefined, unscoped)).json().domains, []);
  // An inherited grant to a mapped group on its domain reaches every project of the domain (not the domain).
  const second = (await w.app.call('POST', '/v3/projects', { project: { name: 'second-project', domain_id: w.domainId } })).json().project.id as string;
  t.equal((await w.app.call('PUT', `/v3/OS-INHERIT/domains/${w.domainId}/groups/${w.groups.admins}/roles/${w.roles.reader}/inherited_to_projects`)).statusCode, 204);
  const inherited = (await w.app.call('GET', '/v3/auth/projects', undefined, unscoped)).json().projects.map((project: { id: string }) => project.id).sort();
  t.strictSame(inherited, [w.projectId, second].sort());
  t.strictSame((await w.app.call('GET', '/v3/auth/domains', undefined, unscoped)).json().domains, [], 'an inherited grant gives nothing on the domain itself');
  t.equal((await w.app.call('DELETE', `/v3/OS-INHERIT/domains/${w.domainId}/groups/${w.groups.admins}/roles/${w.roles.reader}/inherited_to_projects`)).statusCode, 204);
  t.equal((await w.app.call('DELETE', `/v3/projects/${second}`)).statusCode, 204);

  // Rescope: roles from the groups, OS-FEDERATION kept.
  const scoped = await rescope(w, unscoped, { project: { id: w.projectId } });
  t.equal(scoped.statusCode, 201, scoped.body);
  const scopedToken = String(scoped.headers['x-subject-token']);
  const scopedBody = scoped.json().token;
  t.strictSame([...scopedBody.methods].sort(), ['openid', 'token']);
  t.strictSame(scopedBody.user, body.user);
  t.strictSame(scopedBody.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader']);
  t.equal(scopedBody.project.id, w.projectId);
  t.ok(Array.isArray(scopedBody.catalog));
  t.equal(scopedBody.audit_ids[1], body.audit_ids[0], 'the chain of the unscoped token');
  const scopedValid = await validate(w, scopedToken);
  t.equal(scopedValid.statusCode, 200);
  t.strictSame(scopedValid.json().token.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader']);
  t.strictSame(scopedValid.json().token.user['OS-FEDERATION'], body.user['OS-FEDERATION']);
  // The scoped token works on the API (its roles through the groups).
  t.equal((await w.app.call('GET', '/v3/auth/catalog', undefined, scopedToken)).statusCode, 200);

  // Not a project the groups reach: refused.
  const other = (await w.app.call('POST', '/v3/projects', { project: { name: 'other', domain_id: w.domainId } })).json().project.id;
  t.equal((await rescope(w, unscoped, { project: { id: other } })).statusCode, 401);

  // The provider disabled: its tokens stop validating, no login, no rescope.
  t.equal((await w.app.call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: false } })).statusCode, 200);
  t.equal((await validate(w, unscoped)).statusCode, 404);
  t.equal((await validate(w, scopedToken)).statusCode, 404);
  t.equal((await w.app.call('GET', '/v3/auth/projects', undefined, scopedToken)).statusCode, 401);
  const refused = await w.app.request({ method: 'POST', url: LOGIN });
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.message, 'You are not authorized to perform the requested action.', "Keystone's hidden text");
  t.not((await rescope(w, unscoped, { project: { id: w.projectId } })).statusCode, 201);

  // Enabled again: valid again; deleted: dead for good.
  t.equal((await w.app.call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: true } })).statusCode, 200);
  t.equal((await validate(w, scopedToken)).statusCode, 200);
  t.equal((await w.app.call('DELETE', `${FED}/identity_providers/oidc-idp`)).statusCode, 204);
  t.equal((await validate(w, scopedToken)).statusCode, 404);
  t.equal((await validate(w, unscoped)).statusCode, 404);

  // identity.authenticate for the login, success and failure.
  const authentications = w.audit().filter((event) => event.event_type === 'identity.authenticate');
  t.ok(authentications.some((event) => event.payload.outcome === 'success' && (event.payload.target as { id: string }).id === userId));
  t.ok(authentications.some((event) => event.payload.outcome === 'failure' && (event.payload.reason as { reasonCode: string }).reasonCode === '403'));
});

t.test('a later login: the same user, display name and email brought up to date; groups recomputed', async (t) => {
  const w = await world(t);
  t.equal((await w.app.request({ method: 'GET', url: LOGIN })).statusCode, 201, 'GET logs in too');
  w.verifier.assertion = { ...aliceAssertion(ISSUER), HTTP_OIDC_PREFERRED_USERNAME: 'Alice Liddell', HTTP_OIDC_EMAIL: 'alice@wonderland.example', HTTP_OIDC_GROUPS: 'viewers;nosuchgroup' };
  const again = await w.app.request({ method: 'POST', url: LOGIN });
  t.equal(again.statusCode, 201, again.body);
  const userId = keystoneUserId(w.domainId, 'alice');
  t.equal(again.json().token.user.id, userId);
  t.equal(again.json().token.user.name, 'Alice Liddell');
  t.strictSame(again.json().token.user['OS-FEDERATION'].groups, [{ id: w.groups.viewers }], 'an unknown group name is skipped');
  t.match((await w.app.call('GET', `/v3/users/${userId}`)).json().user, { name: 'Alice Liddell', email: 'alice@wonderland.example' });
  const rows = await w.app.app.store.reader().find(FederatedUserEntity, { userId });
  t.match(rows, [{ uniqueId: 'alice', displayName: 'Alice Liddell' }]);
  t.equal(rows.length, 1);
  // viewers has no grant on the project: nothing to list, no rescope.
  const token = String(again.headers['x-subject-token']);
  t.strictSame((await w.app.call('GET', '/v3/auth/projects', undefined, token)).json().projects, []);
  t.equal((await rescope(w, token, { project: { id: w.projectId } })).statusCode, 401);
  // A role granted to the shadow user itself counts too (Keystone adds the user's own roles).
  t.equal((await w.app.call('PUT', `/v3/projects/${w.projectId}/users/${userId}/roles/${w.roles.reader}`)).statusCode, 204);
  const scoped = await rescope(w, token, { project: { id: w.projectId } });
  t.equal(scoped.statusCode, 201);
  t.strictSame(scoped.json().token.roles.map((role: { name: string }) => role.name), ['reader']);
});

t.test("Keystone's refusals: wrong issuer 403, unknown provider or protocol 404, unsupported method 401, unknown group id 500", async (t) => {
  const w = await world(t);
  w.verifier.assertion = aliceAssertion('https://evil.example');
  const wrong = await w.app.request({ method: 'POST', url: LOGIN });
  t.equal(wrong.statusCode, 403);
  t.equal(wrong.json().error.message, 'You are not authorized to perform the requested action.', "Keystone's hidden text");
  w.verifier.assertion = { HTTP_OIDC_SUB: 'alice', HTTP_OIDC_PREFERRED_USERNAME: 'alice', HTTP_OIDC_EMAIL: 'a@b', HTTP_OIDC_GROUPS: 'developers' };
  t.equal((await w.app.request({ method: 'POST', url: LOGIN })).statusCode, 401, 'no issuer in the assertion');
  w.verifier.assertion = aliceAssertion(ISSUER);
  const unknown = await w.app.request({ method: 'POST', url: `${FED}/identity_providers/nope/protocols/openid/auth` });
  t.equal(unknown.statusCode, 404);
  t.equal(unknown.json().error.message, 'Could not find Identity Provider: nope.');
  t.equal((await w.app.request({ method: 'POST', url: `${FED}/identity_providers/oidc-idp/protocols/saml2/auth` })).statusCode, 404);
  const unsupported = await w.app.request({ method: 'POST', url: `${FED}/identity_providers/oidc-idp/protocols/oidc/auth` });
  t.equal(unsupported.statusCode, 401);
  t.equal(unsupported.json().error.message, 'Attempted to authenticate with an unsupported method.');
  // Nothing maps: 401.
  w.verifier.assertion = { HTTP_OIDC_ISS: ISSUER };
  t.equal((await w.app.request({ method: 'POST', url: LOGIN })).statusCode, 401);
  // A mapped group id that does not exist: Keystone's MappedGroupNotFound (500).
  t.equal(
    (await w.app.call('PATCH', `${FED}/mappings/oidc-mapping`, { mapping: { rules: [{ local: [{ user: { name: '{0}' } }, { group: { id: 'no-such-group' } }], remote: [{ type: 'HTTP_OIDC_SUB' }] }] } })).statusCode,
    200,
  );
  w.verifier.assertion = aliceAssertion(ISSUER);
  t.equal((await w.app.request({ method: 'POST', url: LOGIN })).statusCode, 500);
  t.equal(await w.app.app.store.reader().count(FederatedUserEntity, {}), 0, 'nothing shadowed by failed logins');
});

t.test('the mapping provisions projects with roles; a local user gets an ordinary token', async (t) => {
  const w = await world(t);
  const rules = [
    {
      local: [{ user: { name: '{0}' } }, { projects: [{ name: 'alice-sandbox', roles: [{ name: 'member' }] }, { name: 'dev-project', roles: [{ name: 'reader' }] }] }],
      remote: [{ type: 'HTTP_OIDC_SUB' }],
    },
  ];
  t.equal((await w.app.call('PATCH', `${FED}/mappings/oidc-mapping`, { mapping: { rules } })).statusCode, 200);
  const login = await w.app.request({ method: 'POST', url: LOGIN });
  t.equal(login.statusCode, 201, login.body);
  const token = String(login.headers['x-subject-token']);
  t.strictSame(login.json().token.user['OS-FEDERATION'].groups, []);
  const projects = (await w.app.call('GET', '/v3/auth/projects', undefined, token)).json().projects as { name: string; domain_id: string }[];
  t.strictSame(projects.map((project) => project.name).sort(), ['alice-sandbox', 'dev-project']);
  t.ok(projects.every((project) => project.domain_id === w.domainId));
  const sandbox = await rescope(w, token, { project: { name: 'alice-sandbox', domain: { id: w.domainId } } });
  t.equal(sandbox.statusCode, 201);
  t.strictSame(sandbox.json().token.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader'], 'member implies reader');
  // Again: nothing duplicated.
  t.equal((await w.app.request({ method: 'POST', url: LOGIN })).statusCode, 201);
  t.equal((await w.app.call('GET', `/v3/projects?name=alice-sandbox`)).json().projects.length, 1);

  // A role the mapping names that does not exist: 404, nothing created.
  const missingRole = [{ local: [{ user: { name: 'bob' } }, { projects: [{ name: 'bob-sandbox', roles: [{ name: 'no-such-role' }] }] }], remote: [{ type: 'HTTP_OIDC_SUB' }] }];
  t.equal((await w.app.call('PATCH', `${FED}/mappings/oidc-mapping`, { mapping: { rules: missingRole } })).statusCode, 200);
  const refused = await w.app.request({ method: 'POST', url: LOGIN });
  t.equal(refused.statusCode, 404);
  t.equal(refused.json().error.message, 'Could not find role: no-such-role.');
  t.strictSame((await w.app.call('GET', `/v3/users?name=bob`)).json().users, [], 'one transaction: no shadow user left');

  // A local user: it must exist; its token is an ordinary one with methods [openid].
  const local = [{ local: [{ user: { name: 'admin', domain: { name: 'Default' }, type: 'local' } }], remote: [{ type: 'HTTP_OIDC_SUB' }] }];
  t.equal((await w.app.call('PATCH', `${FED}/mappings/oidc-mapping`, { mapping: { rules: local } })).statusCode, 200);
  const localLogin = await w.app.request({ method: 'POST', url: LOGIN });
  t.equal(localLogin.statusCode, 201, localLogin.body);
  t.strictSame(localLogin.json().token.methods, ['openid']);
  t.equal(localLogin.json().token.user.name, 'admin');
  t.notOk(localLogin.json().token.user['OS-FEDERATION']);
  const nobody = [{ local: [{ user: { name: 'nobody', domain: { name: 'Default' }, type: 'local' } }], remote: [{ type: 'HTTP_OIDC_SUB' }] }];
  t.equal((await w.app.call('PATCH', `${FED}/mappings/oidc-mapping`, { mapping: { rules: nobody } })).statusCode, 200);
  t.equal((await w.app.request({ method: 'POST', url: LOGIN })).statusCode, 401);
});

t.test('without a verifier that answers, OIDC-* headers get a 401: no assertion is built from headers', async (t) => {
  const app = await startTestApp(t);
  await app.call('PUT', `${FED}/identity_providers/oidc-idp`, { identity_provider: { remote_ids: [ISSUER], enabled: true } });
  await app.call('PUT', `${FED}/mappings/m`, { mapping: { rules: [{ local: [{ user: { name: '{0}' } }], remote: [{ type: 'HTTP_OIDC_SUB' }] }] } });
  t.equal((await app.call('PUT', `${FED}/identity_providers/oidc-idp/protocols/openid`, { protocol: { mapping_id: 'm', remote_id_attribute: 'HTTP_OIDC_ISS' } })).statusCode, 201);
  const headers = {
    'OIDC-Iss': ISSUER,
    'OIDC-Sub': 'alice',
    'OIDC-Preferred-Username': 'alice',
    'OIDC-Groups': 'developers;admins',
    HTTP_OIDC_ISS: ISSUER,
    HTTP_OIDC_SUB: 'alice',
    REMOTE_USER: 'alice',
  };
  for (const method of ['GET', 'POST'] as const) {
    const response = await app.request({ method, url: LOGIN, headers });
    t.equal(response.statusCode, 401, method);
    t.notOk(response.headers['x-subject-token']);
  }
  t.equal(await app.app.store.reader().count(FederatedUserEntity, {}), 0);
});
