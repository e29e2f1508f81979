import fs from 'node:fs';
import path from 'node:path';
import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { PasswordHasher } from './password-hash.ts';

const PREFIX = '$hmac-sha256$';

/**
 * Hashes of application-credential secrets. The secrets are 512 random bits, so a keyed fast hash
 * (HMAC-SHA256 with a server-side pepper that is not in the database) resists offline guessing as
 * well as bcrypt does, and API-key authentication costs microseconds instead of ~200 ms. Hashes
 * imported from a Keystone database (bcrypt and friends) still verify through the password hasher.
 */
export class SecretHasher {
  /** The pepper as a key object: imported once rather than on every HMAC. */
  private readonly key: KeyObject;

  constructor(
    pepper: Buffer,
    private readonly passwords: PasswordHasher,
  ) {
    if (pepper.length < 32) throw new RangeError('the secret pepper must have at least 32 bytes');
    this.key = createSecretKey(pepper);
  }

  hash(secret: string): string {
    return PREFIX + this.digest(secret).toString('base64url');
  }

  async verify(secret: string, stored: string): Promise<boolean> {
    if (!stored.startsWith(PREFIX)) return this.passwords.verify(secret, stored);
    const expected = Buffer.from(stored.slice(PREFIX.length), 'base64url');
    const actual = this.digest(secret);
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }

  private digest(secret: string): Buffer {
    return createHmac('sha256', this.key).update(secret, 'utf8').digest();
  }
}

/** Keystone's generated secret: 64 random bytes, URL-safe base64 without padding (86 chars). */
export function newSecret(): string {
  return randomBytes(64).toString('base64url');
}

/**
 * The pepper: SECRET_PEPPER when given (every node of a cluster must share it), else one generated
 * on first start and kept in a file (mode 0600) beside the embedded database.
 */
export function loadPepper(configured: string | undefined, file: string): { pepper: Buffer; created: boolean } {
  if (configured) return { pepper: Buffer.from(configured, 'utf8'), created: false };
  try {
    return { pepper: Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64url'), created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const pepper = randomBytes(32);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, pepper.toString('base64url'), { mode: 0o600, flag: 'wx' });
  return { pepper, created: true };
}
