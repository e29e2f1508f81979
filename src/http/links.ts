import type { FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** scheme://host[:port][/prefix] that links and WWW-Authenticate are built from (no /v3). */
    publicBase?: string;
  }
}

/**
 * Keystone's base URL: PUBLIC_URL when configured, else derived from the request (X-Forwarded-Proto
 * is honoured, X-Forwarded-Host is not, as behind Keystone's ProxyFix).
 */
export function baseUrl(request: FastifyRequest): string {
  return request.publicBase ?? '';
}

/** Where the identity API is also served, beside the root (devstack's layout: clients' auth_url ends in /identity/v3). */
export const IDENTITY_MOUNT = '/identity';

/** Set on a raw request that reached the identity API under a prefix (IDENTITY_MOUNT). */
export const MOUNT_PREFIX = Symbol('identity API mount prefix');

export function deriveBaseUrl(request: FastifyRequest, configured: string, fixed: boolean): string {
  const prefix = (request.raw as { [MOUNT_PREFIX]?: string })[MOUNT_PREFIX] ?? '';
  return baseWithoutPrefix(request, configured, fixed) + prefix;
}

function baseWithoutPrefix(request: FastifyRequest, configured: string, fixed: boolean): string {
  if (fixed) return configured;
  const host = request.headers.host;
  if (!host || !/^[A-Za-z0-9.\-:[\]]+$/.test(host)) return configured;
  const forwarded = request.headers['x-forwarded-proto'];
  const proto = typeof forwarded === 'string' ? forwarded.split(',')[0]!.trim().toLowerCase() : '';
  const scheme = proto === 'https' || proto === 'http' ? proto : 'http';
  const defaultPort = scheme === 'https' ? ':443' : ':80';
  return `${scheme}://${host.endsWith(defaultPort) ? host.slice(0, -defaultPort.length) : host}`;
}

/**
 * A constructor, not an object literal: every entity of a long list has one, and V8 tenures a
 * literal's allocation site when a young-generation collection finds a page of them alive (see
 * JsonNode in render.ts).
 */
class SelfLink {
  constructor(readonly self: string) {}
}

/** `links.self` of an entity: <base>/v3/<collection>/<id>. */
export function selfLink(request: FastifyRequest, collection: string, id: string): { self: string } {
  return new SelfLink(`${baseUrl(request)}/v3/${collection}/${encodeURIComponent(id)}`);
}

/** Collection links: self is the request URL exactly as received; Keystone never paginates. */
export function collectionLinks(request: FastifyRequest): { self: string; previous: null; next: null } {
  return { self: `${baseUrl(request)}${request.url}`, previous: null, next: null };
}
