// The OIDC verifier against a REAL OpenID Provider (panva/oidc-provider, /work/shared/peers/oidc):
// JWT access tokens and id_tokens checked with the discovered JWKS, opaque tokens introspected.
import { decodeJwt, decodeProtectedHeader, exportJWK, exportSPKI, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import t, { type Test } from 'tap';
import { loadConfig } from '../../../src/config.ts';
import type { AssertionRequest } from '../../../src/federation/assertion.ts';
import type { IdentityProvider, Protocol } from '../../../src/federation/federation-service.ts';
import { ISSUER_NOT_ACCEPTED, OidcAssertionVerifier, PROVIDER_UNAVAILABLE } from '../../../src/federation/oidc/oidc-verifier.ts';
import type { Fetch } from '../../../src/federation/oidc/provider-http.ts';
import { AuthenticationError, ForbiddenError, ServiceError, statusOf, UnavailableError } from '../../../src/support/errors.ts';
import { ManualClock } from '../../helpers/clock.ts';
import { startOidcPeer, type OidcPeer } from '../../helpers/oidc-peer.ts';

const AUDIENCES = 'urn:keystone,keystone';

function identityProvider(remoteIds: string[]): IdentityProvider {
  return { id: 'oidc-idp', domainId: 'idp-domain', enabled: true, description: null, authorizationTtl: null, remoteIds };
}

function protocol(id = 'openid'): Protocol {
  return { id, idpId: 'oidc-idp', mappingId: 'oidc-mapping', remoteIdAttribute: 'HTTP_OIDC_ISS' };
}

function request(remoteIds: string[], headers: AssertionRequest['headers'], protocolId = 'openid'): AssertionRequest {
  return { identityProvider: identityProvider(remoteIds), protocol: protocol(protocolId), headers };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

interface Harness {
  verifier: OidcAssertionVerifier;
  clock: ManualClock;
  /** URLs the verifier fetched, in order. */
  calls: string[];
  warnings: string[];
}

function harness(env: Record<string, string> = {}, options: { fetch?: Fetch } = {}): Harness {
  const clock = new ManualClock(Date.now());
  const calls: string[] = [];
  const warnings: string[] = [];
  const inner = options.fetch ?? ((input: string, init: RequestInit) => fetch(input, init));
  const verifier = new OidcAssertionVerifier(loadConfig({ OIDC_AUDIENCES: AUDIENCES, ...env }).oidc, {
    clock,
    fetch: (input, init) => {
      calls.push(input);
      return inner(input, init);
    },
    log: { warn: (_object, message) => warnings.push(message) },
  });
  return { verifier, clock, calls, warnings };
}

/** The error a verification threw (the test fails if it did not throw). */
async function failure(t: Test, promise: Promise<unknown>): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    t.ok(error instanceof ServiceError, `a catalogue error (${(error as Error).name}: ${(error as Error).message})`);
    return error as ServiceError;
  }
  t.fail('verification succeeded');
  throw new Error('verification succeeded');
}

/** A refusal: the generic 401, the cause (matching `reason`) kept for the audit trail. */
async function refused(t: Test, promise: Promise<unknown>, reason: RegExp, what: string): Promise<void> {
  const error = await failure(t, promise);
  t.equal(statusOf(error), 401, `${what}: 401`);
  t.ok(error instanceof AuthenticationError, `${what}: AuthenticationError`);
  t.equal(error.message, AuthenticationError.GENERIC, `${what}: the generic text`);
  t.match((error as AuthenticationError).failure, { reason, code: 401 }, `${what}: the cause for the audit trail`);
}

/** The assertion mod_auth_openidc would make of these claims (Keystone's environ keys). */
function expectedAssertion(claims: Record<string, string>): Record<string, string> {
  const assertion: Record<string, string> = {};
  for (const [name, value] of Object.entries(claims)) {
    assertion[`HTTP_OIDC_${name.toUpperCase()}`] = value;
    assertion[`OIDC-${name}`] = value;
  }
  assertion.REMOTE_USER = claims.sub as string;
  return assertion;
}

