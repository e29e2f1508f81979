import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import type { OidcSettings, WebSsoSettings } from '../../config.ts';
import type { Clock } from '../../support/clock.ts';
import { AuthenticationError, ForbiddenError, ServiceError, UnavailableError, ValidationError } from '../../support/errors.ts';
import type { Assertion } from '../assertion.ts';
import type { FederatedLogin } from '../federated-login.ts';
import type { FederationService, IdentityProvider, Protocol } from '../federation-service.ts';
import { assertionOfClaims } from './claims.ts';
import { OIDC_ALGORITHMS, PROVIDER_UNAVAILABLE } from './oidc-verifier.ts';
import { acceptableProviderUrl, type OidcProviderDirectory, type ProviderMetadata } from './provider-directory.ts';
import { type Fetch, providerRequest, ProviderRequestError } from './provider-http.ts';
import type { ReplayCache } from '../replay-cache.ts';
import type { WebSsoState, WebSsoStateSealer } from './websso-state.ts';

/** Keystone's 400 when the websso request has no `origin` (keystone/api/auth.py _get_sso_origin_host). */
export const ORIGIN_MISSING = 'Request must have an origin query parameter';

/** The cookies that carry login states are named this, followed by the start of the state. */
export const STATE_COOKIE_PREFIX = 'ksgw_websso_';
const STATE_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const COOKIE_NAME_STATE_CHARS = 16;
const PROVIDER_RETRY_AFTER_SECONDS = 5;
/** The most an id_token may weigh. */
const MAX_TOKEN_LENGTH = 16 * 1024;

export interface WebSsoDependencies {
  websso: WebSsoSettings;
  oidc: OidcSettings;
  directory: OidcProviderDirectory;
  federation: FederationService;
  federatedLogin: FederatedLogin;
  sealer: WebSsoStateSealer;
  replays: ReplayCache;
  clock: Clock;
  /** Node's global fetch by default. */
  fetch?: Fetch;
  log?: { warn(object: object, message: string): void };
}

/** Where the browser goes first (302), with the cookie that carries its login state. */
export interface WebSsoStart {
  location: string;
  cookie: { name: string; value: string; maxAgeSeconds: number };
}

/** What a completed callback gives: the verified assertion to log in with, and where the token goes. */
export interface WebSsoCompletion {
  identityProvider: IdentityProvider;
  protocol: Protocol;
  assertion: Assertion;
  /** The trusted dashboard the token is posted to. */
  origin: string;
  /** The cookie to clear. */
  cookieName: string;
}

/** What the callback request carries (query parameters and the browser's cookies). */
export interface WebSsoCallback {
  query: Readonly<Record<string, unknown>>;
  cookies: Readonly<Record<string, string>>;
}

/**
 * Keystone's websso for OpenID Connect, natively: this service is the relying party that
 * mod_auth_openidc is in front of Keystone. The browser is sent to the provider's authorization
 * endpoint (discovered from the issuer) with the code flow, PKCE (S256), a state and a nonce; its
 * login state travels in a cookie sealed with AES-GCM (any node opens it; it names the state, so
 * a state used from another browser finds no cookie) and is single-use (ReplayCache). The callback
 * exchanges the code with the client credentials (OIDC_CLIENT_ID/OIDC_CLIENT_SECRET), verifies the
 * id_token (signature with the provider's JWKS, iss, aud = the client id, nonce, exp) and gives its
 * claims as the assertion mod_auth_openidc would (claims.ts). Every refusal is the generic 401 with
 * its cause for the audit trail; a provider that does not answer is a 503.
 */
export class OidcWebSso {
  private readonly fetch: Fetch;
  private readonly protocols: Set<string>;

  constructor(private readonly deps: WebSsoDependencies) {
    this.fetch = deps.fetch ?? ((input, init) => fetch(input, init));
    this.protocols = new Set(deps.oidc.protocols);
  }

  /**
   * Keystone's _get_sso_origin_host: the origin (query-decoded once more, as Keystone's
   * unquote_plus does) must be one of TRUSTED_DASHBOARDS (their host names lower-cased):
   * missing → 400, another → the generic 401.
   */
  trustedOrigin(origin: unknown): string {
    if (typeof origin !== 'string' || origin === '') throw new ValidationError(ORIGIN_MISSING);
    const host = unquotePlus(origin);
    if (!this.deps.websso.trustedDashboards.includes(host)) {
      throw AuthenticationError.because({ reason: `${host} is not a trusted dashboard host`, code: 401 });
    }
    return host;
  }

