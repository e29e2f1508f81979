// This service as a SAML 2.0 service provider, natively (what Shibboleth's mod_shib does in front of
// Keystone): a federated login of a SAML protocol (SAML_PROTOCOLS, default saml2) posts a SAML
// Response, bare (text/xml), inside an ECP SOAP envelope (application/vnd.paos+xml, what keystoneauth's
// K2K plugin sends) or as a browser form (SAMLResponse, base64). What is believed of it:
//
// - trust comes only from SAML_TRUSTED_IDP_METADATA: the signature is checked against the signing
//   certificates the metadata gives for the issuer's entity id, never against a key or certificate
//   the message carries (KeyInfo is ignored);
// - the issuer must be one of the identity provider's remote_ids (else 403, as Keystone's check);
// - the document is parsed without DTDs or entities; it must hold exactly one Assertion, the child
//   of the Response, signed itself or through the signed Response, with one Reference to it;
// - after the signature verifies, everything is read from the XML the verified Reference covers
//   (xml-crypto's getSignedReferences(), parsed again), never from a new query on the posted
//   document, so content placed beside the signed element is never read (signature wrapping);
// - the Response's Destination and the bearer SubjectConfirmationData's Recipient must be this
//   login's public URL (PUBLIC_URL based, never the request's Host) or SAML_SP_ACCEPTED_RECIPIENTS;
//   an AudienceRestriction, when present, must name SAML_SP_ENTITY_ID or one of those URLs;
// - NotBefore / NotOnOrAfter / IssueInstant within SAML_CLOCK_SKEW_SECONDS;
// - an assertion (issuer, ID) is accepted once, until it expires (replay-cache.ts).
// The assertion given to the mapping is what Shibboleth would put in Keystone's environment: each
// Attribute's Name with its values joined by ';' (a ';' in a value escaped as '\;'), and the issuer
// as Shib-Identity-Provider.

import type { SignedXml } from 'xml-crypto';
import type { SamlSpSettings } from '../../../config.ts';
import type { Clock } from '../../../support/clock.ts';
import { AuthenticationError, ForbiddenError, UnavailableError } from '../../../support/errors.ts';
import type { Assertion, AssertionRequest, AssertionVerifier } from '../../assertion.ts';
import { NS, SCM_BEARER, STATUS_SUCCESS } from '../namespaces.ts';
import { signedXmlClass } from '../xml-libraries.ts';
import { replayKey, ReplayCacheUnavailableError, type ReplayCache } from '../../replay-cache.ts';
import { children, childElements, descendants, onlyChild, parseUntrustedXml, textOf, UnsafeXmlError } from './safe-xml.ts';
import type { TrustedIdpMetadata } from './trusted-metadata.ts';

/** Keystone's text for an issuer that is not one of the identity provider's remote ids (its 403). */
export const ISSUER_NOT_ACCEPTED = 'Incoming identity provider identifier not included among the accepted identifiers.';

export const METADATA_UNAVAILABLE = 'The trusted identity-provider metadata cannot be read; retry later.';
export const REPLAY_CACHE_UNAVAILABLE = 'The assertion cannot be checked against those already used; retry later.';

/** The content types whose body is the SAML message itself. */
export const SAML_XML_TYPES = ['application/vnd.paos+xml', 'text/xml', 'application/xml', 'application/soap+xml'];
export const FORM_TYPE = 'application/x-www-form-urlencoded';

