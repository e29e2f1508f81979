import type { TokenPayload } from './fernet-payload.ts';
import type { KeySetFingerprints } from './key-agreement.ts';

export interface DecodedToken {
  payload: TokenPayload;
  /** Whole seconds since the epoch. */
  issuedAt: number;
}

/**
 * Turns a token payload into the string clients carry and back. Key material is loaded at start and
 * reloaded when it changes, never per request. decode() throws NotFoundError with Keystone's texts
 * for anything that is not a token of ours.
 */
export interface TokenProvider {
  readonly name: 'fernet' | 'jws' | 'uuid';
  start(): void | Promise<void>;
  stop(): void;
  issue(payload: TokenPayload, issuedAtSeconds: number): string | Promise<string>;
  decode(token: string): DecodedToken | Promise<DecodedToken>;
  /** Keys are loaded and the last reload succeeded (readyz `token_keys`). */
  readonly keysReady: boolean;
  /** Called after keys change (drop caches of tokens validated with old keys). */
  onReload(listener: () => void): void;
  /** Fingerprints of the keys in use (never the keys), for the nodes' agreement; none for uuid. */
  readonly keyFingerprints: KeySetFingerprints | undefined;
}
