import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import type { OidcClientCredentials, OidcSettings } from '../../config.ts';
import type { Clock } from '../../support/clock.ts';
import { AuthenticationError, ForbiddenError, UnavailableError } from '../../support/errors.ts';
import type { Assertion, AssertionRequest, AssertionVerifier } from '../assertion.ts';
import type { IdentityProvider } from '../federation-service.ts';
import { assertionOfClaims } from './claims.ts';
import { acceptableProviderUrl, OidcProviderDirectory } from './provider-directory.ts';
import { type Fetch, providerRequest, ProviderRequestError } from './provider-http.ts';

/** Signature algorithms accepted: asymmetric only (never `none`, never an HMAC keyed with a public key). */
export const OIDC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

/** The `typ` header values of a token this verifier accepts (none, JWT, or RFC 9068's at+jwt). */
const TOKEN_TYPES = new Set(['jwt', 'at+jwt', 'application/jwt', 'application/at+jwt']);

/** Bearer tokens longer than this are refused without being parsed. */
const MAX_TOKEN_LENGTH = 16 * 1024;

/** Keystone's text for an issuer that is not one of the identity provider's remote ids (its 403). */
export const ISSUER_NOT_ACCEPTED = 'Incoming identity provider identifier not included among the accepted identifiers.';

/** What the client is told when a provider cannot be reached; it may retry after this many seconds. */
export const PROVIDER_UNAVAILABLE = 'The identity provider cannot be reached to verify the token; retry later.';
const PROVIDER_RETRY_AFTER_SECONDS = 5;

export interface OidcVerifierOptions {
  clock: Clock;
  /** Node's global fetch by default. */
  fetch?: Fetch;
  /** Where the start-up warning (no audience configured) and provider failures are logged. */
  log?: { warn(object: object, message: string): void };
  /** The providers' discovery documents and keys, shared with the websso relying party (one is made otherwise). */
  directory?: OidcProviderDirectory;
}

/**
 * OpenID Connect for federated logins, natively (what Apache with mod_auth_openidc in OAuth 2.0
 * resource-server mode does in front of Keystone). For a protocol listed in OIDC_PROTOCOLS, takes
 * `Authorization: Bearer <token>` and nothing else from the request:
 * - a JWT (access token or id_token) is verified with the issuer's published keys (discovered
 *   from the issuer, cached): the issuer (`iss`) must be one of the identity provider's remote ids
 *   (else 403, as Keystone's remote-id check), an https URL (or http on the loopback host); the
 *   signature asymmetric; `exp` and `sub` present; exp/nbf/iat within OIDC_CLOCK_SKEW_SECONDS;
 *   `aud` one of OIDC_AUDIENCES when set;
 * - any other token is introspected (RFC 7662) at the provider's introspection endpoint with the
 *   configured client credentials; it must be `active`, with the same issuer, audience and time checks.
 * The claims become the assertion under mod_auth_openidc's names (claims.ts). Every refusal is the
 * generic 401 with its cause kept for the audit trail; a provider that cannot be reached is a 503
 * with Retry-After.
 */
export class OidcAssertionVerifier implements AssertionVerifier {
  private readonly protocols: Set<string>;
  private readonly fetch: Fetch;
  private readonly directory: OidcProviderDirectory;

  constructor(
    private readonly settings: OidcSettings,
    private readonly options: OidcVerifierOptions,
  ) {
    this.protocols = new Set(settings.protocols);
    this.fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.directory = options.directory ?? new OidcProviderDirectory({
      fetch: this.fetch,
      clock: options.clock,
      httpTimeoutMs: settings.httpTimeoutMs,
      cacheMs: settings.metadataCacheSeconds * 1000,
      refreshIntervalMs: settings.jwksRefreshIntervalSeconds * 1000,
    });
    if (settings.audiences.length === 0 && settings.protocols.length > 0) {
      options.log?.warn(
        { protocols: settings.protocols },
        'OIDC_AUDIENCES is not set: federated OIDC logins accept a token of a trusted issuer whatever its audience (a token issued to any client of that provider)',
      );
    }
  }

  handles(protocolId: string): boolean {
    return this.protocols.has(protocolId);
  }

  async verify(request: AssertionRequest): Promise<Assertion | undefined> {
    if (!this.handles(request.protocol.id)) return undefined;
    const token = bearerToken(request.headers.authorization);
    const claims = looksLikeJws(token)
      ? await this.verifyJwt(token, request.identityProvider)
      : await this.introspect(token, request.identityProvider);
    return assertionOfClaims(claims);
  }

  // ---- JWT -------------------------------------------------------------------------------------

