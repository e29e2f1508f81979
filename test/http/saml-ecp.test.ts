// Shibboleth's ECP consumer (/Shibboleth.sso/SAML2/ECP), where Keystone's K2K guide points a service
// provider's sp_url: the posted response answers a redirect and a session cookie, and the login URL
// with that cookie is the login (keystoneauth's K2K plugin, tempest's K2K scenario). Each refusal is
// Keystone's envelope; a session is used once, only at a login URL, only for a provider naming its issuer.
import { pino } from 'pino';
import t, { type Test } from 'tap';
import { PUBLIC_URL, startListeningTestApp, startTestApp, type TestApp } from '../helpers/app.ts';
import { K2K_RULES, makeIdp, setUpK2kProvider, type TestIdp } from '../federation/saml/saml-sp-helpers.ts';
import { testRedis } from '../helpers/redis.ts';

const FED = '/v3/OS-FEDERATION';
const ECP = '/Shibboleth.sso/SAML2/ECP';
const LOGIN = `${FED}/identity_providers/k2k-idp/protocols/saml2/auth`;
const PAOS = 'application/vnd.paos+xml';
const COOKIE = '_shibsession_keystone-gateway';
const ISSUER = 'https://idp.example.org/v3/OS-FEDERATION/saml2/idp';
const NOW = Date.UTC(2026, 11, 2, 12, 0, 0);

interface World {
  app: TestApp;
  idp: TestIdp;
  domainId: string;
}

/** The service (or `app`), trusting an identity provider of ours, with Keystone's K2K setup for it. */
async function world(t: Test, options: { app?: TestApp; idp?: TestIdp; settings?: Record<string, string> } = {}): Promise<World> {
  const idp = options.idp ?? makeIdp(t, ISSUER, { recipient: `${PUBLIC_URL}${ECP}`, now: () => NOW });
  const app = options.app ?? (await startTestApp(t, { SAML_TRUSTED_IDP_METADATA: idp.metadataFile, ...options.settings }));
  app.clock.set(NOW);
  const { domainId } = await setUpK2kProvider(app, { prefix: 'k2k', idpId: 'k2k-idp', remoteIds: [ISSUER] });
  return { app, idp, domainId };
}

const consume = (app: TestApp, payload: string, contentType = PAOS) => app.request({ method: 'POST', url: ECP, headers: { 'content-type': contentType }, payload });
const loginWith = (app: TestApp, cookie: string, method: 'GET' | 'POST' = 'GET', url = LOGIN) =>
  app.request({ method, url, headers: { cookie: `other=1; ${COOKIE}=${cookie}`, 'content-type': PAOS } });

/** The session cookie's value from a Set-Cookie header. */
function sessionOf(t: Test, setCookie: unknown): string {
  const header = String(setCookie ?? '');
  const match = new RegExp(`^${COOKIE}=([A-Za-z0-9_-]+);`).exec(header);
  t.ok(match, `a session cookie (${header.slice(0, 80)})`);
  return match?.[1] ?? '';
}

function keystoneError(t: Test, response: { statusCode: number; json(): any; body: string }, status: number, what: string): void {
  t.equal(response.statusCode, status, `${what}: ${status} (${response.body.slice(0, 200)})`);
  const title = { 401: 'Unauthorized', 403: 'Forbidden' }[status];
  t.match(response.json(), { error: { code: status, title, message: String } }, `${what}: Keystone's error envelope`);
}