  /**
   * The first leg: the origin checked, the provider found (named in the URL, or the only enabled
   * one with this protocol), then the redirect to its authorization endpoint.
   */
  async begin(request: { idpId?: string; protocolId: string; origin: unknown; redirectUri: string }): Promise<WebSsoStart> {
    const origin = this.trustedOrigin(request.origin);
    const { identityProvider, protocol } =
      request.idpId === undefined ? await this.onlyProviderOf(request.protocolId) : await this.deps.federatedLogin.target(request.idpId, request.protocolId);
    const client = this.client(protocol);
    const issuer = issuerOf(identityProvider);
    const metadata = await this.metadata(issuer);
    if (!metadata.authorizationEndpoint || !metadata.tokenEndpoint) {
      throw refused(`${issuer} publishes no usable authorization_endpoint and token_endpoint (https, or http on the loopback host)`);
    }
    const ttlMs = this.deps.websso.stateTtlSeconds * 1000;
    const state: WebSsoState = {
      sid: randomBytes(32).toString('base64url'),
      nonce: randomBytes(32).toString('base64url'),
      verifier: randomBytes(32).toString('base64url'),
      idpId: identityProvider.id,
      protocolId: protocol.id,
      issuer,
      origin,
      redirectUri: request.redirectUri,
      expiresAt: this.deps.clock.now() + ttlMs,
    };
    const location = new URL(metadata.authorizationEndpoint);
    const parameters = {
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: request.redirectUri,
      scope: client.scope,
      state: state.sid,
      nonce: state.nonce,
      code_challenge: createHash('sha256').update(state.verifier).digest('base64url'),
      code_challenge_method: 'S256',
    };
    for (const [name, value] of Object.entries(parameters)) location.searchParams.set(name, value);
    return {
      location: location.href,
      cookie: { name: stateCookieName(state.sid), value: this.deps.sealer.seal(state), maxAgeSeconds: this.deps.websso.stateTtlSeconds },
    };
  }

  /**
   * The callback: the state must come with its own cookie (this browser's), open (not forged or
   * changed), be unexpired, unused and of this protocol; then the provider's answer (an error is
   * a 401), the code exchanged and the id_token verified.
   */
  async complete(protocolId: string, callback: WebSsoCallback): Promise<WebSsoCompletion> {
    const sid = callback.query.state;
    if (typeof sid !== 'string' || !STATE_PATTERN.test(sid)) throw refused('the callback carries no state, or not one this service made');
    const cookieName = stateCookieName(sid);
    const sealed = callback.cookies[cookieName];
    if (sealed === undefined) throw refused('no login state cookie for this state (another browser, an expired or already used state)');
    const state = this.deps.sealer.open(sealed);
    if (!state) throw refused('the login state cookie does not open (forged or changed)');
    if (!sameText(state.sid, sid)) throw refused("the callback's state is not the one of the login state cookie");
    const now = this.deps.clock.now();
    if (state.expiresAt <= now) throw refused('the login state has expired (WEBSSO_STATE_TTL_SECONDS)');
    if (state.protocolId !== protocolId) throw refused(`the login state is for protocol ${state.protocolId}, not ${protocolId}`);
    if (!(await this.deps.replays.claim(state.sid, state.expiresAt))) throw refused('the login state was already used (a replayed callback)');

    const error = callback.query.error;
    if (error !== undefined) {
      const description = typeof callback.query.error_description === 'string' ? `: ${callback.query.error_description.slice(0, 200)}` : '';
      throw refused(`the provider answered error=${String(error).slice(0, 100)}${description}`);
    }
    // RFC 9207: a provider that names itself must be the one the browser was sent to (mix-up defence).
    if (callback.query.iss !== undefined && callback.query.iss !== state.issuer) throw refused(`the callback names another issuer (${String(callback.query.iss).slice(0, 200)})`);
    const code = callback.query.code;
    if (typeof code !== 'string' || code === '' || code.length > 4096) throw refused('the callback carries no authorization code');

    // The provider may have been disabled, or its remote ids changed, during the login.
    const { identityProvider, protocol } = await this.deps.federatedLogin.target(state.idpId, state.protocolId);
    if (!identityProvider.remoteIds.includes(state.issuer)) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    const client = this.client(protocol);
    const metadata = await this.metadata(state.issuer);
    if (!metadata.tokenEndpoint) throw refused(`${state.issuer} publishes no usable token_endpoint`);
    const tokens = await this.exchange(metadata.tokenEndpoint, client, code, state);
    const claims = await this.verifyIdToken(tokens.idToken, client.clientId, state);
    const extra = client.userinfo && metadata.userinfoEndpoint && tokens.accessToken ? await this.userinfo(metadata.userinfoEndpoint, tokens.accessToken, claims.sub as string, state.issuer) : {};
    // The id_token's claims win: userinfo only adds (it can never change iss, sub, aud or nonce).
    return { identityProvider, protocol, assertion: assertionOfClaims({ ...extra, ...claims }), origin: state.origin, cookieName };
  }

