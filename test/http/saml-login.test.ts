// The SAML 2.0 federated login (this service as service provider) through HTTP: the real Keystone 22
// ECP envelope posted as keystoneauth's K2K plugin posts it, a browser form, Keystone's error
// envelopes for every refusal (never a 500), and the replay cache shared by two nodes through Redis.
import t, { type Test } from 'tap';
import { PUBLIC_URL, startOtherNode, startTestApp, type TestApp } from '../helpers/app.ts';
import { LOCAL_POSTGRES } from '../helpers/database.ts';
import { testRedis } from '../helpers/redis.ts';
import { K2K_RULES, makeIdp, SAMPLE, setUpK2kProvider } from '../federation/saml/saml-sp-helpers.ts';
import { FixedAssertionVerifier } from '../helpers/federation.ts';

const FED = '/v3/OS-FEDERATION';
const LOGIN = `${FED}/identity_providers/keystone-idp/protocols/saml2/auth`;
const PAOS = 'application/vnd.paos+xml';

interface World {
  app: TestApp;
  domainId: string;
  projectId: string;
}

async function world(t: Test, overrides: Record<string, string> = {}, remoteIds: string[] = [SAMPLE.issuer], databaseServer?: string): Promise<World> {
  const app = await startTestApp(t, { SAML_TRUSTED_IDP_METADATA: SAMPLE.metadataFile, SAML_SP_ACCEPTED_RECIPIENTS: SAMPLE.recipient, ...overrides }, databaseServer ? { databaseServer } : {});
  const { domainId, projectId } = await setUpK2kProvider(app, { prefix: 'k2k', idpId: 'keystone-idp', remoteIds });
  // The samples were issued at 11:57:08 on 2026-11-22 and expire an hour later.
  app.clock.set(SAMPLE.now);
  return { app, domainId, projectId };
}

const post = (app: TestApp, payload: string | Buffer, contentType = PAOS, url = LOGIN, headers: Record<string, string> = {}) =>
  app.request({ method: 'POST', url, headers: { 'content-type': contentType, ...headers }, payload });

function keystoneError(t: Test, response: { statusCode: number; json(): any; body: string }, status: number, what: string): void {
  t.equal(response.statusCode, status, `${what}: ${status} (${response.body.slice(0, 200)})`);
  const title = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 503: 'Service Unavailable' }[status];
  t.match(response.json(), { error: { code: status, title, message: String } }, `${what}: Keystone's error envelope`);
}

t.test('the real Keystone ECP envelope, as keystoneauth posts it: 201, X-Subject-Token, the federated token; then rescoped', async (t) => {
  const w = await world(t);
  const login = await post(w.app, SAMPLE.ecp());
  t.equal(login.statusCode, 201, login.body);
  const token = String(login.headers['x-subject-token'] ?? '');
  t.ok(token, 'X-Subject-Token');
  const body = login.json().token;
  t.strictSame(body.methods, ['saml2']);
  t.match(body.user, { name: 'admin', domain: { id: w.domainId }, 'OS-FEDERATION': { identity_provider: { id: 'keystone-idp' }, protocol: { id: 'saml2' } } });
  t.equal(body.user['OS-FEDERATION'].groups.length, 1, 'the federated_users group');
  t.ok(body.expires_at && body.issued_at);

  // keystoneauth's next step: the unscoped token scoped to the remote project.
  const scoped = await w.app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ auth: { identity: { methods: ['token'], token: { id: token } }, scope: { project: { name: 'k2k-project', domain: { id: w.domainId } } } } }),
  });
  t.equal(scoped.statusCode, 201, scoped.body);
  t.match(scoped.json().token, { project: { id: w.projectId } });
  t.ok(scoped.json().token.roles.some((role: { name: string }) => role.name === 'member'), "the group's role");

  keystoneError(t, await post(w.app, SAMPLE.ecp()), 401, 'the same envelope again (replay)');
});

t.test('a browser form (SAMLResponse) and a bare response as text/xml', async (t) => {
  const w = await world(t);
  const form = new URLSearchParams({ SAMLResponse: Buffer.from(SAMPLE.response()).toString('base64'), RelayState: 'x' }).toString();
  const login = await post(w.app, form, 'application/x-www-form-urlencoded');
  t.equal(login.statusCode, 201, login.body);
  t.match(login.json().token.user, { name: 'admin' });
  keystoneError(t, await post(w.app, SAMPLE.response(), 'text/xml; charset=utf-8'), 401, 'the same assertion as text/xml (replay)');
  t.equal((await post(w.app, SAMPLE.ecp(), 'text/xml; charset=utf-8')).statusCode, 201, 'the ECP envelope as text/xml');
});

