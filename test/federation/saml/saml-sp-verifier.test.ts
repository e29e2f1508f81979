// This service as SAML service provider: the verifier of SAML federated logins, with the real
// Keystone 22 samples (an injected clock: they expire) and identity providers of our own making.
import fs from 'node:fs';
import crypto from 'node:crypto';
import { Redis } from 'ioredis';
import t, { type Test } from 'tap';
import { loadConfig } from '../../../src/config.ts';
import type { AssertionRequest } from '../../../src/federation/assertion.ts';
import type { IdentityProvider, Protocol } from '../../../src/federation/federation-service.ts';
import { MemoryReplayCache, RedisReplayCache, type ReplayCache } from '../../../src/federation/replay-cache.ts';
import { ISSUER_NOT_ACCEPTED, SamlAssertionVerifier } from '../../../src/federation/saml/sp/saml-verifier.ts';
import { TrustedIdpMetadata } from '../../../src/federation/saml/sp/trusted-metadata.ts';
import { AuthenticationError, ForbiddenError, ServiceError, statusOf } from '../../../src/support/errors.ts';
import { ManualClock } from '../../helpers/clock.ts';
import { TEST_REDIS_URL, testRedis } from '../../helpers/redis.ts';
import { makeIdp, SAMPLE, signElement, stripSignatures } from './saml-sp-helpers.ts';
import { makeKeyPair } from './saml-test-helpers.ts';
import { loadSigningKeys } from '../../../src/federation/saml/signing-keys.ts';

const ENDPOINT = 'http://keystone.test:5000/v3/OS-FEDERATION/identity_providers/idp/protocols/saml2/auth';
const OUR_ISSUER = 'https://idp.example.org/saml2/idp';

function identityProvider(remoteIds: string[]): IdentityProvider {
  return { id: 'idp', domainId: 'idp-domain', enabled: true, description: null, authorizationTtl: null, remoteIds };
}

const protocol = (id = 'saml2'): Protocol => ({ id, idpId: 'idp', mappingId: 'mapping', remoteIdAttribute: null }) as unknown as Protocol;

interface Harness {
  clock: ManualClock;
  warnings: string[];
  verify(xml: string, options?: { remoteIds?: string[]; contentType?: string; endpointUrl?: string; protocolId?: string; body?: Buffer }): Promise<Record<string, string> | undefined>;
}

function harness(env: Record<string, string>, options: { replayCache?: (clock: ManualClock) => ReplayCache; now?: number } = {}): Harness {
  const clock = new ManualClock(options.now ?? SAMPLE.now);
  const warnings: string[] = [];
  const log = { warn: (_object: object, message: string) => warnings.push(message) };
  const settings = loadConfig(env).samlSp;
  const verifier = new SamlAssertionVerifier(settings, {
    clock,
    log,
    metadata: new TrustedIdpMetadata(settings.trustedIdpMetadata, { clock, refreshMs: 60_000, httpTimeoutMs: 2000, log }),
    replayCache: options.replayCache ? options.replayCache(clock) : new MemoryReplayCache(clock),
  });
  return {
    clock,
    warnings,
    verify: (xml, o = {}) => {
      const request: AssertionRequest = {
        identityProvider: identityProvider(o.remoteIds ?? [SAMPLE.issuer, OUR_ISSUER]),
        protocol: protocol(o.protocolId),
        headers: {},
        contentType: o.contentType ?? 'application/vnd.paos+xml',
        body: o.body ?? Buffer.from(xml, 'utf8'),
        endpointUrl: o.endpointUrl ?? ENDPOINT,
      };
      return verifier.verify(request);
    },
  };
}

/** The real samples' identity provider trusted, their Shibboleth ECP URL accepted as recipient. */
const sampleEnv = (extra: Record<string, string> = {}) => ({ SAML_TRUSTED_IDP_METADATA: SAMPLE.metadataFile, SAML_SP_ACCEPTED_RECIPIENTS: SAMPLE.recipient, ...extra });

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

