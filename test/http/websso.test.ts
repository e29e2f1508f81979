import fs from 'node:fs';
import path from 'node:path';
import { decodeJwt, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';
import t, { type Test } from 'tap';
import { pino } from 'pino';
import type { AuditNotification } from '../../src/events/audit.ts';
import { OidcProviderDirectory } from '../../src/federation/oidc/provider-directory.ts';
import type { Fetch } from '../../src/federation/oidc/provider-http.ts';
import { OidcWebSso, ORIGIN_MISSING } from '../../src/federation/oidc/websso.ts';
import { WebSsoStateSealer } from '../../src/federation/oidc/websso-state.ts';
import { MemoryReplayCache } from '../../src/federation/replay-cache.ts';
import { AuthenticationError } from '../../src/support/errors.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';
import { HeadlessBrowser, type BrowserResponse } from '../helpers/browser.ts';
import { registerOidcProvider } from '../helpers/federation.ts';
import { OIDC_USERS, startOidcPeer, type OidcPeer } from '../helpers/oidc-peer.ts';
import { TEST_REDIS_URL, testRedis } from '../helpers/redis.ts';

// Keystone's websso for OpenID Connect with this service as the relying party, against the REAL
// OpenID Provider of ../shared/peers/oidc: a headless browser (a cookie jar, no JavaScript) goes
// GET …/websso → the provider's login form → the callback → the page that posts the token to the
// dashboard. The token is then validated like any federated unscoped token.

const FED = '/v3/OS-FEDERATION';
const WEBSSO = `${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/openid`;
const IDP_WEBSSO = `${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/oidc-idp/protocols/openid/websso`;
const CALLBACK = `${WEBSSO}/redirect`;
const DASHBOARD = 'https://horizon.example.org/dashboard/auth/websso/';
/** A trusted dashboard whose URL holds characters HTML must escape (configured with an upper-case host). */
const ODD_DASHBOARD = `https://dash.example.org/x?a="<b>'&c=1`;
const CLIENT = { client_id: 'keystone', client_secret: 'keystone-secret', grant_types: ['authorization_code', 'password'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' };
const CLIENTS = [
  { ...CLIENT, redirect_uris: [CALLBACK, `${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/mapped/redirect`] },
  { ...CLIENT, client_id: 'other-client', client_secret: 'other-secret', redirect_uris: [CALLBACK] },
];

interface World {
  op: OidcPeer;
  app: TestApp;
  domainId: string;
  groups: Record<'developers' | 'admins' | 'viewers', string>;
  projectId: string;
  audit: () => AuditNotification[];
  /** Log messages (msg) of the service. */
  messages: () => string[];
}

async function world(t: Test, options: { op?: OidcPeer; env?: Record<string, string> } = {}): Promise<World> {
  const op = options.op ?? (await startOidcPeer(t, { clients: CLIENTS }));
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const app = await startTestApp(
    t,
    {
      TRUSTED_DASHBOARDS: `${DASHBOARD}, ${ODD_DASHBOARD.replace('dash.example.org', 'Dash.Example.ORG')}`,
      OIDC_CLIENT_ID: 'keystone',
      OIDC_CLIENT_SECRET: 'keystone-secret',
      OIDC_SCOPE: 'openid profile email groups',
      ...options.env,
    },
    { logger },
  );
  const created = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const domainId = (await created('POST', '/v3/domains', { domain: { name: 'federated-users' } })).domain.id as string;
  const group = async (name: string) => (await created('POST', '/v3/groups', { group: { name, domain_id: domainId } })).group.id as string;
  const groups = { developers: await group('developers'), admins: await group('admins'), viewers: await group('viewers') };
  const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
  const projectId = (await created('POST', '/v3/projects', { project: { name: 'dev-project', domain_id: domainId } })).project.id as string;
  if ((await app.call('PUT', `/v3/projects/${projectId}/groups/${groups.developers}/roles/${member}`)).statusCode !== 204) throw new Error('grant');
  await registerOidcProvider(app, { issuer: op.issuer, domainId });
  const audit = () =>
    lines
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.msg === 'audit')
      .map((entry) => entry.notification as AuditNotification);
  const messages = () => lines.map((line) => String(JSON.parse(line).msg));
  return { op, app, domainId, groups, projectId, audit, messages };
}

const browserOf = (w: World) => new HeadlessBrowser(new URL(PUBLIC_URL).host, w.app.request);

/** At the provider: the login form filled and sent, consent automatic; answers the callback URL the provider redirects to. */
async function loginAtProvider(browser: HeadlessBrowser, authorizeUrl: string, user: keyof typeof OIDC_USERS = 'alice'): Promise<string> {
  let url = authorizeUrl;
  for (let hop = 0; hop < 12; hop++) {
    const response = await browser.request(url);
    if (response.status >= 300 && response.status < 400 && response.location) {
      const next = new URL(response.location, url).href;
      if (next.startsWith(`${PUBLIC_URL}/`)) return next;
      url = next;
      continue;
    }
    const form = /<form[^>]*action="([^"]+)"/.exec(response.body);
    if (response.status !== 200 || !form) throw new Error(`unexpected ${response.status} at ${url}: ${response.body.slice(0, 300)}`);
    const posted = await browser.request(new URL(form[1]!.replace(/&#47;/g, '/'), url).href, { method: 'POST', form: { login: user, password: OIDC_USERS[user] } });
    if (!posted.location) throw new Error(`login POST answered ${posted.status}`);
    url = new URL(posted.location, url).href;
  }
  throw new Error('no redirect back to the service');
}

/** The sso_callback_template page: where its form posts, and the token it carries (HTML entities decoded). */
function ssoForm(page: string): { action: string; token: string } {
  const unescape = (text: string) => text.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code))).replace(/&amp;/g, '&');
  const action = /<form id="sso" name="sso" action="([^"]*)" method="post">/.exec(page);
  const token = /<input type="hidden" name="token" id="token" value="([^"]*)"\/>/.exec(page);
  if (!action || !token) throw new Error(`not the sso page: ${page.slice(0, 300)}`);
  return { action: unescape(action[1]!), token: unescape(token[1]!) };
}

