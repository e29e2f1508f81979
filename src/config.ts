import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** Every setting the service reads from its environment, validated once at start. */
export interface Config {
  port: number;
  host: string;
  /** Base URL clients use; links, the WWW-Authenticate header and the bootstrap catalog use it. */
  publicUrl: string;
  /** True when PUBLIC_URL was given: links then ignore the request's Host header. */
  publicUrlFixed: boolean;
  databaseUrl: string | undefined;
  /**
   * Bounds on waiting for PostgreSQL (DATABASE_*_TIMEOUT_MS): past them a request fails with 503;
   * poolSize (DATABASE_POOL_SIZE): connections per process (the embedded database has one).
   */
  database: { connectTimeoutMs: number; acquireTimeoutMs: number; queryTimeoutMs: number; poolSize: number };
  /** With Redis: how often each process also reads new revocation events from the database (0: never). */
  revocationPollIntervalMs: number;
  /**
   * While neither the database nor Redis can be reached, a cached validation is served for at most
   * this long after the node last heard from either (keystonemiddleware's token_cache_time), then 503.
   */
  staleValidationMaxSeconds: number;
  dataDir: string;
  redisUrl: string | undefined;
  adminPassword: string | undefined;
  tokenExpiration: number;
  /** TRUST_MAX_REDELEGATION_COUNT: Keystone's [trust] max_redelegation_count (the depth of a trust chain). */
  trustMaxRedelegationCount: number;
  /** OAUTH1_REQUEST_TOKEN_DURATION: Keystone's [oauth1] request_token_duration, seconds (0: never expires). */
  oauth1RequestTokenDuration: number;
  /** OAUTH1_ACCESS_TOKEN_DURATION: Keystone's [oauth1] access_token_duration, seconds (0: never expires). */
  oauth1AccessTokenDuration: number;
  /**
   * FEDERATION_REMOTE_ID_ATTRIBUTE: Keystone's [federation] remote_id_attribute, the assertion
   * attribute naming the identity provider when a protocol has no remote_id_attribute of its own
   * (empty: none, and a protocol without one accepts any provider's assertion, as in Keystone).
   */
  federationRemoteIdAttribute: string;
  /** RECEIPT_EXPIRATION: Keystone's [receipt] expiration, the lifetime of an MFA auth receipt (seconds). */
  receiptExpiration: number;
  /** TOTP_INCLUDED_PREVIOUS_WINDOWS: Keystone's [totp] included_previous_windows. */
  totpIncludedPreviousWindows: number;
  fernetKeyRepository: string;
  fernetMaxActiveKeys: number;
  tokenProvider: 'fernet' | 'jws' | 'uuid';
  jwsKeyRepository: string;
  jwsMaxActiveKeys: number;
  /** CREDENTIAL_KEY_REPOSITORY: Keystone's credential key repository (Fernet keys of the credential blobs). */
  credentialKeyRepository: string;
  /** Keystone's [credential] auth_ttl (minutes): how old a signed EC2/S3 request's timestamp may be. */
  credentialAuthTtlMinutes: number;
  /** KEY_ENCRYPTION_KEY (32 bytes): when set, token keys live in the database, encrypted with it, not in files. */
  keyEncryptionKey: Buffer | undefined;
  /** KEY_ENCRYPTION_KEY_PREVIOUS: earlier key encryption keys that still decrypt (while re-encrypting). */
  previousKeyEncryptionKeys: Buffer[];
  /** How often a node checks the database's token key generation (KEY_ENCRYPTION_KEY set). */
  keyReloadIntervalMs: number;
  passwordHashRounds: number;
  /** Key of the application-credential secret hashes; generated into DATA_DIR when unset. */
  secretPepper: string | undefined;
  logLevel: string;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  maxHeaderBytes: number;
  gatewayRegion: string;
  upstreamConnectTimeoutMs: number;
  upstreamResponseTimeoutMs: number;
  upstreamConnections: number;
  /** Consecutive connection failures/timeouts that open an upstream's circuit (0: off), and for how long. */
  upstreamCircuitFailures: number;
  upstreamCircuitOpenMs: number;
  /** Socket peer addresses/CIDRs allowed to read GET /metrics; empty: the route does not exist. */
  metricsAllowedNetworks: string[];
  serviceTokenRoles: string[];
  gatewayServiceCatalogHeader: boolean;
  /** GATEWAY_REQUEST_FRONT: plain gateway requests are read and answered by the request front (http/front/), the rest by node:http. */
  gatewayRequestFront: boolean;
  /** GATEWAY_PUBLIC_CATALOG: clients' catalogs send them through the gateway (false: the registered catalog, as Keystone serves it). */
  gatewayPublicCatalog: boolean;
  policyDirectory: string;
  identityPolicyDirectory: string;
  /** POLICY_SHADOW_DIR: a second gateway policy, decided for every proxied request but never enforced (undefined: none). */
  policyShadowDirectory: string | undefined;
  /** Decisions kept for GET /v3/gateway/decisions/{request_id}: how many per process, how long what a stopped node left stays in Redis (REDIS_URL), under which key prefix. */
  gatewayDecisions: { kept: number; ttlSeconds: number; keyPrefix: string };
  bodyLimitBytes: number;
  /** Body limit of the routes anyone may call (token issue, password change); at most bodyLimitBytes. */
  publicBodyLimitBytes: number;
  /**
   * DOMAIN_CONFIG_DIR: operators' per-domain configuration files, `keystone.<domain name>.conf`
   * (Keystone's domain_config_dir), read at start; undefined: none (domains are configured through the API).
   */
  domainConfigDirectory: string | undefined;
  /** Keystone's [security_compliance] options (IDENTITY_*). */
  securityCompliance: SecurityCompliance;
  authRateLimit: AuthRateLimit;
  /** Proxies whose X-Forwarded-For is believed when finding a client's address (addresses, CIDRs). */
  trustedProxies: string[];
  /** Prefix of the rate-limit keys in Redis. */
  rateLimitKeyPrefix: string;
  /** Redis pub/sub channel of the nodes of one deployment (REDIS_EVENTS_CHANNEL). */
  redisEventsChannel: string;
  /** Redis stream that receives audit events (when REDIS_URL is set), and its approximate cap. */
  auditStream: string;
  auditStreamMaxLength: number;
  /** Processes serving requests (node:cluster) when DATABASE_URL is set; the embedded database runs one. */
  workers: number;
  /** True when WORKERS was given (not the one-per-core default). */
  workersGiven: boolean;
  /** How long a stopping process lets in-flight requests finish before closing their connections. */
  shutdownTimeoutMs: number;
  /**
   * LIST_PAGE_SIZE: rows read per database query by the long lists (GET /v3/users, /v3/projects,
   * /v3/groups/{id}/users, /v3/role_assignments, effective ones expanded per page of grants); a list
   * longer than one page is written to the client page by page. 200: a page's objects then die in
   * the young generation; at 1,000 they lived through two scavenges, were promoted, and the old
   * generation grew by ~25 MB while a 100k-user list streamed (bench/README.md, 2026-11-30).
   */
  listPageSize: number;
  /**
   * V8 heap limits the cluster primary gives the workers it forks (node's --max-old-space-size and
   * --max-semi-space-size, in MB); 0 (the default) leaves node's. Off by default: a worker that
   * reaches its cap dies, and the caches are bounded by entries, not bytes, so the right cap depends
   * on the deployment (bench/README.md, "Memory with 100k users"). Not applied to a single process (WORKERS=1, embedded
   * database): pass those flags to node or in NODE_OPTIONS there.
   */
  workerHeap: WorkerHeap;
  /** OIDC_*: the native OpenID Connect verifier of federated logins (src/federation/oidc/). */
  oidc: OidcSettings;
  /** Browser single sign-on (Keystone's websso): TRUSTED_DASHBOARDS, WEBSSO_*. */
  websso: WebSsoSettings;
  /** Keystone's [saml] section: this service as a SAML 2.0 identity provider (K2K); off without key files. */
  saml: SamlIdpConfig;
  /** SAML_SP_* and SAML_TRUSTED_IDP_METADATA: this service as a SAML 2.0 service provider (src/federation/saml/sp/). */
  samlSp: SamlSpSettings;
}

