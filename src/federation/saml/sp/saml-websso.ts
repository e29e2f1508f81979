// Keystone's websso for SAML 2.0 protocols, natively (what Shibboleth's mod_shib does in front of
// Keystone): the browser is sent to the identity provider's SingleSignOnService with the
// HTTP-Redirect binding, carrying an AuthnRequest (DEFLATE, base64; signed per the binding with
// SAML_KEYFILE when configured), and comes back with the HTTP-POST binding to the assertion consumer
// service (…/websso/{protocol}/acs) with a SAMLResponse and the RelayState. The login state is the
// OIDC websso's (websso-state.ts): sealed with AES-GCM in a cookie named after the state id, the
// RelayState being that id (43 characters: the binding allows 80 bytes), single-use (ReplayCache);
// its `nonce` is the AuthnRequest's ID, which the response must answer (InResponseTo). The response
// itself is verified by the SAML verifier (saml-verifier.ts), addressed to the ACS URL.

import { randomBytes, sign, timingSafeEqual } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import type { SamlSpSettings, WebSsoSettings } from '../../../config.ts';
import type { Clock } from '../../../support/clock.ts';
import { AuthenticationError, ForbiddenError, UnavailableError, ValidationError } from '../../../support/errors.ts';
import type { FederatedLogin } from '../../federated-login.ts';
import type { FederationService, IdentityProvider, Protocol } from '../../federation-service.ts';
import { ORIGIN_MISSING, stateCookieName, unquotePlus, type WebSsoCompletion, type WebSsoStart } from '../../oidc/websso.ts';
import type { WebSsoState, WebSsoStateSealer } from '../../oidc/websso-state.ts';
import type { ReplayCache } from '../../replay-cache.ts';
import { NS } from '../namespaces.ts';
import type { SamlSigningKeys } from '../signing-keys.ts';
import { attribute as a, text as t } from '../xml.ts';
import { FORM_TYPE, METADATA_UNAVAILABLE, type SamlAssertionVerifier } from './saml-verifier.ts';
import type { TrustedEntity, TrustedIdpMetadata } from './trusted-metadata.ts';

export const BINDING_HTTP_REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
export const BINDING_HTTP_POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';
/** The SigAlg of a signed HTTP-Redirect message (RSA-SHA256). */
export const REDIRECT_SIG_ALG = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';

const RELAY_STATE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export interface SamlWebSsoDependencies {
  websso: WebSsoSettings;
  samlSp: SamlSpSettings;
  metadata: TrustedIdpMetadata;
  verifier: SamlAssertionVerifier;
  federation: FederationService;
  federatedLogin: FederatedLogin;
  sealer: WebSsoStateSealer;
  replays: ReplayCache;
  clock: Clock;
  /** SAML_CERTFILE / SAML_KEYFILE: AuthnRequests are signed with them when configured. */
  keys?: SamlSigningKeys | undefined;
}

/** What the assertion consumer service receives: the form's fields and the browser's cookies. */
export interface SamlWebSsoCallback {
  /** The raw form body (application/x-www-form-urlencoded), as the verifier reads it. */
  body: Buffer;
  cookies: Readonly<Record<string, string>>;
  /** This protocol's ACS URL (PUBLIC_URL based): where the response must be addressed. */
  acsUrl: string;
}

export class SamlWebSso {
  private readonly protocols: Set<string>;

  constructor(private readonly deps: SamlWebSsoDependencies) {
    this.protocols = new Set(deps.samlSp.protocols);
  }

  handles(protocolId: string): boolean {
    return this.protocols.has(protocolId);
  }

  /** As the OIDC websso (Keystone's _get_sso_origin_host): missing → 400, untrusted → the generic 401. */
  trustedOrigin(origin: unknown): string {
    if (typeof origin !== 'string' || origin === '') throw new ValidationError(ORIGIN_MISSING);
    const host = unquotePlus(origin);
    if (!this.deps.websso.trustedDashboards.includes(host)) throw AuthenticationError.because({ reason: `${host} is not a trusted dashboard host`, code: 401 });
    return host;
  }

