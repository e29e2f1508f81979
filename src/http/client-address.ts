import net from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { networkMatcher, unmappedAddress } from '../support/network-matcher.ts';

/** The address of the client behind a request, for rate limits and the audit trail. */
export type ClientAddressResolver = (socketAddress: string | undefined, headers: IncomingHttpHeaders) => string;

/**
 * The socket's peer, unless it is a trusted proxy: then X-Forwarded-For is read from the right,
 * skipping trusted proxies, and the first other address is the client. Nothing a client writes in
 * X-Forwarded-For is believed unless every hop after it is trusted.
 */
export function clientAddressResolver(trustedProxies: readonly string[]): ClientAddressResolver {
  if (trustedProxies.length === 0) return (socketAddress) => unmappedAddress(socketAddress ?? '');
  const isTrusted = networkMatcher(trustedProxies);
  return (socketAddress, headers) => {
    let client = unmappedAddress(socketAddress ?? '');
    if (!isTrusted(client)) return client;
    const header = headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((hop) => unmappedAddress(hop.trim()))
      .filter(Boolean);
    while (hops.length > 0) {
      const hop = hops.pop()!;
      if (!net.isIP(hop)) return client; // garbage: stop at the last address we could trust
      client = hop;
      if (!isTrusted(hop)) return hop;
    }
    return client;
  };
}