let main: OidcPeer;
let other: OidcPeer;
let opaque: OidcPeer;

t.before(async () => {
  [main, other, opaque] = await Promise.all([startOidcPeer(t), startOidcPeer(t), startOidcPeer(t, { atFormat: 'opaque' })]);
});

t.test('a JWT access token of alice: the assertion mod_auth_openidc would make, issuer discovered once', async (t) => {
  const { verifier, calls, warnings } = harness();
  const tokens = await main.tokens('alice');
  const claims = decodeJwt(tokens.access_token);
  const assertion = await verifier.verify(request([main.issuer], bearer(tokens.access_token)));
  t.same(
    assertion,
    expectedAssertion({
      email: 'alice@example.org',
      groups: 'developers;admins',
      preferred_username: 'alice',
      name: 'Alice Federated',
      jti: claims.jti as string,
      sub: 'alice',
      iat: String(claims.iat),
      exp: String(claims.exp),
      scope: 'openid profile email groups',
      client_id: 'keystone',
      iss: main.issuer,
      aud: 'urn:keystone',
    }),
  );
  t.equal(assertion?.HTTP_OIDC_ISS, main.issuer, 'remote_id_attribute HTTP_OIDC_ISS finds the issuer');
  t.same(calls, [`${main.issuer}/.well-known/openid-configuration`, `${main.issuer}/jwks`], 'discovery, then the key set');
  t.same(warnings, [], 'no warning: audiences are configured');

  const again = await verifier.verify(request([main.issuer], bearer((await main.tokens('bob')).access_token)));
  t.match(again, { HTTP_OIDC_SUB: 'bob', 'OIDC-groups': 'viewers', REMOTE_USER: 'bob' });
  t.equal(calls.length, 2, 'the second token is verified with the cached keys');
  t.same(await verifier.verify(request([main.issuer], bearer(tokens.access_token), 'saml2')), undefined, 'a protocol not in OIDC_PROTOCOLS is not handled');
});

t.test('an id_token (audience: the client id)', async (t) => {
  const { verifier } = harness();
  const tokens = await main.tokens('alice');
  const idToken = tokens.id_token as string;
  const claims = decodeJwt(idToken);
  const assertion = await verifier.verify(request([main.issuer], bearer(idToken)));
  t.same(
    assertion,
    expectedAssertion({
      sub: 'alice',
      name: 'Alice Federated',
      given_name: 'Alice',
      family_name: 'Federated',
      preferred_username: 'alice',
      email: 'alice@example.org',
      email_verified: '1',
      groups: 'developers;admins',
      auth_time: String(claims.auth_time),
      amr: 'pwd',
      aud: 'keystone',
      exp: String(claims.exp),
      iat: String(claims.iat),
      iss: main.issuer,
    }),
  );
  await refused(t, harness({ OIDC_AUDIENCES: 'urn:keystone' }).verifier.verify(request([main.issuer], bearer(idToken))), /claim aud/, 'an id_token when only the resource is an accepted audience');
});

t.test('OIDC_PROTOCOLS: mapped is handled when listed', async (t) => {
  const token = (await main.tokens('alice')).access_token;
  t.same(await harness().verifier.verify(request([main.issuer], bearer(token), 'mapped')), undefined, 'not by default');
  t.match(await harness({ OIDC_PROTOCOLS: 'openid,mapped' }).verifier.verify(request([main.issuer], bearer(token), 'mapped')), { HTTP_OIDC_ISS: main.issuer, REMOTE_USER: 'alice' });
});

t.test('a token of another issuer (not a remote id of the provider): 403, and that issuer is never asked', async (t) => {
  const { verifier, calls } = harness();
  const token = (await other.tokens('alice')).access_token;
  const error = await failure(t, verifier.verify(request([main.issuer], bearer(token))));
  t.ok(error instanceof ForbiddenError);
  t.equal(statusOf(error), 403);
  t.equal(error.message, ISSUER_NOT_ACCEPTED, "Keystone's text");
  t.same(calls, [], 'nothing fetched');
  t.match(await verifier.verify(request([main.issuer, other.issuer], bearer(token))), { HTTP_OIDC_ISS: other.issuer }, 'accepted once it is a remote id');
});