  private async verifyJwt(token: string, provider: IdentityProvider): Promise<Record<string, unknown>> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    let unverified: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      unverified = decodeJwt(token);
    } catch (error) {
      throw refused(`the bearer token is not a well-formed JWT: ${(error as Error).message}`);
    }
    if (typeof header.alg !== 'string' || !OIDC_ALGORITHMS.includes(header.alg)) throw refused(`the token's algorithm ${String(header.alg)} is not accepted (asymmetric signatures only)`);
    if (header.typ !== undefined && !TOKEN_TYPES.has(String(header.typ).toLowerCase())) throw refused(`the token's type ${String(header.typ)} is not an access token or id_token`);
    const issuer = this.trustedIssuer(unverified.iss, provider);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, (protectedHeader, input) => this.directory.key(issuer, protectedHeader, input), {
        algorithms: OIDC_ALGORITHMS,
        issuer,
        ...(this.settings.audiences.length > 0 ? { audience: this.settings.audiences } : {}),
        clockTolerance: this.settings.clockSkewSeconds,
        currentDate: new Date(this.options.clock.now()),
        requiredClaims: ['exp', 'sub'],
      }));
    } catch (error) {
      throw this.translate(error, issuer);
    }
    this.checkTimes(payload as Record<string, unknown>, { iatOnly: true });
    if (typeof payload.sub !== 'string' || payload.sub === '') throw refused('the token has no subject (sub)');
    return payload as Record<string, unknown>;
  }

  /** The token's issuer, when it is one of the provider's remote ids (else Keystone's 403) and a URL this service may ask. */
  private trustedIssuer(iss: unknown, provider: IdentityProvider): string {
    if (typeof iss !== 'string' || iss === '') throw refused('the token names no issuer (iss)');
    if (!provider.remoteIds.includes(iss)) throw new ForbiddenError(ISSUER_NOT_ACCEPTED);
    if (!acceptableProviderUrl(iss)) throw refused(`the issuer ${iss} is not an https URL (http only on the loopback host)`);
    return iss;
  }

  // ---- opaque tokens: RFC 7662 introspection ---------------------------------------------------

  private async introspect(token: string, provider: IdentityProvider): Promise<Record<string, unknown>> {
    const issuer = this.introspectionIssuer(provider);
    const credentials = this.settings.introspection.byIssuer[issuer] ?? this.settings.introspection.default;
    if (!credentials) throw refused(`an opaque token, and no introspection client is configured for ${issuer} (OIDC_INTROSPECTION_CLIENT_ID, OIDC_INTROSPECTION_CLIENTS)`);
    const metadata = await this.provider(() => this.directory.metadata(issuer), issuer);
    if (!metadata.introspectionEndpoint) throw refused(`an opaque token, and ${issuer} publishes no introspection_endpoint`);
    const endpoint = metadata.introspectionEndpoint;
    const { status, body } = await this.provider(
      () =>
        providerRequest(
          this.fetch,
          endpoint,
          {
            method: 'POST',
            headers: { authorization: basicAuthorization(credentials), 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
          },
          this.settings.httpTimeoutMs,
        ),
      issuer,
    );
    if (status !== 200) throw refused(`introspection at ${endpoint} answered ${status}${status === 400 || status === 401 ? ' (are the introspection client credentials right?)' : ''}`);
    const answer = body as Record<string, unknown> | null;
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) throw refused(`introspection at ${endpoint}: not a JSON object`);
    if (answer.active !== true) throw refused(`introspection at ${issuer}: the token is not active`);
    if (answer.iss !== undefined && answer.iss !== issuer) {
      if (typeof answer.iss === 'string' && !provider.remoteIds.includes(answer.iss)) throw new ForbiddenError(ISSUER_NOT_ACCEPTED);
      throw refused(`introspection at ${issuer} names another issuer (${String(answer.iss)})`);
    }
    if (answer.token_type !== undefined && !['bearer', 'access_token'].includes(String(answer.token_type).toLowerCase())) {
      throw refused(`introspection at ${issuer}: the token is a ${String(answer.token_type)}, not an access token`);
    }
    this.checkAudience(answer.aud);
    this.checkTimes(answer, { iatOnly: false });
    if (typeof answer.sub !== 'string' || answer.sub === '') throw refused(`introspection at ${issuer}: the token has no subject (sub)`);
    const { active: _active, ...claims } = answer;
    return { ...claims, iss: issuer };
  }

  /**
   * The issuer an opaque token is sent to (it does not say which): the identity provider's one
   * remote id that is a usable issuer URL; with several, the one of them with its own entry in
   * OIDC_INTROSPECTION_CLIENTS. A token is never sent to several providers in turn.
   */
  private introspectionIssuer(provider: IdentityProvider): string {
    const candidates = provider.remoteIds.filter(acceptableProviderUrl);
    if (candidates.length === 1) return candidates[0] as string;
    const configured = candidates.filter((issuer) => this.settings.introspection.byIssuer[issuer] !== undefined);
    if (configured.length === 1) return configured[0] as string;
    throw refused(
      candidates.length === 0
        ? `an opaque token, and identity provider ${provider.id} has no remote id that is an issuer URL`
        : `an opaque token, and identity provider ${provider.id} has several issuers: name one in OIDC_INTROSPECTION_CLIENTS`,
    );
  }

  // ---- shared checks -------------------------------------------------------------------------

  private checkAudience(aud: unknown): void {
    if (this.settings.audiences.length === 0) return;
    const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud.filter((entry): entry is string => typeof entry === 'string') : [];
    if (!audiences.some((entry) => this.settings.audiences.includes(entry))) throw refused(`the token's audience (${audiences.join(', ') || 'none'}) is not one of OIDC_AUDIENCES`);
  }

  /** exp, nbf (introspection answers: jwtVerify checks a JWT's) and iat (both) within the skew. */
  private checkTimes(claims: Record<string, unknown>, { iatOnly }: { iatOnly: boolean }): void {
    const now = this.options.clock.now() / 1000;
    const skew = this.settings.clockSkewSeconds;
    if (typeof claims.iat === 'number' && claims.iat > now + skew) throw refused('the token is issued in the future (iat)');
    if (iatOnly) return;
    if (typeof claims.exp === 'number' && claims.exp <= now - skew) throw refused('the token is expired (exp)');
    if (typeof claims.nbf === 'number' && claims.nbf > now + skew) throw refused('the token is not yet valid (nbf)');
  }

  /** A call to the provider, its failures made the catalogue's: unreachable → 503, refused → 401. */
  private async provider<T>(call: () => Promise<T>, issuer: string): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw this.translate(error, issuer);
    }
  }

  private translate(error: unknown, issuer: string): Error {
    if (error instanceof AuthenticationError || error instanceof ForbiddenError || error instanceof UnavailableError) return error;
    if (error instanceof ProviderRequestError) {
      if (error.kind === 'unreachable') {
        this.options.log?.warn({ issuer, cause: error.message }, 'OpenID Provider unreachable');
        return new UnavailableError(PROVIDER_UNAVAILABLE, PROVIDER_RETRY_AFTER_SECONDS);
      }
      return refused(`provider ${issuer}: ${error.message}`);
    }
    if (error instanceof joseErrors.JWTExpired) return refused(`the token is expired (${error.message})`);
    if (error instanceof joseErrors.JWTClaimValidationFailed) return refused(`claim ${error.claim} refused: ${error.message}`);
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) return refused(`the token's signature does not verify with ${issuer}'s key`);
    if (error instanceof joseErrors.JWKSNoMatchingKey) return refused(`no key of ${issuer} matches the token: ${error.message}`);
    if (error instanceof joseErrors.JOSEError) return refused(`the token is refused (${error.code}): ${error.message}`);
    return refused(`the token could not be verified: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The generic 401, the cause kept for the audit trail. */
function refused(reason: string): AuthenticationError {
  return AuthenticationError.because({ reason: `OIDC: ${reason}`, code: 401 });
}

/** `Authorization: Bearer <token>` (RFC 6750 §2.1), one header, one token. */
function bearerToken(header: string | string[] | undefined): string {
  if (header === undefined) throw refused('no Authorization: Bearer token');
  if (Array.isArray(header)) throw refused('several Authorization headers');
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
  if (!match) throw refused('the Authorization header is not a Bearer token');
  const token = match[1] as string;
  if (token.length > MAX_TOKEN_LENGTH) throw refused(`the bearer token is longer than ${MAX_TOKEN_LENGTH} characters`);
  return token;
}

/** A compact JWS: three base64url parts, the first a JSON header (anything else is introspected). */
function looksLikeJws(token: string): boolean {
  const parts = token.split('.');
  if (parts.length !== 3 || !/^[A-Za-z0-9_-]+$/.test(parts[0] as string)) return false;
  try {
    const header = JSON.parse(Buffer.from(parts[0] as string, 'base64url').toString('utf8')) as unknown;
    return typeof header === 'object' && header !== null && 'alg' in header;
  } catch {
    return false;
  }
}

/** RFC 6749 §2.3.1: client id and secret form-encoded, then Basic. */
function basicAuthorization({ clientId, clientSecret }: OidcClientCredentials): string {
  const encode = (value: string) => encodeURIComponent(value).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`).toString('base64')}`;
}
