import type { IdentityProvider, Protocol } from './federation-service.ts';

/**
 * A verified federated assertion: attribute name → value, named as Keystone's mapped plugin sees
 * them (the WSGI environ keys a web-server module would set, e.g. `HTTP_OIDC_ISS`, `OIDC-iss`;
 * multi-valued attributes joined with `;`). Only a verifier builds one, from what it verified
 * itself (a signed token, an introspection answer): never from request headers a client could set.
 */
export type Assertion = Record<string, string>;

/** What a verifier sees of a federated login request. */
export interface AssertionRequest {
  identityProvider: IdentityProvider;
  protocol: Protocol;
  /** The request's headers, names lower-cased (Authorization: Bearer … for OIDC). */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The request's Content-Type (lower-cased header value) and raw body, for a protocol that posts its assertion (SAML). */
  contentType?: string;
  body?: unknown;
  /**
   * This login's public URL (PUBLIC_URL based, never the request's Host): what a SAML assertion's
   * Destination and Recipient must name.
   */
  endpointUrl?: string;
  /**
   * The ID of the AuthnRequest this login answers (SAML websso): the bearer confirmation's
   * InResponseTo must be it, and the Response's when it names one. Undefined: an unsolicited login.
   */
  inResponseTo?: string;
  /**
   * The request's cookies, given only by the login URL: the one place a SAML ECP session
   * (ecp-session.ts) is a login, as Shibboleth protects only the login URL.
   */
  cookies?: Readonly<Record<string, string>>;
}

/**
 * Turns a federated login request into a verified assertion. One per kind of protocol (OIDC now;
 * SAML later). Answers undefined when this verifier does not handle the protocol; throws the
 * catalogue's AuthenticationError (401) when the request carries nothing it can verify, and
 * ForbiddenError (403) when what it verified belongs to another provider (an issuer that is not
 * one of the provider's remote ids), as Keystone does.
 */
export interface AssertionVerifier {
  verify(request: AssertionRequest): Promise<Assertion | undefined>;
}
