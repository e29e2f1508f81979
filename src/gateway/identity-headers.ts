import type { TokenContext } from '../token/token-service.ts';

/**
 * A header name in the one form names are compared in: lower case, '_' read as '-' (CGI and WSGI
 * servers give X_ROLES and X-Roles the same key, HTTP_X_ROLES).
 */
export function normalizedHeaderName(name: string): string {
  return name.toLowerCase().replace(/_/g, '-');
}

// Every header keystonemiddleware sets, their X-Service-* twins, the deprecated ones, and
// OpenStack-System-Scope (which keystonemiddleware itself forgets to strip).
const USER_HEADERS = [
  'x-identity-status',
  'x-domain-id',
  'x-domain-name',
  'x-project-id',
  'x-project-name',
  'x-project-domain-id',
  'x-project-domain-name',
  'x-user-id',
  'x-user-name',
  'x-user-domain-id',
  'x-user-domain-name',
  'x-roles',
  'x-is-admin-project',
  'x-service-catalog',
];
export const FORGEABLE_HEADERS: ReadonlySet<string> = new Set([
  ...USER_HEADERS,
  ...USER_HEADERS.map((name) => name.replace(/^x-/, 'x-service-')),
  'x-service-roles',
  'x-role',
  'x-user',
  'x-tenant-id',
  'x-tenant-name',
  'x-tenant',
  'openstack-system-scope',
]);

/**
 * Request headers a common framework or server behind us believes, by what they claim
 * (docs/gateway.md, "Headers a service behind the gateway can believe"): the names below, and every name starting
 * with one of BELIEVED_HEADER_PREFIXES. A client may never send any of them to a service: the
 * gateway sets X-Forwarded-For/-Proto/-Host (-Port from a trusted proxy) itself and drops every
 * other one.
 */
export const BELIEVED_HEADER_FAMILIES = {
  /** Who the caller is: keystonemiddleware's set, nova's noauth and Swift's tempauth, auth proxies. */
  identity: [
    ...FORGEABLE_HEADERS,
    'x-auth-project-id',
    'x-auth-user',
    'x-storage-user',
    'remote-user',
    'x-remote-user',
    'x-remote-group',
    'x-forwarded-user',
    'x-forwarded-email',
    'x-forwarded-groups',
    'x-forwarded-preferred-username',
    'x-auth-request-user',
    'x-auth-request-email',
    'x-auth-request-groups',
    'x-auth-request-preferred-username',
    'x-webauth-user',
  ],
  /**
   * Credentials the gateway did not verify: a service would authenticate from them (Basic auth,
   * keystonemiddleware's oauth2 filters, Swift's tempauth, oauth2-proxy setups) as someone other
   * than the X-Auth-Token user policy allowed. X-Auth-Token and X-Service-Token pass: validated.
   */
  credentials: ['authorization', 'x-auth-key', 'x-storage-pass', 'x-forwarded-access-token', 'x-auth-request-access-token'],
  /** A client certificate a TLS-terminating proxy verified: the gateway verifies none. */
  clientCertificate: [
    'client-cert',
    'client-cert-chain',
    'x-forwarded-client-cert',
    'x-client-cert',
    'x-ssl-cert',
    'ssl-client-cert',
    'x-client-verify',
    'ssl-client-verify',
    'x-client-dn',
    'x-arr-clientcert',
  ],
  /** The client's address: only X-Forwarded-For, set from the socket (and TRUSTED_PROXIES). */
  clientAddress: [
    'x-forwarded-for',
    'forwarded',
    'x-real-ip',
    'x-client-ip',
    'client-ip',
    'true-client-ip',
    'cf-connecting-ip',
    'cf-connecting-ipv6',
    'x-cluster-client-ip',
    'fastly-client-ip',
    'x-original-forwarded-for',
    'x-forwarded',
    'forwarded-for',
    'x-envoy-external-address',
    'x-appengine-user-ip',
    'x-proxyuser-ip',
    'x-originating-ip',
    'x-remote-ip',
    'x-remote-addr',
  ],
  /** The scheme, host and port the client used: only X-Forwarded-Proto/-Host (-Port), set by us. */
  schemeAndHost: [
    'x-forwarded-proto',
    'x-forwarded-host',
    'x-forwarded-port',
    'x-forwarded-ssl',
    'x-forwarded-scheme',
    'x-forwarded-protocol',
    'x-forwarded-server',
    'front-end-https',
    'x-url-scheme',
    'x-scheme',
    'x-original-host',
    'x-host',
    'x-arr-ssl',
    'cloudfront-forwarded-proto',
  ],
  /** Where the service is mounted or which path was asked for: policy decided on the path we send. */
  path: [
    'x-forwarded-prefix',
    'x-script-name',
    'script-name',
    'x-original-url',
    'x-original-uri',
    'x-rewrite-url',
    'x-forwarded-path',
    'x-forwarded-uri',
    'x-envoy-original-path',
  ],
  /** Another method than the request's: policy decided on the request's. */
  method: ['x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-method'],
} as const satisfies Record<string, readonly string[]>;

