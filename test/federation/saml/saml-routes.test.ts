import t from 'tap';
import { NS } from '../../../src/federation/saml/namespaces.ts';
import { startTestApp, type TestApp } from '../../helpers/app.ts';
import { elements, makeKeyPair, parseXml, samlAttributes, xmlsecVerifies } from './saml-test-helpers.ts';

const ENTITY_ID = 'https://idp.example/v3/OS-FEDERATION/saml2/idp';
const SSO = 'https://idp.example/v3/OS-FEDERATION/saml2/sso';
const GENERIC_500 = 'An unexpected error prevented the server from fulfilling your request.';

function samlBody(token: string, serviceProvider: string) {
  return { auth: { identity: { methods: ['token'], token: { id: token } }, scope: { service_provider: { id: serviceProvider } } } };
}

async function createServiceProvider(app: TestApp, id: string, extra: Record<string, unknown> = {}) {
  const response = await app.call('PUT', `/v3/OS-FEDERATION/service_providers/${id}`, {
    service_provider: { auth_url: `https://${id}.example/v3/OS-FEDERATION/identity_providers/idp/protocols/saml2/auth`, sp_url: `https://${id}.example/Shibboleth.sso/SAML2/ECP`, enabled: true, ...extra },
  });
  if (response.statusCode !== 201) throw new Error(`service provider: ${response.statusCode} ${response.body}`);
}

/** POST without X-Auth-Token: Keystone's routes are unenforced, the body's token is what counts. */
function post(app: TestApp, path: string, body: unknown) {
  return app.call('POST', path, body, null);
}