const withOrigin = (url: string, origin = DASHBOARD) => `${url}?origin=${encodeURIComponent(origin)}`;

/** GET …/websso: the 302 to the provider, checked; answers the callback URL once the user logged in there. */
async function startAndLogin(t: Test, w: World, browser: HeadlessBrowser, options: { url?: string; user?: keyof typeof OIDC_USERS; origin?: string } = {}): Promise<string> {
  const first = await browser.request(withOrigin(options.url ?? WEBSSO, options.origin));
  t.equal(first.status, 302, `websso redirects to the provider (${first.body})`);
  t.ok(first.location?.startsWith(`${w.op.issuer}/auth?`), 'to its discovered authorization endpoint');
  return loginAtProvider(browser, first.location!, options.user);
}

function errorOf(response: BrowserResponse): { code: number; title: string; message: string } {
  return JSON.parse(response.body).error;
}

function refusedGenerically(t: Test, response: BrowserResponse, what: string): void {
  t.equal(response.status, 401, `${what}: 401`);
  t.strictSame(errorOf(response), { code: 401, title: 'Unauthorized', message: AuthenticationError.GENERIC }, `${what}: Keystone's generic 401`);
}

t.test('websso against the real OpenID Provider', async (t) => {
  const w = await world(t);

  t.test('the whole flow: GET websso → login form → callback → the page posting an unscoped federated token to the dashboard', async (t) => {
    const browser = browserOf(w);
    const first = await browser.request(withOrigin(WEBSSO));
    t.equal(first.status, 302);
    t.equal(first.body, '');
    const authorize = new URL(first.location!);
    t.equal(`${authorize.origin}${authorize.pathname}`, `${w.op.issuer}/auth`);
    const parameters = Object.fromEntries(authorize.searchParams);
    t.match(parameters, {
      response_type: 'code',
      client_id: 'keystone',
      redirect_uri: CALLBACK,
      scope: 'openid profile email groups',
      code_challenge_method: 'S256',
      state: /^[A-Za-z0-9_-]{43}$/,
      nonce: /^[A-Za-z0-9_-]{43}$/,
      code_challenge: /^[A-Za-z0-9_-]{43}$/,
    });
    t.equal(first.setCookies.length, 1);
    t.match(first.setCookies[0], new RegExp(`^ksgw_websso_${parameters.state!.slice(0, 16)}=[A-Za-z0-9_-]+; Max-Age=600; Path=/v3/auth/OS-FEDERATION/websso/openid/redirect; HttpOnly; SameSite=Lax$`));
    t.notMatch(first.setCookies[0], parameters.nonce!, 'the nonce is not readable in the cookie');

    const callback = await loginAtProvider(browser, first.location!);
    t.ok(callback.startsWith(`${CALLBACK}?`), 'the provider sends the browser back to the callback');
    t.equal(new URL(callback).searchParams.get('state'), parameters.state);
    const page = await browser.request(callback);
    t.equal(page.status, 200, page.body);
    t.equal(page.contentType, 'text/html; charset=utf-8');
    t.match(page.body, /<title>Keystone WebSSO redirect<\/title>/);
    t.match(page.body, /document\.forms\['sso'\]\.submit\(\)/, 'the form posts itself');
    const { action, token } = ssoForm(page.body);
    t.equal(action, DASHBOARD, 'to the origin');
    t.strictSame(browser.cookiesFor(callback), {}, 'the login state cookie is cleared');
    t.ok(
      w.messages().some((message) => /^websso: userinfo answered 40\d/.test(message)),
      "the peer's userinfo refuses an access token bound to its resource: logged, the id_token's claims used alone",
    );

    const validated = await w.app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });
    t.equal(validated.statusCode, 200);
    const body = validated.json().token;
    t.strictSame(body.methods, ['openid']);
    t.equal(body.user.name, 'alice');
    t.equal(body.user.domain.id, w.domainId);
    t.strictSame(body.user['OS-FEDERATION'], { groups: [{ id: w.groups.developers }, { id: w.groups.admins }], identity_provider: { id: 'oidc-idp' }, protocol: { id: 'openid' } });
    t.notOk(body.project, 'unscoped');
    const rescoped = await w.app.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: token } }, scope: { project: { id: w.projectId } } } }, null);
    t.equal(rescoped.statusCode, 201, 'the dashboard rescopes it to the project of her group');
    t.ok(rescoped.json().token.roles.some((role: { name: string }) => role.name === 'member'));
    const authentications = w.audit().filter((event) => event.event_type === 'identity.authenticate');
    t.ok(
      authentications.some((event) => event.payload.outcome === 'success' && (event.payload.target as { id: string }).id === body.user.id),
      'the login is audited',
    );
  });

  t.test('the URL naming the identity provider; a second login of the same user; several logins of one browser at once', async (t) => {
    const browser = browserOf(w);
    const first = await browser.request(withOrigin(IDP_WEBSSO));
    const second = await browser.request(withOrigin(WEBSSO));
    t.equal(first.status, 302);
    t.equal(second.status, 302);
    const callbackFirst = await loginAtProvider(browser, first.location!, 'bob');
    const callbackSecond = await loginAtProvider(browser, second.location!, 'bob');
    for (const callback of [callbackSecond, callbackFirst]) {
      const page = await browser.request(callback);
      t.equal(page.status, 200, page.body);
      const validated = (await w.app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': ssoForm(page.body).token })).json().token;
      t.equal(validated.user.name, 'bob');
      t.strictSame(validated.user['OS-FEDERATION'].groups, [{ id: w.groups.viewers }]);
    }
  });

  t.test('origin: missing (400), untrusted (401), HTML-escaped in the page; host names compared as Keystone does', async (t) => {
    const browser = browserOf(w);
    for (const url of [WEBSSO, IDP_WEBSSO]) {
      const missing = await browser.request(url);
      t.equal(missing.status, 400);
      t.strictSame(errorOf(missing), { code: 400, title: 'Bad Request', message: ORIGIN_MISSING });
      t.equal((await browser.request(`${url}?origin=`)).status, 400, 'empty origin');
      refusedGenerically(t, await browser.request(withOrigin(url, 'https://evil.example.org/')), 'an untrusted origin');
      refusedGenerically(t, await browser.request(withOrigin(url, `${DASHBOARD}x`)), 'a longer URL');
      refusedGenerically(t, await browser.request(withOrigin(url, DASHBOARD.replace('horizon', 'HORIZON'))), 'the origin is compared as given (only trusted dashboards are lower-cased)');
      t.strictSame(browser.cookiesFor(CALLBACK), {}, 'no state cookie for a refused start');
    }
    t.equal((await browser.request(`${WEBSSO}?origin=${encodeURIComponent(encodeURIComponent(DASHBOARD))}`)).status, 302, 'decoded once more, as Keystone unquote_plus does');
    const callback = await startAndLogin(t, w, browser, { origin: ODD_DASHBOARD });
    const page = await browser.request(callback);
    t.equal(page.status, 200);
    t.match(page.body, 'action="https://dash.example.org/x?a=&#34;&#60;b&#62;&#39;&#38;c=1"', 'quotes and brackets escaped');
    t.equal(ssoForm(page.body).action, ODD_DASHBOARD);
  });

  t.test('unknown or unusable identity provider or protocol: Keystone-shaped errors', async (t) => {
    const browser = browserOf(w);
    const unknownIdp = await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/nope/protocols/openid/websso`));
    t.equal(unknownIdp.status, 404);
    t.strictSame(errorOf(unknownIdp), { code: 404, title: 'Not Found', message: 'Could not find Identity Provider: nope.' }, "Keystone 22's answer (checked against the real one)");
    const unknownProtocol = await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/oidc-idp/protocols/mapped/websso`));
    t.equal(unknownProtocol.status, 404, 'a protocol the provider does not have');
    const notFederated = await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/oidc-idp/protocols/kerberos/websso`));
    t.equal(notFederated.status, 401, 'not a federated auth method');
    t.equal(errorOf(notFederated).message, 'Attempted to authenticate with an unsupported method.', "Keystone's text");
    refusedGenerically(t, await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/saml2`)), 'no provider has this protocol');
    refusedGenerically(t, await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/kerberos`)), 'no such protocol at all');
    t.strictSame(browser.cookiesFor(CALLBACK), {});
    // A disabled provider: Keystone's 403, at the start and at a callback begun before.
    const pending = await startAndLogin(t, w, browser);
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: false } })).statusCode, 200);
    t.teardown(() => w.app.call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: true } }));
    t.equal((await browser.request(withOrigin(IDP_WEBSSO))).status, 403);
    refusedGenerically(t, await browser.request(withOrigin(WEBSSO)), 'no enabled provider has the protocol');
    t.equal((await browser.request(pending)).status, 403, 'disabled during the login');
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/oidc-idp`, { identity_provider: { enabled: true } })).statusCode, 200);
  });

  t.test('state: tampered, forged cookie, from another browser, replayed, expired, another protocol; nothing of it burns a good one', async (t) => {
    const browser = browserOf(w);
    const callback = await startAndLogin(t, w, browser);
    const state = new URL(callback).searchParams.get('state')!;
    const [cookieName, cookieValue] = Object.entries(browser.cookiesFor(callback))[0]!;

    const tampered = new URL(callback);
    tampered.searchParams.set('state', `${state.slice(0, -1)}${state.endsWith('A') ? 'B' : 'A'}`);
    refusedGenerically(t, await browser.request(tampered.href), 'a changed state');
    const otherState = new URL(callback);
    otherState.searchParams.set('state', 'x'.repeat(43));
    refusedGenerically(t, await browser.request(otherState.href), 'a made-up state');
    const noState = new URL(callback);
    noState.searchParams.delete('state');
    refusedGenerically(t, await browser.request(noState.href), 'no state');

    const flipped = `${cookieValue.slice(0, 20)}${cookieValue[20] === 'A' ? 'B' : 'A'}${cookieValue.slice(21)}`;
    browser.setCookie(callback, cookieName, flipped, new URL(CALLBACK).pathname);
    refusedGenerically(t, await browser.request(callback), 'a changed cookie');
    browser.setCookie(callback, cookieName, 'AAAA', new URL(CALLBACK).pathname);
    refusedGenerically(t, await browser.request(callback), 'a forged cookie');

    const elsewhere = browserOf(w);
    refusedGenerically(t, await elsewhere.request(callback), 'the callback in another browser (no cookie of its own)');
    const thief = browserOf(w);
    const theirs = await startAndLogin(t, w, thief);
    const [theirName, theirValue] = Object.entries(thief.cookiesFor(theirs))[0]!;
    browser.setCookie(callback, theirName, theirValue, new URL(CALLBACK).pathname);
    const swapped = new URL(callback);
    swapped.searchParams.set('state', new URL(theirs).searchParams.get('state')!);
    refusedGenerically(t, await browser.request(swapped.href), "another browser's state and cookie with this code (PKCE: the code is not theirs)");

    const otherProtocol = new URL(callback.replace('/websso/openid/redirect', '/websso/mapped/redirect'));
    browser.setCookie(otherProtocol.href, cookieName, cookieValue, otherProtocol.pathname);
    refusedGenerically(t, await browser.request(otherProtocol.href), 'the state of another protocol');

    browser.setCookie(callback, cookieName, cookieValue, new URL(CALLBACK).pathname);
    const page = await browser.request(callback);
    t.equal(page.status, 200, `the genuine callback still works: ${page.body.slice(0, 200)}`);
    browser.setCookie(callback, cookieName, cookieValue, new URL(CALLBACK).pathname);
    refusedGenerically(t, await browser.request(callback), 'replayed with its cookie');
    refusedGenerically(t, await browser.request(callback), 'replayed without it');

    const late = browserOf(w);
    const lateCallback = await startAndLogin(t, w, late);
    w.app.clock.advance(601_000);
    refusedGenerically(t, await late.request(lateCallback), 'after WEBSSO_STATE_TTL_SECONDS');
    w.app.clock.set(Date.now());
    const failures = w.audit().filter((event) => event.event_type === 'identity.authenticate' && event.payload.outcome === 'failure');
    t.ok(failures.length >= 10, `failures are audited (${failures.length})`);
  });

  t.test("the provider's error answer, and an issuer that is not the one the browser was sent to (RFC 9207)", async (t) => {
    const browser = browserOf(w);
    const callback = await startAndLogin(t, w, browser);
    const state = new URL(callback).searchParams.get('state')!;
    const [cookieName, cookieValue] = Object.entries(browser.cookiesFor(callback))[0]!;
    refusedGenerically(t, await browser.request(`${CALLBACK}?error=access_denied&error_description=${encodeURIComponent('The user said no')}&state=${state}`), 'error=access_denied');
    browser.setCookie(callback, cookieName, cookieValue, new URL(CALLBACK).pathname);
    refusedGenerically(t, await browser.request(callback), 'the state is spent by the error answer');

    const second = browserOf(w);
    const mixUp = new URL(await startAndLogin(t, w, second));
    t.equal(mixUp.searchParams.get('iss'), w.op.issuer, 'the provider names itself');
    mixUp.searchParams.set('iss', 'https://evil.example.org');
    refusedGenerically(t, await second.request(mixUp.href), 'another iss in the callback');
    const noCode = browserOf(w);
    const withoutCode = new URL(await startAndLogin(t, w, noCode));
    withoutCode.searchParams.delete('code');
    refusedGenerically(t, await noCode.request(withoutCode.href), 'no code');
  });

  t.test('the id_token: wrong nonce, issuer, audience, azp, signature, expired; the code exchanged with the provider for real', async (t) => {
    w.app.clock.set(Date.now());
    // A relying party like the service's, whose fetch swaps the provider's id_token for one signed
    // with the provider's own key (from its state directory) but with one claim changed.
    const jwks = JSON.parse(fs.readFileSync(path.join(w.op.directory, 'jwks.json'), 'utf8')) as { keys: JWK[] };
    const providerKey = await importJWK(jwks.keys[0]!, 'RS256');
    let change: ((claims: Record<string, unknown>) => Record<string, unknown>) | undefined;
    let signWith: { key: CryptoKey | Uint8Array; kid: string } = { key: providerKey as CryptoKey, kid: jwks.keys[0]!.kid! };
    let changeUserinfo: ((claims: Record<string, unknown>) => Record<string, unknown>) | undefined;
    const userinfoCalls: string[] = [];
    const swapping: Fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (input.endsWith('/me')) {
        userinfoCalls.push(String((init.headers as Record<string, string>).authorization));
        if (!changeUserinfo) return response;
        const claims = changeUserinfo((await response.json()) as Record<string, unknown>);
        return new Response(JSON.stringify(claims), { status: 200, headers: { 'content-type': 'application/json' } });
      }
      if (!input.endsWith('/token') || !change) return response;
      const body = (await response.json()) as Record<string, unknown>;
      const claims = change(decodeJwt(String(body.id_token)) as Record<string, unknown>);
      body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: signWith.kid }).sign(signWith.key);
      return new Response(JSON.stringify(body), { status: response.status, headers: { 'content-type': 'application/json' } });
    };
    const settings = w.app.config;
    const directory = new OidcProviderDirectory({ fetch: swapping, clock: w.app.clock, httpTimeoutMs: 5000, cacheMs: 3_600_000, refreshIntervalMs: 30_000 });
    const websso = new OidcWebSso({
      websso: settings.websso,
      oidc: settings.oidc,
      directory,
      federation: w.app.app.federation,
      federatedLogin: w.app.app.federatedLogin,
      sealer: new WebSsoStateSealer(Buffer.from('a key of the test, long enough')),
      replays: new MemoryReplayCache(w.app.clock),
      clock: w.app.clock,
      fetch: swapping,
    });
    const attempt = async (what: string, changed: typeof change, reason: RegExp) => {
      change = changed;
      const browser = browserOf(w);
      const started = await websso.begin({ protocolId: 'openid', origin: DASHBOARD, redirectUri: CALLBACK });
      const callback = new URL(await loginAtProvider(browser, started.location));
      try {
        const completed = await websso.complete('openid', { query: Object.fromEntries(callback.searchParams), cookies: { [started.cookie.name]: started.cookie.value } });
        if (reason.source === 'accepted') {
          t.equal(completed.assertion.HTTP_OIDC_SUB, 'alice', `${what}: accepted`);
          t.equal(completed.assertion.HTTP_OIDC_GROUPS, 'developers;admins');
          t.equal(completed.assertion.HTTP_OIDC_ISS, w.op.issuer);
          t.equal(completed.origin, DASHBOARD);
        } else t.fail(`${what}: accepted`);
      } catch (error) {
        if (reason.source === 'accepted') throw error;
        t.ok(error instanceof AuthenticationError, `${what}: a 401`);
        t.equal((error as AuthenticationError).message, AuthenticationError.GENERIC);
        t.match((error as AuthenticationError).failure?.reason, reason, `${what}: ${(error as AuthenticationError).failure?.reason}`);
      }
    };
    await attempt('the real id_token', undefined, /accepted/);
    t.equal(userinfoCalls.length, 1, 'userinfo read once, with the access token');
    t.match(userinfoCalls[0], /^Bearer \S+$/);
    // The peer's access tokens are bound to its resource (urn:keystone): its userinfo refuses them,
    // and the id_token's claims are used alone (above). A provider whose userinfo answers:
    changeUserinfo = () => ({ sub: 'alice', department: 'research', groups: ['admins', 'viewers'], iss: 'https://evil.example.org' });
    change = undefined;
    {
      const browser = browserOf(w);
      const started = await websso.begin({ protocolId: 'openid', origin: DASHBOARD, redirectUri: CALLBACK });
      const callback = new URL(await loginAtProvider(browser, started.location));
      const completed = await websso.complete('openid', { query: Object.fromEntries(callback.searchParams), cookies: { [started.cookie.name]: started.cookie.value } });
      t.equal(completed.assertion.HTTP_OIDC_DEPARTMENT, 'research', 'a userinfo claim the id_token lacks is added (as mod_auth_openidc does)');
      t.equal(completed.assertion.HTTP_OIDC_GROUPS, 'developers;admins', "the id_token's claims win");
      t.equal(completed.assertion.HTTP_OIDC_ISS, w.op.issuer, 'userinfo never changes the issuer');
    }
    changeUserinfo = () => ({ sub: 'mallory', department: 'research' });
    await attempt('userinfo about another subject', undefined, /another subject/);
    changeUserinfo = undefined;
    await attempt('the provider-signed token unchanged (the swap itself is harmless)', (claims) => claims, /accepted/);
    await attempt('another nonce', (claims) => ({ ...claims, nonce: 'another-nonce' }), /nonce/);
    await attempt('no nonce', ({ nonce: _nonce, ...claims }) => claims, /nonce/);
    await attempt('another issuer', (claims) => ({ ...claims, iss: 'https://evil.example.org' }), /iss/);
    await attempt('another audience', (claims) => ({ ...claims, aud: 'other-client' }), /aud/);
    await attempt('several audiences, azp another client', (claims) => ({ ...claims, aud: ['keystone', 'other-client'], azp: 'other-client' }), /azp/);
    await attempt('expired', (claims) => ({ ...claims, exp: Math.floor(Date.now() / 1000) - 3600 }), /expired|exp/);
    await attempt('issued in the future', (claims) => ({ ...claims, iat: Math.floor(Date.now() / 1000) + 3600 }), /iat|future/);
    signWith = { key: (await generateKeyPair('RS256')).privateKey, kid: jwks.keys[0]!.kid! };
    await attempt('signed by another key under the same kid', (claims) => claims, /signature/);
  });
});

