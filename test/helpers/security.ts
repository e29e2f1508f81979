import type { IncomingHttpHeaders } from 'node:http';
import type { InjectOptions } from 'fastify';

/** A route as the service lists it. */
export interface RouteUnderTest {
  method: string;
  url: string;
  public: boolean;
}

/** Tokens the cases need: a valid unprivileged one (member of some other project) and a dead one. */
export interface SecurityTokens {
  member: string;
  revoked: string;
  expiredOrGarbage: string;
}

/** What the checks read of a response: fastify's inject answers and raw HTTP answers both fit. */
export interface SecurityResponse {
  statusCode: number;
  headers: IncomingHttpHeaders | Record<string, string | string[] | number | undefined>;
  body: string;
  json(): any;
}

/** A raw HTTP answer (as test/helpers/upstream.ts rawRequest gives it) in the shape the checks read. */
export function asSecurityResponse(response: { status: number; headers: IncomingHttpHeaders; body: string }): SecurityResponse {
  return { statusCode: response.status, headers: response.headers, body: response.body, json: () => JSON.parse(response.body) };
}

export interface SecurityCase {
  name: string;
  headers: Record<string, string>;
  /** A JSON body of its own instead of injectOptions' `{}`. */
  payload?: string | Buffer;
  /** Returns a failure description, or undefined when the response is right. */
  check(response: SecurityResponse, baseline: SecurityResponse): string | undefined;
}

/** Every identity header keystonemiddleware sets: a client sending them must gain nothing. */
export const FORGED_IDENTITY_HEADERS: Record<string, string> = {
  'X-Identity-Status': 'Confirmed',
  'X-User-Id': 'forged-admin-id',
  'X-User-Name': 'admin',
  'X-Roles': 'admin,member,reader',
  'X-Is-Admin-Project': 'True',
  'X-Project-Id': 'forged-project',
  'X-Domain-Id': 'default',
  'X-Service-Roles': 'service,admin',
  'X-Service-Identity-Status': 'Confirmed',
  'OpenStack-System-Scope': 'all',
  // The same names with '_': WSGI servers give them the same environ key (HTTP_X_ROLES).
  X_ROLES: 'admin',
  X_USER_ID: 'forged-admin-id',
  X_PROJECT_ID: 'forged-project',
  X_IDENTITY_STATUS: 'Confirmed',
  X_SERVICE_ROLES: 'service,admin',
  'x_is_admin_project': 'True',
};

/**
 * Request headers a common framework or server believes, by what they claim (docs/gateway.md,
 * "Headers a service behind the gateway can believe"). The gateway sets some of them itself (GATEWAY_SET) and
 * drops every other one a client sends, in any spelling. Written here independently of the
 * gateway's own lists: a name missing there fails the generated cases.
 */