t.test('an identity provider with no remote ids trusts no issuer', async (t) => {
  const { verifier } = harness();
  const error = await failure(t, verifier.verify(request([], bearer((await main.tokens('alice')).access_token))));
  t.equal(statusOf(error), 403);
});

t.test('times: expired, not yet valid, within the clock skew', async (t) => {
  const { verifier, clock } = harness({ OIDC_CLOCK_SKEW_SECONDS: '30' });
  const token = (await main.tokens('alice')).access_token;
  const { exp, iat } = decodeJwt(token) as Required<Pick<JWTPayload, 'exp' | 'iat'>>;
  clock.set((exp + 29) * 1000);
  t.match(await verifier.verify(request([main.issuer], bearer(token))), { REMOTE_USER: 'alice' }, 'expired by less than the skew');
  clock.set((exp + 31) * 1000);
  await refused(t, verifier.verify(request([main.issuer], bearer(token))), /expired/, 'expired');
  clock.set((iat - 29) * 1000);
  t.match(await verifier.verify(request([main.issuer], bearer(token))), { REMOTE_USER: 'alice' }, 'issued less than the skew ahead');
  clock.set((iat - 31) * 1000);
  await refused(t, verifier.verify(request([main.issuer], bearer(token))), /issued in the future/, 'issued in the future');
});

t.test('audiences: checked when configured, else a warning at start', async (t) => {
  const token = (await main.tokens('alice')).access_token;
  await refused(t, harness({ OIDC_AUDIENCES: 'urn:nova,other-client' }).verifier.verify(request([main.issuer], bearer(token))), /claim aud/, 'wrong audience');
  const open = harness({ OIDC_AUDIENCES: '' });
  t.equal(open.warnings.length, 1, 'one warning when the verifier is built');
  t.match(open.warnings[0], /OIDC_AUDIENCES is not set/);
  t.match(await open.verifier.verify(request([main.issuer], bearer(token))), { REMOTE_USER: 'alice' }, 'no audience check');
});

t.test('forgeries: alg none, HS256 keyed with the public key, another key with the real kid, a changed payload', async (t) => {
  const { verifier, calls } = harness();
  const real = (await main.tokens('alice')).access_token;
  const header = decodeProtectedHeader(real);
  const payload = { ...decodeJwt(real), sub: 'admin', preferred_username: 'admin' };
  const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

  const none = `${b64({ alg: 'none', typ: 'at+jwt', kid: header.kid })}.${b64(payload)}.`;
  await refused(t, verifier.verify(request([main.issuer], bearer(none))), /algorithm none is not accepted/, 'alg none');

  const jwks = (await (await fetch(`${main.issuer}/jwks`)).json()) as { keys: Array<Record<string, string>> };
  const publicJwk = jwks.keys[0] as Record<string, string>;
  const { createPublicKey } = await import('node:crypto');
  const pem = createPublicKey({ key: publicJwk as never, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string;
  for (const secret of [pem, JSON.stringify(publicJwk), publicJwk.n as string]) {
    const hs = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: header.kid as string }).sign(new TextEncoder().encode(secret));
    await refused(t, verifier.verify(request([main.issuer], bearer(hs))), /algorithm HS256 is not accepted/, 'HS256 with the public key');
  }
  t.same(calls, [], 'refused before any key is fetched');

  const { privateKey, publicKey } = await generateKeyPair('RS256');
  t.ok(await exportSPKI(publicKey));
  const otherKey = await new SignJWT(payload).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: header.kid as string }).sign(privateKey);
  await refused(t, verifier.verify(request([main.issuer], bearer(otherKey))), /signature does not verify/, 'signed by another key with the real kid');

  const [h, , s] = real.split('.');
  await refused(t, verifier.verify(request([main.issuer], bearer(`${h}.${b64(payload)}.${s}`))), /signature does not verify/, 'the payload changed');
  t.ok(await exportJWK(publicKey));
});

