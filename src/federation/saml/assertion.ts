// Keystone's K2K SAML Response (keystone/federation/idp.py SAMLGenerator.samlize_token) and its ECP
// form (ECPGenerator), written as Keystone 22 sends them: namespace prefixes ns0 (protocol, or the
// SOAP envelope), saml, xmldsig and xsi declared on the root, elements and attributes in pysaml2's order.

import type { SamlIdpConfig } from '../../config.ts';
import {
  ATTRNAME_FORMAT_URI,
  AUTHN_PASSWORD,
  NAMEID_FORMAT_ENTITY,
  NS,
  SCM_BEARER,
  SOAP_ACTOR_NEXT,
  STATUS_SUCCESS,
} from './namespaces.ts';
import { signAssertion } from './signer.ts';
import type { SamlSigningKeys } from './signing-keys.ts';
import { attribute as a, text as t } from './xml.ts';

/** What the assertion says about the token's user and project (names, as Keystone puts them). */
export interface AssertionClaims {
  user: string;
  userDomain: string;
  roles: string[];
  project: string;
  projectDomain: string;
  /** `JSON:{"name": …, "domain": {"name": …}}` per group of the user; none: no openstack_groups. */
  groups: string[];
}

export interface AssertionRequest {
  /** SAML_IDP_ENTITY_ID: Issuer and AuthenticatingAuthority. */
  issuer: string;
  /** The service provider's sp_url: Response Destination and SubjectConfirmationData Recipient. */
  recipient: string;
  claims: AssertionClaims;
  /** Milliseconds since the epoch: IssueInstant and AuthnInstant. */
  now: number;
  /** Seconds after `now` of NotOnOrAfter and SessionNotOnOrAfter (SAML_ASSERTION_EXPIRATION_TIME). */
  expiresIn: number;
  /** uuid4 hex, as Keystone's. */
  ids: { response: string; assertion: string; session: string };
  /** The AuthnRequest answered (a service provider's websso); Keystone's K2K assertions answer none. */
  inResponseTo?: string;
}

/** Keystone's utils.isotime(): whole seconds, "Z". */
export function isoTime(milliseconds: number): string {
  return new Date(Math.floor(milliseconds / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Keystone's utils.isotime(subsecond=True): microseconds dropped, then printed (".000000Z"). */
export function isoTimeSubsecond(milliseconds: number): string {
  return isoTime(milliseconds).replace(/Z$/, '.000000Z');
}

/** Python's json.dumps with its default separators and ensure_ascii, for one group. */
export function groupAttributeValue(name: string, domainName: string): string {
  const str = (value: string) => JSON.stringify(value).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `JSON:{"name": ${str(name)}, "domain": {"name": ${str(domainName)}}}`;
}

function attributeElement(name: string, values: string[]): string {
  const items = values.map((value) => `<saml:AttributeValue xmlns:xs="${NS.xs}" xsi:type="xs:string">${t(value)}</saml:AttributeValue>`).join('');
  return `<saml:Attribute Name="${a(name)}" NameFormat="${ATTRNAME_FORMAT_URI}">${items}</saml:Attribute>`;
}

function issuer(entityId: string): string {
  return `<saml:Issuer Format="${NAMEID_FORMAT_ENTITY}">${t(entityId)}</saml:Issuer>`;
}

function assertionElement(request: AssertionRequest): string {
  const { claims } = request;
  const instant = isoTime(request.now);
  const expires = isoTimeSubsecond(request.now + request.expiresIn * 1000);
  const attributes = [
    attributeElement('openstack_user', [claims.user]),
    attributeElement('openstack_roles', claims.roles),
    attributeElement('openstack_project', [claims.project]),
    attributeElement('openstack_project_domain', [claims.projectDomain]),
    attributeElement('openstack_user_domain', [claims.userDomain]),
    ...(claims.groups.length > 0 ? [attributeElement('openstack_groups', claims.groups)] : []),
  ].join('');
  return (
    `<saml:Assertion Version="2.0" ID="${a(request.ids.assertion)}" IssueInstant="${instant}">` +
    issuer(request.issuer) +
    `<saml:Subject><saml:NameID>${t(claims.user)}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="${SCM_BEARER}"><saml:SubjectConfirmationData${request.inResponseTo !== undefined ? ` InResponseTo="${a(request.inResponseTo)}"` : ''} NotOnOrAfter="${expires}" Recipient="${a(request.recipient)}" /></saml:SubjectConfirmation>` +
    `</saml:Subject>` +
    `<saml:AuthnStatement AuthnInstant="${instant}" SessionIndex="${a(request.ids.session)}" SessionNotOnOrAfter="${expires}">` +
    `<saml:AuthnContext><saml:AuthnContextClassRef>${AUTHN_PASSWORD}</saml:AuthnContextClassRef><saml:AuthenticatingAuthority>${t(request.issuer)}</saml:AuthenticatingAuthority></saml:AuthnContext>` +
    `</saml:AuthnStatement>` +
    `<saml:AttributeStatement>${attributes}</saml:AttributeStatement>` +
    `</saml:Assertion>`
  );
}

/** The Response element; `declarations` are the root's namespace declarations (none when nested). */
function responseElement(request: AssertionRequest, prefix: string, declarations: string): string {
  return (
    `<${prefix}:Response${declarations} ID="${a(request.ids.response)}" Version="2.0" IssueInstant="${isoTime(request.now)}" Destination="${a(request.recipient)}"${request.inResponseTo !== undefined ? ` InResponseTo="${a(request.inResponseTo)}"` : ''}>` +
    issuer(request.issuer) +
    `<${prefix}:Status><${prefix}:StatusCode Value="${STATUS_SUCCESS}" /></${prefix}:Status>` +
    assertionElement(request) +
    `</${prefix}:Response>`
  );
}

const SAML_DECLARATIONS = ` xmlns:saml="${NS.assertion}" xmlns:xmldsig="${NS.xmldsig}" xmlns:xsi="${NS.xsi}"`;

/** POST /v3/auth/OS-FEDERATION/saml2: the signed Response. */
export function signedResponse(request: AssertionRequest, keys: SamlSigningKeys, algorithm: SamlIdpConfig['signatureAlgorithm']): string {
  return signAssertion(responseElement(request, 'ns0', ` xmlns:ns0="${NS.protocol}"${SAML_DECLARATIONS}`), keys, algorithm);
}

/** POST /v3/auth/OS-FEDERATION/saml2/ecp: the same Response in a SOAP envelope with the ECP RelayState. */
export function signedEcpEnvelope(request: AssertionRequest, relayState: string, keys: SamlSigningKeys, algorithm: SamlIdpConfig['signatureAlgorithm']): string {
  const envelope =
    `<ns0:Envelope xmlns:ns0="${NS.soap}" xmlns:ns1="${NS.ecp}" xmlns:ns2="${NS.protocol}"${SAML_DECLARATIONS}>` +
    `<ns0:Header><ns1:RelayState ns0:mustUnderstand="1" ns0:actor="${SOAP_ACTOR_NEXT}">${t(relayState)}</ns1:RelayState></ns0:Header>` +
    `<ns0:Body>${responseElement(request, 'ns2', '')}</ns0:Body>` +
    `</ns0:Envelope>`;
  return signAssertion(envelope, keys, algorithm);
}
