// The real Keystone 22 the comparison tests ask (../shared/peers/keystone/start.sh); they skip without it.
export const PEER_URL = process.env.KEYSTONE_PEER_URL ?? 'http://127.0.0.1:15000';
export const PEER_PASSWORD = process.env.KEYSTONE_PEER_PASSWORD ?? 'admin-secret';

/** Whether a peer answers at PEER_URL. */
export async function peerUp(): Promise<boolean> {
  try {
    return (await fetch(`${PEER_URL}/v3`, { signal: AbortSignal.timeout(2000) })).status === 200;
  } catch {
    return false;
  }
}

/**
 * Deletes from a token body what two servers' tokens differ in by nature (times, audit ids, the
 * catalog's URLs) and what other test files sharing the peer put there meanwhile: a service provider
 * one of them has enabled is in every Keystone token (Keystone-to-Keystone) until it is deleted.
 */
export function dropUncomparedTokenFields(token: Record<string, unknown>): void {
  for (const key of ['expires_at', 'issued_at', 'audit_ids', 'catalog', 'service_providers']) delete token[key];
}