/** Whole families named by prefix: every header whose name starts with one is dropped. */
export const BELIEVED_HEADER_PREFIXES = {
  /** Kubernetes' authenticating proxy, AWS ALB OIDC, Google IAP, Azure App Service, Cloudflare Access. */
  identity: ['x-remote-extra-', 'x-amzn-oidc-', 'x-goog-authenticated-user-', 'x-ms-client-principal', 'cf-access-'],
  /** nginx/HAProxy's X-SSL-Client-* (Verify, DN, I-DN, Serial, Fingerprint, Escaped-Cert, …), AWS ALB mTLS. */
  clientCertificate: ['x-ssl-client-', 'x-amzn-mtls-clientcert'],
  /** Proxy-Authorization, Proxy-Connection, Proxy-Status, …: for a proxy, never for a service. */
  hopByHop: ['proxy-'],
} as const satisfies Record<string, readonly string[]>;

// Hop-by-hop headers (RFC 9110 §7.6.1; Proxy-* by prefix above) and ones this proxy sets itself.
const NOT_FORWARDED: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
  'expect',
  'host',
  'x-openstack-request-id',
]);

export type HeaderMap = Record<string, string | string[]>;

/** Every header name a client's request never passes on with, normalised: believed and hop-by-hop ones. */
const DROPPED: ReadonlySet<string> = new Set([...Object.values(BELIEVED_HEADER_FAMILIES).flat(), ...NOT_FORWARDED].map(normalizedHeaderName));

const DROPPED_PREFIXES: readonly string[] = Object.values(BELIEVED_HEADER_PREFIXES).flat();
// One anchored pattern, tried only on names whose first letter begins a prefix (x, c, p).
const DROPPED_PREFIX = new RegExp(`^(?:${DROPPED_PREFIXES.join('|')})`);
const PREFIX_INITIALS: ReadonlySet<number> = new Set(DROPPED_PREFIXES.map((prefix) => prefix.charCodeAt(0)));

/** `name` (lower case) is believed or hop-by-hop: a Set lookup, then a prefix check for x-, cf-, proxy- names. */
function isDropped(name: string): boolean {
  return DROPPED.has(name) || (PREFIX_INITIALS.has(name.charCodeAt(0)) && DROPPED_PREFIX.test(name));
}

/** Connection values that name no header (most clients send one of these): not parsed. */
const PLAIN_CONNECTION: ReadonlySet<string> = new Set(['keep-alive', 'close', 'Keep-Alive', 'Close']);

/**
 * The header names a Connection header lists, lower case (RFC 9110 §7.6.1: they are for us, hop by
 * hop, not for the service); undefined when there are none.
 */
