// Shibboleth's ECP assertion consumer, natively. Keystone's K2K guide registers a service provider
// with sp_url https://<sp>/Shibboleth.sso/SAML2/ECP: mod_shib verifies the posted ECP response there,
// answers a redirect with a session cookie, and the client (keystoneauth's K2K plugin, tempest's
// federation scenario) then calls the login URL, which Shibboleth protects, with that cookie. Here:
//
// - POST /Shibboleth.sso/SAML2/ECP verifies the response as any SAML login (saml-verifier.ts; trust
//   is SAML_TRUSTED_IDP_METADATA, the Destination/Recipient must be this URL) and answers 302 with a
//   session: what Shibboleth would put in the environment, its issuer and an expiry, sealed with
//   AES-GCM (the websso key, its own purpose) in a cookie limited to the federation login paths;
// - the login URL (GET, or POST without a body) with that cookie is a login with that assertion: the
//   issuer must be one of the URL's identity provider's remote ids (else 403, and the session stays
//   usable), and the session is used once, claimed before the mapping runs (Shibboleth's session
//   could be reused until it expires: one login per assertion here), within the assertion's validity
//   and at most WEBSSO_STATE_TTL_SECONDS.
// No provider is named at the consumer, as with Shibboleth: the provider and its mapping are the
// login URL's.

import { randomBytes } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Clock } from '../../../support/clock.ts';
import { AuthenticationError, ForbiddenError } from '../../../support/errors.ts';
import type { Assertion, AssertionRequest, AssertionVerifier } from '../../assertion.ts';
import type { FederationService } from '../../federation-service.ts';
import type { WebSsoStateSealer } from '../../oidc/websso-state.ts';
import type { ReplayCache } from '../../replay-cache.ts';
import { claimOnce, ISSUER_NOT_ACCEPTED, type SamlAssertionVerifier, type SamlMessage } from './saml-verifier.ts';

/** The session cookie (Shibboleth names its own `_shibsession_<application>`). */
export const ECP_SESSION_COOKIE = '_shibsession_keystone-gateway';
/** The consumer's path, where Shibboleth's handler is (the service's root, or its /identity mount). */
export const ECP_CONSUMER_PATH = '/Shibboleth.sso/SAML2/ECP';

const PURPOSE = 'keystone-gateway saml ecp session v1';
/** The longest sealed session accepted (the sealer's bound): an assertion with hundreds of groups does not fit. */
const MAX_SEALED_CHARS = 8192;

interface EcpSession {
  sid: string;
  issuer: string;
  assertion: Assertion;
  expiresAt: number;
}

export interface SamlEcpSessionDependencies {
  verifier: SamlAssertionVerifier;
  sealer: WebSsoStateSealer;
  /** The SAML assertions' replay cache: a session is used once across the deployment. */
  replays: ReplayCache;
  federation: FederationService;
  clock: Clock;
  /** SAML_PROTOCOLS: the logins a session serves. */
  protocols: readonly string[];
  /** The longest a session lives (WEBSSO_STATE_TTL_SECONDS), however long the assertion is valid. */
  ttlSeconds: number;
  /** SAML_CLOCK_SKEW_SECONDS: a used session stays claimed this much past its expiry, for nodes whose clocks lag. */
  clockSkewSeconds: number;
  log?: { warn(object: object, message: string): void };
}

/** A consumed response: the sealed session, and the one login it points to when only one can take it. */
export interface EcpSessionStart {
  cookieValue: string;
  maxAgeSeconds: number;
  login?: { idpId: string; protocolId: string };
}

export class SamlEcpSessions implements AssertionVerifier {
  private readonly protocols: Set<string>;

  constructor(private readonly deps: SamlEcpSessionDependencies) {
    this.protocols = new Set(deps.protocols);
  }

