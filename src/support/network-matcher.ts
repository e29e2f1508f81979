import net from 'node:net';

/** An IPv4 address written IPv6-mapped (a dual-stack socket's peer) as plain IPv4. */
export function unmappedAddress(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/**
 * A test of addresses against a list of addresses and CIDR blocks (as validated by config.ts):
 * METRICS_ALLOWED_NETWORKS, TRUSTED_PROXIES. IPv6-mapped IPv4 addresses match their IPv4 entries;
 * anything that is not an IP address (a Unix socket's peer, garbage in a header) never matches.
 */
export function networkMatcher(entries: readonly string[]): (address: string | undefined) => boolean {
  // Per request on the gateway: an empty list (the default TRUSTED_PROXIES) costs nothing.
  if (entries.length === 0) return () => false;
  const networks = new net.BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const family = net.isIPv4(address) ? 'ipv4' : 'ipv6';
    if (bits === undefined) networks.addAddress(address, family);
    else networks.addSubnet(address, Number(bits), family);
  }
  return (address) => {
    if (address === undefined) return false;
    const plain = unmappedAddress(address);
    const family = net.isIP(plain);
    return family !== 0 && networks.check(plain, family === 4 ? 'ipv4' : 'ipv6');
  };
}