t.test('the ECP response answers a redirect and a session; the login URL with it is the login, once', async (t) => {
  const w = await world(t);
  const envelope = w.idp.ecp();
  const consumed = await consume(w.app, envelope);
  t.equal(consumed.statusCode, 302, consumed.body);
  t.equal(consumed.headers.location, `${PUBLIC_URL}${LOGIN}`, 'to the one login that takes the issuer');
  const setCookies = consumed.headers['set-cookie'] as string[];
  t.equal(setCookies.length, 2, 'one cookie per mount of the identity API');
  t.match(setCookies[0], /; Max-Age=(\d+); Path=\/v3\/OS-FEDERATION\/identity_providers\/; HttpOnly; SameSite=Strict$/, 'only for the login URLs, not for scripts');
  t.match(setCookies[1], /; Max-Age=(\d+); Path=\/identity\/v3\/OS-FEDERATION\/identity_providers\/; HttpOnly; SameSite=Strict$/, 'and those under /identity');
  t.equal(sessionOf(t, setCookies[1]), sessionOf(t, setCookies[0]), 'the same session');
  t.ok(Number(/Max-Age=(\d+)/.exec(setCookies[0] ?? '')?.[1]) <= 600, 'at most WEBSSO_STATE_TTL_SECONDS');
  t.equal(consumed.headers['cache-control'], 'no-store');
  const session = sessionOf(t, consumed.headers['set-cookie']);

  const login = await loginWith(w.app, session);
  t.equal(login.statusCode, 201, login.body);
  t.ok(login.headers['x-subject-token'], 'X-Subject-Token');
  const token = login.json().token;
  t.strictSame(token.methods, ['saml2']);
  t.match(token.user, { name: 'alice', domain: { id: w.domainId }, 'OS-FEDERATION': { identity_provider: { id: 'k2k-idp' }, protocol: { id: 'saml2' } } });
  t.equal(token.user['OS-FEDERATION'].groups.length, 1, 'the federated_users group');

  keystoneError(t, await loginWith(w.app, session), 401, 'the session again');
  keystoneError(t, await consume(w.app, envelope), 401, 'the same response again (replay)');
});

t.test('POST at the login URL without a body, and the bare response or the form at the consumer', async (t) => {
  const w = await world(t);
  const bare = await consume(w.app, w.idp.response(), 'text/xml; charset=utf-8');
  t.equal(bare.statusCode, 302, bare.body);
  t.equal((await loginWith(w.app, sessionOf(t, bare.headers['set-cookie']), 'POST')).statusCode, 201, 'POST without a body');
  const form = new URLSearchParams({ SAMLResponse: Buffer.from(w.idp.response()).toString('base64') }).toString();
  const posted = await consume(w.app, form, 'application/x-www-form-urlencoded');
  t.equal(posted.statusCode, 302, posted.body);
  t.equal((await loginWith(w.app, sessionOf(t, posted.headers['set-cookie']))).statusCode, 201);
});

t.test('the audit trail: the login is identity.authenticate, the consumer itself writes no event and no warning', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const idp = makeIdp(t, ISSUER, { recipient: `${PUBLIC_URL}${ECP}`, now: () => NOW });
  const w = await world(t, { idp, app: await startTestApp(t, { SAML_TRUSTED_IDP_METADATA: idp.metadataFile }, { logger }) });
  lines.length = 0;
  const consumed = await consume(w.app, w.idp.ecp());
  t.equal(consumed.statusCode, 302, consumed.body);
  const entries = () => lines.map((line) => JSON.parse(line));
  t.notOk(entries().some((entry) => entry.msg === 'a write with no audit event'), 'the consumer is known to the audit table');
  t.strictSame(entries().filter((entry) => entry.msg === 'audit'), [], 'nothing stored, nothing announced');
  t.equal((await loginWith(w.app, sessionOf(t, consumed.headers['set-cookie']))).statusCode, 201);
  t.equal((await consume(w.app, 'not a response')).statusCode, 401);
  t.match(
    entries().filter((entry) => entry.msg === 'audit').map((entry) => entry.notification),
    [
      { event_type: 'identity.authenticate', payload: { outcome: 'success' } },
      { event_type: 'identity.authenticate', payload: { outcome: 'failure' } },
    ],
  );
});

t.test('a login that fails after the session is claimed (no mapping rule matches) spends it, as a posted assertion', async (t) => {
  const w = await world(t);
  const consumed = await consume(w.app, w.idp.ecp({ claims: { user: 'alice', userDomain: 'Elsewhere', roles: ['member'], project: 'demo', projectDomain: 'Default', groups: [] } }));
  t.equal(consumed.statusCode, 302, consumed.body);
  const session = sessionOf(t, consumed.headers['set-cookie']);
  keystoneError(t, await loginWith(w.app, session), 401, 'no rule matches the user domain');
  const rules = K2K_RULES(w.domainId);
  rules[0]!.remote[1]!.any_one_of = ['Default', 'Elsewhere'];
  t.equal((await w.app.call('PATCH', `${FED}/mappings/k2k-mapping`, { mapping: { rules } })).statusCode, 200);
  keystoneError(t, await loginWith(w.app, session), 401, 'the mapping now matches, but the session was spent');
  const again = await consume(w.app, w.idp.ecp({ claims: { user: 'alice', userDomain: 'Elsewhere', roles: ['member'], project: 'demo', projectDomain: 'Default', groups: [] } }));
  t.equal((await loginWith(w.app, sessionOf(t, again.headers['set-cookie']))).statusCode, 201, 'a new exchange logs in');
});