export const HEADER_FAMILIES: Record<string, readonly string[]> = {
  // keystonemiddleware's headers, their X-Service-* twins, the deprecated ones, OpenStack-System-Scope;
  // nova's noauth and Swift's tempauth; what Apache, Kubernetes and oauth2-proxy style auth proxies set.
  identity: [
    'X-Identity-Status',
    'X-Service-Identity-Status',
    'X-User-Id',
    'X-User-Name',
    'X-User-Domain-Id',
    'X-User-Domain-Name',
    'X-Project-Id',
    'X-Project-Name',
    'X-Project-Domain-Id',
    'X-Project-Domain-Name',
    'X-Domain-Id',
    'X-Domain-Name',
    'X-Roles',
    'X-Is-Admin-Project',
    'X-Service-Catalog',
    'X-Service-User-Id',
    'X-Service-User-Name',
    'X-Service-User-Domain-Id',
    'X-Service-User-Domain-Name',
    'X-Service-Project-Id',
    'X-Service-Project-Name',
    'X-Service-Project-Domain-Id',
    'X-Service-Project-Domain-Name',
    'X-Service-Roles',
    'X-Role',
    'X-User',
    'X-Tenant',
    'X-Tenant-Id',
    'X-Tenant-Name',
    'OpenStack-System-Scope',
    'X-Auth-Project-Id',
    'X-Auth-User',
    'Remote-User',
    'X-Remote-User',
    'X-Remote-Group',
    'X-Forwarded-User',
    'X-Forwarded-Email',
    'X-Forwarded-Groups',
    'X-Forwarded-Preferred-Username',
    'X-Auth-Request-User',
    'X-Auth-Request-Email',
    'X-Auth-Request-Groups',
    'X-Auth-Request-Preferred-Username',
    'X-WebAuth-User',
    'X-Storage-User',
    // Families named by prefix: Kubernetes' authenticating proxy, AWS ALB, Google IAP, Azure App
    // Service, Cloudflare Access (a few members each; any other member is dropped the same way).
    'X-Remote-Extra-Scopes',
    'X-Remote-Extra-Acme.Com%2Fproject',
    'X-Amzn-Oidc-Data',
    'X-Amzn-Oidc-Identity',
    'X-Goog-Authenticated-User-Email',
    'X-Goog-Authenticated-User-Id',
    'X-MS-Client-Principal',
    'X-MS-Client-Principal-Name',
    'X-Ms-Client-Principal-Idp',
    'Cf-Access-Authenticated-User-Email',
    'Cf-Access-Jwt-Assertion',
  ],
  // Credentials the gateway did not verify: a service (keystonemiddleware's oauth2 filters, Basic
  // auth, Swift's tempauth, oauth2-proxy setups) would authenticate the request from them instead.
  credentials: [
    'Authorization',
    'X-Auth-Key',
    'X-Storage-Pass',
    'X-Forwarded-Access-Token',
    'X-Auth-Request-Access-Token',
    'X-Amzn-Oidc-Accesstoken',
  ],
  'client certificate': [
    'X-Forwarded-Client-Cert',
    'X-Client-Cert',
    'X-Ssl-Client-Cert',
    'Ssl-Client-Cert',
    'X-Client-Verify',
    'X-Ssl-Client-Verify',
    'Ssl-Client-Verify',
    'X-Client-Dn',
    'X-Ssl-Client-Dn',
    'X-Ssl-Client-S-Dn',
    'X-Arr-ClientCert',
    'Client-Cert',
    'Client-Cert-Chain',
    'X-SSL-Cert',
    'X-SSL-Client-I-DN',
    'X-SSL-Client-Serial',
    'X-SSL-Client-Fingerprint',
    'X-SSL-Client-Escaped-Cert',
    'X-SSL-Client-V-End',
    'X-Amzn-Mtls-Clientcert',
    'X-Amzn-Mtls-Clientcert-Subject',
  ],
  'client address': [
    'X-Forwarded-For',
    'Forwarded',
    'X-Real-Ip',
    'X-Client-Ip',
    'Client-Ip',
    'True-Client-Ip',
    'Cf-Connecting-Ip',
    'Cf-Connecting-Ipv6',
    'X-Cluster-Client-Ip',
    'Fastly-Client-Ip',
    'X-Original-Forwarded-For',
    'X-Forwarded',
    'Forwarded-For',
    'X-Envoy-External-Address',
    'X-Appengine-User-Ip',
    'X-ProxyUser-Ip',
    'X-Originating-Ip',
    'X-Remote-Ip',
    'X-Remote-Addr',
  ],
  'scheme and host': [
    'X-Forwarded-Proto',
    'X-Forwarded-Host',
    'X-Forwarded-Port',
    'X-Forwarded-Ssl',
    'X-Forwarded-Scheme',
    'X-Forwarded-Protocol',
    'X-Forwarded-Server',
    'Front-End-Https',
    'X-Url-Scheme',
    'X-Scheme',
    'X-Original-Host',
    'X-Host',
    'X-Arr-Ssl',
    'CloudFront-Forwarded-Proto',
  ],
  path: [
    'X-Forwarded-Prefix',
    'X-Script-Name',
    'Script-Name',
    'X-Original-Url',
    'X-Original-Uri',
    'X-Rewrite-Url',
    'X-Forwarded-Path',
    'X-Forwarded-Uri',
    'X-Envoy-Original-Path',
  ],
  method: ['X-Http-Method-Override', 'X-Http-Method', 'X-Method-Override', 'X-Original-Method'],
};