/** How SAML responses posted to a federated login are verified (this service as SAML service provider). */
export interface SamlSpSettings {
  /** SAML_PROTOCOLS: the federation protocol ids whose logins carry a SAML response (default saml2). */
  protocols: string[];
  /**
   * SAML_TRUSTED_IDP_METADATA: files (absolute paths) or http(s) URLs of identity-provider metadata;
   * signatures are checked against their certificates only. Empty: every SAML login is refused.
   */
  trustedIdpMetadata: string[];
  /** SAML_METADATA_REFRESH_SECONDS: how often a metadata URL is fetched again (files: on each change). */
  metadataRefreshSeconds: number;
  /** SAML_METADATA_HTTP_TIMEOUT_MS: bound on fetching one metadata URL. */
  metadataHttpTimeoutMs: number;
  /** SAML_CLOCK_SKEW_SECONDS: tolerance on NotBefore, NotOnOrAfter and IssueInstant. */
  clockSkewSeconds: number;
  /** SAML_SP_ENTITY_ID: an Audience this service answers to, beside its login URLs. */
  entityId: string | undefined;
  /**
   * SAML_SP_ACCEPTED_RECIPIENTS: further URLs accepted as Destination and Recipient, beside this
   * login's own public URL (or the ECP consumer's): e.g. an older address an identity provider still posts to.
   */
  acceptedRecipients: string[];
  /** SAML_SIGNATURE_ALGORITHMS: the XML-DSig signature algorithms accepted (rsa-sha256, rsa-sha512, rsa-sha1). */
  signatureAlgorithms: Array<'rsa-sha256' | 'rsa-sha512' | 'rsa-sha1'>;
  /** SAML_REMOTE_ID_ATTRIBUTE: Keystone's [saml2] remote_id_attribute for SAML protocols (default Shib-Identity-Provider). */
  remoteIdAttribute: string;
  /** SAML_REPLAY_KEY_PREFIX: the Redis key prefix of the assertion ids already used (with REDIS_URL). */
  replayKeyPrefix: string;
}

