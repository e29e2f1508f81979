import { createLocalJWKSet, errors as joseErrors, type JSONWebKeySet, type JWTHeaderParameters, type FlattenedJWSInput } from 'jose';
import type { Clock } from '../../support/clock.ts';
import { type Fetch, providerRequest, ProviderRequestError } from './provider-http.ts';

/** The parts of an OpenID Provider's discovery document the verifier uses. */
export interface ProviderMetadata {
  issuer: string;
  jwksUri: string;
  introspectionEndpoint: string | undefined;
  /** Where a browser is sent to log in (the websso code flow); absent when not published or not https. */
  authorizationEndpoint?: string | undefined;
  /** Where the websso code flow exchanges its code; absent when not published or not https. */
  tokenEndpoint?: string | undefined;
  /** Where websso reads the user's claims with the access token (OIDC Core §5.3); absent when not published or not https. */
  userinfoEndpoint?: string | undefined;
}

/**
 * Whether `value` may be an issuer (or a provider endpoint) this service talks to: an https URL, or
 * plain http only to the loopback host (127.0.0.1, [::1], localhost), without credentials, query or
 * fragment (OpenID Connect Discovery's issuer rules).
 */
export function acceptableProviderUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  if (url.username || url.password || url.hash || url.search) return false;
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
}

type KeyResolver = ReturnType<typeof createLocalJWKSet>;

interface Cached<T> {
  value: T;
  fetchedAt: number;
}

interface IssuerState {
  metadata?: Cached<ProviderMetadata>;
  keys?: Cached<KeyResolver>;
  /** When the JWKS was last asked for (successfully or not): the refresh rate limit counts from it. */
  keysAttemptAt?: number;
  keysAttemptFailed?: ProviderRequestError;
  metadataAttemptAt?: number;
  metadataAttemptFailed?: ProviderRequestError;
  pendingKeys?: Promise<KeyResolver>;
  pendingMetadata?: Promise<ProviderMetadata>;
}

export interface ProviderDirectoryOptions {
  fetch: Fetch;
  clock: Clock;
  httpTimeoutMs: number;
  /** How long discovery documents and key sets are used before being fetched again. */
  cacheMs: number;
  /** At most one JWKS fetch per issuer in this interval (unknown kids, failures). */
  refreshIntervalMs: number;
}

/**
 * Providers' discovery documents and signing keys, fetched when first needed and kept for
 * `cacheMs`. A token whose `kid` is not in the cached key set makes the set be fetched again, but
 * at most once per `refreshIntervalMs` per issuer (a flood of made-up kids costs the provider one
 * request per interval); a failed fetch is not retried within that interval either. When a cached
 * set or document is due but the provider does not answer, the old one is used until it does.
 * Only issuers that are remote ids of an identity provider reach this directory, so it grows with
 * the configuration, not with requests.
 */
export class OidcProviderDirectory {
  private readonly issuers = new Map<string, IssuerState>();

  constructor(private readonly options: ProviderDirectoryOptions) {}

  private state(issuer: string): IssuerState {
    let state = this.issuers.get(issuer);
    if (!state) {
      state = {};
      this.issuers.set(issuer, state);
    }
    return state;
  }

  /** The issuer's discovery document (`${issuer}/.well-known/openid-configuration`). */
  async metadata(issuer: string): Promise<ProviderMetadata> {
    const state = this.state(issuer);
    const now = this.options.clock.now();
    if (state.metadata && now - state.metadata.fetchedAt < this.options.cacheMs) return state.metadata.value;
    if (state.metadataAttemptFailed && state.metadataAttemptAt !== undefined && now - state.metadataAttemptAt < this.options.refreshIntervalMs) {
      if (state.metadata) return state.metadata.value;
      throw state.metadataAttemptFailed;
    }
    state.pendingMetadata ??= this.discover(issuer, state).finally(() => (state.pendingMetadata = undefined));
    try {
      return await state.pendingMetadata;
    } catch (error) {
      if (state.metadata && error instanceof ProviderRequestError && error.kind === 'unreachable') return state.metadata.value;
      throw error;
    }
  }

