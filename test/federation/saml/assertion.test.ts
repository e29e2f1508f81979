import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { groupAttributeValue, signedEcpEnvelope, signedResponse, type AssertionRequest } from '../../../src/federation/saml/assertion.ts';
import { idpMetadata } from '../../../src/federation/saml/metadata.ts';
import { NS } from '../../../src/federation/saml/namespaces.ts';
import { loadSigningKeys } from '../../../src/federation/saml/signing-keys.ts';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { elements, K2K_SAMPLES, makeKeyPair, parseXml, samlAttributes, skeleton, xmlsecVerifies } from './saml-test-helpers.ts';

const NOW = Date.UTC(2026, 10, 22, 11, 57, 8, 654);

function request(overrides: Partial<AssertionRequest> = {}): AssertionRequest {
  return {
    issuer: 'http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp',
    recipient: 'http://127.0.0.1:15060/Shibboleth.sso/SAML2/ECP',
    claims: { user: 'admin', userDomain: 'Default', roles: ['reader', 'member', 'admin'], project: 'admin', projectDomain: 'Default', groups: [] },
    now: NOW,
    expiresIn: 3600,
    ids: { response: 'af679df191c847ecb2b87f0bb325b9ea', assertion: '898421ba05a4462ba01b09efdf26f0dd', session: 'b36df73691a441399941eee4aa51615f' },
    ...overrides,
  };
}

