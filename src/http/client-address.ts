import net from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';

/** The address of the client behind a request, for rate limits and the audit trail. */
export type ClientAddressResolver = (socketAddress: string | undefined, headers: IncomingHttpHeaders) => string;

function unmapped(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/**
 * The socket's peer, unless it is a trusted proxy: then X-Forwarded-For is read from the right,
 * skipping trusted proxies, and the first other address is the client. Nothing a client writes in
 * X-Forwarded-For is believed unless every hop after it is trusted.
 */
export function clientAddressResolver(trustedProxies: readonly string[]): ClientAddressResolver {
  if (trustedProxies.length === 0) return (socketAddress) => unmapped(socketAddress ?? '');
  const trusted = new net.BlockList();
  for (const entry of trustedProxies) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const family = net.isIPv4(address) ? 'ipv4' : 'ipv6';
    if (bits === undefined) trusted.addAddress(address, family);
    else trusted.addSubnet(address, Number(bits), family);
  }
  const isTrusted = (address: string) => {
    const family = net.isIP(address);
    return family !== 0 && trusted.check(address, family === 4 ? 'ipv4' : 'ipv6');
  };
  return (socketAddress, headers) => {
    let client = unmapped(socketAddress ?? '');
    if (!isTrusted(client)) return client;
    const header = headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((hop) => unmapped(hop.trim()))
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
