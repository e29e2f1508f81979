// Keystone's websso for a SAML protocol, this service as the SAML service provider: a headless
// browser (a cookie jar, no JavaScript) goes GET …/websso?origin=… → 302 to the identity provider's
// SingleSignOnService (HTTP-Redirect binding, a signed AuthnRequest) → [the identity provider of our
// own making, its keys from saml-sp-helpers, answers a signed Response] → POST …/websso/saml2/acs
// (HTTP-POST binding) → the page that posts the unscoped federated token to the dashboard.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { DOMParser } from '@xmldom/xmldom';
import { pino } from 'pino';
import t, { type Test } from 'tap';
import { BINDING_URI } from '../../src/federation/saml/namespaces.ts';
import { BINDING_HTTP_REDIRECT, REDIRECT_SIG_ALG } from '../../src/federation/saml/sp/saml-websso.ts';
import { samlStateCookie } from '../../src/http/routes/saml-websso.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';
import { HeadlessBrowser, type BrowserResponse } from '../helpers/browser.ts';
import { makeIdp, setUpK2kProvider, type TestIdp } from '../federation/saml/saml-sp-helpers.ts';
import { makeKeyPair } from '../federation/saml/saml-test-helpers.ts';

const FED = '/v3/OS-FEDERATION';
const IDP_ENTITY = 'https://idp.example.org/idp/shibboleth';
const SSO = `${IDP_ENTITY}/sso`;
const ACS = `${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/saml2/acs`;
const IDP_WEBSSO = `${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/saml-idp/protocols/saml2/websso`;
const WEBSSO = `${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/saml2`;
const LOGIN = `${PUBLIC_URL}${FED}/identity_providers/saml-idp/protocols/saml2/auth`;
const DASHBOARD = 'https://horizon.example.org/dashboard/auth/websso/';
const SP_ENTITY = 'https://keystone.test/shibboleth-sp';
const NS_PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';
const NS_ASSERTION = 'urn:oasis:names:tc:SAML:2.0:assertion';

interface World {
  app: TestApp;
  idp: TestIdp;
  domainId: string;
  projectId: string;
  /** Our service provider's signing certificate (SAML_CERTFILE), PEM; undefined without keys. */
  spCertificate: string | undefined;
  /** The audited cause of the last refused authentication (the client only sees the generic 401). */
  lastReason: () => string;
}

interface WorldOptions {
  env?: Record<string, string>;
  /** Without SAML_CERTFILE/SAML_KEYFILE: AuthnRequests unsigned. */
  unsigned?: boolean;
  /** The identity provider's metadata says WantAuthnRequestsSigned="true". */
  wantSigned?: boolean;
}

async function world(t: Test, options: WorldOptions = {}): Promise<World> {
  let clock: () => number = () => Date.now();
  const idp = makeIdp(t, IDP_ENTITY, { recipient: ACS, now: () => clock() });
  // The helper's metadata names a URI-binding SingleSignOnService (Keystone's); an identity provider for browsers has an HTTP-Redirect one.
  let metadata = fs.readFileSync(idp.metadataFile, 'utf8').replace(BINDING_URI, BINDING_HTTP_REDIRECT);
  if (options.wantSigned) metadata = metadata.replace('<ns0:IDPSSODescriptor ', '<ns0:IDPSSODescriptor WantAuthnRequestsSigned="true" ');
  fs.writeFileSync(idp.metadataFile, metadata);
  const sp = options.unsigned ? undefined : makeKeyPair(t);
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const app = await startTestApp(t, {
    TRUSTED_DASHBOARDS: DASHBOARD,
    SAML_TRUSTED_IDP_METADATA: idp.metadataFile,
    SAML_SP_ENTITY_ID: SP_ENTITY,
    ...(sp ? { SAML_CERTFILE: sp.certFile, SAML_KEYFILE: sp.keyFile, SAML_IDP_ENTITY_ID: `${PUBLIC_URL}/v3/OS-FEDERATION/saml2/idp`, SAML_IDP_SSO_ENDPOINT: `${PUBLIC_URL}/v3/OS-FEDERATION/saml2/sso` } : {}),
    ...options.env,
  }, { logger });
  clock = () => app.clock.now();
  const lastReason = () => {
    const failures = lines
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.msg === 'audit' && entry.notification?.event_type === 'identity.authenticate' && entry.notification.payload.outcome === 'failure');
    return String(failures.at(-1)?.notification.payload.reason?.reasonType ?? 'no failure audited');
  };
  const { domainId, projectId } = await setUpK2kProvider(app, { prefix: 'saml', idpId: 'saml-idp', remoteIds: [IDP_ENTITY] });
  return { app, idp, domainId, projectId, spCertificate: sp ? fs.readFileSync(sp.certFile, 'utf8') : undefined, lastReason };
}

