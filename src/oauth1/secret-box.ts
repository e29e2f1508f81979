import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const PREFIX = 'aes256gcm:';

/**
 * Encryption at rest of OAuth1 secrets (consumer, request token and access token secrets). HMAC-SHA1
 * verification needs the plain secret, so it cannot be hashed as application-credential secrets are;
 * it is kept with AES-256-GCM under a key derived (HKDF-SHA256) from the service's secret pepper
 * (SECRET_PEPPER, or the generated pepper file), which is not in the database. Each ciphertext is
 * bound to the row it belongs to (`context`), so a secret copied to another row does not decrypt.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(pepper: Buffer) {
    if (pepper.length < 32) throw new RangeError('the secret pepper must have at least 32 bytes');
    this.key = Buffer.from(hkdfSync('sha256', pepper, Buffer.alloc(0), 'keystone-gateway oauth1 secrets', 32));
  }

  seal(secret: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url');
  }

  /** The plain secret, or undefined when it does not decrypt (another pepper, another row, tampering). */
  open(stored: string, context: string): string | undefined {
    if (!stored.startsWith(PREFIX)) return undefined;
    const bytes = Buffer.from(stored.slice(PREFIX.length), 'base64url');
    if (bytes.length < 28) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, 12));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(bytes.subarray(12, 28));
      return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }
}