/** The generic 401, its cause (matching `reason`) kept for the audit trail. */
async function refused(t: Test, promise: Promise<unknown>, reason: RegExp, what: string): Promise<void> {
  const error = await failure(t, promise);
  t.equal(statusOf(error), 401, `${what}: 401`);
  t.ok(error instanceof AuthenticationError, `${what}: AuthenticationError`);
  t.equal(error.message, AuthenticationError.GENERIC, `${what}: the generic text`);
  t.match((error as AuthenticationError).failure, { reason, code: 401 }, `${what}: ${reason}`);
}

const SAMPLE_ASSERTION = {
  openstack_user: 'admin',
  openstack_roles: 'reader;member;admin',
  openstack_project: 'admin',
  openstack_project_domain: 'Default',
  openstack_user_domain: 'Default',
  'Shib-AuthnContext-Class': 'urn:oasis:names:tc:SAML:2.0:ac:classes:Password',
  'Shib-Identity-Provider': SAMPLE.issuer,
};

/** The one Assertion element of a document, as text. */
const assertionText = (xml: string) => /<saml:Assertion[\s\S]*<\/saml:Assertion>/.exec(xml)![0];
const idOf = (element: string) => /ID="([^"]+)"/.exec(element)![1]!;

t.test('the real Keystone 22 response and ECP envelope are accepted when their metadata is trusted', async (t) => {
  const h = harness(sampleEnv());
  t.same(await h.verify(SAMPLE.response(), { contentType: 'text/xml' }), { ...SAMPLE_ASSERTION, 'Shib-Authentication-Instant': '2026-11-22T11:57:08Z' }, 'the bare response');
  t.same(await h.verify(SAMPLE.ecp()), { ...SAMPLE_ASSERTION, 'Shib-Authentication-Instant': '2026-11-22T11:57:09Z' }, 'the ECP envelope');
  t.same(await h.verify(SAMPLE.ecp(), { protocolId: 'openid' }), undefined, 'a protocol not in SAML_PROTOCOLS is not handled');
  const custom = harness(sampleEnv({ SAML_PROTOCOLS: 'saml2,k2k' }));
  t.match(await custom.verify(SAMPLE.response(), { protocolId: 'k2k' }), SAMPLE_ASSERTION, 'a protocol id the operator named in SAML_PROTOCOLS');
});

t.test('a form POST (SAMLResponse, base64) and the content types', async (t) => {
  const h = harness(sampleEnv());
  const form = `RelayState=x&SAMLResponse=${encodeURIComponent(Buffer.from(SAMPLE.response()).toString('base64'))}`;
  t.match(await h.verify('', { contentType: 'application/x-www-form-urlencoded', body: Buffer.from(form) }), SAMPLE_ASSERTION, 'the form');
  await refused(t, h.verify('', { contentType: 'application/x-www-form-urlencoded', body: Buffer.from('SAMLResponse=%%%') }), /not base64/, 'not base64');
  await refused(t, h.verify('', { contentType: 'application/x-www-form-urlencoded', body: Buffer.from('RelayState=x') }), /one SAMLResponse/, 'no SAMLResponse');
  await refused(t, h.verify(SAMPLE.ecp(), { contentType: 'application/json' }), /not application\/json/, 'JSON');
  await refused(t, h.verify('', { body: Buffer.alloc(0) }), /no SAML response/, 'no body');
  await refused(t, h.verify('<x/>'), /not a SAML Response/, 'another document');
  await refused(t, h.verify('<ns0:Response xmlns:ns0="urn:oasis:names:tc:SAML:2.0:protocol"'), /well-formed/, 'malformed');
});