const browserOf = (w: World) => new HeadlessBrowser(new URL(PUBLIC_URL).host, w.app.request);
const withOrigin = (url: string, origin = DASHBOARD) => `${url}?origin=${encodeURIComponent(origin)}`;

interface Redirect {
  response: BrowserResponse;
  location: URL;
  /** The inflated AuthnRequest. */
  xml: string;
  request: Element;
  requestId: string;
  relayState: string;
}

/** The first leg: GET the websso URL, the 302 to the identity provider read. */
async function start(t: Test, browser: HeadlessBrowser, url = IDP_WEBSSO): Promise<Redirect> {
  const response = await browser.request(withOrigin(url));
  t.equal(response.status, 302, `websso redirects to the identity provider (${response.body.slice(0, 200)})`);
  const location = new URL(response.location ?? '');
  const xml = inflateRawSync(Buffer.from(location.searchParams.get('SAMLRequest') ?? '', 'base64')).toString('utf8');
  const request = new DOMParser().parseFromString(xml, 'text/xml').documentElement as unknown as Element;
  return { response, location, xml, request, requestId: request.getAttribute('ID') ?? '', relayState: location.searchParams.get('RelayState') ?? '' };
}

/** The identity provider's HTTP-POST binding back: the form its page would post. */
const postBack = (browser: HeadlessBrowser, response: string, relayState: string, url = ACS) =>
  browser.request(url, { method: 'POST', form: { SAMLResponse: Buffer.from(response).toString('base64'), RelayState: relayState } });

function ssoForm(page: string): { action: string; token: string } {
  const unescape = (text: string) => text.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code)));
  const action = /<form id="sso" name="sso" action="([^"]*)" method="post">/.exec(page);
  const token = /<input type="hidden" name="token" id="token" value="([^"]*)"\/>/.exec(page);
  if (!action || !token) throw new Error(`not the sso page: ${page.slice(0, 300)}`);
  return { action: unescape(action[1]!), token: unescape(token[1]!) };
}

function keystoneError(t: Test, response: BrowserResponse, status: number, what: string): void {
  t.equal(response.status, status, `${what}: ${status} (${response.body.slice(0, 200)})`);
  const title = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 503: 'Service Unavailable' }[status];
  t.match(JSON.parse(response.body), { error: { code: status, title, message: String } }, `${what}: Keystone's error envelope`);
}

/** The generic 401, refused for the expected (audited) cause. */
function refusedFor(t: Test, w: World, response: BrowserResponse, reason: RegExp, what: string): void {
  keystoneError(t, response, 401, what);
  t.match(w.lastReason(), reason, `${what}: ${w.lastReason()}`);
}

