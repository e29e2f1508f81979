import type { TokenContext } from '../token/token-service.ts';

// Every header keystonemiddleware sets, their X-Service-* twins, the deprecated ones, and
// OpenStack-System-Scope (which keystonemiddleware itself forgets to strip): a client may never
// send any of them to a service behind us. Names are lower case (Node lower-cases incoming ones).
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

// Hop-by-hop headers (RFC 9110 §7.6.1) and ones this proxy sets itself.
const NOT_FORWARDED: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
  'expect',
  'host',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-openstack-request-id',
]);

export type HeaderMap = Record<string, string | string[]>;

/** Every header name a client's request never passes on with: the forgeable and the hop-by-hop ones. */
const DROPPED: ReadonlySet<string> = new Set([...FORGEABLE_HEADERS, ...NOT_FORWARDED]);

/**
 * The client's headers minus forgeable identity headers and hop-by-hop ones, as a flat
 * [name, value, …] list (undici takes it as is; no object is built per request).
 */
export function forwardableHeaders(incoming: Record<string, string | string[] | undefined>): (string | string[])[] {
  const headers: (string | string[])[] = [];
  const names = Object.keys(incoming);
  for (let index = 0; index < names.length; index++) {
    const name = names[index]!;
    const value = incoming[name];
    if (value === undefined || DROPPED.has(name)) continue;
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
      headers['openstack-system-scope'] = 'all';
      break;
    case 'unscoped':
      break;
  }
  // Keystone's default (no admin project configured) is True, and keystonemiddleware passes it on.
  if (prefix === '') headers['x-is-admin-project'] = 'True';
  return headers;
}