t.test('the signed response: xmlsec1 accepts it with both algorithms and refuses it tampered', async (t) => {
  const { certFile, keyFile } = makeKeyPair(t);
  const other = makeKeyPair(t);
  const keys = loadSigningKeys(certFile, keyFile);
  for (const algorithm of ['rsa-sha256', 'rsa-sha1'] as const) {
    const xml = signedResponse(request(), keys, algorithm);
    t.ok(xmlsecVerifies(xml, certFile), `${algorithm}: verified`);
    const document = parseXml(xml);
    const method = elements(document, NS.xmldsig, 'SignatureMethod')[0]!.getAttribute('Algorithm');
    t.equal(method, algorithm === 'rsa-sha1' ? 'http://www.w3.org/2000/09/xmldsig#rsa-sha1' : 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256');
    t.equal(elements(document, NS.xmldsig, 'CanonicalizationMethod')[0]!.getAttribute('Algorithm'), 'http://www.w3.org/2001/10/xml-exc-c14n#');
    t.equal(elements(document, NS.xmldsig, 'Reference')[0]!.getAttribute('URI'), '#898421ba05a4462ba01b09efdf26f0dd');
    t.equal(elements(document, NS.xmldsig, 'X509Certificate')[0]!.textContent, keys.certificateBase64, 'the certificate in KeyInfo');
    t.notOk(xmlsecVerifies(xml.replace('>member<', '>owner<'), certFile), `${algorithm}: a changed role is refused`);
    t.notOk(xmlsecVerifies(xml.replace('NotOnOrAfter="2026-11-22T12:57:08', 'NotOnOrAfter="2026-11-23T12:57:08'), certFile), `${algorithm}: a later expiry is refused`);
    t.notOk(xmlsecVerifies(xml, other.certFile), `${algorithm}: another certificate does not verify it`);
  }
  const ecp = signedEcpEnvelope(request(), 'ss:mem:abc', keys, 'rsa-sha256');
  t.ok(xmlsecVerifies(ecp, certFile), 'the ECP envelope: verified');
});

t.test("the response has Keystone 22's structure, element by element (k2k-saml2-response.xml)", async (t) => {
  const { certFile, keyFile } = makeKeyPair(t);
  const keys = loadSigningKeys(certFile, keyFile);
  const real = fs.readFileSync(path.join(K2K_SAMPLES, 'k2k-saml2-response.xml'), 'utf8');
  t.same(skeleton(signedResponse(request(), keys, 'rsa-sha1')), skeleton(real));
  const ecpReal = fs.readFileSync(path.join(K2K_SAMPLES, 'k2k-saml2-ecp-envelope.xml'), 'utf8');
  t.same(skeleton(signedEcpEnvelope(request(), 'ss:mem:x', keys, 'rsa-sha1')), skeleton(ecpReal), 'the ECP envelope too');
  // Same root, prefixes and namespace declarations as Keystone sends.
  const ours = signedResponse(request(), keys, 'rsa-sha1');
  t.equal(ours.slice(0, ours.indexOf(' ID=')), real.slice(0, real.indexOf(' ID=')));
});

t.test('values: ids, times (the injected clock), issuer, recipient, subject and attributes', async (t) => {
  const { certFile, keyFile } = makeKeyPair(t);
  const keys = loadSigningKeys(certFile, keyFile);
  const xml = signedResponse(request({ expiresIn: 120 }), keys, 'rsa-sha256');
  const document = parseXml(xml);
  const root = document.documentElement;
  t.match(
    { id: root.getAttribute('ID'), instant: root.getAttribute('IssueInstant'), destination: root.getAttribute('Destination'), version: root.getAttribute('Version') },
    { id: 'af679df191c847ecb2b87f0bb325b9ea', instant: '2026-11-22T11:57:08Z', destination: 'http://127.0.0.1:15060/Shibboleth.sso/SAML2/ECP', version: '2.0' },
  );
  const assertion = elements(document, NS.assertion, 'Assertion')[0]!;
  t.equal(assertion.getAttribute('IssueInstant'), '2026-11-22T11:57:08Z');
  t.same(elements(document, NS.assertion, 'Issuer').map((issuer) => [issuer.textContent, issuer.getAttribute('Format')]), [
    ['http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp', 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity'],
    ['http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp', 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity'],
  ]);
  t.equal(elements(document, NS.assertion, 'NameID')[0]!.textContent, 'admin');
  const confirmation = elements(document, NS.assertion, 'SubjectConfirmationData')[0]!;
  t.equal(confirmation.getAttribute('NotOnOrAfter'), '2026-11-22T11:59:08.000000Z', 'now + the expiration time, microseconds printed as zeros');
  t.equal(confirmation.getAttribute('Recipient'), 'http://127.0.0.1:15060/Shibboleth.sso/SAML2/ECP');
  const authn = elements(document, NS.assertion, 'AuthnStatement')[0]!;
  t.same([authn.getAttribute('AuthnInstant'), authn.getAttribute('SessionIndex'), authn.getAttribute('SessionNotOnOrAfter')], ['2026-11-22T11:57:08Z', 'b36df73691a441399941eee4aa51615f', '2026-11-22T11:59:08.000000Z']);
  t.equal(elements(document, NS.assertion, 'AuthenticatingAuthority')[0]!.textContent, 'http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp');
  t.same(samlAttributes(xml), {
    openstack_user: ['admin'],
    openstack_roles: ['reader', 'member', 'admin'],
    openstack_project: ['admin'],
    openstack_project_domain: ['Default'],
    openstack_user_domain: ['Default'],
  }, 'no openstack_groups without groups');
  const withGroups = signedResponse(request({ claims: { ...request().claims, groups: [groupAttributeValue('g1', 'Default'), groupAttributeValue('ops é', 'D2')] } }), keys, 'rsa-sha256');
  t.same(samlAttributes(withGroups).openstack_groups, ['JSON:{"name": "g1", "domain": {"name": "Default"}}', 'JSON:{"name": "ops \\u00e9", "domain": {"name": "D2"}}'], "Python's json.dumps");
  t.same(Object.keys(samlAttributes(withGroups)), ['openstack_user', 'openstack_roles', 'openstack_project', 'openstack_project_domain', 'openstack_user_domain', 'openstack_groups'], "Keystone's order");
});

t.test('every value is escaped: names with markup stay text and the signature holds', async (t) => {
  const { certFile, keyFile } = makeKeyPair(t);
  const keys = loadSigningKeys(certFile, keyFile);
  const evil = '</saml:NameID><x a="1">&amp;\'"';
  const xml = signedResponse(
    request({ recipient: 'http://sp/?a=1&b="2"<', claims: { user: evil, userDomain: evil, roles: [evil], project: evil, projectDomain: evil, groups: [groupAttributeValue(evil, evil)] } }),
    keys,
    'rsa-sha256',
  );
  t.ok(xmlsecVerifies(xml, certFile));
  const attributes = samlAttributes(xml);
  t.same(attributes.openstack_user, [evil]);
  t.same(attributes.openstack_project_domain, [evil]);
  t.equal(elements(parseXml(xml), NS.assertion, 'NameID')[0]!.textContent, evil);
  t.equal(parseXml(xml).documentElement.getAttribute('Destination'), 'http://sp/?a=1&b="2"<');
  t.throws(() => signedResponse(request({ claims: { ...request().claims, user: 'a\u0001b' } }), keys, 'rsa-sha256'), { name: 'XmlValueError' }, 'a control character is refused, not sent');
});

t.test("metadata: Keystone's EntityDescriptor (k2k-idp-metadata.xml)", async (t) => {
  const { certFile, keyFile } = makeKeyPair(t);
  const keys = loadSigningKeys(certFile, keyFile);
  const config = loadConfig({
    SAML_CERTFILE: certFile,
    SAML_KEYFILE: keyFile,
    SAML_IDP_ENTITY_ID: 'http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp',
    SAML_IDP_SSO_ENDPOINT: 'http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/sso',
    SAML_IDP_ORGANIZATION_NAME: 'Example Cloud A',
    SAML_IDP_ORGANIZATION_DISPLAY_NAME: 'Example Cloud A',
    SAML_IDP_ORGANIZATION_URL: 'http://example.org',
    SAML_IDP_CONTACT_COMPANY: 'Example, Inc.',
    SAML_IDP_CONTACT_NAME: 'Ops',
    SAML_IDP_CONTACT_SURNAME: 'Team',
    SAML_IDP_CONTACT_EMAIL: 'ops@example.org',
    SAML_IDP_CONTACT_TELEPHONE: '+1 800 555 0100',
    SAML_IDP_CONTACT_TYPE: 'technical',
  });
  const real = fs.readFileSync(path.join(K2K_SAMPLES, 'k2k-idp-metadata.xml'), 'utf8').trim();
  const realCertificate = /<ns1:X509Certificate>([^<]+)</.exec(real)![1]!;
  const ours = idpMetadata(config.saml, realCertificate);
  t.equal(ours, real, 'byte for byte, given the same settings and certificate');
  const document = parseXml(idpMetadata(config.saml, keys.certificateBase64));
  t.equal(document.documentElement.getAttribute('entityID'), 'http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/idp');
  t.equal(elements(document, NS.xmldsig, 'X509Certificate')[0]!.textContent, keys.certificateBase64);
  t.same(elements(document, NS.metadata, 'SingleSignOnService').map((sso) => sso.getAttribute('Location')), ['http://127.0.0.1:15050/v3/OS-FEDERATION/saml2/sso']);
  t.equal(elements(parseXml(idpMetadata({ ...config.saml, organizationName: 'A & <B>' }, 'x')), NS.metadata, 'OrganizationName')[0]!.textContent, 'A & <B>', 'escaped');
});

t.test('settings: both key files or none, the entity id and SSO endpoint with them, choices checked', async (t) => {
  const base = { SAML_IDP_ENTITY_ID: 'https://idp.example/v3/OS-FEDERATION/saml2/idp', SAML_IDP_SSO_ENDPOINT: 'https://idp.example/v3/OS-FEDERATION/saml2/sso' };
  const off = loadConfig({});
  t.match(off.saml, { certFile: undefined, keyFile: undefined, entityId: undefined, assertionExpirationTime: 3600, signatureAlgorithm: 'rsa-sha256', organizationName: 'SAML Identity Provider', contactType: 'other', lang: 'en' }, "Keystone's defaults, not configured");
  t.throws(() => loadConfig({ SAML_CERTFILE: '/c.pem' }), new ConfigError('SAML_CERTFILE and SAML_KEYFILE go together: SAML_KEYFILE is missing'));
  t.throws(() => loadConfig({ SAML_KEYFILE: '/k.pem' }), new ConfigError('SAML_CERTFILE and SAML_KEYFILE go together: SAML_CERTFILE is missing'));
  t.throws(() => loadConfig({ SAML_CERTFILE: '/c.pem', SAML_KEYFILE: '/k.pem', SAML_IDP_SSO_ENDPOINT: base.SAML_IDP_SSO_ENDPOINT }), /SAML_IDP_ENTITY_ID is required/);
  t.throws(() => loadConfig({ SAML_CERTFILE: '/c.pem', SAML_KEYFILE: '/k.pem', SAML_IDP_ENTITY_ID: base.SAML_IDP_ENTITY_ID }), /SAML_IDP_SSO_ENDPOINT is required/);
  t.throws(() => loadConfig({ ...base, SAML_IDP_ENTITY_ID: 'not a uri' }), /SAML_IDP_ENTITY_ID is not a valid URI/);
  t.throws(() => loadConfig({ SAML_SIGNATURE_ALGORITHM: 'rsa-md5' }), /SAML_SIGNATURE_ALGORITHM must be rsa-sha256 or rsa-sha1/);
  t.throws(() => loadConfig({ SAML_IDP_CONTACT_TYPE: 'boss' }), /SAML_IDP_CONTACT_TYPE must be one of technical, support, administrative, billing, other/);
  t.throws(() => loadConfig({ SAML_ASSERTION_EXPIRATION_TIME: '0' }), /SAML_ASSERTION_EXPIRATION_TIME must be between 1/);
  const on = loadConfig({ ...base, SAML_CERTFILE: '/c.pem', SAML_KEYFILE: '/k.pem', SAML_SIGNATURE_ALGORITHM: 'RSA-SHA1', SAML_ASSERTION_EXPIRATION_TIME: '600' });
  t.match(on.saml, { certFile: '/c.pem', keyFile: '/k.pem', signatureAlgorithm: 'rsa-sha1', assertionExpirationTime: 600 });
});

t.test('signing keys: unreadable, not RSA, or a certificate of another key stop the start', async (t) => {
  const a = makeKeyPair(t);
  const b = makeKeyPair(t);
  t.throws(() => loadSigningKeys(path.join(a.dir, 'none.pem'), a.keyFile), /SAML_CERTFILE: cannot read .*none\.pem \(ENOENT\)/);
  t.throws(() => loadSigningKeys(a.certFile, b.keyFile), /SAML_CERTFILE: .* is not the certificate of the key in SAML_KEYFILE/);
  t.throws(() => loadSigningKeys(a.keyFile, a.keyFile), /SAML_CERTFILE: .* is not a PEM certificate/);
  t.throws(() => loadSigningKeys(a.certFile, a.certFile), /SAML_KEYFILE: .* is not an unencrypted PEM private key/);
  const ec = path.join(a.dir, 'ec.pem');
  const { execFileSync } = await import('node:child_process');
  execFileSync('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', ec]);
  t.throws(() => loadSigningKeys(a.certFile, ec), /SAML_KEYFILE: .* must be an RSA key/);
  t.ok(loadSigningKeys(a.certFile, a.keyFile).certificateBase64.length > 100);
});