t.test('an assertion let in only by the clock skew is refused at the consumer, not turned into a dead session', async (t) => {
  const w = await world(t);
  // NotOnOrAfter 30 s ago: within SAML_CLOCK_SKEW_SECONDS (60).
  keystoneError(t, await consume(w.app, w.idp.ecp({ now: NOW - 3_630_000, expiresIn: 3600 })), 401, 'expired');
});

t.test('with Redis, a used session stays claimed past its expiry by SAML_CLOCK_SKEW_SECONDS (nodes whose clocks lag)', async (t) => {
  const shared = await testRedis(t);
  if (!shared) return t.plan(0, 'no Redis at 127.0.0.1:6379');
  const idp = makeIdp(t, ISSUER, { recipient: `${PUBLIC_URL}${ECP}`, now: () => NOW });
  const settings = { SAML_TRUSTED_IDP_METADATA: idp.metadataFile, REDIS_URL: 'redis://127.0.0.1:6379', SAML_REPLAY_KEY_PREFIX: shared.prefix, REDIS_EVENTS_CHANNEL: `${shared.prefix}events`, SAML_CLOCK_SKEW_SECONDS: '120' };
  const w = await world(t, { idp, app: await startTestApp(t, settings) });
  const consumed = await consume(w.app, w.idp.ecp());
  const maxAge = Number(/Max-Age=(\d+)/.exec(String(consumed.headers['set-cookie']))?.[1]);
  t.equal((await loginWith(w.app, sessionOf(t, consumed.headers['set-cookie']))).statusCode, 201);
  const [key] = await shared.redis.keys(`${shared.prefix}saml-ecp-session:*`);
  t.ok(key, 'the session is claimed in Redis');
  const ttl = await shared.redis.pttl(key!);
  t.ok(ttl > (maxAge + 120 - 5) * 1000 && ttl <= (maxAge + 120) * 1000, `claimed for the session's life and the skew (${ttl} ms, Max-Age ${maxAge} s)`);
});

t.test('an https PUBLIC_URL with a path: the cookies are Secure, under that path and its /identity mount', async (t) => {
  const base = 'https://sso.example.org/keystone';
  const idp = makeIdp(t, ISSUER, { recipient: `${base}${ECP}`, now: () => NOW });
  const w = await world(t, { idp, app: await startTestApp(t, { PUBLIC_URL: base, SAML_TRUSTED_IDP_METADATA: idp.metadataFile }) });
  const consumed = await consume(w.app, w.idp.ecp());
  t.equal(consumed.statusCode, 302, consumed.body);
  t.equal(consumed.headers.location, `${base}${LOGIN}`);
  const paths = (consumed.headers['set-cookie'] as string[]).map((cookie) => {
    t.match(cookie, /; HttpOnly; SameSite=Strict; Secure$/, 'Secure over https');
    return /; Path=([^;]+);/.exec(cookie)?.[1];
  });
  t.strictSame(paths, ['/keystone/v3/OS-FEDERATION/identity_providers/', '/keystone/identity/v3/OS-FEDERATION/identity_providers/']);
});

