import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../support/clock.ts';
import type { IdentityService, User, UserReference } from '../identity/identity-service.ts';

/** Keystone's TOTP: 6 digits, HMAC-SHA1, 30-second steps (keystone/auth/plugins/totp.py). */
export const TOTP_DIGITS = 6;
export const TOTP_STEP_SECONDS = 30;

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
/** Characters left in the last 8-character group that Python's b32decode accepts. */
const VALID_TAIL = new Set([0, 2, 4, 5, 7]);

/**
 * A base32 secret as Keystone decodes a `totp` credential's blob: padded with '=' to a multiple of
 * 8, then RFC 4648 base32 (upper case only, like Python's b32decode without casefold). Anything
 * else is not a secret (null): that credential matches no passcode.
 */
export function decodeBase32Secret(blob: string): Buffer | null {
  const text = blob.replace(/=+$/, '');
  if (blob.length - text.length > 6 || !VALID_TAIL.has(text.length % 8)) return null;
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const char of text) {
    const index = BASE32_ALPHABET.indexOf(char);
    if (index < 0) return null;
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((value >> bits) & 0xff);
    }
    value &= (1 << bits) - 1;
  }
  return Buffer.from(out);
}

/** RFC 6238 (HOTP of RFC 4226 over the time step): the passcode for `timeSeconds`. */
export function totpPasscode(key: Uint8Array, timeSeconds: number, options: { digits?: number; step?: number; algorithm?: 'sha1' | 'sha256' | 'sha512' } = {}): string {
  const digits = options.digits ?? TOTP_DIGITS;
  const counter = Math.floor(timeSeconds / (options.step ?? TOTP_STEP_SECONDS));
  const message = Buffer.alloc(8);
  message.writeUInt32BE(Math.floor(counter / 2 ** 32), 0);
  message.writeUInt32BE(counter % 2 ** 32, 4);
  const digest = createHmac(options.algorithm ?? 'sha1', key).update(message).digest();
  const offset = digest[digest.length - 1]! & 0x0f;
  const binary = digest.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

/** The passcodes Keystone accepts at `timeSeconds`: the current step and `previousWindows` before it. */
export function acceptedPasscodes(key: Uint8Array, timeSeconds: number, previousWindows: number): string[] {
  const codes: string[] = [];
  for (let window = 0; window <= previousWindows; window++) codes.push(totpPasscode(key, timeSeconds - window * TOTP_STEP_SECONDS));
  return codes;
}

/** Whether `passcode` is accepted for any of the base32 secrets (a constant-time comparison each). */
export function passcodeMatches(secrets: readonly string[], passcode: unknown, timeSeconds: number, previousWindows: number): boolean {
  if (typeof passcode !== 'string') return false;
  const given = Buffer.from(passcode);
  let matched = false;
  for (const secret of secrets) {
    const key = decodeBase32Secret(secret);
    if (!key) continue;
    for (const code of acceptedPasscodes(key, timeSeconds, previousWindows)) {
      const expected = Buffer.from(code);
      if (expected.length === given.length && timingSafeEqual(expected, given)) matched = true;
    }
  }
  return matched;
}

/**
 * The `totp` auth method: the passcode is checked against each of the user's `totp` credentials
 * (their blobs are base32 secrets). A failure is the generic 401 and counts towards the lockout as
 * a wrong password does (the identity service's bookkeeping; Keystone itself does not count them).
 */
export class TotpAuthenticator {
  constructor(
    private readonly identity: Pick<IdentityService, 'authenticateFactor'>,
    /** The blobs of a user's `totp` credentials, decrypted. */
    private readonly secretsOf: (userId: string) => Promise<string[]>,
    private readonly clock: Clock,
    /** Keystone's [totp] included_previous_windows. */
    private readonly previousWindows: number,
  ) {}

  authenticate(user: UserReference, passcode: unknown): Promise<User> {
    return this.identity.authenticateFactor(user, 'Invalid username or TOTP passcode', async (userId) =>
      passcodeMatches(await this.secretsOf(userId), passcode, this.clock.now() / 1000, this.previousWindows),
    );
  }
}