const SIGNATURE_METHODS: Record<SamlSpSettings['signatureAlgorithms'][number], { signature: string; digest: string }> = {
  'rsa-sha256': { signature: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256', digest: 'http://www.w3.org/2001/04/xmlenc#sha256' },
  'rsa-sha512': { signature: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512', digest: 'http://www.w3.org/2001/04/xmlenc#sha512' },
  'rsa-sha1': { signature: 'http://www.w3.org/2000/09/xmldsig#rsa-sha1', digest: 'http://www.w3.org/2000/09/xmldsig#sha1' },
};
const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const C14N = 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315';
const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';
/** SignedInfo canonicalization and Reference transforms accepted (no comments, no XPath/XSLT). */
const CANONICALIZATIONS = new Set([EXC_C14N, C14N]);
const TRANSFORMS = new Set([ENVELOPED, EXC_C14N, C14N]);

export interface SamlVerifierOptions {
  clock: Clock;
  metadata: TrustedIdpMetadata;
  replayCache: ReplayCache;
  log?: { warn(object: object, message: string): void };
}

/** A SAML time (xs:dateTime), in ms; fractional seconds beyond milliseconds are dropped. */
function samlTime(value: string | null, what: string): number | undefined {
  if (value === null || value === '') return undefined;
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$/.exec(value.trim());
  const time = match ? Date.parse(`${match[1]}${match[2] ? match[2].slice(0, 4) : ''}${match[3] ?? 'Z'}`) : Number.NaN;
  if (Number.isNaN(time)) throw refused(`${what} is not a time: ${value.slice(0, 64)}`);
  return time;
}

/** The generic 401, the cause kept for the audit trail. */
function refused(reason: string): AuthenticationError {
  return AuthenticationError.because({ reason: `SAML: ${reason}`, code: 401 });
}

function is(element: Element, namespace: string, localName: string): boolean {
  return element.namespaceURI === namespace && element.localName === localName;
}

/** A posted SAML message and where it was posted. */
export interface SamlMessage {
  contentType?: string | undefined;
  body?: unknown;
  /** The public URL it was posted to: what its Destination and Recipient must name. */
  endpointUrl: string;
  /** The AuthnRequest ID it must answer (websso); undefined: an unsolicited response. */
  inResponseTo?: string | undefined;
}

/** A verified SAML message. */
export interface VerifiedSamlLogin {
  /** What Shibboleth would put in Keystone's environment. */
  assertion: Assertion;
  /** The issuer, verified: the entity id of the trusted metadata whose key signed it. */
  issuer: string;
  /** When the assertion stops being valid (ms since the epoch; the earliest of its NotOnOrAfters). */
  expiresAt: number;
}

/** What the signature covers, once verified. */
interface VerifiedMessage {
  /** The signed Assertion, parsed from the verified Reference's XML. */
  assertion: Element;
  /** The signed Response, when the Response (not only the Assertion) is what was signed. */
  response?: Element;
}

export class SamlAssertionVerifier implements AssertionVerifier {
  private readonly protocols: Set<string>;
  private readonly signatureMethods: Map<string, string>;
  private readonly digestMethods: Set<string>;

  constructor(
    private readonly settings: SamlSpSettings,
    private readonly options: SamlVerifierOptions,
  ) {
    this.protocols = new Set(settings.protocols);
    this.signatureMethods = new Map(settings.signatureAlgorithms.map((name) => [SIGNATURE_METHODS[name].signature, name]));
    this.digestMethods = new Set(settings.signatureAlgorithms.map((name) => SIGNATURE_METHODS[name].digest));
    if (settings.protocols.length > 0 && settings.trustedIdpMetadata.length === 0) {
      options.log?.warn({ protocols: settings.protocols }, 'SAML_TRUSTED_IDP_METADATA is not set: every SAML federated login is refused');
    }
  }

  handles(protocolId: string): boolean {
    return this.protocols.has(protocolId);
  }

  async verify(request: AssertionRequest): Promise<Assertion | undefined> {
    if (!this.handles(request.protocol.id)) return undefined;
    if (!request.endpointUrl) throw refused('the login URL is unknown');
    const provider = request.identityProvider;
    const message = { contentType: request.contentType, body: request.body, endpointUrl: request.endpointUrl, inResponseTo: request.inResponseTo };
    const verified = await this.verifyMessage(message, (claimedIssuer) => {
      if (provider.remoteIds.length === 0) throw refused(`identity provider ${provider.id} has no remote_ids: a SAML assertion cannot be attributed to it`);
      if (!provider.remoteIds.includes(claimedIssuer)) throw new ForbiddenError(ISSUER_NOT_ACCEPTED);
    });
    return verified.assertion;
  }

  /**
   * A posted SAML message verified as the module's header says, addressed to `endpointUrl`;
   * `acceptIssuer` sees the issuer as claimed before anything else is done with it (throws to
   * refuse). Returns what Shibboleth would put in the environment, the issuer, and when the
   * assertion stops being valid (ms).
   */
  async verifyMessage(message: SamlMessage, acceptIssuer: (claimedIssuer: string) => void): Promise<VerifiedSamlLogin> {
    const xml = messageOf(message);
    let document: Document;
    try {
      document = parseUntrustedXml(xml);
    } catch (error) {
      if (error instanceof UnsafeXmlError) throw refused(error.message);
      throw error;
    }
    const response = responseOf(document);
    const assertion = this.theAssertion(document, response);

    // The issuer as claimed (not yet verified) picks the metadata whose keys must have signed it.
    const claimedIssuer = issuerOf(assertion);
    const responseIssuer = onlyChild(response, NS.assertion, 'Issuer');
    if (responseIssuer && textOf(responseIssuer) !== claimedIssuer) throw refused('the Response and the Assertion name different issuers');
    acceptIssuer(claimedIssuer);
    const { entity, incomplete } = await this.options.metadata.entity(claimedIssuer);
    if (!entity) {
      if (incomplete) throw new UnavailableError(METADATA_UNAVAILABLE, 5);
      throw refused(`the issuer ${claimedIssuer} is in no trusted metadata (SAML_TRUSTED_IDP_METADATA)`);
    }

    const verified = this.verifySignature(xml, document, response, assertion, entity.certificates);
    const signed = verified.assertion;
    // Everything from here on is read from the signed XML.
    if (issuerOf(signed) !== entity.entityId) throw refused('the signed issuer is not the one whose key verified the signature');
    const recipients = this.recipients(message.endpointUrl);
    const now = this.options.clock.now();
    const skew = this.settings.clockSkewSeconds * 1000;
    this.checkResponse(verified.response ?? response, recipients, now, skew, message.inResponseTo);
    const expiresAt = this.checkAssertion(signed, recipients, now, skew, message.inResponseTo);

    const id = signed.getAttribute('ID') as string;
    if (!(await claimOnce(this.options.replayCache, replayKey(entity.entityId, id), expiresAt + skew, this.options.log))) {
      throw refused(`the assertion ${id} of ${entity.entityId} was already used`);
    }
    return { assertion: assertionOf(signed, entity.entityId), issuer: entity.entityId, expiresAt };
  }

  // ---- structure -------------------------------------------------------------------------------

  /** Exactly one Assertion in the whole document, a child of the Response; none encrypted. */
  private theAssertion(document: Document, response: Element): Element {
    if (descendants(document, NS.assertion, 'EncryptedAssertion').length > 0) throw refused('an encrypted assertion (not supported)');
    const all = descendants(document, NS.assertion, 'Assertion');
    if (all.length !== 1) throw refused(`the message holds ${all.length} assertions (exactly one is accepted)`);
    const assertion = all[0] as Element;
    if (assertion.parentNode !== (response as unknown as Node)) throw refused('the Assertion is not a child of the Response');
    return assertion;
  }

  // ---- the signature ---------------------------------------------------------------------------

  /**
   * The Response's signature when it has one, else the Assertion's; verified with the metadata's
   * certificates only. Returns the signed element(s) parsed from the verified Reference's XML.
   */
  private verifySignature(xml: string, document: Document, response: Element, assertion: Element, certificates: string[]): VerifiedMessage {
    let responseSignature: Element | undefined;
    let assertionSignature: Element | undefined;
    try {
      responseSignature = onlyChild(response, NS.xmldsig, 'Signature');
      assertionSignature = onlyChild(assertion, NS.xmldsig, 'Signature');
    } catch (error) {
      throw refused((error as Error).message);
    }
    const expected = (responseSignature ? 1 : 0) + (assertionSignature ? 1 : 0);
    if (descendants(document, NS.xmldsig, 'Signature').length !== expected) throw refused('a signature is somewhere other than on the Response or the Assertion');
    const target = responseSignature ? response : assertionSignature ? assertion : undefined;
    const signature = responseSignature ?? assertionSignature;
    if (!target || !signature) throw refused('neither the Response nor the Assertion is signed');
    const id = target.getAttribute('ID');
    if (!id) throw refused(`the signed ${target.localName} has no ID`);

    let canonical: string | undefined;
    let lastError = 'no certificate';
    for (const certificate of certificates) {
      try {
        canonical = this.checkWith(xml, signature, id, certificate);
        break;
      } catch (error) {
        lastError = (error as Error).message;
      }
    }
    if (canonical === undefined) throw refused(`the signature does not verify with the trusted metadata's certificates (${lastError.slice(0, 200)})`);

    let signedRoot: Element;
    try {
      signedRoot = parseUntrustedXml(canonical).documentElement as Element;
    } catch (error) {
      throw refused(`the signed XML does not parse: ${(error as Error).message}`);
    }
    if (!is(signedRoot, target.namespaceURI as string, target.localName) || signedRoot.getAttribute('ID') !== id) {
      throw refused('the verified Reference is not the signed element');
    }
    if (target === assertion) return { assertion: signedRoot };
    const signedAssertions = descendants(signedRoot, NS.assertion, 'Assertion');
    const direct = children(signedRoot, NS.assertion, 'Assertion');
    if (signedAssertions.length !== 1 || direct.length !== 1) throw refused('the signed Response does not hold exactly one Assertion');
    return { assertion: direct[0] as Element, response: signedRoot };
  }

  /** One certificate's verdict: the canonical XML of the one Reference, or a thrown reason. */
  private checkWith(xml: string, signatureNode: Element, id: string, certificate: string): string {
    // getCertFromKeyInfo: never a key from the message; only the metadata's certificate.
    const signed = new (signedXmlClass())({ publicCert: certificate, getCertFromKeyInfo: () => null });
    signed.loadSignature(signatureNode as unknown as Node);
    this.checkSignedInfo(signed, id);
    if (signed.checkSignature(xml) !== true) throw new Error('a reference does not verify');
    this.checkSignedInfo(signed, id);
    const references = signed.getSignedReferences();
    if (references.length !== 1) throw new Error(`${references.length} signed references`);
    return references[0] as string;
  }

  /** Algorithms accepted, exactly one Reference, to the signed element's ID, with plain transforms. */
  private checkSignedInfo(signed: SignedXml, id: string): void {
    if (!this.signatureMethods.has(signed.signatureAlgorithm ?? '')) throw new Error(`signature algorithm ${signed.signatureAlgorithm} is not accepted (SAML_SIGNATURE_ALGORITHMS)`);
    if (!CANONICALIZATIONS.has(signed.canonicalizationAlgorithm ?? '')) throw new Error(`canonicalization ${signed.canonicalizationAlgorithm} is not accepted`);
    const references = signed.getReferences();
    if (references.length !== 1) throw new Error(`the signature has ${references.length} references (one is accepted)`);
    const reference = references[0]!;
    if (reference.uri !== `#${id}`) throw new Error(`the reference ${reference.uri} is not the signed element #${id}`);
    if (!this.digestMethods.has(reference.digestAlgorithm)) throw new Error(`digest ${reference.digestAlgorithm} is not accepted`);
    for (const transform of reference.transforms) if (!TRANSFORMS.has(transform)) throw new Error(`transform ${transform} is not accepted`);
    if (!reference.transforms.includes(ENVELOPED)) throw new Error('the reference is not an enveloped signature');
  }

  // ---- the conditions --------------------------------------------------------------------------

  private recipients(endpointUrl: string): Set<string> {
    return new Set([endpointUrl, ...this.settings.acceptedRecipients]);
  }

  private checkResponse(response: Element, recipients: Set<string>, now: number, skew: number, inResponseTo: string | undefined): void {
    if (response.getAttribute('Version') !== '2.0') throw refused('the Response is not SAML 2.0');
    const answered = response.hasAttribute('InResponseTo') ? response.getAttribute('InResponseTo') : null;
    if (inResponseTo !== undefined && answered !== null && answered !== inResponseTo) throw refused(`the Response answers another request (InResponseTo ${answered.slice(0, 100)})`);
    const destination = response.getAttribute('Destination');
    if (destination !== null && !recipients.has(destination)) throw refused(`the Response's Destination ${destination.slice(0, 200)} is not this login's URL`);
    const status = onlyChild(response, NS.protocol, 'Status');
    const code = status ? onlyChild(status, NS.protocol, 'StatusCode')?.getAttribute('Value') : undefined;
    if (code !== STATUS_SUCCESS) throw refused(`the Response's status is ${code ?? 'missing'}`);
    const issued = samlTime(response.getAttribute('IssueInstant'), 'the Response IssueInstant');
    if (issued !== undefined && issued > now + skew) throw refused('the Response is issued in the future');
  }

  /** The assertion's checks; returns when it stops being valid (ms). */
  private checkAssertion(assertion: Element, recipients: Set<string>, now: number, skew: number, inResponseTo: string | undefined): number {
    if (assertion.getAttribute('Version') !== '2.0') throw refused('the Assertion is not SAML 2.0');
    if (!assertion.getAttribute('ID')) throw refused('the Assertion has no ID');
    const issued = samlTime(assertion.getAttribute('IssueInstant'), 'the Assertion IssueInstant');
    if (issued === undefined) throw refused('the Assertion has no IssueInstant');
    if (issued > now + skew) throw refused('the Assertion is issued in the future');

    let expiresAt = Number.POSITIVE_INFINITY;
    const conditions = single(assertion, NS.assertion, 'Conditions');
    if (conditions) {
      const notBefore = samlTime(conditions.getAttribute('NotBefore'), 'Conditions NotBefore');
      const notOnOrAfter = samlTime(conditions.getAttribute('NotOnOrAfter'), 'Conditions NotOnOrAfter');
      if (notBefore !== undefined && notBefore > now + skew) throw refused('the assertion is not yet valid (Conditions NotBefore)');
      if (notOnOrAfter !== undefined) {
        if (notOnOrAfter <= now - skew) throw refused('the assertion has expired (Conditions NotOnOrAfter)');
        expiresAt = notOnOrAfter;
      }
      const audiences = new Set([...recipients, ...(this.settings.entityId ? [this.settings.entityId] : [])]);
      for (const restriction of children(conditions, NS.assertion, 'AudienceRestriction')) {
        const named = children(restriction, NS.assertion, 'Audience').map((audience) => textOf(audience));
        if (!named.some((audience) => audiences.has(audience))) throw refused(`the assertion is for another audience (${named.join(', ').slice(0, 200)})`);
      }
    }

    const subject = single(assertion, NS.assertion, 'Subject');
    if (!subject) throw refused('the Assertion has no Subject');
    let confirmed: number | undefined;
    const reasons: string[] = [];
    for (const confirmation of children(subject, NS.assertion, 'SubjectConfirmation')) {
      if (confirmation.getAttribute('Method') !== SCM_BEARER) continue;
      const data = single(confirmation, NS.assertion, 'SubjectConfirmationData');
      const recipient = data?.getAttribute('Recipient') ?? null;
      const notOnOrAfter = samlTime(data?.getAttribute('NotOnOrAfter') ?? null, 'SubjectConfirmationData NotOnOrAfter');
      const notBefore = samlTime(data?.getAttribute('NotBefore') ?? null, 'SubjectConfirmationData NotBefore');
      if (recipient === null || !recipients.has(recipient)) reasons.push(`the bearer confirmation's Recipient ${String(recipient).slice(0, 200)} is not this login's URL`);
      else if (notOnOrAfter === undefined) reasons.push('the bearer confirmation has no NotOnOrAfter');
      else if (notOnOrAfter <= now - skew) reasons.push('the assertion has expired (SubjectConfirmationData NotOnOrAfter)');
      else if (notBefore !== undefined && notBefore > now + skew) reasons.push('the bearer confirmation is not yet valid');
      // SAML profiles §4.1.4.2: a response to an AuthnRequest names it in the bearer confirmation.
      else if (inResponseTo !== undefined && data?.getAttribute('InResponseTo') !== inResponseTo) {
        reasons.push(`the bearer confirmation does not answer this login's request (InResponseTo ${String(data?.getAttribute('InResponseTo') || 'missing').slice(0, 100)})`);
      } else {
        confirmed = notOnOrAfter;
        break;
      }
    }
    if (confirmed === undefined) throw refused(reasons[0] ?? 'the Assertion has no bearer SubjectConfirmation');
    return Math.min(expiresAt, confirmed);
  }
}

/** Claims a single-use key; the cache out of reach: 503 (a replay could not be told from a first use). */
export async function claimOnce(cache: ReplayCache, key: string, expiresAt: number, log?: { warn(object: object, message: string): void }): Promise<boolean> {
  try {
    return await cache.claim(key, expiresAt);
  } catch (error) {
    if (error instanceof ReplayCacheUnavailableError) {
      log?.warn({ cause: error.message }, 'SAML: the replay cache cannot be reached; SAML logins are refused until it can');
      throw new UnavailableError(REPLAY_CACHE_UNAVAILABLE, 5);
    }
    throw error;
  }
}

/** At most one such child (several: refused). */
function single(parent: Element, namespace: string, localName: string): Element | undefined {
  try {
    return onlyChild(parent, namespace, localName);
  } catch (error) {
    throw refused((error as Error).message);
  }
}

function issuerOf(assertion: Element): string {
  const issuer = textOf(single(assertion, NS.assertion, 'Issuer'));
  if (!issuer) throw refused('the Assertion names no Issuer');
  const format = single(assertion, NS.assertion, 'Issuer')?.getAttribute('Format');
  if (format && format !== 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity') throw refused(`the Issuer's format ${format} is not an entity id`);
  return issuer;
}

/** The Response of a bare message, or of the Body of an ECP / SOAP envelope (its only child). */
function responseOf(document: Document): Element {
  const root = document.documentElement as Element;
  if (is(root, NS.protocol, 'Response')) return root;
  if (is(root, NS.soap, 'Envelope')) {
    const bodies = children(root, NS.soap, 'Body');
    if (bodies.length !== 1) throw refused('the SOAP envelope has no single Body');
    const content = childElements(bodies[0] as Element);
    if (content.length !== 1 || !is(content[0] as Element, NS.protocol, 'Response')) throw refused('the SOAP Body does not hold one SAML Response');
    return content[0] as Element;
  }
  throw refused(`the message is a ${root.localName}, not a SAML Response or an ECP envelope`);
}

/** The posted XML: the body of an XML type, or the form's SAMLResponse (base64). */
function messageOf(message: SamlMessage): string {
  const type = (message.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const body = message.body;
  if (!Buffer.isBuffer(body) || body.length === 0) throw refused('no SAML response was posted');
  if (SAML_XML_TYPES.includes(type)) return decodeUtf8(body);
  if (type === FORM_TYPE) {
    const form = new URLSearchParams(body.toString('latin1'));
    const values = form.getAll('SAMLResponse');
    if (values.length !== 1) throw refused('the form does not carry one SAMLResponse');
    const encoded = (values[0] as string).replace(/[\r\n\t ]/g, '');
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0) throw refused('SAMLResponse is not base64');
    return decodeUtf8(Buffer.from(encoded, 'base64'));
  }
  throw refused(`a SAML login is posted as ${SAML_XML_TYPES.join(', ')} or a form (${FORM_TYPE}), not ${type || 'no content type'}`);
}

function decodeUtf8(bytes: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw refused('the message is not UTF-8');
  }
}

/** What Shibboleth puts in Keystone's environment for this (signed) assertion. */
function assertionOf(assertion: Element, issuer: string): Assertion {
  const values = new Map<string, string[]>();
  for (const statement of children(assertion, NS.assertion, 'AttributeStatement')) {
    for (const attribute of children(statement, NS.assertion, 'Attribute')) {
      const name = attribute.getAttribute('Name') ?? '';
      // Names Shibboleth sets itself (and REMOTE_USER) cannot come from an attribute.
      if (!name || /^shib-/i.test(name) || name === 'REMOTE_USER') continue;
      const list = values.get(name) ?? [];
      for (const value of children(attribute, NS.assertion, 'AttributeValue')) {
        const text = value.textContent ?? '';
        if (text !== '') list.push(text.replace(/;/g, '\\;'));
      }
      values.set(name, list);
    }
  }
  const result: Assertion = {};
  for (const [name, list] of values) if (list.length > 0) result[name] = list.join(';');
  const authn = children(assertion, NS.assertion, 'AuthnStatement')[0];
  if (authn) {
    const instant = authn.getAttribute('AuthnInstant');
    if (instant) result['Shib-Authentication-Instant'] = instant;
    const context = children(authn, NS.assertion, 'AuthnContext')[0];
    const classRef = context ? textOf(children(context, NS.assertion, 'AuthnContextClassRef')[0]) : '';
    if (classRef) result['Shib-AuthnContext-Class'] = classRef;
  }
  result['Shib-Identity-Provider'] = issuer;
  return result;
}
