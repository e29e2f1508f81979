import t from 'tap';
import { decodeJwt } from 'jose';
import { TokenEntity } from '../../src/store/entities.ts';
import { ADMIN_PASSWORD, startTestApp, type TestApp } from '../helpers/app.ts';
import { aliceAssertion, FixedAssertionVerifier, registerOidcProvider } from '../helpers/federation.ts';

// The mapped method of POST /v3/auth/tokens (Keystone's keystone/auth/plugins/mapped.py) under the
// protocol's name: {"methods": ["openid"], "openid": {"id": <federated token>}} rescopes a federated
// token with its groups' roles; without `id` it logs in at {identity_provider, protocol} from what the
// protocol's verifier proves of the request. Statuses and texts as the real Keystone 22 answered them
// (test/e2e/federation-mapped-keystone.test.ts compares the two); under each token provider.

const FED = '/v3/OS-FEDERATION';
const ISSUER = 'http://127.0.0.1:19000';
const LOGIN = `${FED}/identity_providers/oidc-idp/protocols/openid/auth`;

interface World {
  app: TestApp;
  verifier: FixedAssertionVerifier;
  domainId: string;
  groups: Record<'developers' | 'admins', string>;
  roles: Record<'member' | 'reader', string>;
  projectId: string;
  otherProjectId: string;
}

async function world(t: Parameters<typeof startTestApp>[0], overrides: Record<string, string> = {}): Promise<World> {
  const verifier = new FixedAssertionVerifier(aliceAssertion(ISSUER));
  const app = await startTestApp(t, overrides, { assertionVerifiers: [verifier] });
  const created = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const domainId = (await created('POST', '/v3/domains', { domain: { name: 'federated-users' } })).domain.id as string;
  const group = async (name: string) => (await created('POST', '/v3/groups', { group: { name, domain_id: domainId } })).group.id as string;
  const groups = { developers: await group('developers'), admins: await group('admins') };
  const roleId = async (name: string) => (await app.call('GET', `/v3/roles?name=${name}`)).json().roles[0].id as string;
  const roles = { member: await roleId('member'), reader: await roleId('reader') };
  const projectId = (await created('POST', '/v3/projects', { project: { name: 'dev-project', domain_id: domainId } })).project.id as string;
  const otherProjectId = (await created('POST', '/v3/projects', { project: { name: 'other-project', domain_id: domainId } })).project.id as string;
  for (const [target, actor, role] of [
    [`/v3/projects/${projectId}`, groups.developers, roles.member],
    [`/v3/projects/${otherProjectId}`, groups.admins, roles.reader],
    [`/v3/domains/${domainId}`, groups.admins, roles.reader],
  ] as const) {
    const granted = await app.call('PUT', `${target}/groups/${actor}/roles/${role}`);
    if (granted.statusCode !== 204) throw new Error(`grant: ${granted.statusCode}`);
  }
  await registerOidcProvider(app, { issuer: ISSUER, domainId });
  return { app, verifier, domainId, groups, roles, projectId, otherProjectId };
}

async function federatedLogin(w: World): Promise<{ token: string; body: any }> {
  const login = await w.app.request({ method: 'POST', url: LOGIN, headers: { authorization: 'Bearer anything' } });
  if (login.statusCode !== 201) throw new Error(`login: ${login.statusCode} ${login.body}`);
  return { token: String(login.headers['x-subject-token']), body: login.json().token };
}

const issue = (w: World, identity: Record<string, unknown>, scope?: unknown, headers: Record<string, string> = {}) =>
  w.app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ auth: { identity, ...(scope === undefined ? {} : { scope }) } }),
  });
const validate = (w: World, token: string) => w.app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });
const roleNames = (body: { roles?: { name: string }[] }) => (body.roles ?? []).map((role) => role.name).sort();