/** How bearer tokens of OpenID Providers are verified on a federated login (OIDC_* settings). */
export interface OidcSettings {
  /** OIDC_PROTOCOLS: the federation protocol ids whose logins carry an OIDC bearer token. */
  protocols: string[];
  /** OIDC_AUDIENCES: a token's `aud` must name one of these; empty: not checked (a warning at start). */
  audiences: string[];
  /** OIDC_CLOCK_SKEW_SECONDS: tolerance on exp, nbf and iat. */
  clockSkewSeconds: number;
  /** OIDC_HTTP_TIMEOUT_MS: bound on each request to a provider (connect, headers and body). */
  httpTimeoutMs: number;
  /** OIDC_METADATA_CACHE_SECONDS: how long a provider's discovery document and JWKS are kept. */
  metadataCacheSeconds: number;
  /** OIDC_JWKS_REFRESH_INTERVAL_SECONDS: at most one JWKS refetch per issuer this often for an unknown kid. */
  jwksRefreshIntervalSeconds: number;
  /**
   * Client credentials for RFC 7662 introspection of opaque tokens, by issuer
   * (OIDC_INTROSPECTION_CLIENTS), else the default pair (OIDC_INTROSPECTION_CLIENT_ID/_SECRET).
   */
  introspection: {
    default: OidcClientCredentials | undefined;
    byIssuer: Record<string, OidcClientCredentials>;
  };
}

export interface OidcClientCredentials {
  clientId: string;
  clientSecret: string;
}

/** The relying party of the browser login (websso): OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_SCOPE. */
export interface OidcRelyingParty {
  clientId: string;
  /** Absent: a public client (PKCE only, client_id in the token request). */
  clientSecret: string | undefined;
  /** The scopes asked for (always including openid). */
  scope: string;
  /** OIDC_USERINFO: the provider's userinfo claims are added to the id_token's (as mod_auth_openidc does). */
  userinfo: boolean;
}

/** Keystone's websso (browser single sign-on) settings. */
export interface WebSsoSettings {
  /**
   * TRUSTED_DASHBOARDS: Keystone's [federation] trusted_dashboard, the only URLs a websso login
   * posts its token to (their host names lower-cased, as Keystone compares them).
   */
  trustedDashboards: string[];
  /** WEBSSO_STATE_TTL_SECONDS: how long a browser may take at the provider between the redirect and the callback. */
  stateTtlSeconds: number;
  /** WEBSSO_KEY_PREFIX: prefix of the Redis keys that make each login state single-use across nodes (with REDIS_URL). */
  replayKeyPrefix: string;
  /** OIDC_CLIENT_ID and friends; absent: no OIDC websso (every websso login of an OIDC protocol is a 401). */
  oidcClient: OidcRelyingParty | undefined;
}

/** SAML_*: Keystone's [saml] options (src/federation/saml/). */
export interface SamlIdpConfig {
  /** SAML_CERTFILE and SAML_KEYFILE (PEM): both or neither; neither means SAML is not configured. */
  certFile: string | undefined;
  keyFile: string | undefined;
  /** SAML_IDP_ENTITY_ID, SAML_IDP_SSO_ENDPOINT: required with the key files. */
  entityId: string | undefined;
  ssoEndpoint: string | undefined;
  lang: string;
  organizationName: string;
  organizationDisplayName: string;
  organizationUrl: string;
  contactCompany: string;
  contactName: string;
  contactSurname: string;
  contactEmail: string;
  contactTelephone: string;
  contactType: 'technical' | 'support' | 'administrative' | 'billing' | 'other';
  /** SAML_ASSERTION_EXPIRATION_TIME: seconds an assertion is valid (NotOnOrAfter), Keystone's default 3600. */
  assertionExpirationTime: number;
  /** SAML_SIGNATURE_ALGORITHM: rsa-sha256 (default) or rsa-sha1 (what Keystone 22's xmlsec1 template uses). */
  signatureAlgorithm: 'rsa-sha256' | 'rsa-sha1';
}

/** V8 heap limits for cluster workers, in MB (0: node's default). */
export interface WorkerHeap {
  maxOldSpaceMb: number;
  maxSemiSpaceMb: number;
}

/** Keystone's [security_compliance] section; undefined means the rule is off, as in Keystone. */
export interface SecurityCompliance {
  /** Anchored at the start like Python's re.match, as Keystone applies password_regex. */
  passwordRegex: RegExp | undefined;
  passwordRegexDescription: string | undefined;
  passwordExpiresDays: number | undefined;
  lockoutFailureAttempts: number | undefined;
  lockoutDurationSeconds: number;
  disableUserAccountDaysInactive: number | undefined;
  uniqueLastPasswordCount: number;
  minimumPasswordAgeDays: number;
  changePasswordUponFirstUse: boolean;
}