t.test('two nodes behind one public URL, no sticky sessions: either node serves the callback; Redis makes the state single-use across them', async (t) => {
  const redis = await testRedis(t);
  if (!redis) {
    t.fail(`no Redis at ${TEST_REDIS_URL}`);
    return;
  }
  const op = await startOidcPeer(t, { clients: CLIENTS });
  const env = {
    SECRET_PEPPER: 'one pepper for every node of this deployment',
    REDIS_URL: TEST_REDIS_URL,
    REDIS_EVENTS_CHANNEL: `${redis.prefix}events`,
    RATE_LIMIT_KEY_PREFIX: `${redis.prefix}ratelimit:`,
    AUDIT_STREAM: `${redis.prefix}audit`,
    WEBSSO_KEY_PREFIX: `${redis.prefix}websso:`,
  };
  const nodeA = await world(t, { op, env });
  const nodeB = await world(t, { op, env });
  // The balancer: each request to the public URL goes to the node the test chooses.
  let node = nodeA;
  const browser = new HeadlessBrowser(new URL(PUBLIC_URL).host, (options) => node.app.request(options));
  const callback = await startAndLogin(t, nodeA, browser);
  const [cookieName, cookieValue] = Object.entries(browser.cookiesFor(callback))[0]!;
  node = nodeB;
  const page = await browser.request(callback);
  t.equal(page.status, 200, `node B completes the login node A began: ${page.body.slice(0, 200)}`);
  const validated = await nodeB.app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': ssoForm(page.body).token });
  t.equal(validated.json().token.user.name, 'alice');
  t.ok((await redis.redis.keys(`${redis.prefix}websso:*`)).length === 1, 'the used state is recorded in Redis');
  node = nodeA;
  browser.setCookie(callback, cookieName, cookieValue, new URL(CALLBACK).pathname);
  refusedGenerically(t, await browser.request(callback), 'replayed at node A');

  // A node with another pepper cannot open the state of this deployment.
  const stranger = await world(t, { op, env: { ...env, SECRET_PEPPER: 'the pepper of another deployment entirely' } });
  node = nodeA;
  const second = await startAndLogin(t, nodeA, browser);
  node = stranger;
  refusedGenerically(t, await browser.request(second), 'a node of another deployment');
});