t.test("refusals, each Keystone's envelope, never a 500", async (t) => {
  const w = await world(t);
  keystoneError(t, await consume(w.app, '<not xml'), 401, 'not XML');
  keystoneError(t, await consume(w.app, ''), 401, 'nothing posted');
  keystoneError(t, await consume(w.app, w.idp.ecp().replace('>alice<', '>mallory<')), 401, 'a tampered attribute');
  keystoneError(t, await consume(w.app, w.idp.ecp({ recipient: `${PUBLIC_URL}${LOGIN}` })), 401, 'addressed to the login URL, not to the consumer');
  const stranger = makeIdp(t, 'https://stranger.example/idp', { recipient: `${PUBLIC_URL}${ECP}`, now: () => NOW });
  keystoneError(t, await consume(w.app, stranger.ecp()), 401, 'an issuer in no trusted metadata');

  const session = sessionOf(t, (await consume(w.app, w.idp.ecp())).headers['set-cookie']);
  keystoneError(t, await loginWith(w.app, `${session.slice(0, -2)}${session.endsWith('AA') ? 'BB' : 'AA'}`), 401, 'a changed cookie');
  keystoneError(t, await loginWith(w.app, 'x'), 401, 'a made-up cookie');
  keystoneError(t, await w.app.request({ method: 'GET', url: LOGIN }), 401, 'no cookie');

  // A provider that does not name the issuer: Keystone's 403, and the session is not used up.
  t.equal((await w.app.call('PUT', `${FED}/identity_providers/other-idp`, { identity_provider: { remote_ids: ['https://someone-else.example/idp'], enabled: true } })).statusCode, 201);
  t.equal((await w.app.call('PUT', `${FED}/identity_providers/other-idp/protocols/saml2`, { protocol: { mapping_id: 'k2k-mapping' } })).statusCode, 201);
  keystoneError(t, await loginWith(w.app, session, 'GET', `${FED}/identity_providers/other-idp/protocols/saml2/auth`), 403, "another provider's login URL");

  // The mapped method of POST /v3/auth/tokens is not a login URL: the cookie is not believed there.
  const mapped = await w.app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json', cookie: `${COOKIE}=${session}` },
    payload: JSON.stringify({ auth: { identity: { methods: ['saml2'], saml2: { identity_provider: 'k2k-idp', protocol: 'saml2' } } } }),
  });
  keystoneError(t, mapped, 401, 'the session at POST /v3/auth/tokens');

  // Past WEBSSO_STATE_TTL_SECONDS (the assertion itself is good for an hour).
  w.app.clock.set(NOW + 601_000);
  keystoneError(t, await loginWith(w.app, session), 401, 'an expired session');
  w.app.clock.set(NOW);
  t.equal((await loginWith(w.app, session)).statusCode, 201, 'the untouched session, in time, at its provider');
});

t.test('a provider with two SAML protocols: the redirect goes to the root, and either login URL takes the session', async (t) => {
  const w = await world(t, { settings: { SAML_PROTOCOLS: 'saml2,mapped' } });
  t.equal((await w.app.call('PUT', `${FED}/identity_providers/k2k-idp/protocols/mapped`, { protocol: { mapping_id: 'k2k-mapping' } })).statusCode, 201);
  const consumed = await consume(w.app, w.idp.ecp());
  t.equal(consumed.statusCode, 302, consumed.body);
  t.equal(consumed.headers.location, `${PUBLIC_URL}/`, "Shibboleth's home URL");
  const login = await loginWith(w.app, sessionOf(t, consumed.headers['set-cookie']), 'GET', `${FED}/identity_providers/k2k-idp/protocols/mapped/auth`);
  t.equal(login.statusCode, 201, login.body);
  t.strictSame(login.json().token.methods, ['mapped']);
});

t.test('over HTTP, at the root and under /identity: the identity API answers, not the gateway', async (t) => {
  // The provider's metadata (its entity id and key) is known before the port; the recipient is given per response.
  const idp = makeIdp(t, ISSUER, { recipient: 'set per response', now: () => NOW });
  const { testApp, base } = await startListeningTestApp(t, (base) => ({ PUBLIC_URL: base, SAML_TRUSTED_IDP_METADATA: idp.metadataFile }));
  await world(t, { app: testApp, idp });
  // Shibboleth's URL is at the host's root wherever the client's auth_url is (tempest on devstack:
  // sp_url at the root, auth_url under /identity), and a cookie jar sends a cookie only under its Path.
  for (const [mount, loginMount] of [['', ''], ['/identity', '/identity'], ['', '/identity'], ['/identity', '']]) {
    const consumed = await fetch(`${base}${mount}${ECP}`, { method: 'POST', headers: { 'content-type': PAOS }, body: idp.ecp({ recipient: `${base}${mount}${ECP}` }), redirect: 'manual' });
    t.equal(consumed.status, 302, `${mount || '/'}: ${await consumed.text()}`);
    t.equal(consumed.headers.get('location'), `${base}${mount}${LOGIN}`);
    const forLogin = consumed.headers.getSetCookie().find((cookie) => cookie.includes(`; Path=${loginMount}/v3/OS-FEDERATION/identity_providers/;`));
    t.ok(forLogin, `posted at ${mount || '/'}: a cookie for the login URLs under ${loginMount || '/'}`);
    const login = await fetch(`${base}${loginMount}${LOGIN}`, { headers: { cookie: `${COOKIE}=${sessionOf(t, forLogin)}` } });
    t.equal(login.status, 201, await login.text());
    t.ok(login.headers.get('x-subject-token'));
  }
});