t.test('refused: a tampered attribute, a later expiry, an unsigned message (the real sample)', async (t) => {
  const h = harness(sampleEnv());
  await refused(t, h.verify(SAMPLE.response().replace('>member<', '>owner<')), /signature does not verify/, 'a changed role');
  await refused(t, h.verify(SAMPLE.response().replace('>admin</saml:AttributeValue></saml:Attribute><saml:Attribute Name="openstack_project"', '>superadmin</saml:AttributeValue></saml:Attribute><saml:Attribute Name="openstack_project"')), /signature does not verify/, 'another role added');
  await refused(t, h.verify(SAMPLE.response().replace(/NotOnOrAfter="2026-11-22T12:57:08/g, 'NotOnOrAfter="2027-11-22T12:57:08')), /signature does not verify/, 'a later expiry');
  await refused(t, h.verify(stripSignatures(SAMPLE.response())), /neither the Response nor the Assertion is signed/, 'unsigned');
  t.same(await h.verify(SAMPLE.response()), { ...SAMPLE_ASSERTION, 'Shib-Authentication-Instant': '2026-11-22T11:57:08Z' }, 'the untouched sample still passes (none of the above was claimed)');
});

t.test('the signature is checked with the metadata certificate only, never with KeyInfo', async (t) => {
  const h = harness(sampleEnv());
  // An attacker's key, its certificate embedded: the real message made to say more, re-signed.
  const attacker = makeKeyPair(t);
  const attackerKeys = loadSigningKeys(attacker.certFile, attacker.keyFile);
  const original = SAMPLE.response();
  const tampered = stripSignatures(original).replace('>member<', '>owner<');
  const resigned = signElement(tampered, idOf(assertionText(original)), attackerKeys);
  t.match(resigned, attackerKeys.certificateBase64, 'the attacker certificate is in KeyInfo');
  await refused(t, h.verify(resigned), /signature does not verify/, 're-signed by an untrusted key with its certificate embedded');
  // The same re-signed message with the trusted certificate pasted in KeyInfo: still refused.
  const trustedCert = /<xmldsig:X509Certificate>([\s\S]*?)<\/xmldsig:X509Certificate>/.exec(original)![1]!;
  await refused(t, h.verify(resigned.replace(attackerKeys.certificateBase64, trustedCert.replace(/\s/g, ''))), /signature does not verify/, 're-signed, the trusted certificate pasted in KeyInfo');
  // The genuine signature with the attacker's certificate in KeyInfo: accepted (KeyInfo is not what is trusted).
  t.match(await h.verify(original.replace(trustedCert, attackerKeys.certificateBase64)), SAMPLE_ASSERTION, 'a genuine signature whatever KeyInfo says');
  // Metadata trusted for another entity: the sample's issuer has none.
  const other = makeIdp(t, OUR_ISSUER, { recipient: ENDPOINT, now: () => SAMPLE.now });
  const untrusting = harness({ SAML_TRUSTED_IDP_METADATA: other.metadataFile, SAML_SP_ACCEPTED_RECIPIENTS: SAMPLE.recipient });
  await refused(t, untrusting.verify(SAMPLE.response()), /is in no trusted metadata/, 'an issuer without trusted metadata');
  // One entity's key cannot vouch for another trusted entity.
  const both = harness({ SAML_TRUSTED_IDP_METADATA: `${other.metadataFile},${SAMPLE.metadataFile}` });
  await refused(t, both.verify(other.response({ issuer: SAMPLE.issuer })), /signature does not verify/, "an assertion naming the sample's issuer signed by our other trusted IdP");
  t.match(await both.verify(other.response()), { 'Shib-Identity-Provider': OUR_ISSUER, openstack_user: 'alice' }, 'each with its own key: accepted');
  const none = harness({});
  await refused(t, none.verify(SAMPLE.response(), { endpointUrl: SAMPLE.recipient }), /is in no trusted metadata/, 'no SAML_TRUSTED_IDP_METADATA at all');
  t.match(none.warnings, [/SAML_TRUSTED_IDP_METADATA is not set/]);
  const sha256Only = harness(sampleEnv({ SAML_SIGNATURE_ALGORITHMS: 'rsa-sha256' }));
  await refused(t, sha256Only.verify(SAMPLE.response()), /rsa-sha1 is not accepted/, 'rsa-sha1 when only rsa-sha256 is accepted');
});

t.test('the issuer must be one of the identity provider remote ids: 403 as Keystone', async (t) => {
  const h = harness(sampleEnv());
  const error = await failure(t, h.verify(SAMPLE.response(), { remoteIds: ['https://someone-else.example/idp'] }));
  t.ok(error instanceof ForbiddenError);
  t.equal(statusOf(error), 403);
  t.equal(error.message, ISSUER_NOT_ACCEPTED);
  await refused(t, h.verify(SAMPLE.response(), { remoteIds: [] }), /has no remote_ids/, 'an identity provider without remote ids');
});

t.test('addressed to another service provider: Destination, Recipient, Audience', async (t) => {
  const strict = harness({ SAML_TRUSTED_IDP_METADATA: SAMPLE.metadataFile });
  await refused(t, strict.verify(SAMPLE.response()), /Destination http:\/\/127.0.0.1:15060\/Shibboleth.sso\/SAML2\/ECP is not this login's URL/, 'the sample (for keystone-b) without SAML_SP_ACCEPTED_RECIPIENTS');
  t.same(await strict.verify(SAMPLE.response(), { endpointUrl: SAMPLE.recipient }), { ...SAMPLE_ASSERTION, 'Shib-Authentication-Instant': '2026-11-22T11:57:08Z' }, 'the same, when it is our login URL');

  const h = harness({ SAML_TRUSTED_IDP_METADATA: '' }, { now: SAMPLE.now });
  const idp = makeIdp(t, OUR_ISSUER, { recipient: ENDPOINT, now: () => h.clock.now() });
  const v = harness({ SAML_TRUSTED_IDP_METADATA: idp.metadataFile, SAML_SP_ENTITY_ID: 'https://sp.keystone.test' });
  t.match(await v.verify(idp.ecp()), { openstack_user: 'alice', openstack_roles: 'reader;member', 'Shib-Identity-Provider': OUR_ISSUER }, 'for us: accepted');
  const forOther = idp.response({ recipient: 'https://other-sp.example/v3/OS-FEDERATION/identity_providers/idp/protocols/saml2/auth' });
  await refused(t, v.verify(forOther), /Destination https:\/\/other-sp.example.* is not this login's URL/, 'made for another service provider');
  // Only the Assertion is signed: the Response's Destination rewritten to ours, the Recipient still says the other.
  await refused(t, v.verify(forOther.replace(/Destination="[^"]+"/, `Destination="${ENDPOINT}"`)), /Recipient https:\/\/other-sp.example.* is not this login's URL/, 'the Destination rewritten, the signed Recipient not');
  await refused(t, v.verify(idp.response(), { endpointUrl: ENDPOINT.replace('/idp/', '/another-idp/') }), /not this login's URL/, "another identity provider's login URL");

  // Conditions with an audience: ours (entity id or the URL) or refused.
  const withConditions = (audience: string, conditions = '') => {
    const unsigned = stripSignatures(idp.response());
    const assertion = assertionText(unsigned);
    const changed = assertion.replace('<saml:Subject>', `<saml:Conditions${conditions}><saml:AudienceRestriction><saml:Audience>${audience}</saml:Audience></saml:AudienceRestriction></saml:Conditions><saml:Subject>`);
    return signElement(unsigned.replace(assertion, changed), idOf(assertion), idp.keys);
  };
  t.ok(await v.verify(withConditions('https://sp.keystone.test')), 'Audience: SAML_SP_ENTITY_ID');
  t.ok(await v.verify(withConditions(ENDPOINT)), 'Audience: the login URL');
  await refused(t, v.verify(withConditions('https://other-sp.example')), /another audience \(https:\/\/other-sp.example\)/, 'another Audience');
  const later = new Date(v.clock.now() + 10 * 60_000).toISOString();
  await refused(t, v.verify(withConditions(ENDPOINT, ` NotBefore="${later}"`)), /not yet valid \(Conditions NotBefore\)/, 'Conditions NotBefore in the future');
  const earlier = new Date(v.clock.now() - 10 * 60_000).toISOString();
  await refused(t, v.verify(withConditions(ENDPOINT, ` NotOnOrAfter="${earlier}"`)), /expired \(Conditions NotOnOrAfter\)/, 'Conditions NotOnOrAfter passed');
});

t.test('times: expired, issued in the future, within the skew', async (t) => {
  const h = harness(sampleEnv({ SAML_CLOCK_SKEW_SECONDS: '30' }));
  h.clock.set(SAMPLE.notOnOrAfter + 31_000);
  await refused(t, h.verify(SAMPLE.response()), /expired \(SubjectConfirmationData NotOnOrAfter\)/, 'past NotOnOrAfter and the skew');
  h.clock.set(SAMPLE.notOnOrAfter + 29_000);
  t.ok(await h.verify(SAMPLE.response()), 'past NotOnOrAfter within the skew: accepted');
  h.clock.set(Date.UTC(2026, 10, 22, 11, 56, 0));
  await refused(t, h.verify(SAMPLE.ecp()), /issued in the future/, 'issued a minute from now (skew 30 s)');
});

t.test('replay: an assertion is accepted once, until it expires', async (t) => {
  const h = harness(sampleEnv());
  t.ok(await h.verify(SAMPLE.response()));
  await refused(t, h.verify(SAMPLE.response()), /898421ba05a4462ba01b09efdf26f0dd of .* was already used/, 'the same response again');
  await refused(t, h.verify(SAMPLE.response(), { contentType: 'text/xml' }), /already used/, 'again, otherwise posted');
  t.ok(await h.verify(SAMPLE.ecp()), 'another assertion of the same provider: accepted');

  // The cache forgets an entry once the assertion has expired (it is then refused for its time anyway).
  const clock = new ManualClock(0);
  const cache = new MemoryReplayCache(clock, 2);
  t.ok(await cache.claim('a', 1000));
  t.notOk(await cache.claim('a', 1000), 'claimed');
  clock.set(1000);
  t.ok(await cache.claim('a', 2000), 'expired: claimable again');
  t.ok(await cache.claim('b', 5000));
  t.ok(await cache.claim('c', 5000), 'full: the soonest to expire made room');
  t.notOk(await cache.claim('c', 5000));
});

t.test('replay across two nodes sharing Redis', async (t) => {
  const shared = await testRedis(t);
  if (!shared) return t.plan(0, 'no Redis at 127.0.0.1:6379');
  const second = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  t.teardown(() => second.disconnect());
  const nodeA = harness(sampleEnv(), { replayCache: (clock) => new RedisReplayCache(shared.redis, shared.prefix, clock) });
  const nodeB = harness(sampleEnv(), { replayCache: (clock) => new RedisReplayCache(second, shared.prefix, clock) });
  t.ok(await nodeA.verify(SAMPLE.ecp()), 'node A accepts it');
  await refused(t, nodeB.verify(SAMPLE.ecp()), /already used/, 'node B refuses it (its own memory never saw it)');
  const keys = await shared.redis.keys(`${shared.prefix}*`);
  t.equal(keys.length, 1, 'one key in Redis');
  const ttl = await shared.redis.pttl(keys[0]!);
  const expected = Date.UTC(2026, 10, 22, 12, 57, 9) + 60_000 - SAMPLE.now;
  t.ok(ttl > expected - 5000 && ttl <= expected, `it expires with the assertion (+ skew): ${ttl} ms`);
  // A node whose Redis is out of reach refuses (503) rather than guess.
  const broken = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  broken.on('error', () => {});
  t.teardown(() => broken.disconnect());
  const nodeC = harness(sampleEnv(), { replayCache: (clock) => new RedisReplayCache(broken, shared.prefix, clock) });
  const error = await failure(t, nodeC.verify(SAMPLE.response()));
  t.equal(statusOf(error), 503, 'Redis out of reach: 503');
  t.match(nodeC.warnings, [/replay cache cannot be reached/]);
});

t.test('signature wrapping: only the signed element is read', async (t) => {
  const v = harness({}, { now: SAMPLE.now });
  const idp = makeIdp(t, OUR_ISSUER, { recipient: ENDPOINT, now: () => v.clock.now() });
  const h = harness({ SAML_TRUSTED_IDP_METADATA: idp.metadataFile });
  const legit = idp.response();
  const signed = assertionText(legit);
  const evil = stripSignatures(signed).replace(idOf(signed), 'evil-id').replace('>alice<', '>root<').replace('>member<', '>admin<');

  // XSW: the signed assertion moved into Extensions, an evil unsigned one in its place.
  const moved = legit.replace(signed, `<ns0:Extensions>${signed}</ns0:Extensions>${evil}`);
  await refused(t, h.verify(moved), /holds 2 assertions/, 'signed assertion moved to Extensions, evil assertion injected');
  // The evil assertion wraps the signed one.
  await refused(t, h.verify(legit.replace(signed, evil.replace('</saml:Assertion>', `${signed}</saml:Assertion>`))), /holds 2 assertions/, 'evil assertion wrapping the signed one');
  // The evil assertion takes the signed one's ID (the Reference would resolve to either).
  await refused(t, h.verify(legit.replace(signed, `${evil.replace('evil-id', idOf(signed))}${signed}`)), /holds 2 assertions/, 'two assertions with one ID');
  // The evil assertion alone, carrying the legitimate Signature (its Reference names the legit ID).
  const signature = /<xmldsig:Signature[\s>][\s\S]*<\/xmldsig:Signature>/.exec(signed)![0];
  const evilWithSignature = evil.replace('</saml:Issuer>', `</saml:Issuer>${signature}`);
  await refused(t, h.verify(legit.replace(signed, evilWithSignature)), /not the signed element #/, 'the signature moved onto the evil assertion');
  await refused(t, h.verify(legit.replace(signed, evilWithSignature.replace('evil-id', idOf(signed)))), /signature does not verify/, 'the signature moved onto the evil assertion with the legit ID');
  // A second Response in the SOAP body or header beside the real one.
  const ecp = idp.ecp();
  const ecpAssertion = assertionText(ecp);
  const wrappedEcp = ecp.replace('</ns0:Header>', `<ns2:Response ID="x" Version="2.0">${ecpAssertion}</ns2:Response></ns0:Header>`);
  await refused(t, h.verify(wrappedEcp), /holds 2 assertions/, 'the signed response copied into the SOAP header');
  await refused(t, h.verify(ecp.replace('</ns0:Body>', '<ns2:Response ID="y" Version="2.0"/></ns0:Body>')), /does not hold one SAML Response/, 'two responses in the SOAP body');
  // A signature elsewhere (it could be what a lax verifier found first).
  await refused(t, h.verify(legit.replace('<ns0:Status>', `<ns0:Extensions>${signature}</ns0:Extensions><ns0:Status>`)), /signature is somewhere other/, 'an extra signature in Extensions');
  t.match(await h.verify(legit), { openstack_user: 'alice' }, 'the legitimate message still passes');

  // A signed Response (not the Assertion): accepted; then an evil unsigned assertion injected beside it.
  const unsigned = stripSignatures(idp.response());
  const responseId = /<ns0:Response[^>]* ID="([^"]+)"/.exec(unsigned)![1]!;
  const signedResponse = signElement(unsigned, responseId, idp.keys);
  t.match(await h.verify(signedResponse), { openstack_user: 'alice', 'Shib-Identity-Provider': OUR_ISSUER }, 'a signed Response holding one assertion');
  const inner = assertionText(signedResponse);
  await refused(t, h.verify(signedResponse.replace(inner, `${inner}${evil}`)), /holds 2 assertions/, 'an evil assertion beside the signed response’s');
  await refused(t, h.verify(signedResponse.replace('>member<', '>admin<')), /signature does not verify/, 'a changed role in a signed Response');
});

t.test('DTDs and entities are refused before anything is read', async (t) => {
  const h = harness(sampleEnv());
  const response = SAMPLE.response();
  const xxe = `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>${response.replace('>admin</saml:NameID>', '>&x;</saml:NameID>')}`;
  await refused(t, h.verify(xxe), /has a DTD/, 'an external entity');
  const laughs = `<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>${response.replace('>admin</saml:NameID>', '>&b;</saml:NameID>')}`;
  await refused(t, h.verify(laughs), /has a DTD/, 'entity expansion');
  await refused(t, h.verify(`<!doctype Response SYSTEM "http://127.0.0.1:1/x.dtd">${response}`), /has a DTD/, 'an external DTD (lower case)');
  await refused(t, h.verify(response.replace('>admin</saml:NameID>', '>&undefined;</saml:NameID>')), /well-formed|entity/, 'an undeclared entity');
  await refused(t, h.verify(`<?xml-stylesheet href="x"?>${response}`), /processing instruction/, 'a processing instruction');
  const deep = response.replace('<saml:NameID>admin</saml:NameID>', `<saml:NameID>${'<x>'.repeat(60)}admin${'</x>'.repeat(60)}</saml:NameID>`);
  await refused(t, h.verify(deep), /nests deeper than 48 levels/, 'a deeply nested document');
  const form = `SAMLResponse=${encodeURIComponent(Buffer.from(xxe).toString('base64'))}`;
  await refused(t, h.verify('', { contentType: 'application/x-www-form-urlencoded', body: Buffer.from(form) }), /has a DTD/, 'the same in a form');
});

t.test('trusted metadata is re-read when its file changes; a bad file keeps the last good one', async (t) => {
  const clock = { now: () => SAMPLE.now };
  const idp = makeIdp(t, OUR_ISSUER, { recipient: ENDPOINT, now: clock.now });
  const rotated = makeIdp(t, OUR_ISSUER, { recipient: ENDPOINT, now: clock.now });
  const file = `${idp.metadataFile}.trusted.xml`;
  fs.copyFileSync(idp.metadataFile, file);
  const h = harness({ SAML_TRUSTED_IDP_METADATA: file });
  t.ok(await h.verify(idp.response()), 'the old key');
  await refused(t, h.verify(rotated.response()), /signature does not verify/, 'the new key before the metadata names it');
  fs.copyFileSync(rotated.metadataFile, file);
  fs.utimesSync(file, new Date(), new Date(Date.now() + 5000));
  t.ok(await h.verify(rotated.response()), 'the new key once the file changed');
  await refused(t, h.verify(idp.response()), /signature does not verify/, 'the old key, no longer trusted');
  fs.writeFileSync(file, '<not metadata');
  fs.utimesSync(file, new Date(), new Date(Date.now() + 10_000));
  t.ok(await h.verify(rotated.response()), 'a broken file: the last good content is kept');
  t.ok(await h.verify(rotated.response()), 'again');
  t.match(h.warnings, [/cannot be read/]);
  t.equal(h.warnings.length, 1, 'the broken file is logged once, not at every login');
  const missing = harness({ SAML_TRUSTED_IDP_METADATA: '/nonexistent/metadata.xml' });
  const error = await failure(t, missing.verify(idp.response()));
  t.equal(statusOf(error), 503, 'metadata never read: 503 (the issuer may be in it)');
  t.equal(statusOf(await failure(t, missing.verify(idp.response()))), 503, 'still');
  t.equal(missing.warnings.filter((warning) => /cannot be read/.test(warning)).length, 1, 'logged once');
});

t.test('trusted metadata from a URL, fetched again after SAML_METADATA_REFRESH_SECONDS', async (t) => {
  const clock = new ManualClock(SAMPLE.now);
  const idp = makeIdp(t, OUR_ISSUER, { recipient: ENDPOINT, now: () => clock.now() });
  let fetches = 0;
  let body = fs.readFileSync(idp.metadataFile, 'utf8');
  const metadata = new TrustedIdpMetadata(['https://metadata.example/idp.xml'], {
    clock,
    refreshMs: 3_600_000,
    httpTimeoutMs: 1000,
    fetch: async () => {
      fetches += 1;
      return new Response(body, { status: 200 });
    },
  });
  t.match((await metadata.entity(OUR_ISSUER)).entity, { entityId: OUR_ISSUER, certificates: [idp.keys.certificate.toString()] });
  await metadata.entity(OUR_ISSUER);
  t.equal(fetches, 1, 'cached');
  body = body.replace(/entityID="[^"]+"/, 'entityID="https://renamed.example"');
  clock.advance(3_600_000);
  t.equal((await metadata.entity(OUR_ISSUER)).entity, undefined, 'fetched again: the entity is gone');
  t.equal(fetches, 2);
  // validUntil passed: not trusted.
  const expired = crypto.randomUUID();
  body = body.replace('<ns0:EntityDescriptor ', `<ns0:EntityDescriptor validUntil="2020-01-01T00:00:00Z" `).replace(/entityID="[^"]+"/, `entityID="urn:${expired}"`);
  clock.advance(3_600_000);
  t.equal((await metadata.entity(`urn:${expired}`)).entity, undefined, 'metadata past validUntil is not trusted');
});