/** Password and secret attempts (token requests, self-service password changes) per window; 0 turns a limit off. */
export interface AuthRateLimit {
  perAddress: number;
  perUser: number;
  windowSeconds: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Environment = Record<string, string | undefined>;

function integer(env: Environment, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got '${raw}'`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function url(env: Environment, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: '${raw}'`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got '${parsed.protocol}'`);
  }
  return raw;
}

function tokenProvider(env: Environment): Config['tokenProvider'] {
  const value = (env.TOKEN_PROVIDER || 'fernet').toLowerCase();
  if (value === 'fernet' || value === 'jws' || value === 'uuid') return value;
  if (value === 'pki' || value === 'pkiz') {
    throw new ConfigError(`TOKEN_PROVIDER=${value} was removed from Keystone (Ocata) and is not supported: use fernet (the default) or jws`);
  }
  throw new ConfigError(`TOKEN_PROVIDER must be fernet, jws or uuid, got '${value}'`);
}

function pepper(env: Environment): string | undefined {
  const value = env.SECRET_PEPPER;
  if (!value) return undefined;
  if (Buffer.byteLength(value) < 32) throw new ConfigError('SECRET_PEPPER must be at least 32 bytes (e.g. openssl rand -base64 48)');
  return value;
}

/** 32 bytes in base64 or base64url (e.g. openssl rand -base64 32); never echoed in the message. */
function keyEncryptionKey(env: Environment): Buffer | undefined {
  const value = env.KEY_ENCRYPTION_KEY?.trim();
  return value ? decodeKeyEncryptionKey(value, 'KEY_ENCRYPTION_KEY') : undefined;
}

/** Comma-separated, like KEY_ENCRYPTION_KEY; only meaningful beside it. */
function previousKeyEncryptionKeys(env: Environment): Buffer[] {
  const values = (env.KEY_ENCRYPTION_KEY_PREVIOUS ?? '').split(',').map((value) => value.trim()).filter(Boolean);
  if (values.length > 0 && !env.KEY_ENCRYPTION_KEY?.trim()) throw new ConfigError('KEY_ENCRYPTION_KEY_PREVIOUS needs KEY_ENCRYPTION_KEY (the key to encrypt with from now on)');
  return values.map((value) => decodeKeyEncryptionKey(value, 'KEY_ENCRYPTION_KEY_PREVIOUS'));
}

function decodeKeyEncryptionKey(value: string, name: string): Buffer {
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(value) ? Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64') : undefined;
  if (key?.length !== 32) {
    throw new ConfigError(`${name} must be 32 bytes in base64 or base64url (e.g. openssl rand -base64 32)`);
  }
  return key;
}

/** An integer setting that is off when unset. */
function optionalInteger(env: Environment, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return integer(env, name, 0, min, max);
}

/**
 * Keystone applies password_regex with Python's re.match: anchored at the start only. Unicode mode
 * when the pattern allows it, so `.` and lengths count characters as Python does.
 */
function passwordRegex(env: Environment): RegExp | undefined {
  const source = env.IDENTITY_PASSWORD_REGEX;
  if (source === undefined || source === '') return undefined;
  for (const flags of ['u', '']) {
    try {
      return new RegExp(`^(?:${source})`, flags);
    } catch {
      // Python accepts some escapes that Unicode mode refuses; try without it.
    }
  }
  throw new ConfigError(`IDENTITY_PASSWORD_REGEX is not a valid regular expression: '${source}'`);
}

function securityCompliance(env: Environment): SecurityCompliance {
  return {
    passwordRegex: passwordRegex(env),
    passwordRegexDescription: env.IDENTITY_PASSWORD_REGEX_DESCRIPTION || undefined,
    passwordExpiresDays: optionalInteger(env, 'IDENTITY_PASSWORD_EXPIRES_DAYS', 1, 36_500),
    lockoutFailureAttempts: optionalInteger(env, 'IDENTITY_LOCKOUT_FAILURE_ATTEMPTS', 1, 1_000_000),
    lockoutDurationSeconds: integer(env, 'IDENTITY_LOCKOUT_DURATION', 1800, 1, 31_536_000),
    disableUserAccountDaysInactive: optionalInteger(env, 'IDENTITY_DISABLE_USER_ACCOUNT_DAYS_INACTIVE', 1, 36_500),
    uniqueLastPasswordCount: integer(env, 'IDENTITY_UNIQUE_LAST_PASSWORD_COUNT', 0, 0, 1000),
    minimumPasswordAgeDays: integer(env, 'IDENTITY_MINIMUM_PASSWORD_AGE', 0, 0, 36_500),
    changePasswordUponFirstUse: booleanSetting(env, 'IDENTITY_CHANGE_PASSWORD_UPON_FIRST_USE', false),
  };
}

/** Comma-separated IPv4/IPv6 addresses and CIDR blocks; `fallback` when unset (set but empty: none). */
function networks(env: Environment, name: string, fallback = ''): string[] {
  const entries = (env[name] ?? fallback).split(',').map((entry) => entry.trim()).filter(Boolean);
  for (const entry of entries) {
    const [address, bits, ...rest] = entry.split('/');
    const family = net.isIP(address ?? '');
    const maxBits = family === 4 ? 32 : 128;
    const validBits = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= maxBits);
    if (!family || rest.length > 0 || !validBits) {
      throw new ConfigError(`${name} must list IP addresses or CIDR blocks, got '${entry}'`);
    }
  }
  return entries;
}

function booleanSetting(env: Environment, name: string, fallback: boolean): boolean {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got '${value}'`);
}

