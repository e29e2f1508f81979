// The XML libraries (xml-crypto, and with it xmldom and xpath) are loaded by the first SAML document
// parsed, signed or verified, not at start: a worker that never handles SAML does not hold their
// code (issue 21, item 6: memory per worker). They are CommonJS packages, required synchronously
// (node caches them), so the callers stay synchronous.

import { createRequire } from 'node:module';

type XmlCrypto = typeof import('xml-crypto');
type Xmldom = typeof import('@xmldom/xmldom');

const requireFromHere = createRequire(import.meta.url);

/** xml-crypto's SignedXml (XML-DSig signing and verification). */
export function signedXmlClass(): XmlCrypto['SignedXml'] {
  return (requireFromHere('xml-crypto') as XmlCrypto).SignedXml;
}

/** xmldom's DOMParser. */
export function domParserClass(): Xmldom['DOMParser'] {
  return (requireFromHere('@xmldom/xmldom') as Xmldom).DOMParser;
}