  // ---- the provider ----------------------------------------------------------------------------

  /** The websso/{protocol} URL names no provider: the only enabled one with this protocol (Keystone picks it by the assertion's remote id). */
  private async onlyProviderOf(protocolId: string): Promise<{ identityProvider: IdentityProvider; protocol: Protocol }> {
    const candidates: Array<{ identityProvider: IdentityProvider; protocol: Protocol }> = [];
    for (const identityProvider of await this.deps.federation.listIdentityProviders({ enabled: true })) {
      if (!identityProvider.enabled || !identityProvider.remoteIds.some(acceptableProviderUrl)) continue;
      const protocol = (await this.deps.federation.listProtocols(identityProvider.id)).find((entry) => entry.id === protocolId);
      if (protocol) candidates.push({ identityProvider, protocol });
    }
    if (candidates.length === 1) return this.deps.federatedLogin.target(candidates[0]!.identityProvider.id, protocolId);
    // Keystone's Unauthorized("Missing entity ID from environment"), its text hidden from clients.
    throw refused(
      candidates.length === 0
        ? `Missing entity ID from environment: no enabled identity provider with an issuer URL has protocol ${protocolId}`
        : `several identity providers have protocol ${protocolId} (${candidates.map((entry) => entry.identityProvider.id).join(', ')}): use /v3/auth/OS-FEDERATION/identity_providers/{idp_id}/protocols/${protocolId}/websso`,
    );
  }

  private client(protocol: Protocol): NonNullable<WebSsoSettings['oidcClient']> {
    if (!this.protocols.has(protocol.id)) throw refused(`protocol ${protocol.id} is not an OpenID Connect protocol (OIDC_PROTOCOLS)`);
    const client = this.deps.websso.oidcClient;
    if (!client) throw refused('no OpenID Connect client is configured for websso (OIDC_CLIENT_ID)');
    return client;
  }

  private async metadata(issuer: string): Promise<ProviderMetadata> {
    try {
      return await this.deps.directory.metadata(issuer);
    } catch (error) {
      throw this.translate(error, issuer);
    }
  }