  private async discover(issuer: string, state: IssuerState): Promise<ProviderMetadata> {
    state.metadataAttemptAt = this.options.clock.now();
    state.metadataAttemptFailed = undefined;
    try {
      const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
      const { status, body } = await providerRequest(this.options.fetch, url, { method: 'GET' }, this.options.httpTimeoutMs);
      if (status !== 200) throw new ProviderRequestError('refused', `discovery of ${issuer} answered ${status}`);
      const document = body as Record<string, unknown> | null;
      if (typeof document !== 'object' || document === null || Array.isArray(document)) throw new ProviderRequestError('refused', `discovery of ${issuer}: not a JSON object`);
      if (document.issuer !== issuer) throw new ProviderRequestError('refused', `discovery of ${issuer} names another issuer (${String(document.issuer)})`);
      const jwksUri = document.jwks_uri;
      if (typeof jwksUri !== 'string' || !acceptableProviderUrl(jwksUri)) throw new ProviderRequestError('refused', `discovery of ${issuer}: jwks_uri missing or not https`);
      const introspection = document.introspection_endpoint;
      const introspectionEndpoint = typeof introspection === 'string' && acceptableProviderUrl(introspection) ? introspection : undefined;
      const optionalEndpoint = (value: unknown) => (typeof value === 'string' && acceptableProviderUrl(value) ? value : undefined);
      const metadata = {
        issuer,
        jwksUri,
        introspectionEndpoint,
        authorizationEndpoint: optionalEndpoint(document.authorization_endpoint),
        tokenEndpoint: optionalEndpoint(document.token_endpoint),
        userinfoEndpoint: optionalEndpoint(document.userinfo_endpoint),
      };
      state.metadata = { value: metadata, fetchedAt: this.options.clock.now() };
      return metadata;
    } catch (error) {
      state.metadataAttemptFailed = asProviderError(error);
      throw state.metadataAttemptFailed;
    }
  }

  /**
   * The key that verifies a token of `issuer` with this protected header (jose's key resolver):
   * from the cached JWKS, else from a fresh one (rate-limited). Throws jose's JWKSNoMatchingKey
   * when no key matches, ProviderRequestError when the provider cannot be asked.
   */
  async key(issuer: string, header: JWTHeaderParameters, token: FlattenedJWSInput): Promise<CryptoKey> {
    const state = this.state(issuer);
    const now = this.options.clock.now();
    const due = !state.keys || now - state.keys.fetchedAt >= this.options.cacheMs;
    let resolver = state.keys?.value;
    if (due) resolver = await this.refreshKeys(issuer, state, now);
    try {
      return await (resolver as KeyResolver)(header, token);
    } catch (error) {
      if (!(error instanceof joseErrors.JWKSNoMatchingKey) || due) throw error;
    }
    // An unknown kid: the provider may have rotated its keys. Ask again, within the rate limit.
    if (state.keysAttemptAt !== undefined && now - state.keysAttemptAt < this.options.refreshIntervalMs) {
      throw new joseErrors.JWKSNoMatchingKey(`no key of ${issuer} matches (key set refetched less than ${this.options.refreshIntervalMs / 1000} s ago)`);
    }
    resolver = await this.refreshKeys(issuer, state, now);
    return resolver(header, token);
  }

  /** Fetches the key set again unless a fetch failed within the interval; an unreachable provider leaves the old set in use. */
  private async refreshKeys(issuer: string, state: IssuerState, now: number): Promise<KeyResolver> {
    if (state.keysAttemptFailed && state.keysAttemptAt !== undefined && now - state.keysAttemptAt < this.options.refreshIntervalMs) {
      if (state.keys && state.keysAttemptFailed.kind === 'unreachable') return state.keys.value;
      throw state.keysAttemptFailed;
    }
    state.pendingKeys ??= this.fetchKeys(issuer, state).finally(() => (state.pendingKeys = undefined));
    try {
      return await state.pendingKeys;
    } catch (error) {
      if (state.keys && error instanceof ProviderRequestError && error.kind === 'unreachable') return state.keys.value;
      throw error;
    }
  }

  private async fetchKeys(issuer: string, state: IssuerState): Promise<KeyResolver> {
    const metadata = await this.metadata(issuer);
    state.keysAttemptAt = this.options.clock.now();
    state.keysAttemptFailed = undefined;
    try {
      const { status, body } = await providerRequest(this.options.fetch, metadata.jwksUri, { method: 'GET' }, this.options.httpTimeoutMs);
      if (status !== 200) throw new ProviderRequestError('refused', `JWKS of ${issuer} answered ${status}`);
      let resolver: KeyResolver;
      try {
        resolver = createLocalJWKSet(body as JSONWebKeySet);
      } catch {
        throw new ProviderRequestError('refused', `JWKS of ${issuer} is not a JSON Web Key Set`);
      }
      state.keys = { value: resolver, fetchedAt: this.options.clock.now() };
      return resolver;
    } catch (error) {
      state.keysAttemptFailed = asProviderError(error);
      throw state.keysAttemptFailed;
    }
  }
}

function asProviderError(error: unknown): ProviderRequestError {
  return error instanceof ProviderRequestError ? error : new ProviderRequestError('refused', error instanceof Error ? error.message : String(error));
}