t.test('the full flow: a signed AuthnRequest by HTTP-Redirect, a signed Response posted back, the token posted to the dashboard', async (t) => {
  const w = await world(t);
  const browser = browserOf(w);
  const redirect = await start(t, browser);

  // Where the browser goes: the metadata's HTTP-Redirect SingleSignOnService.
  t.equal(`${redirect.location.origin}${redirect.location.pathname}`, SSO, "the identity provider's SingleSignOnService");
  t.strictSame([...redirect.location.searchParams.keys()], ['SAMLRequest', 'RelayState', 'SigAlg', 'Signature'], 'the binding parameters, in their order');
  // The AuthnRequest.
  const request = redirect.request;
  t.equal(request.namespaceURI, NS_PROTOCOL);
  t.equal(request.localName, 'AuthnRequest');
  t.match(redirect.requestId, /^_[0-9a-f]{40}$/, 'a random xs:ID');
  t.equal(request.getAttribute('Version'), '2.0');
  t.equal(request.getAttribute('IssueInstant'), new Date(Math.floor(w.app.clock.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z'), 'IssueInstant is now');
  t.equal(request.getAttribute('Destination'), SSO, 'Destination is the SingleSignOnService');
  t.equal(request.getAttribute('AssertionConsumerServiceURL'), ACS, 'AssertionConsumerServiceURL is our ACS');
  t.equal(request.getAttribute('ProtocolBinding'), 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST');
  const issuer = request.getElementsByTagNameNS(NS_ASSERTION, 'Issuer')[0];
  t.equal(issuer?.textContent, SP_ENTITY, 'Issuer is SAML_SP_ENTITY_ID');
  t.notOk(/Signature/.test(redirect.xml), 'the redirect binding signs the query, not the XML');
  // RelayState: the state id, within the binding's 80 bytes; the sealed state is in the cookie.
  t.ok(Buffer.byteLength(redirect.relayState) <= 80, `RelayState is at most 80 bytes (${redirect.relayState.length})`);
  const cookie = redirect.response.setCookies.find((line) => line.startsWith('ksgw_websso_'));
  t.ok(cookie, 'the login state cookie');
  t.match(cookie, /Path=\/v3\/auth\/OS-FEDERATION\/websso\/saml2\/acs/, 'sent only to the ACS');
  t.match(cookie, /HttpOnly/);
  t.equal(redirect.response.location?.includes(redirect.relayState), true);

  // The redirect signature (SAML bindings §3.4.4.1) verifies with our certificate over the query as sent.
  t.equal(redirect.location.searchParams.get('SigAlg'), REDIRECT_SIG_ALG, 'RSA-SHA256');
  const raw = redirect.location.search.slice(1);
  const signedPart = raw.slice(0, raw.indexOf('&Signature='));
  t.match(signedPart, /^SAMLRequest=[^&]+&RelayState=[^&]+&SigAlg=[^&]+$/);
  const signature = Buffer.from(redirect.location.searchParams.get('Signature') ?? '', 'base64');
  t.ok(crypto.verify('sha256', Buffer.from(signedPart), w.spCertificate!, signature), 'the signature verifies with SAML_CERTFILE');
  t.notOk(crypto.verify('sha256', Buffer.from(signedPart.replace('RelayState=', 'RelayState=x')), w.spCertificate!, signature), 'and not over another query');

  // The identity provider answers a signed Response to the AuthnRequest; the browser posts it back.
  const page = await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState);
  t.equal(page.status, 200, page.body.slice(0, 300));
  t.match(page.contentType, /^text\/html/);
  const form = ssoForm(page.body);
  t.equal(form.action, DASHBOARD, 'the token is posted to the dashboard');
  t.ok(page.setCookies.some((line) => line.startsWith(cookie!.split('=')[0]!) && /Max-Age=0/.test(line)), 'the state cookie is cleared');

  const validated = await w.app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': form.token });
  t.equal(validated.statusCode, 200, validated.body);
  const token = validated.json().token;
  t.strictSame(token.methods, ['saml2']);
  t.match(token.user, { name: 'alice', domain: { id: w.domainId }, 'OS-FEDERATION': { identity_provider: { id: 'saml-idp' }, protocol: { id: 'saml2' } } });
  t.notOk(token.project, 'unscoped');
  const scoped = await w.app.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: form.token } }, scope: { project: { id: w.projectId } } } }, null);
  t.equal(scoped.statusCode, 201, "rescoped through the federated_users group's role");

  // The same post again: the state is spent (and its cookie gone).
  refusedFor(t, w, await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), /no login state cookie/, 'the state once more');
});

t.test('websso/{protocol} names no identity provider: the only one with the protocol; POST starts too', async (t) => {
  const w = await world(t);
  const browser = browserOf(w);
  const redirect = await start(t, browser, WEBSSO);
  t.equal(redirect.request.getAttribute('Destination'), SSO);
  const posted = await browser.request(withOrigin(WEBSSO), { method: 'POST' });
  t.equal(posted.status, 302, 'POST …/websso/saml2 starts as well');
  const page = await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState);
  t.equal(page.status, 200, page.body.slice(0, 300));
  t.equal(ssoForm(page.body).action, DASHBOARD);
});

t.test('without SAML_KEYFILE the AuthnRequest is unsigned; an identity provider that wants it signed is refused', async (t) => {
  const w = await world(t, { unsigned: true });
  const browser = browserOf(w);
  const redirect = await start(t, browser);
  t.strictSame([...redirect.location.searchParams.keys()], ['SAMLRequest', 'RelayState'], 'no SigAlg, no Signature');
  const page = await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState);
  t.equal(page.status, 200, 'the login completes');

  const wants = await world(t, { unsigned: true, wantSigned: true });
  refusedFor(t, wants, await browserOf(wants).request(withOrigin(IDP_WEBSSO)), /wants signed AuthnRequests/, 'WantAuthnRequestsSigned without a key');
  const signed = await world(t, { wantSigned: true });
  t.equal((await browserOf(signed).request(withOrigin(IDP_WEBSSO))).status, 302, 'WantAuthnRequestsSigned with a key');
});