  /** The first leg: the origin, the provider, then the redirect to its SingleSignOnService with an AuthnRequest. */
  async begin(request: { idpId?: string; protocolId: string; origin: unknown; acsUrl: string }): Promise<WebSsoStart> {
    const origin = this.trustedOrigin(request.origin);
    const { identityProvider, protocol } =
      request.idpId === undefined ? await this.onlyProviderOf(request.protocolId) : await this.deps.federatedLogin.target(request.idpId, request.protocolId);
    if (!this.handles(protocol.id)) throw refused(`protocol ${protocol.id} is not a SAML protocol (SAML_PROTOCOLS)`);
    const spEntityId = this.deps.samlSp.entityId;
    if (!spEntityId) throw refused('SAML_SP_ENTITY_ID is not set: an AuthnRequest needs this service provider\'s entity id as its Issuer');
    const { entity, location } = await this.singleSignOn(identityProvider);
    if (entity.wantAuthnRequestsSigned && !this.deps.keys) throw refused(`${entity.entityId} wants signed AuthnRequests and no SAML_KEYFILE is configured`);

    const now = this.deps.clock.now();
    const state: WebSsoState = {
      sid: randomBytes(32).toString('base64url'),
      // The AuthnRequest's ID (an xs:ID: starts with a letter or '_'): the response's InResponseTo.
      nonce: `_${randomBytes(20).toString('hex')}`,
      verifier: '',
      idpId: identityProvider.id,
      protocolId: protocol.id,
      issuer: entity.entityId,
      origin,
      redirectUri: request.acsUrl,
      expiresAt: now + this.deps.websso.stateTtlSeconds * 1000,
    };
    const xml = authnRequest({ id: state.nonce, now, destination: location, acsUrl: request.acsUrl, issuer: spEntityId });
    return {
      location: redirectLocation(location, xml, state.sid, this.deps.keys),
      cookie: { name: stateCookieName(state.sid), value: this.deps.sealer.seal(state), maxAgeSeconds: this.deps.websso.stateTtlSeconds },
    };
  }

  /**
   * The assertion consumer service: the RelayState must come with its own cookie (this browser's),
   * open, be unexpired, of this protocol and this ACS, unused; then the response verified (signed by
   * the trusted metadata's keys, addressed to this ACS URL, answering this login's AuthnRequest,
   * issued by the provider the browser was sent to).
   */
  async complete(protocolId: string, callback: SamlWebSsoCallback): Promise<WebSsoCompletion> {
    const relayState = relayStateOf(callback.body);
    if (relayState === undefined) throw refused('the response carries no RelayState, or not one this service made');
    const cookieName = stateCookieName(relayState);
    const sealed = callback.cookies[cookieName];
    if (sealed === undefined) throw refused('no login state cookie for this RelayState (another browser, an expired or already used state)');
    const state = this.deps.sealer.open(sealed);
    if (!state) throw refused('the login state cookie does not open (forged or changed)');
    if (!sameText(state.sid, relayState)) throw refused("the RelayState is not the one of the login state cookie");
    if (state.expiresAt <= this.deps.clock.now()) throw refused('the login state has expired (WEBSSO_STATE_TTL_SECONDS)');
    if (state.protocolId !== protocolId || !this.handles(protocolId)) throw refused(`the login state is for protocol ${state.protocolId}, not ${protocolId}`);
    if (state.redirectUri !== callback.acsUrl) throw refused(`the login state is for the assertion consumer service ${state.redirectUri}, not ${callback.acsUrl}`);
    if (!(await this.deps.replays.claim(state.sid, state.expiresAt))) throw refused('the login state was already used (a replayed response)');

    // The provider may have been disabled, or its remote ids changed, during the login.
    const { identityProvider, protocol } = await this.deps.federatedLogin.target(state.idpId, state.protocolId);
    if (!identityProvider.remoteIds.includes(state.issuer)) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    const assertion = await this.deps.verifier.verify({
      identityProvider,
      protocol,
      headers: {},
      contentType: FORM_TYPE,
      body: callback.body,
      endpointUrl: callback.acsUrl,
      inResponseTo: state.nonce,
    });
    if (!assertion) throw refused(`protocol ${protocol.id} is not verified as SAML`);
    if (assertion['Shib-Identity-Provider'] !== state.issuer) throw refused(`the response is issued by ${assertion['Shib-Identity-Provider']}, not ${state.issuer} to which the browser was sent`);
    return { identityProvider, protocol, assertion, origin: state.origin, cookieName };
  }

  /** The ACS got something other than a form. */
  notAForm(): AuthenticationError {
    return refused(`the identity provider's response is posted as a form (${FORM_TYPE}) with SAMLResponse and RelayState`);
  }