function connectionOptions(connection: string | string[] | undefined): ReadonlySet<string> | undefined {
  if (connection === undefined || (typeof connection === 'string' && PLAIN_CONNECTION.has(connection))) return undefined;
  const names = new Set<string>();
  for (const option of String(connection).split(',')) {
    const name = option.trim().toLowerCase();
    if (name) names.add(name);
  }
  return names;
}

/**
 * The client's headers minus the believed and hop-by-hop ones (those its Connection header names
 * included), as a flat [name, value, …] list (undici takes it as is; no object is built per
 * request). A name with '_' is never forwarded, as nginx and Apache do by default: a WSGI service
 * would read X_ROLES as X-Roles. Node lower-cases names, so what remains is in normalised form
 * already: one Set lookup per header in the common case.
 */
export function forwardableHeaders(incoming: Record<string, string | string[] | undefined>): (string | string[])[] {
  const headers: (string | string[])[] = [];
  const hopByHop = connectionOptions(incoming.connection);
  const names = Object.keys(incoming);
  for (let index = 0; index < names.length; index++) {
    const name = names[index]!;
    const value = incoming[name];
    if (value === undefined || name.includes('_') || isDropped(name) || hopByHop?.has(name)) continue;
    headers.push(name, value);
  }
  return headers;
}

/** identityHeaders() as a flat [name, value, …] list, values as sent on the wire (asHeaderValue). */
export function identityHeaderList(user: TokenContext, service: TokenContext | undefined): string[] {
  const list: string[] = [];
  for (const [name, value] of Object.entries(identityHeaders(user, service))) list.push(name, asHeaderValue(value as string));
  return list;
}

const NON_ASCII = /[^\x00-\x7f]/;

/**
 * A header value for the upstream request: text beyond ASCII (a user, project, domain or role name)
 * goes as its UTF-8 bytes. An HTTP header carries bytes, and undici refuses characters above U+00FF
 * outright; one user named 李 must not turn every request into a 502.
 */
export function asHeaderValue(text: string): string {
  return NON_ASCII.test(text) ? Buffer.from(text, 'utf8').toString('latin1') : text;
}

/** The headers keystonemiddleware would set for this user token (and service token, if any). */
export function identityHeaders(user: TokenContext, service: TokenContext | undefined): HeaderMap {
  const headers: HeaderMap = { 'x-identity-status': 'Confirmed', ...tokenHeaders(user, '') };
  if (service) Object.assign(headers, { 'x-service-identity-status': 'Confirmed', ...tokenHeaders(service, 'service-') });
  return headers;
}

function tokenHeaders(token: TokenContext, prefix: '' | 'service-'): HeaderMap {
  const headers: HeaderMap = {
    [`x-${prefix}user-id`]: token.user.id,
    [`x-${prefix}user-name`]: token.user.name,
    [`x-${prefix}user-domain-id`]: token.user.domainId,
    [`x-${prefix}user-domain-name`]: token.user.domainName,
    [`x-${prefix}roles`]: token.roles.map((role) => role.name).join(','),
  };
  switch (token.scope.type) {
    case 'project':
      headers[`x-${prefix}project-id`] = token.scope.project.id;
      headers[`x-${prefix}project-name`] = token.scope.project.name;
      headers[`x-${prefix}project-domain-id`] = token.scope.project.domainId;
      headers[`x-${prefix}project-domain-name`] = token.scope.project.domainName;
      break;
    case 'domain':
      headers[`x-${prefix}domain-id`] = token.scope.domain.id;
      headers[`x-${prefix}domain-name`] = token.scope.domain.name;
      break;
    case 'system':
      // The user's scope only. (keystonemiddleware writes this one header from each token in turn, so
      // a system-scoped service token would lift a project user's request to system scope.)
      if (prefix === '') headers['openstack-system-scope'] = 'all';
      break;
    case 'unscoped':
      break;
  }
  // Keystone's default (no admin project configured) is True, and keystonemiddleware passes it on.
  if (prefix === '') headers['x-is-admin-project'] = 'True';
  return headers;
}