/** POLICY_SHADOW_DIR: unset or empty for none; never the live policy's own directory (it would only ever agree). */
function shadowDirectory(env: Environment): string | undefined {
  if (!env.POLICY_SHADOW_DIR) return undefined;
  const directory = path.resolve(env.POLICY_SHADOW_DIR);
  const live = path.resolve(env.POLICY_DIR || path.join(projectRoot, 'policies'));
  if (directory === live) throw new ConfigError(`POLICY_SHADOW_DIR must not be POLICY_DIR (${directory})`);
  return directory;
}

/** Comma-separated, trimmed, empty entries dropped; `fallback` when unset. */
function list(env: Environment, name: string, fallback = ''): string[] {
  return (env[name] ?? fallback).split(',').map((entry) => entry.trim()).filter(Boolean);
}

function oidcSettings(env: Environment): OidcSettings {
  const protocols = list(env, 'OIDC_PROTOCOLS', 'openid');
  for (const protocol of protocols) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(protocol)) throw new ConfigError(`OIDC_PROTOCOLS must list protocol ids, got '${protocol}'`);
  }
  const clientId = env.OIDC_INTROSPECTION_CLIENT_ID || undefined;
  const clientSecret = env.OIDC_INTROSPECTION_CLIENT_SECRET || undefined;
  if ((clientId === undefined) !== (clientSecret === undefined)) {
    throw new ConfigError('OIDC_INTROSPECTION_CLIENT_ID and OIDC_INTROSPECTION_CLIENT_SECRET must be set together');
  }
  return {
    protocols,
    audiences: list(env, 'OIDC_AUDIENCES'),
    clockSkewSeconds: integer(env, 'OIDC_CLOCK_SKEW_SECONDS', 60, 0, 600),
    httpTimeoutMs: integer(env, 'OIDC_HTTP_TIMEOUT_MS', 5000, 100, 60_000),
    metadataCacheSeconds: integer(env, 'OIDC_METADATA_CACHE_SECONDS', 3600, 1, 86_400),
    jwksRefreshIntervalSeconds: integer(env, 'OIDC_JWKS_REFRESH_INTERVAL_SECONDS', 30, 0, 3600),
    introspection: {
      default: clientId !== undefined && clientSecret !== undefined ? { clientId, clientSecret } : undefined,
      byIssuer: introspectionClients(env),
    },
  };
}

function webSsoSettings(env: Environment): WebSsoSettings {
  const trustedDashboards = list(env, 'TRUSTED_DASHBOARDS').map((entry) => {
    if (!URL.canParse(entry) || !['http:', 'https:'].includes(new URL(entry).protocol)) {
      throw new ConfigError(`TRUSTED_DASHBOARDS must list http(s) URLs, got '${entry}'`);
    }
    return lowerCaseHostname(entry);
  });
  const clientId = env.OIDC_CLIENT_ID || undefined;
  const clientSecret = env.OIDC_CLIENT_SECRET || undefined;
  if (clientId === undefined && clientSecret !== undefined) throw new ConfigError('OIDC_CLIENT_SECRET is set but OIDC_CLIENT_ID is not');
  const scope = (env.OIDC_SCOPE ?? 'openid profile email').split(/[\s,]+/).filter(Boolean);
  if (!scope.includes('openid')) throw new ConfigError(`OIDC_SCOPE must include openid, got '${env.OIDC_SCOPE}'`);
  for (const entry of scope) if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(entry)) throw new ConfigError(`OIDC_SCOPE: '${entry}' is not a scope token (RFC 6749 §3.3)`);
  return {
    trustedDashboards,
    stateTtlSeconds: integer(env, 'WEBSSO_STATE_TTL_SECONDS', 600, 30, 3600),
    replayKeyPrefix: env.WEBSSO_KEY_PREFIX || 'keystone-gateway:websso:',
    oidcClient: clientId === undefined ? undefined : { clientId, clientSecret, scope: scope.join(' '), userinfo: booleanSetting(env, 'OIDC_USERINFO', true) },
  };
}

/** Keystone's lower_case_hostname: the URL's netloc (between `//` and the path) lower-cased, the rest as given. */
function lowerCaseHostname(value: string): string {
  const match = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/s.exec(value);
  return match ? `${match[1]!.toLowerCase()}${match[2]!.toLowerCase()}${match[3]}` : value;
}

/** OIDC_INTROSPECTION_CLIENTS: {"<issuer>": {"client_id": "…", "client_secret": "…"}, …}; never echoes a secret. */
function introspectionClients(env: Environment): Record<string, OidcClientCredentials> {
  const raw = env.OIDC_INTROSPECTION_CLIENTS;
  if (raw === undefined || raw.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError('OIDC_INTROSPECTION_CLIENTS must be a JSON object {"<issuer>": {"client_id": "…", "client_secret": "…"}}');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('OIDC_INTROSPECTION_CLIENTS must be a JSON object {"<issuer>": {"client_id": "…", "client_secret": "…"}}');
  }
  const clients: Record<string, OidcClientCredentials> = {};
  for (const [issuer, value] of Object.entries(parsed)) {
    if (!URL.canParse(issuer) || !['http:', 'https:'].includes(new URL(issuer).protocol)) {
      throw new ConfigError(`OIDC_INTROSPECTION_CLIENTS: '${issuer}' is not an issuer URL (http or https)`);
    }
    const entry = value as { client_id?: unknown; client_secret?: unknown } | null;
    if (typeof entry?.client_id !== 'string' || !entry.client_id || typeof entry.client_secret !== 'string' || !entry.client_secret) {
      throw new ConfigError(`OIDC_INTROSPECTION_CLIENTS: the issuer '${issuer}' needs a non-empty client_id and client_secret`);
    }
    clients[issuer] = { clientId: entry.client_id, clientSecret: entry.client_secret };
  }
  return clients;
}