for (const provider of ['fernet', 'jws', 'uuid'] as const) {
  t.test(`${provider}: federated tokens issue, validate, rescope (token and mapped methods) and revoke`, async (t) => {
    const w = await world(t, { TOKEN_PROVIDER: provider });
    t.equal(w.app.app.tokenProvider.name, provider);
    const { token: unscoped, body } = await federatedLogin(w);
    const federation = { groups: [{ id: w.groups.developers }, { id: w.groups.admins }], identity_provider: { id: 'oidc-idp' }, protocol: { id: 'openid' } };
    t.strictSame(body.user['OS-FEDERATION'], federation);
    t.strictSame(body.methods, ['openid']);

    const validated = await validate(w, unscoped);
    t.equal(validated.statusCode, 200, `${provider}: the unscoped federated token validates`);
    t.strictSame(validated.json().token.user['OS-FEDERATION'], federation);
    t.notOk(validated.json().token.roles);

    // What the provider carries: the groups, the provider and the protocol.
    if (provider === 'jws') {
      const claims = decodeJwt(unscoped);
      t.strictSame(claims.openstack_group_ids, [w.groups.developers, w.groups.admins]);
      t.equal(claims.openstack_idp_id, 'oidc-idp');
      t.equal(claims.openstack_protocol_id, 'openid');
      t.notOk('openstack_project_id' in claims);
    }
    if (provider === 'uuid') {
      const row = await w.app.app.store.reader().findOne(TokenEntity, { id: unscoped });
      t.match(row?.payload, { scope: { type: 'federated_unscoped', identityProviderId: 'oidc-idp', protocolId: 'openid' } });
    }

    // The token method: methods [openid, token], the groups' roles on the project (member implies reader).
    const byToken = await issue(w, { methods: ['token'], token: { id: unscoped } }, { project: { id: w.projectId } });
    t.equal(byToken.statusCode, 201, byToken.body);
    t.strictSame(byToken.json().token.methods, ['openid', 'token']);
    t.strictSame(roleNames(byToken.json().token), ['member', 'reader']);
    if (provider === 'jws') {
      const claims = decodeJwt(String(byToken.headers['x-subject-token']));
      t.equal(claims.openstack_project_id, w.projectId);
      t.equal(claims.openstack_idp_id, 'oidc-idp');
    }

    // The mapped method under the protocol's name: methods [openid] only, the source's expiry, a new audit chain.
    const byMapped = await issue(w, { methods: ['openid'], openid: { id: unscoped } }, { project: { id: w.projectId } });
    t.equal(byMapped.statusCode, 201, byMapped.body);
    const scoped = byMapped.json().token;
    const scopedToken = String(byMapped.headers['x-subject-token']);
    t.strictSame(scoped.methods, ['openid']);
    t.strictSame(scoped.user['OS-FEDERATION'], federation);
    t.equal(scoped.project.id, w.projectId);
    t.strictSame(roleNames(scoped), ['member', 'reader']);
    t.equal(scoped.expires_at, body.expires_at, "the source token's expiry");
    t.equal(scoped.audit_ids.length, 1);
    t.not(scoped.audit_ids[0], body.audit_ids[0]);
    const validatedScoped = await validate(w, scopedToken);
    t.equal(validatedScoped.statusCode, 200);
    t.strictSame(validatedScoped.json().token.methods, ['openid']);
    t.strictSame(roleNames(validatedScoped.json().token), ['member', 'reader']);
    t.strictSame(validatedScoped.json().token.user['OS-FEDERATION'], federation);

    // A scoped federated token rescopes through the mapped method too (Keystone has no check), to a domain as well.
    const otherProject = await issue(w, { methods: ['openid'], openid: { id: scopedToken } }, { project: { id: w.otherProjectId } });
    t.equal(otherProject.statusCode, 201, otherProject.body);
    t.strictSame(roleNames(otherProject.json().token), ['reader']);
    const domainScoped = await issue(w, { methods: ['mapped'], mapped: { id: unscoped } }, { domain: { id: w.domainId } });
    t.equal(domainScoped.statusCode, 201, domainScoped.body);
    t.strictSame(domainScoped.json().token.methods, ['mapped']);
    t.equal(domainScoped.json().token.domain.id, w.domainId);
    t.strictSame(roleNames(domainScoped.json().token), ['reader']);
    const domainToken = String(domainScoped.headers['x-subject-token']);
    t.equal((await validate(w, domainToken)).statusCode, 200);
    if (provider === 'jws') t.equal(decodeJwt(domainToken).openstack_domain_id, w.domainId);

    // Revocation: the scoped token goes, the unscoped one stays.
    t.equal((await w.app.call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': scopedToken })).statusCode, 204);
    t.equal((await validate(w, scopedToken)).statusCode, 404, `${provider}: a revoked federated token no longer validates`);
    t.equal((await validate(w, unscoped)).statusCode, 200);
    t.equal((await issue(w, { methods: ['openid'], openid: { id: scopedToken } }, { project: { id: w.projectId } })).statusCode, 404, 'nor rescopes');

    // The provider disabled: its tokens neither validate nor rescope (403, Keystone's hidden text).
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: false } })).statusCode, 200);
    t.equal((await validate(w, domainToken)).statusCode, 404);
    t.equal((await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } })).statusCode, 403);
  });
}