  /** The token request (RFC 6749 §4.1.3 with RFC 7636's code_verifier): client_secret_basic, or client_id alone for a public client. */
  private async exchange(endpoint: string, client: NonNullable<WebSsoSettings['oidcClient']>, code: string, state: WebSsoState): Promise<{ idToken: string; accessToken: string | undefined }> {
    const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: state.redirectUri, code_verifier: state.verifier });
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (client.clientSecret !== undefined) {
      headers.authorization = `Basic ${Buffer.from(`${formEncode(client.clientId)}:${formEncode(client.clientSecret)}`).toString('base64')}`;
    } else {
      form.set('client_id', client.clientId);
    }
    let answer: { status: number; body: unknown };
    try {
      answer = await providerRequest(this.fetch, endpoint, { method: 'POST', headers, body: form.toString() }, this.deps.oidc.httpTimeoutMs);
    } catch (error) {
      throw this.translate(error, state.issuer);
    }
    const body = answer.body as Record<string, unknown> | null;
    if (answer.status !== 200) {
      const reason = typeof body === 'object' && body !== null && typeof body.error === 'string' ? ` (${body.error.slice(0, 100)})` : '';
      throw refused(`the token endpoint of ${state.issuer} answered ${answer.status}${reason}`);
    }
    const idToken = typeof body === 'object' && body !== null ? body.id_token : undefined;
    if (typeof idToken !== 'string' || idToken === '' || idToken.length > MAX_TOKEN_LENGTH) throw refused(`the token endpoint of ${state.issuer} gave no id_token`);
    const accessToken = body?.access_token;
    return { idToken, accessToken: typeof accessToken === 'string' && accessToken !== '' && accessToken.length <= MAX_TOKEN_LENGTH ? accessToken : undefined };
  }

  /**
   * The userinfo claims (OIDC Core §5.3, what mod_auth_openidc adds to the id_token's). As with
   * mod_auth_openidc, a userinfo endpoint that fails (an error answer, no answer, a signed or
   * encrypted JWT answer, or an access token bound to another resource) leaves the id_token's
   * claims alone, logged; but an answer about another subject than the id_token's (§5.3.2) refuses
   * the login.
   */
  private async userinfo(endpoint: string, accessToken: string, sub: string, issuer: string): Promise<Record<string, unknown>> {
    let answer: { status: number; body: unknown };
    try {
      answer = await providerRequest(this.fetch, endpoint, { method: 'GET', headers: { authorization: `Bearer ${accessToken}` } }, this.deps.oidc.httpTimeoutMs);
    } catch (error) {
      this.deps.log?.warn({ issuer, cause: (error as Error).message }, 'websso: userinfo not read; the id_token claims alone are used');
      return {};
    }
    const body = answer.body;
    if (answer.status !== 200 || typeof body !== 'object' || body === null || Array.isArray(body)) {
      const error = typeof body === 'object' && body !== null && typeof (body as Record<string, unknown>).error === 'string' ? ` (${String((body as Record<string, unknown>).error).slice(0, 100)})` : '';
      this.deps.log?.warn({ issuer, status: answer.status }, `websso: userinfo answered ${answer.status}${error}; the id_token claims alone are used`);
      return {};
    }
    if ((body as Record<string, unknown>).sub !== sub) throw refused(`userinfo at ${issuer} is about another subject than the id_token`);
    return body as Record<string, unknown>;
  }

  /** OpenID Connect Core §3.1.3.7: signature (the provider's JWKS), iss, aud (the client id), azp, exp, iat, nonce. */
  private async verifyIdToken(idToken: string, clientId: string, state: WebSsoState): Promise<Record<string, unknown>> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(idToken, (header, input) => this.deps.directory.key(state.issuer, header, input), {
        algorithms: OIDC_ALGORITHMS,
        issuer: state.issuer,
        audience: clientId,
        clockTolerance: this.deps.oidc.clockSkewSeconds,
        currentDate: new Date(this.deps.clock.now()),
        requiredClaims: ['exp', 'iat', 'sub', 'nonce'],
      }));
    } catch (error) {
      throw this.translate(error, state.issuer);
    }
    if (typeof payload.nonce !== 'string' || !sameText(payload.nonce, state.nonce)) throw refused("the id_token's nonce is not the one of this login");
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (audiences.length > 1 && payload.azp !== clientId) throw refused(`the id_token has several audiences and its azp (${String(payload.azp)}) is not ${clientId}`);
    if (payload.azp !== undefined && payload.azp !== clientId) throw refused(`the id_token's azp (${String(payload.azp)}) is not ${clientId}`);
    if (typeof payload.iat === 'number' && payload.iat * 1000 > this.deps.clock.now() + this.deps.oidc.clockSkewSeconds * 1000) throw refused('the id_token is issued in the future (iat)');
    if (typeof payload.sub !== 'string' || payload.sub === '') throw refused('the id_token has no subject (sub)');
    return payload as Record<string, unknown>;
  }

  private translate(error: unknown, issuer: string): Error {
    if (error instanceof ServiceError) return error;
    if (error instanceof ProviderRequestError) {
      if (error.kind === 'unreachable') {
        this.deps.log?.warn({ issuer, cause: error.message }, 'OpenID Provider unreachable (websso)');
        return new UnavailableError(PROVIDER_UNAVAILABLE, PROVIDER_RETRY_AFTER_SECONDS);
      }
      return refused(`provider ${issuer}: ${error.message}`);
    }
    if (error instanceof joseErrors.JWTExpired) return refused(`the id_token is expired (${error.message})`);
    if (error instanceof joseErrors.JWTClaimValidationFailed) return refused(`id_token claim ${error.claim} refused: ${error.message}`);
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) return refused(`the id_token's signature does not verify with ${issuer}'s key`);
    if (error instanceof joseErrors.JOSEError) return refused(`the id_token does not verify: ${error.message}`);
    return refused(`the id_token does not verify: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The cookie that carries the login state of `sid` (several logins of one browser do not collide). */
export function stateCookieName(sid: string): string {
  return `${STATE_COOKIE_PREFIX}${sid.slice(0, COOKIE_NAME_STATE_CHARS)}`;
}

/** The cookie of a state given by a callback; undefined when it is not a state this service makes. */
export function stateCookieNameOf(state: string): string | undefined {
  return STATE_PATTERN.test(state) ? stateCookieName(state) : undefined;
}

/** The provider's issuer: the identity provider's one remote id that is an issuer URL this service may ask. */
function issuerOf(identityProvider: IdentityProvider): string {
  const issuers = identityProvider.remoteIds.filter(acceptableProviderUrl);
  if (issuers.length === 1) return issuers[0]!;
  throw refused(
    issuers.length === 0
      ? `identity provider ${identityProvider.id} has no remote id that is an issuer URL (https, or http on the loopback host)`
      : `identity provider ${identityProvider.id} has several issuer URLs among its remote ids: websso cannot tell which provider to send the browser to`,
  );
}

function refused(reason: string): AuthenticationError {
  return AuthenticationError.because({ reason: `websso: ${reason}`, code: 401 });
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** RFC 6749 §2.3.1: the client id and secret are form-encoded before HTTP Basic. */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** Python's urllib.parse.unquote_plus: `+` is a space, %XX escapes decoded, malformed ones left as they are. */
export function unquotePlus(value: string): string {
  const text = value.replace(/\+/g, ' ');
  return text.replace(/(%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8');
    }
  });
}
