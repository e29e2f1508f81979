import t from 'tap';
import { recordResolvedModules } from '../../helpers/resolved-modules.ts';

// A service that never reads or writes SAML does not hold the XML libraries' code (issue 21, item 6:
// memory per worker): xml-crypto, xmldom and xpath are loaded by the first document parsed, signed
// or verified. The modules under test are imported after the recording starts.
const loaded = recordResolvedModules();
const XML_LIBRARIES = /node_modules\/(xml-crypto|@xmldom\/xmldom|xpath)\//;

// The whole service's module graph: everything app.ts imports, SAML's routes and services included.
await import('../../../src/app.ts');
const { parseUntrustedXml } = await import('../../../src/federation/saml/sp/safe-xml.ts');
const { signAssertion } = await import('../../../src/federation/saml/signer.ts');
const { loadSigningKeys } = await import('../../../src/federation/saml/signing-keys.ts');
// Read before the test helpers are imported (they parse XML with xmldom themselves).
const loadedByTheService = loaded(XML_LIBRARIES);
const { makeKeyPair } = await import('./saml-test-helpers.ts');

t.test('the service loads no XML library until a SAML document is handled', async (t) => {
  t.same(loadedByTheService, [], 'importing the service loaded none');

  const document = parseUntrustedXml('<a xmlns="urn:example"><b ID="one">text</b></a>');
  t.equal(document.documentElement.localName, 'a', 'an untrusted document parsed');
  t.throws(() => parseUntrustedXml('<!DOCTYPE a><a/>'), { name: 'UnsafeXmlError' }, 'and still refuses a DTD');

  const { certFile, keyFile } = makeKeyPair(t);
  const xml =
    '<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:xmldsig="http://www.w3.org/2000/09/xmldsig#">' +
    '<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="a1"><saml:Issuer>https://idp.example</saml:Issuer></saml:Assertion>' +
    '</samlp:Response>';
  const signed = signAssertion(xml, loadSigningKeys(certFile, keyFile), 'rsa-sha256');
  t.match(signed, /<xmldsig:Signature[\s\S]*<xmldsig:Reference URI="#a1"/, 'the assertion signed');
  t.ok(loaded(XML_LIBRARIES).some((url) => url.includes('xml-crypto')), 'signing loaded xml-crypto');
});