t.test('nothing is taken from headers: OIDC-* headers without a bearer token are refused', async (t) => {
  const { verifier, calls } = harness();
  const headers = { 'oidc-iss': main.issuer, 'oidc-preferred-username': 'alice', 'oidc-email': 'alice@example.org', 'oidc-groups': 'developers;admins', 'remote-user': 'alice', 'x-remote-user': 'alice' };
  await refused(t, verifier.verify(request([main.issuer], headers)), /no Authorization: Bearer token/, 'mod_auth_openidc headers only');
  await refused(t, verifier.verify(request([main.issuer], { ...headers, authorization: 'Basic YWxpY2U6YWxpY2UtcGFzcw==' })), /not a Bearer token/, 'Basic');
  await refused(t, verifier.verify(request([main.issuer], { ...headers, authorization: 'Bearer ' })), /not a Bearer token/, 'an empty bearer');
  const token = (await main.tokens('alice')).access_token;
  await refused(t, verifier.verify(request([main.issuer], { authorization: [`Bearer ${token}`, `Bearer ${token}`] })), /several Authorization headers/, 'two Authorization headers');
  const bob = await verifier.verify(request([main.issuer], { ...headers, ...bearer((await main.tokens('bob')).access_token) }));
  t.match(bob, { HTTP_OIDC_SUB: 'bob', REMOTE_USER: 'bob', HTTP_OIDC_PREFERRED_USERNAME: 'bob' }, 'the token speaks, not the headers');
  t.ok(calls.length > 0);
});

t.test('opaque tokens: RFC 7662 introspection with the configured client', async (t) => {
  const credentials = { OIDC_INTROSPECTION_CLIENT_ID: 'keystone', OIDC_INTROSPECTION_CLIENT_SECRET: 'keystone-secret' };
  const { verifier, calls } = harness(credentials);
  const tokens = await opaque.tokens('alice');
  t.notMatch(tokens.access_token, /\./, 'the peer issued an opaque token');
  const assertion = await verifier.verify(request([opaque.issuer], bearer(tokens.access_token)));
  t.ok(assertion);
  const { HTTP_OIDC_EXP: exp, HTTP_OIDC_IAT: iat } = assertion as Record<string, string>;
  t.same(
    assertion,
    expectedAssertion({
      sub: 'alice',
      email: 'alice@example.org',
      groups: 'developers;admins',
      preferred_username: 'alice',
      name: 'Alice Federated',
      client_id: 'keystone',
      exp: exp as string,
      iat: iat as string,
      iss: opaque.issuer,
      aud: 'urn:keystone',
      scope: 'openid profile email groups',
      token_type: 'Bearer',
    }),
    'the introspection answer, without "active"',
  );
  t.same(calls, [`${opaque.issuer}/.well-known/openid-configuration`, `${opaque.issuer}/token/introspection`]);

  await refused(t, harness({ ...credentials, OIDC_AUDIENCES: 'urn:nova' }).verifier.verify(request([opaque.issuer], bearer(tokens.access_token))), /audience/, 'wrong audience');
  await refused(t, harness().verifier.verify(request([opaque.issuer], bearer(tokens.access_token))), /no introspection client is configured/, 'no credentials');
  await refused(
    t,
    harness({ OIDC_INTROSPECTION_CLIENT_ID: 'keystone', OIDC_INTROSPECTION_CLIENT_SECRET: 'wrong' }).verifier.verify(request([opaque.issuer], bearer(tokens.access_token))),
    /introspection .* answered (400|401)/,
    'wrong client secret',
  );
  const perIssuer = harness({ OIDC_INTROSPECTION_CLIENTS: JSON.stringify({ [opaque.issuer]: { client_id: 'keystone', client_secret: 'keystone-secret' } }) });
  t.match(await perIssuer.verifier.verify(request(['https://elsewhere.example', opaque.issuer], bearer(tokens.access_token))), { REMOTE_USER: 'alice' }, 'per-issuer credentials pick the issuer');
  await refused(t, verifier.verify(request(['https://elsewhere.example', opaque.issuer], bearer(tokens.access_token))), /several issuers/, 'two issuers, none named');

  await refused(t, verifier.verify(request([opaque.issuer], bearer('not-a-token-the-provider-issued'))), /not active/, 'an unknown token');
  await opaque.revoke(tokens.access_token);
  await refused(t, verifier.verify(request([opaque.issuer], bearer(tokens.access_token))), /not active/, 'a revoked token');
});

