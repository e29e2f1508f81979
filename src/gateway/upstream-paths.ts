import type { InternalEndpoint } from '../catalog/internal-endpoints.ts';

/**
 * The upstream path for `rest` (the canonical path after /{service_type}): when the client's path
 * already starts with the endpoint's base path (catalog URLs usually carry the API version, e.g.
 * http://nova:8774/v2.1 and /compute/v2.1/servers) it is used as is, else the base path is
 * prepended (a service mounted under a prefix, e.g. http://ctl/placement).
 */
export function joinPath(upstream: InternalEndpoint, encodedRest: string): string {
  const base = upstream.basePath;
  if (!base || encodedRest === base || encodedRest.startsWith(`${base}/`)) return encodedRest || '/';
  return `${base}${encodedRest === '/' ? '' : encodedRest}` || '/';
}

/** Absolute or path-only Location headers that point at the upstream point at the gateway instead. */
export function rewriteLocation(location: string, upstream: InternalEndpoint, encodedRest: string, publicServiceBase: string): string {
  const prepended = upstream.basePath && joinPath(upstream, encodedRest) !== encodedRest ? upstream.basePath : '';
  let upstreamPath: string;
  if (location.startsWith(upstream.origin + '/') || location === upstream.origin) {
    upstreamPath = location.slice(upstream.origin.length) || '/';
  } else if (location.startsWith('/') && !location.startsWith('//')) {
    upstreamPath = location;
  } else {
    return location;
  }
  if (prepended && (upstreamPath === prepended || upstreamPath.startsWith(`${prepended}/`) || upstreamPath.startsWith(`${prepended}?`))) {
    upstreamPath = upstreamPath.slice(prepended.length) || '/';
  }
  return publicServiceBase + upstreamPath;
}
