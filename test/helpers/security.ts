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
};

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

export function injectOptions(route: RouteUnderTest, headers: Record<string, string>): InjectOptions {
  const body = WRITE_METHODS.has(route.method) && route.method !== 'DELETE' ? { payload: '{}', headers: { ...headers, 'content-type': 'application/json' } } : { headers };
  return { method: route.method as InjectOptions['method'], url: concreteUrl(route.url), ...body };
}