const SAML_CONTACT_TYPES = ['technical', 'support', 'administrative', 'billing', 'other'] as const;

/** A URI setting (Keystone's URIOpt): any scheme, parsed by WHATWG URL. */
function uri(env: Environment, name: string, maxLength = 8192): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (raw.length > maxLength) throw new ConfigError(`${name} must be at most ${maxLength} characters`);
  try {
    new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URI: '${raw}'`);
  }
  return raw;
}

const SAML_SP_ALGORITHMS = ['rsa-sha256', 'rsa-sha512', 'rsa-sha1'] as const;

function samlSp(env: Environment): SamlSpSettings {
  const protocols = list(env, 'SAML_PROTOCOLS', 'saml2');
  for (const protocol of protocols) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(protocol)) throw new ConfigError(`SAML_PROTOCOLS must list protocol ids, got '${protocol}'`);
  }
  const oidc = list(env, 'OIDC_PROTOCOLS', 'openid');
  const both = protocols.filter((protocol) => oidc.includes(protocol));
  if (both.length > 0) throw new ConfigError(`SAML_PROTOCOLS and OIDC_PROTOCOLS both name ${both.join(', ')}: a protocol is verified one way`);
  const trustedIdpMetadata = list(env, 'SAML_TRUSTED_IDP_METADATA').map((source) => {
    if (/^https?:\/\//i.test(source)) {
      try {
        new URL(source);
      } catch {
        throw new ConfigError(`SAML_TRUSTED_IDP_METADATA: '${source}' is not a valid URL`);
      }
      return source;
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) throw new ConfigError(`SAML_TRUSTED_IDP_METADATA: '${source}' is neither a file nor an http(s) URL`);
    return path.resolve(source);
  });
  const acceptedRecipients = list(env, 'SAML_SP_ACCEPTED_RECIPIENTS').map((recipient) => {
    try {
      const parsed = new URL(recipient);
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('scheme');
    } catch {
      throw new ConfigError(`SAML_SP_ACCEPTED_RECIPIENTS: '${recipient}' is not an http(s) URL`);
    }
    return recipient;
  });
  const signatureAlgorithms = list(env, 'SAML_SIGNATURE_ALGORITHMS', SAML_SP_ALGORITHMS.join(',')).map((algorithm) => {
    const name = algorithm.toLowerCase();
    if (!(SAML_SP_ALGORITHMS as readonly string[]).includes(name)) throw new ConfigError(`SAML_SIGNATURE_ALGORITHMS must list ${SAML_SP_ALGORITHMS.join(', ')}, got '${algorithm}'`);
    return name as SamlSpSettings['signatureAlgorithms'][number];
  });
  if (signatureAlgorithms.length === 0) throw new ConfigError('SAML_SIGNATURE_ALGORITHMS must name at least one algorithm');
  return {
    protocols,
    trustedIdpMetadata,
    metadataRefreshSeconds: integer(env, 'SAML_METADATA_REFRESH_SECONDS', 3600, 10, 604_800),
    metadataHttpTimeoutMs: integer(env, 'SAML_METADATA_HTTP_TIMEOUT_MS', 5000, 100, 60_000),
    clockSkewSeconds: integer(env, 'SAML_CLOCK_SKEW_SECONDS', 60, 0, 600),
    entityId: uri(env, 'SAML_SP_ENTITY_ID', 1024),
    acceptedRecipients,
    signatureAlgorithms,
    remoteIdAttribute: (env.SAML_REMOTE_ID_ATTRIBUTE ?? 'Shib-Identity-Provider').trim(),
    replayKeyPrefix: env.SAML_REPLAY_KEY_PREFIX || 'keystone-gateway:saml-replay:',
  };
}

function samlIdp(env: Environment): SamlIdpConfig {
  const certFile = env.SAML_CERTFILE ? path.resolve(env.SAML_CERTFILE) : undefined;
  const keyFile = env.SAML_KEYFILE ? path.resolve(env.SAML_KEYFILE) : undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError(`SAML_CERTFILE and SAML_KEYFILE go together: ${certFile ? 'SAML_KEYFILE' : 'SAML_CERTFILE'} is missing`);
  }
  const entityId = uri(env, 'SAML_IDP_ENTITY_ID', 1024);
  const ssoEndpoint = uri(env, 'SAML_IDP_SSO_ENDPOINT');
  if (certFile && !entityId) throw new ConfigError('SAML_IDP_ENTITY_ID is required with SAML_CERTFILE and SAML_KEYFILE');
  if (certFile && !ssoEndpoint) throw new ConfigError('SAML_IDP_SSO_ENDPOINT is required with SAML_CERTFILE and SAML_KEYFILE');
  const contactType = env.SAML_IDP_CONTACT_TYPE || 'other';
  if (!(SAML_CONTACT_TYPES as readonly string[]).includes(contactType)) {
    throw new ConfigError(`SAML_IDP_CONTACT_TYPE must be one of ${SAML_CONTACT_TYPES.join(', ')}, got '${contactType}'`);
  }
  const algorithm = (env.SAML_SIGNATURE_ALGORITHM || 'rsa-sha256').toLowerCase();
  if (algorithm !== 'rsa-sha256' && algorithm !== 'rsa-sha1') throw new ConfigError(`SAML_SIGNATURE_ALGORITHM must be rsa-sha256 or rsa-sha1, got '${algorithm}'`);
  return {
    certFile,
    keyFile,
    entityId,
    ssoEndpoint,
    lang: env.SAML_IDP_LANG || 'en',
    organizationName: env.SAML_IDP_ORGANIZATION_NAME ?? 'SAML Identity Provider',
    organizationDisplayName: env.SAML_IDP_ORGANIZATION_DISPLAY_NAME ?? 'OpenStack SAML Identity Provider',
    organizationUrl: uri(env, 'SAML_IDP_ORGANIZATION_URL') ?? 'https://example.com/',
    contactCompany: env.SAML_IDP_CONTACT_COMPANY ?? 'Example, Inc.',
    contactName: env.SAML_IDP_CONTACT_NAME ?? 'SAML Identity Provider Support',
    contactSurname: env.SAML_IDP_CONTACT_SURNAME ?? 'Support',
    contactEmail: env.SAML_IDP_CONTACT_EMAIL ?? 'support@example.com',
    contactTelephone: env.SAML_IDP_CONTACT_TELEPHONE ?? '+1 800 555 0100',
    contactType: contactType as SamlIdpConfig['contactType'],
    assertionExpirationTime: integer(env, 'SAML_ASSERTION_EXPIRATION_TIME', 3600, 1, 31_536_000),
    signatureAlgorithm: algorithm,
  };
}

/** The checkout the service runs from (policies/ lives there by default). */
const projectRoot = path.resolve(import.meta.dirname, '..');

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Environment = process.env): Config {
  const port = integer(env, 'PORT', 5000, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const given = url(env, 'PUBLIC_URL', ['http:', 'https:']);
  const reachableHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  const publicUrl = (given ?? `http://${reachableHost}:${port}`).replace(/\/+$/, '').replace(/\/v3$/, '');
  const dataDir = path.resolve(env.DATA_DIR || './data');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  const adminPassword = env.ADMIN_PASSWORD || undefined;
  return {
    port,
    host,
    publicUrl,
    publicUrlFixed: given !== undefined,
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    database: {
      connectTimeoutMs: integer(env, 'DATABASE_CONNECT_TIMEOUT_MS', 3000, 100, 600_000),
      acquireTimeoutMs: integer(env, 'DATABASE_ACQUIRE_TIMEOUT_MS', 5000, 100, 600_000),
      queryTimeoutMs: integer(env, 'DATABASE_QUERY_TIMEOUT_MS', 5000, 0, 3_600_000),
      poolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    },
    revocationPollIntervalMs: integer(env, 'REVOCATION_POLL_INTERVAL_MS', 2000, 0, 3_600_000),
    staleValidationMaxSeconds: integer(env, 'STALE_VALIDATION_MAX_SECONDS', 300, 0, 86_400),
    dataDir,
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    adminPassword,
    tokenExpiration: integer(env, 'TOKEN_EXPIRATION', 3600, 60, 31_536_000),
    trustMaxRedelegationCount: integer(env, 'TRUST_MAX_REDELEGATION_COUNT', 3, 0, 1000),
    oauth1RequestTokenDuration: integer(env, 'OAUTH1_REQUEST_TOKEN_DURATION', 28_800, 0, 31_536_000),
    oauth1AccessTokenDuration: integer(env, 'OAUTH1_ACCESS_TOKEN_DURATION', 86_400, 0, 315_360_000),
    federationRemoteIdAttribute: (env.FEDERATION_REMOTE_ID_ATTRIBUTE ?? '').trim(),
    receiptExpiration: integer(env, 'RECEIPT_EXPIRATION', 300, 1, 86_400),
    totpIncludedPreviousWindows: integer(env, 'TOTP_INCLUDED_PREVIOUS_WINDOWS', 1, 0, 10),
    fernetKeyRepository: path.resolve(env.FERNET_KEY_REPOSITORY || path.join(dataDir, 'fernet-keys')),
    fernetMaxActiveKeys: integer(env, 'FERNET_MAX_ACTIVE_KEYS', 3, 1, 100),
    tokenProvider: tokenProvider(env),
    jwsKeyRepository: path.resolve(env.JWS_KEY_REPOSITORY || path.join(dataDir, 'jws-keys')),
    jwsMaxActiveKeys: integer(env, 'JWS_MAX_ACTIVE_KEYS', 3, 1, 100),
    credentialKeyRepository: path.resolve(env.CREDENTIAL_KEY_REPOSITORY || path.join(dataDir, 'credential-keys')),
    credentialAuthTtlMinutes: integer(env, 'CREDENTIAL_AUTH_TTL_MINUTES', 15, 1, 1440),
    keyEncryptionKey: keyEncryptionKey(env),
    previousKeyEncryptionKeys: previousKeyEncryptionKeys(env),
    keyReloadIntervalMs: integer(env, 'KEY_RELOAD_INTERVAL_MS', 5000, 10, 3_600_000),
    passwordHashRounds: integer(env, 'PASSWORD_HASH_ROUNDS', 12, 4, 31),
    secretPepper: pepper(env),
    logLevel,
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000),
    headersTimeoutMs: integer(env, 'HEADERS_TIMEOUT_MS', 10_000, 500, 600_000),
    maxHeaderBytes: integer(env, 'MAX_HEADER_BYTES', 16_384, 1024, 1_048_576),
    gatewayRegion: env.GATEWAY_REGION || 'RegionOne',
    upstreamConnectTimeoutMs: integer(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', 5_000, 100, 600_000),
    upstreamResponseTimeoutMs: integer(env, 'UPSTREAM_RESPONSE_TIMEOUT_MS', 60_000, 100, 3_600_000),
    upstreamConnections: integer(env, 'UPSTREAM_CONNECTIONS', 128, 1, 10_000),
    upstreamCircuitFailures: integer(env, 'UPSTREAM_CIRCUIT_FAILURES', 5, 0, 1_000_000),
    upstreamCircuitOpenMs: integer(env, 'UPSTREAM_CIRCUIT_OPEN_MS', 10_000, 100, 3_600_000),
    metricsAllowedNetworks: networks(env, 'METRICS_ALLOWED_NETWORKS', '127.0.0.0/8,::1'),
    serviceTokenRoles: (env.SERVICE_TOKEN_ROLES || 'service').split(',').map((role) => role.trim()).filter(Boolean),
    gatewayServiceCatalogHeader: booleanSetting(env, 'GATEWAY_SERVICE_CATALOG_HEADER', false),
    gatewayRequestFront: booleanSetting(env, 'GATEWAY_REQUEST_FRONT', true),
    gatewayPublicCatalog: booleanSetting(env, 'GATEWAY_PUBLIC_CATALOG', true),
    policyDirectory: path.resolve(env.POLICY_DIR || path.join(projectRoot, 'policies')),
    identityPolicyDirectory: path.resolve(env.IDENTITY_POLICY_DIR || path.join(projectRoot, 'policies', 'identity')),
    policyShadowDirectory: shadowDirectory(env),
    gatewayDecisions: {
      kept: integer(env, 'GATEWAY_DECISIONS_KEPT', 10_000, 0, 10_000_000),
      ttlSeconds: integer(env, 'GATEWAY_DECISIONS_TTL_SECONDS', 86_400, 1, 31_536_000),
      keyPrefix: env.GATEWAY_DECISIONS_KEY_PREFIX || 'keystone-gateway:decision:',
    },
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 104_857_600),
    publicBodyLimitBytes: integer(env, 'PUBLIC_BODY_LIMIT_BYTES', 65_536, 1024, 104_857_600),
    domainConfigDirectory: env.DOMAIN_CONFIG_DIR ? path.resolve(env.DOMAIN_CONFIG_DIR) : undefined,
    securityCompliance: securityCompliance(env),
    authRateLimit: {
      perAddress: integer(env, 'AUTH_RATE_LIMIT_PER_ADDRESS', 300, 0, 1_000_000),
      perUser: integer(env, 'AUTH_RATE_LIMIT_PER_USER', 10, 0, 1_000_000),
      windowSeconds: integer(env, 'AUTH_RATE_LIMIT_WINDOW', 60, 1, 86_400),
    },
    trustedProxies: networks(env, 'TRUSTED_PROXIES'),
    rateLimitKeyPrefix: env.RATE_LIMIT_KEY_PREFIX || 'keystone-gateway:ratelimit:',
    redisEventsChannel: env.REDIS_EVENTS_CHANNEL || 'keystone-gateway:events',
    auditStream: env.AUDIT_STREAM || 'keystone-gateway:audit',
    auditStreamMaxLength: integer(env, 'AUDIT_STREAM_MAX_LENGTH', 100_000, 1, 100_000_000),
    workers: integer(env, 'WORKERS', os.availableParallelism(), 1, 1024),
    workersGiven: env.WORKERS !== undefined && env.WORKERS !== '',
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 25_000, 100, 600_000),
    listPageSize: integer(env, 'LIST_PAGE_SIZE', 200, 1, 100_000),
    workerHeap: {
      maxOldSpaceMb: integer(env, 'WORKER_MAX_OLD_SPACE_MB', 0, 0, 1_048_576),
      maxSemiSpaceMb: integer(env, 'WORKER_MAX_SEMI_SPACE_MB', 0, 0, 1024),
    },
    oidc: oidcSettings(env),
    websso: webSsoSettings(env),
    saml: samlIdp(env),
    samlSp: samlSp(env),
  };
}