/** Of HEADER_FAMILIES, the ones the gateway writes itself; from a trusted proxy, its values are kept. */
export const GATEWAY_SET = ['X-Forwarded-For', 'X-Forwarded-Proto', 'X-Forwarded-Host', 'X-Forwarded-Port'];

/** One name in the single form names are compared in: lower case, '_' read as '-'. */
export function normalizedHeaderName(name: string): string {
  return name.toLowerCase().replace(/_/g, '-');
}

/**
 * Every spelling of a header name a server may take for the same header: as written, lower and upper
 * case, mixed case, '_' for every '-' (in each of those cases), and '_' for only the first '-'.
 */
export function spellingsOf(name: string): string[] {
  const mixed = [...name].map((letter, index) => (index % 2 ? letter.toLowerCase() : letter.toUpperCase())).join('');
  const cased = [name, name.toLowerCase(), name.toUpperCase(), mixed];
  const spellings = [...cased, ...cased.map((spelling) => spelling.replace(/-/g, '_')), name.replace('-', '_')];
  return [...new Set(spellings)];
}

const GENERIC_401 = 'The request you have made requires authentication.';

function unauthorized(response: SecurityResponse): string | undefined {
  if (response.statusCode !== 401) return `expected 401, got ${response.statusCode}`;
  if (!String(response.headers['www-authenticate'] ?? '').startsWith('Keystone uri=')) return 'no WWW-Authenticate';
  if (response.body && response.json().error?.message !== GENERIC_401) return `unexpected body ${response.body}`;
  return undefined;
}

