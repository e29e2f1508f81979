import net from 'node:net';

/** An IPv4 address written IPv6-mapped (a dual-stack socket's peer) as plain IPv4. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/**
 * A test of socket peer addresses against a list of addresses and CIDR blocks (as validated by
 * config.ts). An address that is not an IP address (a Unix socket's peer) never matches.
 */
export function networkMatcher(entries: readonly string[]): (address: string | undefined) => boolean {
  const allowed = new net.BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const family = net.isIPv4(address) ? 'ipv4' : 'ipv6';
    if (bits === undefined) allowed.addAddress(address, family);
    else allowed.addSubnet(address, Number(bits), family);
  }
  return (address) => {
    if (address === undefined) return false;
    const plain = unmapped(address);
    const family = net.isIP(plain);
    return family !== 0 && allowed.check(plain, family === 4 ? 'ipv4' : 'ipv6');
  };
}