t.test('the mapped method refuses as Keystone 22 does', async (t) => {
  const w = await world(t);
  const { token: unscoped, body } = await federatedLogin(w);
  const admin = w.app.adminToken;
  const error = (response: { statusCode: number; json(): any }) => ({ status: response.statusCode, error: response.json().error });

  t.strictSame(error(await issue(w, { methods: ['openid'], openid: { id: admin } }, { project: { id: w.projectId } })), {
    status: 400,
    error: { code: 400, title: 'Bad Request', message: 'The token given to the openid method is not a federated token.' },
  }, 'a token that is not federated: 400');
  t.strictSame(error(await issue(w, { methods: ['openid'], openid: { id: 'gAAAAABbogus' } })).status, 404, 'no token: 404');
  t.strictSame(error(await issue(w, { methods: ['openid'], saml2: { id: unscoped } })), {
    status: 400,
    error: {
      code: 400,
      title: 'Bad Request',
      message: 'Expecting to find openid in identity. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.',
    },
  });
  const unsupported = error(await issue(w, { methods: ['oidc'], oidc: { id: unscoped } }));
  t.equal(unsupported.status, 401);
  t.equal(unsupported.error.message, 'Attempted to authenticate with an unsupported method.');
  t.strictSame(unsupported.error.identity.methods.slice(-3), ['mapped', 'openid', 'saml2'], 'the mapped methods are offered');
  t.match(error(await issue(w, { methods: ['openid'], openid: {} })), { status: 400, error: { message: /^Expecting to find identity_provider in mapped\./ } });
  t.match(error(await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp' } })), { status: 400, error: { message: /^Expecting to find protocol in mapped\./ } });
  t.strictSame(error(await issue(w, { methods: ['openid'], openid: { identity_provider: 'nope', protocol: 'openid' } })), {
    status: 404,
    error: { code: 404, title: 'Not Found', message: 'Could not find Identity Provider: nope.' },
  });
  t.equal(error(await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'saml2' } })).status, 404, 'no such protocol');

  // Another user's token: the password names the admin, the federated token alice.
  const mixed = await issue(w, {
    methods: ['password', 'openid'],
    password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } },
    openid: { id: unscoped },
  });
  t.strictSame(error(mixed), { status: 401, error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } });
  t.equal((await issue(w, { methods: ['openid', 'saml2'], openid: { id: unscoped }, saml2: { id: unscoped } })).statusCode, 401, 'two mapped methods');
  // A project the groups have no role on.
  t.equal((await issue(w, { methods: ['openid'], openid: { id: unscoped } }, { project: { name: 'admin', domain: { id: 'default' } } })).statusCode, 401);
  // An expired federated token: 404, as at validation.
  w.app.clock.set(Date.parse(body.expires_at) + 1000);
  t.equal((await issue(w, { methods: ['openid'], openid: { id: unscoped } }, { project: { id: w.projectId } })).statusCode, 404);
});

t.test('without an id: a login from what the verifier proves, scoped at once; request headers alone get nothing', async (t) => {
  const w = await world(t);
  const login = await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } }, { project: { id: w.projectId } }, { authorization: 'Bearer proof' });
  t.equal(login.statusCode, 201, login.body);
  const token = login.json().token;
  t.strictSame(token.methods, ['openid']);
  t.equal(token.project.id, w.projectId);
  t.strictSame(roleNames(token), ['member', 'reader']);
  t.strictSame(token.user['OS-FEDERATION'].identity_provider, { id: 'oidc-idp' });
  t.equal(w.verifier.requests.at(-1)?.headers.authorization, 'Bearer proof', "the protocol's verifier sees the request");
  t.equal(w.verifier.requests.at(-1)?.identityProvider.id, 'oidc-idp');
  t.ok(token.catalog, 'a scoped token with its catalog');

  const unscoped = await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } });
  t.equal(unscoped.statusCode, 201);
  t.notOk(unscoped.json().token.project);

  // The verifier proves nothing (no bearer token it accepts): OIDC-* headers are never claims.
  w.verifier.assertion = undefined;
  const headersOnly = await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } }, undefined, {
    'OIDC-iss': ISSUER,
    'OIDC-sub': 'alice',
    'OIDC-preferred_username': 'alice',
    'OIDC-groups': 'developers;admins',
    HTTP_OIDC_ISS: ISSUER,
  });
  t.strictSame(headersOnly.json().error, { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' });

  // A verified assertion of another issuer: 403.
  w.verifier.assertion = aliceAssertion('http://elsewhere');
  t.equal((await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } })).statusCode, 403);

  // A shadow user disabled by an administrator: 401.
  w.verifier.assertion = aliceAssertion(ISSUER);
  t.equal((await w.app.call('PATCH', `/v3/users/${token.user.id}`, { user: { enabled: false } })).statusCode, 200);
  t.equal((await issue(w, { methods: ['openid'], openid: { identity_provider: 'oidc-idp', protocol: 'openid' } })).statusCode, 401);
});