  /** POST /Shibboleth.sso/SAML2/ECP: the response verified (its replay claimed), then the session. */
  async consume(message: SamlMessage): Promise<EcpSessionStart> {
    if (this.protocols.size === 0) throw refused('no protocol is a SAML protocol (SAML_PROTOCOLS)');
    // Any issuer of the trusted metadata, as Shibboleth: the login URL checks the provider's remote ids.
    const verified = await this.deps.verifier.verifyMessage(message, () => undefined);
    const now = this.deps.clock.now();
    const session: EcpSession = {
      sid: randomBytes(24).toString('base64url'),
      issuer: verified.issuer,
      assertion: verified.assertion,
      expiresAt: Math.min(verified.expiresAt, now + this.deps.ttlSeconds * 1000),
    };
    // An assertion let in by the clock skew alone would make a session dead on arrival.
    if (session.expiresAt <= now) throw refused('the assertion has expired');
    const cookieValue = this.deps.sealer.sealFor(PURPOSE, deflateRawSync(Buffer.from(JSON.stringify(session), 'utf8')));
    if (cookieValue.length > MAX_SEALED_CHARS) throw refused(`the assertion is too large for a session (${cookieValue.length} characters sealed, at most ${MAX_SEALED_CHARS})`);
    const login = await this.onlyLoginFor(verified.issuer);
    return { cookieValue, maxAgeSeconds: Math.max(1, Math.ceil((session.expiresAt - now) / 1000)), ...(login ? { login } : {}) };
  }

  /**
   * A login at the login URL with the session cookie and no posted message: the session's
   * assertion, once. Anything else (no cookie, a posted message, another kind of protocol) is the
   * other verifiers'.
   */
  async verify(request: AssertionRequest): Promise<Assertion | undefined> {
    if (!this.protocols.has(request.protocol.id)) return undefined;
    const sealed = request.cookies?.[ECP_SESSION_COOKIE];
    if (sealed === undefined || (Buffer.isBuffer(request.body) && request.body.length > 0)) return undefined;
    const session = this.open(sealed);
    if (!session) throw refused('the session cookie does not open (forged, changed, or of another deployment)');
    if (session.expiresAt <= this.deps.clock.now()) throw refused('the session has expired');
    if (!request.identityProvider.remoteIds.includes(session.issuer)) throw new ForbiddenError(ISSUER_NOT_ACCEPTED);
    // Claimed before the mapping and the token, as a posted assertion is: a login that fails after this spends the session.
    const claimedUntil = session.expiresAt + this.deps.clockSkewSeconds * 1000;
    if (!(await claimOnce(this.deps.replays, `saml-ecp-session:${session.sid}`, claimedUntil, this.deps.log))) throw refused('the session was already used');
    return session.assertion;
  }

  private open(sealed: string): EcpSession | undefined {
    const bytes = this.deps.sealer.openFor(PURPOSE, sealed);
    if (!bytes) return undefined;
    try {
      const session = JSON.parse(inflateRawSync(bytes, { maxOutputLength: 1 << 20 }).toString('utf8')) as EcpSession;
      return typeof session.sid === 'string' && typeof session.issuer === 'string' && typeof session.expiresAt === 'number' && typeof session.assertion === 'object' && session.assertion !== null ? session : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The enabled provider naming the issuer, when there is exactly one and it has exactly one SAML
   * protocol. Only a hint for the redirect (keystoneauth calls its own login URL): when the providers
   * cannot be read, the redirect goes to the root rather than the verified response being lost.
   */
  private async onlyLoginFor(issuer: string): Promise<{ idpId: string; protocolId: string } | undefined> {
    try {
      const logins: Array<{ idpId: string; protocolId: string }> = [];
      for (const identityProvider of await this.deps.federation.listIdentityProviders({ enabled: true })) {
        if (!identityProvider.enabled || !identityProvider.remoteIds.includes(issuer)) continue;
        for (const protocol of await this.deps.federation.listProtocols(identityProvider.id)) {
          if (this.protocols.has(protocol.id)) logins.push({ idpId: identityProvider.id, protocolId: protocol.id });
        }
      }
      return logins.length === 1 ? logins[0] : undefined;
    } catch (error) {
      this.deps.log?.warn({ err: error }, 'SAML ECP: the identity providers could not be read; the redirect goes to the root');
      return undefined;
    }
  }
}

function refused(reason: string): AuthenticationError {
  return AuthenticationError.because({ reason: `SAML ECP: ${reason}`, code: 401 });
}