t.test('a provider that cannot be reached: 503 with Retry-After, never a 500; cached keys keep working', async (t) => {
  const cached = harness({ OIDC_METADATA_CACHE_SECONDS: '60' });
  const token = (await other.tokens('alice')).access_token;
  t.match(await cached.verifier.verify(request([other.issuer], bearer(token))), { REMOTE_USER: 'alice' });
  await other.stop();
  t.teardown(() => other.start());

  const cold = harness();
  const error = await failure(t, cold.verifier.verify(request([other.issuer], bearer(token))));
  t.ok(error instanceof UnavailableError);
  t.equal(statusOf(error), 503);
  t.equal(error.message, PROVIDER_UNAVAILABLE);
  t.equal((error as UnavailableError).retryAfterSeconds, 5);
  const callsBefore = cold.calls.length;
  t.equal(statusOf(await failure(t, cold.verifier.verify(request([other.issuer], bearer(token))))), 503, 'still 503');
  t.equal(cold.calls.length, callsBefore, 'a failed discovery is not retried within the refresh interval');

  const opaqueDown = harness({ OIDC_INTROSPECTION_CLIENT_ID: 'keystone', OIDC_INTROSPECTION_CLIENT_SECRET: 'keystone-secret' });
  t.equal(statusOf(await failure(t, opaqueDown.verifier.verify(request([other.issuer], bearer('opaque-token'))))), 503, 'introspection: 503');

  t.match(await cached.verifier.verify(request([other.issuer], bearer(token))), { REMOTE_USER: 'alice' }, 'keys fetched before still verify');
  cached.clock.advance(120_000);
  t.match(await cached.verifier.verify(request([other.issuer], bearer(token))), { REMOTE_USER: 'alice' }, 'keys past their cache time are used while the provider is down');
});

t.test('key rotation: an unknown kid refetches the key set, at most once per interval', async (t) => {
  const { verifier, clock, calls } = harness({ OIDC_JWKS_REFRESH_INTERVAL_SECONDS: '30' });
  const before = (await main.tokens('alice')).access_token;
  t.match(await verifier.verify(request([main.issuer], bearer(before))), { REMOTE_USER: 'alice' });
  const jwksFetches = () => calls.filter((url) => url.endsWith('/jwks')).length;
  t.equal(jwksFetches(), 1);

  // Made-up kids within the interval: refused without asking the provider.
  const { privateKey } = await generateKeyPair('RS256');
  for (let i = 0; i < 20; i++) {
    const bogus = await new SignJWT({ ...decodeJwt(before) }).setProtectedHeader({ alg: 'RS256', kid: `bogus-${i}` }).sign(privateKey);
    await refused(t, verifier.verify(request([main.issuer], bearer(bogus))), /no key of .* matches/, `bogus kid ${i}`);
  }
  t.equal(jwksFetches(), 1, 'a flood of unknown kids fetched nothing within the interval');

  await main.rotateKey();
  const after = (await main.tokens('alice')).access_token;
  t.not(decodeProtectedHeader(after).kid, decodeProtectedHeader(before).kid, 'the provider signs with a new key');
  await refused(t, verifier.verify(request([main.issuer], bearer(after))), /no key of .* matches/, 'the new kid within the interval');
  clock.advance(31_000);
  t.match(await verifier.verify(request([main.issuer], bearer(after))), { REMOTE_USER: 'alice' }, 'the new kid after the interval: refetched, accepted');
  t.equal(jwksFetches(), 2);
  await refused(t, verifier.verify(request([main.issuer], bearer(before))), /no key of .* matches/, 'a token of the old key');
  clock.advance(31_000);
  await refused(t, verifier.verify(request([main.issuer], bearer(before))), /no key of .* matches/, 'the old key is gone from the provider too');
  t.equal(jwksFetches(), 3);
});
