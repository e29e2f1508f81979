import { canonicalizeTarget, type CanonicalTarget } from './path.ts';
import { Refusal } from './outcome.ts';
import type { ProxiedRequest, Route } from './proxied-request.ts';

/** The methods the gateway forwards. */
export const GATEWAY_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

const METHOD_NOT_ALLOWED = new Refusal(405, 'The method is not allowed for the requested URL.', 'method not allowed', [['Allow', [...GATEWAY_METHODS].join(', ')]]);

/**
 * Stage 1: a method the gateway forwards (else 405), and the request target canonicalised once
 * (else 400, thrown by canonicalizeTarget): every later stage sees only the canonical form.
 */
export function canonicalise(proxied: ProxiedRequest): Refusal | undefined {
  if (!GATEWAY_METHODS.has(proxied.request.method ?? '')) return METHOD_NOT_ALLOWED;
  proxied.route = routeOf(canonicalizeTarget(proxied.request.url ?? ''));
  return undefined;
}

/**
 * The route of a canonical target: its service type, and the canonical path after /{service_type},
 * decoded for policy and encoded for forwarding. A decoded segment never contains '/'
 * (canonicalizeTarget refuses it), so the first '/' after the leading one ends the service type in
 * both forms.
 */
export function routeOf(target: CanonicalTarget): Route {
  const prefixEnd = target.path.indexOf('/', 1);
  const encodedPrefixEnd = target.encodedPath.indexOf('/', 1);
  return {
    target,
    // A target of '/' alone names no service; no endpoint is found for it.
    serviceType: target.segments[0]!,
    path: prefixEnd === -1 ? '/' : target.path.slice(prefixEnd),
    encodedPath: encodedPrefixEnd === -1 ? '/' : target.encodedPath.slice(encodedPrefixEnd),
  };
}
