import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Clock } from '../../support/clock.ts';

/** What a browser carries between the redirect to the provider and the callback (sealed in a cookie). */
export interface WebSsoState {
  /** The `state` sent to the provider (random, 256 bits); the callback's must be the same. */
  sid: string;
  /** The id_token's `nonce` must be this. */
  nonce: string;
  /** PKCE code_verifier (RFC 7636, S256). */
  verifier: string;
  idpId: string;
  protocolId: string;
  issuer: string;
  /** The trusted dashboard the token goes to. */
  origin: string;
  /** The redirect_uri sent to the provider (the token request repeats it). */
  redirectUri: string;
  /** Milliseconds since the epoch after which the state is refused. */
  expiresAt: number;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** What a websso login state is sealed for: the AES-GCM additional data, so no other sealed value opens as one. */
const WEBSSO_STATE = 'keystone-gateway websso state v1';

/**
 * Seals login states with AES-256-GCM (authenticated: a changed byte fails to open), under a key
 * derived (HKDF-SHA256) from key material every node of a deployment shares (the secret pepper):
 * any node opens what another sealed, without sticky sessions or shared storage. Other short-lived
 * client-held values (the SAML ECP session, ecp-session.ts) are sealed with the same key for another
 * purpose: the purpose is the additional data, so a value never opens as one of another purpose.
 */
export class WebSsoStateSealer {
  private readonly key: Buffer;

  constructor(keyMaterial: Buffer) {
    if (keyMaterial.length === 0) throw new Error('websso state key material is empty');
    this.key = Buffer.from(hkdfSync('sha256', keyMaterial, Buffer.from('keystone-gateway'), Buffer.from('websso state sealing key v1'), 32));
  }

  seal(state: WebSsoState): string {
    return this.sealFor(WEBSSO_STATE, Buffer.from(JSON.stringify(state), 'utf8'));
  }

  /** The state, or undefined when the value is not one this deployment sealed (changed, forged, truncated). */
  open(sealed: string): WebSsoState | undefined {
    const bytes = this.openFor(WEBSSO_STATE, sealed);
    if (!bytes) return undefined;
    try {
      const state = JSON.parse(bytes.toString('utf8')) as WebSsoState;
      return typeof state === 'object' && state !== null && typeof state.sid === 'string' && typeof state.expiresAt === 'number' ? state : undefined;
    } catch {
      return undefined;
    }
  }

  /** `plain` sealed for `purpose` (base64url). */
  sealFor(purpose: string, plain: Buffer): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(purpose, 'utf8'));
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** What was sealed for `purpose`, or undefined (another purpose or key, changed, forged, truncated, longer than 8,192 characters). */
  openFor(purpose: string, sealed: string): Buffer | undefined {
    if (!/^[A-Za-z0-9_-]{1,8192}$/.test(sealed)) return undefined;
    const bytes = Buffer.from(sealed, 'base64url');
    if (bytes.length <= IV_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(purpose, 'utf8'));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
    } catch {
      return undefined;
    }
  }
}