/** Fills path parameters with ids that exist nowhere. */
export function concreteUrl(url: string): string {
  return url.replace(/:([a-z_]+)/g, (_match, name: string) => `no-such-${name.replace(/_/g, '-')}`);
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
// Writes a plain member may make on itself (validated further by their own tests).
const SELF_SERVICE_WRITES = new Set(['DELETE /v3/auth/tokens']);

/**
 * The security cases every authenticated route must pass, generated so a new route cannot forget
 * them: no token, a garbage token, a revoked token → 401 (forged identity headers do not help);
 * an unprivileged token gains nothing from forged headers (same answer as without them) and no
 * write of its succeeds. `baseline` is the answer to the unprivileged token without forged headers.
 */
export function securityCases(route: RouteUnderTest, tokens: SecurityTokens): SecurityCase[] {
  const cases: SecurityCase[] = [
    { name: 'no token', headers: {}, check: unauthorized },
    { name: 'garbage token', headers: { 'X-Auth-Token': tokens.expiredOrGarbage }, check: unauthorized },
    { name: 'revoked token', headers: { 'X-Auth-Token': tokens.revoked }, check: unauthorized },
    { name: 'no token, forged identity headers', headers: { ...FORGED_IDENTITY_HEADERS }, check: unauthorized },
    {
      name: 'unprivileged token, forged identity headers',
      headers: { 'X-Auth-Token': tokens.member, ...FORGED_IDENTITY_HEADERS },
      check: (response, baseline) => {
        if (response.statusCode !== baseline.statusCode) {
          return `forged headers changed the answer: ${baseline.statusCode} without, ${response.statusCode} with`;
        }
        if (response.statusCode >= 500) return `server error ${response.statusCode}`;
        const write = WRITE_METHODS.has(route.method) && !SELF_SERVICE_WRITES.has(`${route.method} ${route.url}`);
        if (write && response.statusCode < 400) return `an unprivileged write succeeded: ${response.statusCode}`;
        return undefined;
      },
    },
  ];
  return cases;
}

export function injectOptions(route: RouteUnderTest, headers: Record<string, string>, payload: string | Buffer = '{}'): InjectOptions {
  const body = WRITE_METHODS.has(route.method) && route.method !== 'DELETE' ? { payload, headers: { ...headers, 'content-type': 'application/json' } } : { headers };
  return { method: route.method as InjectOptions['method'], url: concreteUrl(route.url), ...body };
}

// ---- routes anyone may call, and bodies ----------------------------------------------------------

function keystoneShaped(response: SecurityResponse, status: number): string | undefined {
  if (response.statusCode !== status) return `expected ${status}, got ${response.statusCode} ${response.body.slice(0, 200)}`;
  let error: any;
  try {
    error = response.json().error;
  } catch {
    return `not JSON: ${response.body.slice(0, 200)}`;
  }
  if (error?.code !== status || typeof error.title !== 'string' || typeof error.message !== 'string') return `not Keystone-shaped: ${response.body.slice(0, 200)}`;
  return undefined;
}

/**
 * The cases every route anyone may call must pass (token issue, password change, discovery,
 * health): identity headers a client forges, and a token nobody issued, change nothing — the same
 * answer as without them. `baseline` is the answer to the same request with no headers.
 */
export function publicSecurityCases(route: RouteUnderTest, tokens: SecurityTokens): SecurityCase[] {
  const sameAsBaseline = (response: SecurityResponse, baseline: SecurityResponse) => {
    if (response.statusCode >= 500) return `server error ${response.statusCode}`;
    if (response.statusCode !== baseline.statusCode) return `the headers changed the answer: ${baseline.statusCode} without, ${response.statusCode} with`;
    return undefined;
  };
  return [
    { name: 'forged identity headers', headers: { ...FORGED_IDENTITY_HEADERS }, check: sameAsBaseline },
    { name: 'forged identity headers and a garbage token', headers: { 'X-Auth-Token': tokens.expiredOrGarbage, ...FORGED_IDENTITY_HEADERS }, check: sameAsBaseline },
  ];
}

/** Whether a route reads a JSON body (the body cases apply). */
export function takesBody(route: RouteUnderTest): boolean {
  return route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH';
}

/**
 * Bodies every route that reads one must refuse before any handler sees them, Keystone-shaped and
 * never with a 500: nesting deep enough to exhaust a recursive walk, more than the route's limit
 * (`bodyLimit`: PUBLIC_BODY_LIMIT_BYTES on public routes), bytes that are not UTF-8, a lone
 * surrogate and NUL. `headers`: what gets the request past authentication (nothing on a public route).
 */
export function bodyCases(bodyLimit: number, headers: Record<string, string>): SecurityCase[] {
  // As deep as fits under the limit (thousands of levels: a recursive walk of 10,000 overflowed).
  const depth = Math.min(10_000, Math.floor((bodyLimit - 16) / 2));
  return [
    { name: `nested ${depth} levels`, headers, payload: `{"x": ${'['.repeat(depth)}${']'.repeat(depth)}}`, check: (response) => keystoneShaped(response, 400) },
    { name: 'one byte over the body limit', headers, payload: `{"x": "${'a'.repeat(bodyLimit - 8)}"}`, check: (response) => keystoneShaped(response, 413) },
    { name: 'invalid UTF-8', headers, payload: Buffer.concat([Buffer.from('{"x": "'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), check: (response) => keystoneShaped(response, 400) },
    { name: 'a lone surrogate', headers, payload: '{"x": "sg\\ud800z"}', check: (response) => keystoneShaped(response, 400) },
    { name: 'NUL', headers, payload: '{"x\\u0000": 1}', check: (response) => keystoneShaped(response, 400) },
  ];
}
