// The Assertion's enveloped XML-DSig signature (xml-crypto): exclusive c14n, RSA-SHA256 (default)
// or RSA-SHA1 (Keystone 22's xmlsec1 template), the signing certificate in KeyInfo. Placed after the
// Assertion's Issuer, as xmlsec1 fills Keystone's template, and referenced by the Assertion's ID.

import type { SamlIdpConfig } from '../../config.ts';
import { NS } from './namespaces.ts';
import type { SamlSigningKeys } from './signing-keys.ts';
import { signedXmlClass } from './xml-libraries.ts';

const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';

export const SIGNATURE_ALGORITHMS: Record<SamlIdpConfig['signatureAlgorithm'], { signature: string; digest: string }> = {
  'rsa-sha256': { signature: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256', digest: 'http://www.w3.org/2001/04/xmlenc#sha256' },
  'rsa-sha1': { signature: 'http://www.w3.org/2000/09/xmldsig#rsa-sha1', digest: 'http://www.w3.org/2000/09/xmldsig#sha1' },
};

const ASSERTION = `//*[local-name()='Assertion' and namespace-uri()='${NS.assertion}']`;
const ASSERTION_ISSUER = `${ASSERTION}/*[local-name()='Issuer' and namespace-uri()='${NS.assertion}']`;

/**
 * Signs the one Assertion of `document` (a Response, or an ECP envelope holding one) whose root
 * already declares the `xmldsig` prefix; returns the document with the Signature in place.
 */
export function signAssertion(document: string, keys: SamlSigningKeys, algorithm: SamlIdpConfig['signatureAlgorithm']): string {
  const { signature, digest } = SIGNATURE_ALGORITHMS[algorithm];
  const SignedXml = signedXmlClass();
  const signer = new SignedXml({
    privateKey: keys.privateKeyPem,
    signatureAlgorithm: signature,
    canonicalizationAlgorithm: EXC_C14N,
    getKeyInfoContent: ({ prefix } = {}) => {
      const p = prefix ? `${prefix}:` : '';
      return `<${p}X509Data><${p}X509Certificate>${keys.certificateBase64}</${p}X509Certificate></${p}X509Data>`;
    },
  });
  signer.addReference({ xpath: ASSERTION, transforms: [ENVELOPED, EXC_C14N], digestAlgorithm: digest });
  signer.computeSignature(document, {
    prefix: 'xmldsig',
    existingPrefixes: { xmldsig: NS.xmldsig },
    location: { reference: ASSERTION_ISSUER, action: 'after' },
  });
  return signer.getSignedXml();
}
