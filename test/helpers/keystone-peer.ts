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