t.test('with SAML configured', async (t) => {
  const keys = makeKeyPair(t);
  const app = await startTestApp(t, { SAML_CERTFILE: keys.certFile, SAML_KEYFILE: keys.keyFile, SAML_IDP_ENTITY_ID: ENTITY_ID, SAML_IDP_SSO_ENDPOINT: SSO });
  await createServiceProvider(app, 'sp1');
  await createServiceProvider(app, 'sp-off', { enabled: false });
  await createServiceProvider(app, 'sp-relay', { relay_state_prefix: 'rs:<x>&' });

  t.test('GET /v3/OS-FEDERATION/saml2/metadata: public, text/xml, the entity id and certificate', async (t) => {
    const response = await app.request({ method: 'GET', url: '/v3/OS-FEDERATION/saml2/metadata' });
    t.equal(response.statusCode, 200);
    t.match(response.headers['content-type'], /^text\/xml/);
    t.ok(response.body.endsWith('</ns0:EntityDescriptor>\n'), 'as keystone-manage saml_idp_metadata prints it');
    const document = parseXml(response.body);
    t.equal(document.documentElement.getAttribute('entityID'), ENTITY_ID);
    const { X509Certificate } = await import('node:crypto');
    const fs = await import('node:fs');
    t.equal(elements(document, NS.xmldsig, 'X509Certificate')[0]!.textContent, new X509Certificate(fs.readFileSync(keys.certFile)).raw.toString('base64'));
    t.equal(elements(document, NS.metadata, 'SingleSignOnService')[0]!.getAttribute('Location'), SSO);
  });

  t.test('POST /v3/auth/OS-FEDERATION/saml2: a signed assertion of the token for the service provider', async (t) => {
    const before = app.clock.now();
    const response = await post(app, '/v3/auth/OS-FEDERATION/saml2', samlBody(app.adminToken, 'sp1'));
    t.equal(response.statusCode, 200, response.body);
    t.match(response.headers['content-type'], /^text\/xml/);
    t.equal(response.headers['x-sp-url'], 'https://sp1.example/Shibboleth.sso/SAML2/ECP');
    t.equal(response.headers['x-auth-url'], 'https://sp1.example/v3/OS-FEDERATION/identity_providers/idp/protocols/saml2/auth');
    t.ok(xmlsecVerifies(response.body, keys.certFile), 'xmlsec1 accepts the signature');
    const document = parseXml(response.body);
    t.equal(document.documentElement.getAttribute('Destination'), 'https://sp1.example/Shibboleth.sso/SAML2/ECP');
    t.equal(elements(document, NS.assertion, 'Issuer')[0]!.textContent, ENTITY_ID);
    t.equal(elements(document, NS.assertion, 'NameID')[0]!.textContent, 'admin');
    const instant = new Date(Math.floor(before / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    t.equal(document.documentElement.getAttribute('IssueInstant'), instant, 'the injected clock');
    const expiry = new Date(Math.floor(before / 1000) * 1000 + 3600_000).toISOString().replace('.000Z', '.000000Z');
    t.equal(elements(document, NS.assertion, 'SubjectConfirmationData')[0]!.getAttribute('NotOnOrAfter'), expiry, 'now + SAML_ASSERTION_EXPIRATION_TIME');
    t.match(document.documentElement.getAttribute('ID'), /^[0-9a-f]{32}$/);
    const validated = await app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': app.adminToken });
    const roleNames = (validated.json().token.roles as Array<{ name: string }>).map((role) => role.name);
    const attributes = samlAttributes(response.body);
    t.same(attributes.openstack_user, ['admin']);
    t.same(attributes.openstack_user_domain, ['Default']);
    t.same([...attributes.openstack_roles!].sort(), [...roleNames].sort(), "the token's roles, by name");
    t.same(attributes.openstack_project, ['admin']);
    t.same(attributes.openstack_project_domain, ['Default']);
    t.notOk('openstack_groups' in attributes, 'no groups: no attribute');
  });

  t.test("the user's groups become openstack_groups", async (t) => {
    const domain = await app.call('POST', '/v3/domains', { domain: { name: 'D2' } });
    const groups = [
      (await app.call('POST', '/v3/groups', { group: { name: 'ops', domain_id: 'default' } })).json().group.id,
      (await app.call('POST', '/v3/groups', { group: { name: 'auditors', domain_id: domain.json().domain.id } })).json().group.id,
    ];
    // A user of its own: leaving a group revokes the user's tokens (as Keystone), so not the admin.
    const user = (await app.call('POST', '/v3/users', { user: { name: 'saml-grouped', password: 'Grouped-1' } })).json().user.id as string;
    const project = (await app.call('GET', '/v3/projects?name=admin')).json().projects[0].id as string;
    const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
    t.equal((await app.call('PUT', `/v3/projects/${project}/users/${user}/roles/${member}`)).statusCode, 204);
    for (const group of groups) t.equal((await app.call('PUT', `/v3/groups/${group}/users/${user}`)).statusCode, 204);
    const token = (await app.login({ id: user }, 'Grouped-1', { project: { id: project } })).token;
    const response = await post(app, '/v3/auth/OS-FEDERATION/saml2', samlBody(token, 'sp1'));
    t.equal(response.statusCode, 200);
    t.same([...samlAttributes(response.body).openstack_groups!].sort(), ['JSON:{"name": "auditors", "domain": {"name": "D2"}}', 'JSON:{"name": "ops", "domain": {"name": "Default"}}']);
    t.ok(xmlsecVerifies(response.body, keys.certFile));
    await app.call('DELETE', `/v3/users/${user}`);
  });

  t.test('POST /v3/auth/OS-FEDERATION/saml2/ecp: the envelope with the service provider\'s RelayState', async (t) => {
    const response = await post(app, '/v3/auth/OS-FEDERATION/saml2/ecp', samlBody(app.adminToken, 'sp-relay'));
    t.equal(response.statusCode, 200, response.body);
    t.match(response.headers['content-type'], /^text\/xml/);
    t.equal(response.headers['x-sp-url'], 'https://sp-relay.example/Shibboleth.sso/SAML2/ECP');
    const document = parseXml(response.body);
    t.equal(document.documentElement.namespaceURI, NS.soap);
    const relay = elements(document, NS.ecp, 'RelayState')[0]!;
    t.match(relay.textContent, /^rs:<x>&[0-9a-f]{32}$/, 'prefix (escaped) + uuid hex');
    t.equal(relay.getAttributeNS(NS.soap, 'mustUnderstand'), '1');
    t.equal(relay.getAttributeNS(NS.soap, 'actor'), 'http://schemas.xmlsoap.org/soap/actor/next');
    t.equal(elements(document, NS.protocol, 'Response').length, 1);
    t.ok(xmlsecVerifies(response.body, keys.certFile), 'the assertion inside verifies');
  });

  t.test("errors, in Keystone's order and words", async (t) => {
    const unscoped = await app.login({ name: 'admin', domain: { name: 'Default' } }, 'admin-secret');
    const admin = (await app.call('GET', '/v3/users?name=admin')).json().users[0].id;
    const adminRole = (await app.call('GET', '/v3/roles?name=admin')).json().roles[0].id;
    t.equal((await app.call('PUT', `/v3/domains/default/users/${admin}/roles/${adminRole}`)).statusCode, 204);
    const domainScoped = await app.login({ name: 'admin', domain: { name: 'Default' } }, 'admin-secret', { domain: { id: 'default' } });
    const cases: Array<[string, unknown, number, string | RegExp]> = [
      ['unknown service provider', samlBody(app.adminToken, 'nope'), 404, 'Could not find Service Provider: nope.'],
      ['disabled service provider (Keystone hides its text)', samlBody(app.adminToken, 'sp-off'), 403, 'You are not authorized to perform the requested action.'],
      ['unknown service provider before a bad token', samlBody('bogus', 'nope'), 404, 'Could not find Service Provider: nope.'],
      ['a token that does not validate', samlBody('bogus', 'sp1'), 404, /./],
      ['an unscoped token', samlBody(unscoped.token, 'sp1'), 403, 'You are not authorized to perform the requested action: Use a project scoped token when attempting to create a SAML assertion.'],
      ['a domain-scoped token', samlBody(domainScoped.token, 'sp1'), 403, 'You are not authorized to perform the requested action: Use a project scoped token when attempting to create a SAML assertion.'],
      ['no auth', {}, 400, /./],
      ['no scope', { auth: { identity: { token: { id: app.adminToken } } } }, 400, /./],
      ['no token', { auth: { identity: { methods: ['token'] }, scope: { service_provider: { id: 'sp1' } } } }, 400, /./],
      ['an extra property', { auth: { ...samlBody(app.adminToken, 'sp1').auth, extra: 1 } }, 400, /./],
    ];
    for (const path of ['/v3/auth/OS-FEDERATION/saml2', '/v3/auth/OS-FEDERATION/saml2/ecp']) {
      for (const [name, body, status, message] of cases) {
        const response = await post(app, path, body);
        t.equal(response.statusCode, status, `${path} ${name}: ${status}`);
        t.match(response.json().error, { code: status, message }, `${path} ${name}: ${response.body}`);
      }
    }
    t.equal(unscoped.status, 201);
    t.equal(domainScoped.status, 201);
    const get = await app.request({ method: 'GET', url: '/v3/auth/OS-FEDERATION/saml2' });
    t.equal(get.statusCode, 405, 'GET is not allowed');
  });

  t.test('a revoked token is refused', async (t) => {
    const login = await app.login({ name: 'admin', domain: { name: 'Default' } }, 'admin-secret', { project: { name: 'admin', domain: { name: 'Default' } } });
    t.equal((await app.call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': login.token })).statusCode, 204);
    const response = await post(app, '/v3/auth/OS-FEDERATION/saml2', samlBody(login.token, 'sp1'));
    t.equal(response.statusCode, 404);
  });
});

t.test('SAML_SIGNATURE_ALGORITHM=rsa-sha1 and SAML_ASSERTION_EXPIRATION_TIME', async (t) => {
  const keys = makeKeyPair(t);
  const app = await startTestApp(t, {
    SAML_CERTFILE: keys.certFile,
    SAML_KEYFILE: keys.keyFile,
    SAML_IDP_ENTITY_ID: ENTITY_ID,
    SAML_IDP_SSO_ENDPOINT: SSO,
    SAML_SIGNATURE_ALGORITHM: 'rsa-sha1',
    SAML_ASSERTION_EXPIRATION_TIME: '300',
  });
  await createServiceProvider(app, 'sp1');
  // Within the admin token's life: the next whole second, plus 999 ms that the times drop.
  const second = Math.ceil(app.clock.now() / 1000) * 1000;
  app.clock.set(second + 999);
  const response = await post(app, '/v3/auth/OS-FEDERATION/saml2', samlBody(app.adminToken, 'sp1'));
  t.equal(response.statusCode, 200, response.body);
  t.ok(xmlsecVerifies(response.body, keys.certFile));
  const document = parseXml(response.body);
  t.equal(elements(document, NS.xmldsig, 'SignatureMethod')[0]!.getAttribute('Algorithm'), 'http://www.w3.org/2000/09/xmldsig#rsa-sha1');
  t.equal(elements(document, NS.xmldsig, 'DigestMethod')[0]!.getAttribute('Algorithm'), 'http://www.w3.org/2000/09/xmldsig#sha1');
  t.equal(document.documentElement.getAttribute('IssueInstant'), new Date(second).toISOString().replace('.000Z', 'Z'));
  t.equal(elements(document, NS.assertion, 'AuthnStatement')[0]!.getAttribute('SessionNotOnOrAfter'), new Date(second + 300_000).toISOString().replace('.000Z', '.000000Z'));
});

t.test('without SAML configured: answered as Keystone answers without its [saml] files (metadata: 404, not 500)', async (t) => {
  const app = await startTestApp(t);
  await createServiceProvider(app, 'sp1');
  const metadata = await app.request({ method: 'GET', url: '/v3/OS-FEDERATION/saml2/metadata' });
  t.equal(metadata.statusCode, 404, 'Keystone: 500 (MetadataFileError); here a 404, the route being public (docs/compatibility.md)');
  t.same(metadata.json(), { error: { code: 404, title: 'Not Found', message: 'Could not find the SAML identity provider metadata: SAML is not configured on this server.' } });
  for (const path of ['/v3/auth/OS-FEDERATION/saml2', '/v3/auth/OS-FEDERATION/saml2/ecp']) {
    const response = await post(app, path, samlBody(app.adminToken, 'sp1'));
    t.equal(response.statusCode, 500, `${path}: SAMLSigningError`);
    t.equal(response.json().error.message, GENERIC_500);
    t.equal((await post(app, path, samlBody(app.adminToken, 'nope'))).statusCode, 404, 'the service provider is looked up first');
    const unscoped = await app.login({ name: 'admin', domain: { name: 'Default' } }, 'admin-secret');
    t.equal((await post(app, path, samlBody(unscoped.token, 'sp1'))).statusCode, 403, 'then the token');
  }
});

t.test('a bad key file stops the start', async (t) => {
  const keys = makeKeyPair(t);
  const other = makeKeyPair(t);
  await t.rejects(
    startTestApp(t, { SAML_CERTFILE: keys.certFile, SAML_KEYFILE: other.keyFile, SAML_IDP_ENTITY_ID: ENTITY_ID, SAML_IDP_SSO_ENDPOINT: SSO }),
    { name: 'ConfigError', message: /is not the certificate of the key in SAML_KEYFILE/ },
  );
});