t.test("refusals, each Keystone's envelope, never a 500", async (t) => {
  const w = await world(t);
  keystoneError(t, await post(w.app, SAMPLE.ecp().replace('>member<', '>owner<')), 401, 'a tampered attribute');
  keystoneError(t, await post(w.app, `<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>${SAMPLE.response().replace('>admin</saml:NameID>', '>&x;</saml:NameID>')}`), 401, 'an external entity');
  keystoneError(t, await post(w.app, '<not xml'), 401, 'not XML');
  keystoneError(t, await post(w.app, '', PAOS), 401, 'no body');
  keystoneError(t, await w.app.request({ method: 'POST', url: LOGIN }), 401, 'nothing posted');
  keystoneError(t, await w.app.request({ method: 'GET', url: LOGIN }), 401, 'a GET');
  keystoneError(t, await post(w.app, JSON.stringify({ SAMLResponse: 'x' }), 'application/json'), 401, 'JSON');
  keystoneError(t, await post(w.app, SAMPLE.ecp(), 'text/plain'), 400, 'another content type (as every route: not JSON)');
  // Another identity provider names another issuer: Keystone's 403.
  t.equal((await w.app.call('PUT', `${FED}/identity_providers/other-idp`, { identity_provider: { remote_ids: ['https://someone-else.example/idp'], enabled: true } })).statusCode, 201);
  t.equal((await w.app.call('PUT', `${FED}/identity_providers/other-idp/protocols/saml2`, { protocol: { mapping_id: 'k2k-mapping' } })).statusCode, 201);
  keystoneError(t, await post(w.app, SAMPLE.ecp(), PAOS, `${FED}/identity_providers/other-idp/protocols/saml2/auth`), 403, 'an issuer the identity provider does not name');
  // Expired.
  w.app.clock.set(SAMPLE.notOnOrAfter + 61_000);
  keystoneError(t, await post(w.app, SAMPLE.ecp()), 401, 'an expired assertion');
  w.app.clock.set(SAMPLE.now);
  // Still good after all of that (none of the refusals used it up).
  t.equal((await post(w.app, SAMPLE.ecp())).statusCode, 201, 'the untouched envelope');
});

t.test("addressed by this service's public URL, never by the request's Host", async (t) => {
  const ours = `${PUBLIC_URL}${LOGIN}`;
  const idp = makeIdp(t, 'https://idp.example.org/saml2/idp', { recipient: ours, now: () => SAMPLE.now });
  const w = await world(t, { SAML_TRUSTED_IDP_METADATA: idp.metadataFile, SAML_SP_ACCEPTED_RECIPIENTS: '' }, [idp.entityId, SAMPLE.issuer]);
  t.equal(`${w.app.config.publicUrl}${LOGIN}`, 'http://keystone.test:5000/v3/OS-FEDERATION/identity_providers/keystone-idp/protocols/saml2/auth');
  t.equal((await post(w.app, idp.ecp())).statusCode, 201, 'for our URL: accepted');
  const elsewhere = 'http://other-sp.example/v3/OS-FEDERATION/identity_providers/keystone-idp/protocols/saml2/auth';
  keystoneError(t, await post(w.app, idp.ecp({ recipient: elsewhere }), PAOS, LOGIN, { host: 'other-sp.example' }), 401, "for another service provider, posted with that provider's Host");
  keystoneError(t, await post(w.app, SAMPLE.ecp()), 401, "the sample (its issuer's metadata is not trusted here)");
});

t.test('replay across two nodes sharing Redis', async (t) => {
  const shared = await testRedis(t);
  if (!shared) return t.plan(0, 'no Redis at 127.0.0.1:6379');
  const settings = { REDIS_URL: 'redis://127.0.0.1:6379', SAML_REPLAY_KEY_PREFIX: shared.prefix, REDIS_EVENTS_CHANNEL: `${shared.prefix}events` };
  // Two nodes of one deployment: one PostgreSQL database.
  const w = await world(t, settings, [SAMPLE.issuer], process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const other = await startOtherNode(t, w.app, { ...settings, SAML_TRUSTED_IDP_METADATA: SAMPLE.metadataFile, SAML_SP_ACCEPTED_RECIPIENTS: SAMPLE.recipient });
  const first = await post(w.app, SAMPLE.ecp());
  t.equal(first.statusCode, 201, `node 1 accepts it: ${first.body.slice(0, 200)}`);
  const second = await other.server.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': PAOS }, payload: SAMPLE.ecp() });
  keystoneError(t, second, 401, 'node 2 refuses the same envelope');
  t.equal((await other.server.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'text/xml' }, payload: SAMPLE.response() })).statusCode, 201, 'node 2 accepts another assertion');
  t.equal((await shared.redis.keys(`${shared.prefix}*`)).filter((key) => !key.endsWith('events')).length, 2, 'two assertion ids in Redis');
});

t.test("SAML protocols check the remote id in Shib-Identity-Provider by default (Keystone's [saml2] remote_id_attribute)", async (t) => {
  // A verifier standing in for the SAML one answers an assertion whose Shib-Identity-Provider is not a remote id.
  for (const [setting, status] of [[undefined, 403], ['', 201]] as const) {
    const verifier = new FixedAssertionVerifier({ openstack_user: 'bob', openstack_user_domain: 'Default', 'Shib-Identity-Provider': 'https://elsewhere.example/idp' }, ['saml2']);
    const app = await startTestApp(t, setting === undefined ? {} : { SAML_REMOTE_ID_ATTRIBUTE: setting }, { assertionVerifiers: [verifier] });
    const domainId = (await app.call('POST', '/v3/domains', { domain: { name: 'k2k-users' } })).json().domain.id as string;
    t.equal((await app.call('POST', '/v3/groups', { group: { name: 'federated_users', domain_id: domainId } })).statusCode, 201);
    t.equal((await app.call('PUT', `${FED}/identity_providers/keystone-idp`, { identity_provider: { remote_ids: [SAMPLE.issuer], enabled: true, domain_id: domainId } })).statusCode, 201);
    t.equal((await app.call('PUT', `${FED}/mappings/k2k-mapping`, { mapping: { rules: K2K_RULES(domainId) } })).statusCode, 201);
    t.equal((await app.call('PUT', `${FED}/identity_providers/keystone-idp/protocols/saml2`, { protocol: { mapping_id: 'k2k-mapping' } })).statusCode, 201);
    const response = await post(app, 'ignored');
    t.equal(response.statusCode, status, `SAML_REMOTE_ID_ATTRIBUTE ${setting === undefined ? 'unset (Shib-Identity-Provider)' : "'' (none)"}: ${status}`);
  }
});