  /** The websso/{protocol} URL names no provider: the only enabled one with this protocol. */
  private async onlyProviderOf(protocolId: string): Promise<{ identityProvider: IdentityProvider; protocol: Protocol }> {
    const candidates: string[] = [];
    for (const identityProvider of await this.deps.federation.listIdentityProviders({ enabled: true })) {
      if (!identityProvider.enabled || identityProvider.remoteIds.length === 0) continue;
      if ((await this.deps.federation.listProtocols(identityProvider.id)).some((entry) => entry.id === protocolId)) candidates.push(identityProvider.id);
    }
    if (candidates.length === 1) return this.deps.federatedLogin.target(candidates[0]!, protocolId);
    throw refused(
      candidates.length === 0
        ? `Missing entity ID from environment: no enabled identity provider with remote ids has protocol ${protocolId}`
        : `several identity providers have protocol ${protocolId} (${candidates.join(', ')}): use /v3/auth/OS-FEDERATION/identity_providers/{idp_id}/protocols/${protocolId}/websso`,
    );
  }

  /** The provider's one remote id that trusted metadata gives an HTTP-Redirect SingleSignOnService. */
  private async singleSignOn(identityProvider: IdentityProvider): Promise<{ entity: TrustedEntity; location: string }> {
    const found: Array<{ entity: TrustedEntity; location: string }> = [];
    let incomplete = false;
    for (const remoteId of identityProvider.remoteIds) {
      const answer = await this.deps.metadata.entity(remoteId);
      if (answer.incomplete) incomplete = true;
      const service = answer.entity?.singleSignOnServices.find((entry) => entry.binding === BINDING_HTTP_REDIRECT && /^https?:\/\//i.test(entry.location));
      if (answer.entity && service) found.push({ entity: answer.entity, location: service.location });
    }
    if (found.length === 1) return found[0]!;
    if (found.length === 0 && incomplete) throw new UnavailableError(METADATA_UNAVAILABLE, 5);
    throw refused(
      found.length === 0
        ? `no remote id of identity provider ${identityProvider.id} has trusted metadata (SAML_TRUSTED_IDP_METADATA) with an HTTP-Redirect SingleSignOnService`
        : `several remote ids of identity provider ${identityProvider.id} have an HTTP-Redirect SingleSignOnService: websso cannot tell which to send the browser to`,
    );
  }
}

/** The AuthnRequest (SAML core §3.4.1), the response wanted with the HTTP-POST binding at `acsUrl`. */
export function authnRequest(request: { id: string; now: number; destination: string; acsUrl: string; issuer: string }): string {
  const instant = new Date(Math.floor(request.now / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return (
    `<samlp:AuthnRequest xmlns:samlp="${NS.protocol}" xmlns:saml="${NS.assertion}" ID="${a(request.id)}" Version="2.0" IssueInstant="${instant}"` +
    ` Destination="${a(request.destination)}" AssertionConsumerServiceURL="${a(request.acsUrl)}" ProtocolBinding="${BINDING_HTTP_POST}">` +
    `<saml:Issuer>${t(request.issuer)}</saml:Issuer>` +
    `<samlp:NameIDPolicy AllowCreate="true"/>` +
    `</samlp:AuthnRequest>`
  );
}

/**
 * The HTTP-Redirect binding (SAML bindings §3.4.4): SAMLRequest = base64(DEFLATE(xml)), RelayState,
 * and when signed SigAlg and Signature over `SAMLRequest=…&RelayState=…&SigAlg=…` as sent (URL-encoded).
 */
export function redirectLocation(endpoint: string, xml: string, relayState: string, keys?: SamlSigningKeys): string {
  let query = `SAMLRequest=${encodeURIComponent(deflateRawSync(Buffer.from(xml, 'utf8')).toString('base64'))}&RelayState=${encodeURIComponent(relayState)}`;
  if (keys) {
    query += `&SigAlg=${encodeURIComponent(REDIRECT_SIG_ALG)}`;
    const signature = sign('sha256', Buffer.from(query, 'utf8'), keys.privateKeyPem).toString('base64');
    query += `&Signature=${encodeURIComponent(signature)}`;
  }
  return `${endpoint}${endpoint.includes('?') ? '&' : '?'}${query}`;
}

/** The form's one RelayState, when it is a state id this service makes. */
function relayStateOf(body: Buffer): string | undefined {
  const values = new URLSearchParams(body.toString('latin1')).getAll('RelayState');
  return values.length === 1 && RELAY_STATE_PATTERN.test(values[0]!) ? values[0] : undefined;
}

/** The state cookie of the RelayState of a posted form, to clear it after a failure. */
export function stateCookieNameOfForm(body: unknown): string | undefined {
  if (!Buffer.isBuffer(body)) return undefined;
  const relayState = relayStateOf(body);
  return relayState === undefined ? undefined : stateCookieName(relayState);
}

function refused(reason: string): AuthenticationError {
  return AuthenticationError.because({ reason: `SAML websso: ${reason}`, code: 401 });
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