t.test('the start refuses: no origin, an untrusted origin, unknown identity provider or protocol, no SP entity id, no metadata', async (t) => {
  const w = await world(t);
  const browser = browserOf(w);
  keystoneError(t, await browser.request(IDP_WEBSSO), 400, 'no origin');
  refusedFor(t, w, await browser.request(withOrigin(IDP_WEBSSO, 'https://evil.example.org/')), /not a trusted dashboard/, 'an untrusted origin');
  keystoneError(t, await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/nobody/protocols/saml2/websso`)), 404, 'an unknown identity provider');
  const unknownProtocol = await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/identity_providers/saml-idp/protocols/nothing/websso`));
  t.ok([401, 404].includes(unknownProtocol.status), `an unknown protocol: ${unknownProtocol.status}`);
  keystoneError(t, unknownProtocol, unknownProtocol.status, 'an unknown protocol');
  keystoneError(t, await browser.request(withOrigin(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/nothing`)), 401, 'websso of an unknown protocol');
  t.notOk(browser.jar.get(new URL(PUBLIC_URL).host)?.size, 'no state cookie for a refused start');

  // Remote ids that no trusted metadata names.
  t.equal((await w.app.call('PATCH', `${FED}/identity_providers/saml-idp`, { identity_provider: { remote_ids: ['https://other.example.org/idp'] } })).statusCode, 200);
  refusedFor(t, w, await browser.request(withOrigin(IDP_WEBSSO)), /no remote id .* has trusted metadata/, 'no trusted metadata for the remote ids');

  const noEntity = await world(t, { env: { SAML_SP_ENTITY_ID: '' } });
  refusedFor(t, noEntity, await browserOf(noEntity).request(withOrigin(IDP_WEBSSO)), /SAML_SP_ENTITY_ID/, 'no SAML_SP_ENTITY_ID');
});

t.test('the ACS refuses, never a 500: InResponseTo, another browser, replayed state, another ACS, unsigned or untrusted responses', async (t) => {
  const w = await world(t);
  const browser = browserOf(w);

  await t.test('InResponseTo of another request, or none', async (t) => {
    const redirect = await start(t, browser);
    refusedFor(t, w, await postBack(browser, w.idp.response({ inResponseTo: '_another-request' }), redirect.relayState), /InResponseTo/, 'another InResponseTo');
    const again = await start(t, browser);
    refusedFor(t, w, await postBack(browser, w.idp.response(), again.relayState), /does not answer this login's request \(InResponseTo missing\)/, 'no InResponseTo (unsolicited)');
    // The Response's InResponseTo (outside the signed Assertion) is checked too.
    const third = await start(t, browser);
    const tampered = w.idp.response({ inResponseTo: third.requestId }).replace(`InResponseTo="${third.requestId}"`, 'InResponseTo="_other"');
    t.not(tampered, w.idp.response({ inResponseTo: third.requestId }));
    refusedFor(t, w, await postBack(browser, tampered, third.relayState), /the Response answers another request/, "the Response's InResponseTo changed");
  });

  await t.test('a state started in another browser', async (t) => {
    const redirect = await start(t, browser);
    const other = browserOf(w);
    refusedFor(t, w, await postBack(other, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), /no login state cookie/, 'the RelayState without its cookie');
    // The other browser's own cookie does not open another browser's RelayState.
    const mine = await start(t, other);
    refusedFor(t, w, await postBack(other, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), /no login state cookie/, "another browser's RelayState");
    // A forged cookie.
    const name = Object.keys(browser.cookiesFor(ACS)).find((key) => key.startsWith('ksgw_websso_'))!;
    other.setCookie(ACS, name, 'A'.repeat(120), new URL(ACS).pathname);
    refusedFor(t, w, await postBack(other, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), /does not open/, 'a forged state cookie');
    t.ok(mine.relayState);
  });

  await t.test('a replayed state: its cookie kept and posted again with a fresh response', async (t) => {
    const redirect = await start(t, browser);
    const kept = browser.cookiesFor(ACS);
    t.equal((await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState)).status, 200, 'first use');
    for (const [name, value] of Object.entries(kept)) browser.setCookie(ACS, name, value, new URL(ACS).pathname);
    refusedFor(t, w, await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), /already used/, 'the same state again');
  });

  await t.test('an expired state', async (t) => {
    const redirect = await start(t, browser);
    w.app.clock.advance(601_000);
    refusedFor(t, w, await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), /expired/, 'after WEBSSO_STATE_TTL_SECONDS');
  });

  await t.test('a response addressed to another ACS, and a websso response at the SAML login URL', async (t) => {
    const redirect = await start(t, browser);
    refusedFor(t, w, await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId, recipient: LOGIN }), redirect.relayState), /Destination .* is not this login's URL/, 'addressed to the /auth login');
    const again = await start(t, browser);
    refusedFor(t, w, await postBack(browser, w.idp.response({ inResponseTo: again.requestId, recipient: 'https://other-sp.example.org/acs' }), again.relayState), /not this login's URL/, "another service provider's ACS");
    // The other way round: a response for the ACS is refused by the SAML login URL.
    const atLogin = await w.app.request({
      method: 'POST',
      url: new URL(LOGIN).pathname,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ SAMLResponse: Buffer.from(w.idp.response({ inResponseTo: again.requestId })).toString('base64') }).toString(),
    });
    t.equal(atLogin.statusCode, 401, 'the login URL refuses a response addressed to the ACS');
  });

  await t.test('unsigned, re-signed by an untrusted key, tampered', async (t) => {
    const redirect = await start(t, browser);
    const unsigned = w.idp.response({ inResponseTo: redirect.requestId }).replace(/<xmldsig:Signature[\s\S]*<\/xmldsig:Signature>/, '');
    t.notMatch(unsigned, /Signature/);
    refusedFor(t, w, await postBack(browser, unsigned, redirect.relayState), /neither the Response nor the Assertion is signed/, 'unsigned');
    const impostor = makeIdp(t, IDP_ENTITY, { recipient: ACS, now: () => w.app.clock.now() });
    const again = await start(t, browser);
    refusedFor(t, w, await postBack(browser, impostor.response({ inResponseTo: again.requestId }), again.relayState), /does not verify with the trusted metadata/, 'signed by a key the metadata does not name');
    const third = await start(t, browser);
    const tampered = w.idp.response({ inResponseTo: third.requestId }).replace('>alice<', '>admin<');
    refusedFor(t, w, await postBack(browser, tampered, third.relayState), /does not verify/, 'a tampered attribute');
  });

  await t.test('the identity provider disabled, or no longer naming the issuer, during the login: 403', async (t) => {
    const redirect = await start(t, browser);
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/saml-idp`, { identity_provider: { enabled: false } })).statusCode, 200);
    keystoneError(t, await postBack(browser, w.idp.response({ inResponseTo: redirect.requestId }), redirect.relayState), 403, 'disabled');
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/saml-idp`, { identity_provider: { enabled: true } })).statusCode, 200);
    const again = await start(t, browser);
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/saml-idp`, { identity_provider: { remote_ids: ['https://other.example.org/idp'] } })).statusCode, 200);
    keystoneError(t, await postBack(browser, w.idp.response({ inResponseTo: again.requestId }), again.relayState), 403, 'remote ids changed');
    t.equal((await w.app.call('PATCH', `${FED}/identity_providers/saml-idp`, { identity_provider: { remote_ids: [IDP_ENTITY] } })).statusCode, 200);
  });

  await t.test('malformed posts', async (t) => {
    const redirect = await start(t, browser);
    keystoneError(t, await browser.request(ACS, { method: 'POST', form: { RelayState: redirect.relayState } }), 401, 'no SAMLResponse');
    refusedFor(t, w, await browser.request(ACS, { method: 'POST', form: { SAMLResponse: 'PHg+', RelayState: 'short' } }), /no RelayState, or not one this service made/, 'a RelayState this service never made');
    keystoneError(t, await browser.request(ACS, { method: 'POST', form: { SAMLResponse: '!!!', RelayState: redirect.relayState } }), 401, 'not base64');
    const json = await w.app.request({ method: 'POST', url: new URL(ACS).pathname, headers: { 'content-type': 'application/json' }, payload: '{"SAMLResponse":"x"}' });
    t.equal(json.statusCode, 401, `JSON: ${json.body}`);
    const otherProtocol = await browser.request(`${PUBLIC_URL}/v3/auth/OS-FEDERATION/websso/openid/acs`, { method: 'POST', form: { SAMLResponse: 'PHg+', RelayState: redirect.relayState } });
    refusedFor(t, w, otherProtocol, /not a SAML protocol/, 'the ACS of a protocol that is not SAML');
  });
});

t.test('the SAML state cookie: SameSite=None and Secure over https, so the cross-site POST carries it', async (t) => {
  const https = samlStateCookie('ksgw_websso_x', 'v', 600, 'https://keystone.example.org/identity/v3/auth/OS-FEDERATION/websso/saml2/acs');
  t.equal(https, 'ksgw_websso_x=v; Max-Age=600; Path=/identity/v3/auth/OS-FEDERATION/websso/saml2/acs; HttpOnly; SameSite=None; Secure');
  const http = samlStateCookie('ksgw_websso_x', 'v', 600, ACS);
  t.notMatch(http, /SameSite|Secure/, 'over http no SameSite=None (browsers refuse it without Secure)');
});
