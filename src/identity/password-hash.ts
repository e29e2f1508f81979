/**
 * Password hashing compatible with Keystone 22 (passlib 1.7.4): new hashes are bcrypt `$2b$`; stored
 * hashes in any format Keystone may have written (bcrypt variants, passlib scrypt, pbkdf2-sha512, and
 * legacy sha512-crypt) verify. Stored data is never trusted to be well formed: anything unparseable
 * or out of range verifies as false instead of throwing.
 */
import { createHash, pbkdf2, scrypt, timingSafeEqual } from 'node:crypto';
import type { ScryptOptions } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { hash as bcryptHash, verify as bcryptVerify } from '@node-rs/bcrypt';

export interface PasswordHasherOptions {
  /** bcrypt cost for new hashes, 4..31 (Keystone `[identity] password_hash_rounds`, default 12). */
  bcryptRounds: number;
  /**
   * Keystone `[identity] max_password_length` (default 4096). Applies, in UTF-8 bytes, to the
   * non-bcrypt formats; bcrypt always uses at most 72 bytes.
   */
  maxPasswordLength?: number;
}

/** bcrypt only ever reads 72 key bytes; Keystone 22.0.2 truncates to exactly this before hashing. */
const BCRYPT_MAX_PASSWORD_BYTES = 72;
const DEFAULT_MAX_PASSWORD_LENGTH = 4096;

/**
 * Salt and checksum of a real cost-12 bcrypt hash of a random secret that was discarded, so no
 * password can match it. Verification time depends only on the cost field, so the configured cost
 * is spliced in front; the result is still a well-formed hash the verifier runs in full.
 */
const DUMMY_BCRYPT_SALT_AND_CHECKSUM = 'KdjDsvf2HZ2Pyvwe/k8cfurWDd8t6Uj4q1DBTnp2IqTHnmJmlHNu.';

/** Upper bound on scrypt memory accepted from stored parameters (passlib's default needs 64 MiB). */
const SCRYPT_MAX_MEMORY_BYTES = 1024 * 1024 * 1024;

/** Largest iteration count node:crypto pbkdf2 accepts (int32); passlib's own cap is higher but unused. */
const PBKDF2_MAX_ROUNDS = 0x7fffffff;

/** glibc / passlib sha512-crypt limits. */
const SHA512_CRYPT_DEFAULT_ROUNDS = 5000;
const SHA512_CRYPT_MIN_ROUNDS = 1000;
const SHA512_CRYPT_MAX_ROUNDS = 999_999_999;
const SHA512_CRYPT_MAX_SALT_BYTES = 16;
/** Rounds between event-loop yields, so a high-round legacy hash cannot stall other requests. */
const SHA512_CRYPT_ROUNDS_PER_SLICE = 2000;

/** Alphabet of crypt(3)'s base64 and passlib's "hash64" (little-endian bit packing in both). */
const CRYPT_BASE64_ALPHABET = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

const BCRYPT_PATTERN = /^\$(2|2a|2b|2x|2y)\$(\d\d)\$([./A-Za-z0-9]{53})$/;
const PASSLIB_SCRYPT_PATTERN = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,10}),p=(\d{1,10})\$([A-Za-z0-9+/]*)\$([A-Za-z0-9+/]+)$/;
const SCRYPT_7_PATTERN = /^\$7\$([./A-Za-z0-9])([./A-Za-z0-9]{5})([./A-Za-z0-9]{5})([^$]*)\$([./A-Za-z0-9]{43})$/;
const PBKDF2_SHA512_PATTERN = /^\$pbkdf2-sha512\$(0|[1-9]\d{0,9})\$([A-Za-z0-9./+]*)\$([A-Za-z0-9./+]+)$/;
const SHA512_CRYPT_PATTERN = /^\$6\$(?:rounds=([1-9]\d{0,9})\$)?([^$]*)\$([./A-Za-z0-9]{86})$/;

export class PasswordHasher {
  private readonly bcryptRounds: number;
  private readonly maxPasswordLength: number;
  private readonly dummyHash: string;

  constructor(options: PasswordHasherOptions) {
    const { bcryptRounds, maxPasswordLength = DEFAULT_MAX_PASSWORD_LENGTH } = options;
    if (!Number.isInteger(bcryptRounds) || bcryptRounds < 4 || bcryptRounds > 31) {
      throw new RangeError(`bcryptRounds must be an integer between 4 and 31, got ${String(bcryptRounds)}`);
    }
    if (!Number.isInteger(maxPasswordLength) || maxPasswordLength < 1) {
      throw new RangeError(`maxPasswordLength must be a positive integer, got ${String(maxPasswordLength)}`);
    }
    this.bcryptRounds = bcryptRounds;
    this.maxPasswordLength = maxPasswordLength;
    this.dummyHash = `$2b$${String(bcryptRounds).padStart(2, '0')}$${DUMMY_BCRYPT_SALT_AND_CHECKSUM}`;
  }

  /** New bcrypt `$2b$` hash with a fresh random salt, of the first 72 UTF-8 bytes (Keystone 22.0.2). */
  async hash(password: string): Promise<string> {
    return bcryptHash(truncateUtf8(password, BCRYPT_MAX_PASSWORD_BYTES), {
      cost: this.bcryptRounds,
      version: '2b',
    });
  }

  /**
   * True only if the stored hash is in a supported format and matches. A missing, malformed or
   * unsupported stored hash still costs one dummy bcrypt verification, so a user without a usable
   * password cannot be told apart by timing from one whose password was wrong.
   */
  async verify(password: string, storedHash: string | null | undefined): Promise<boolean> {
    if (typeof password !== 'string' || typeof storedHash !== 'string' || storedHash === '') {
      await this.verifyDummy(typeof password === 'string' ? password : '');
      return false;
    }
    let outcome: boolean | undefined;
    try {
      outcome = await this.verifyKnownFormat(password, storedHash);
    } catch {
      // A throw here can only come from stored data the crypto primitives refused; that is a failed
      // check, not a server error.
      outcome = false;
    }
    if (outcome === undefined) {
      await this.verifyDummy(password);
      return false;
    }
    return outcome;
  }

  /** Spends the time of one bcrypt verification at the configured cost; for unknown users. */
  async verifyDummy(password: string): Promise<void> {
    try {
      const key = truncateUtf8(typeof password === 'string' ? password : '', BCRYPT_MAX_PASSWORD_BYTES);
      await bcryptVerify(key, this.dummyHash);
    } catch {
      // Only the elapsed time matters.
    }
  }

  /** Resolves undefined when the stored hash is in no format we can check. */
  private async verifyKnownFormat(password: string, storedHash: string): Promise<boolean | undefined> {
    if (storedHash.startsWith('$2')) return this.verifyBcrypt(password, storedHash);
    if (storedHash.startsWith('$scrypt$')) {
      return verifyPasslibScrypt(truncateUtf8(password, this.maxPasswordLength), storedHash);
    }
    if (storedHash.startsWith('$7$')) {
      return verifyScrypt7(truncateUtf8(password, this.maxPasswordLength), storedHash);
    }
    if (storedHash.startsWith('$pbkdf2-sha512$')) {
      return verifyPbkdf2Sha512(truncateUtf8(password, this.maxPasswordLength), storedHash);
    }
    if (storedHash.startsWith('$6$')) {
      return verifySha512Crypt(truncateUtf8(password, this.maxPasswordLength), storedHash);
    }
    return undefined;
  }

  private async verifyBcrypt(password: string, storedHash: string): Promise<boolean | undefined> {
    const match = BCRYPT_PATTERN.exec(storedHash);
    if (!match) return undefined;
    const [, variant, cost, saltAndChecksum] = match as unknown as [string, string, string, string];
    if (Number(cost) < 4 || Number(cost) > 31) return undefined;
    const key = truncateUtf8(password, BCRYPT_MAX_PASSWORD_BYTES);
    switch (variant) {
      case '2':
        // The original `$2$` left the NUL terminator out of the cyclically repeated key. Feeding
        // the key already repeated to 72 bytes to `$2a$` reproduces that exactly; passlib uses the
        // same workaround. (Empty key: passlib passes it through unchanged, so do we.)
        return bcryptVerify(repeatToLength(key, BCRYPT_MAX_PASSWORD_BYTES), `$2a$${cost}$${saltAndChecksum}`);
      case '2x':
        // Genuine `$2x$` hashes come from crypt_blowfish's sign-extension bug, which only changes
        // the result for bytes >= 0x80. For ASCII passwords the standard algorithm is exact; for
        // anything else it could accept a different password, so refuse (passlib cannot verify
        // `$2x$` at all).
        if (key.some((byte) => byte >= 0x80)) return undefined;
        return bcryptVerify(key, storedHash);
      default:
        // `$2a$`, `$2b$` and `$2y$` differ only for passwords of 255+ bytes, which truncation rules out.
        return bcryptVerify(key, storedHash);
    }
  }
}

/** Keystone truncates the UTF-8 encoding (possibly mid-character), not the string. */
function truncateUtf8(password: string, maxBytes: number): Buffer {
  const encoded = Buffer.from(password, 'utf8');
  return encoded.length > maxBytes ? encoded.subarray(0, maxBytes) : encoded;
}

function repeatToLength(source: Buffer, length: number): Buffer {
  if (source.length === 0) return source;
  const repeated = Buffer.alloc(length);
  for (let index = 0; index < length; index += 1) repeated[index] = source[index % source.length]!;
  return repeated;
}

function constantTimeEqual(left: Buffer, right: Buffer): boolean {
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Base64 without padding; passlib's "adapted base64" additionally spells '+' as '.'. */
function decodeUnpaddedBase64(text: string): Buffer | undefined {
  if (text.length % 4 === 1) return undefined;
  return Buffer.from(text.replaceAll('.', '+'), 'base64');
}

function scryptAsync(password: Buffer, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, keyLength, options, (error, derived) => (error ? reject(error) : resolve(derived)));
  });
}

function pbkdf2Sha512Async(password: Buffer, salt: Buffer, rounds: number, keyLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    pbkdf2(password, salt, rounds, keyLength, 'sha512', (error, derived) => (error ? reject(error) : resolve(derived)));
  });
}

/** Runs scrypt with limits derived from stored parameters, or undefined if they are unreasonable. */
async function scryptChecked(
  password: Buffer,
  salt: Buffer,
  log2Cost: number,
  blockSize: number,
  parallelism: number,
  keyLength: number,
): Promise<Buffer | undefined> {
  if (log2Cost < 1 || log2Cost > 31 || blockSize < 1 || parallelism < 1) return undefined;
  if (blockSize * parallelism >= 2 ** 30) return undefined;
  const cost = 2 ** log2Cost;
  // OpenSSL's accounting: the V array (128·r·(N+2)) plus the B array (128·r·p).
  const memory = 128 * blockSize * (cost + 2) + 128 * blockSize * parallelism;
  if (memory > SCRYPT_MAX_MEMORY_BYTES) return undefined;
  return scryptAsync(password, salt, keyLength, {
    N: cost,
    r: blockSize,
    p: parallelism,
    maxmem: memory + 1024 * 1024,
  });
}

/** passlib `$scrypt$ln=16,r=8,p=1$<salt>$<hash>`, salt and hash unpadded standard base64. */
async function verifyPasslibScrypt(password: Buffer, storedHash: string): Promise<boolean | undefined> {
  const match = PASSLIB_SCRYPT_PATTERN.exec(storedHash);
  if (!match) return undefined;
  const [, log2Text, blockText, parallelText, saltText, checksumText] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const salt = decodeUnpaddedBase64(saltText);
  const expected = decodeUnpaddedBase64(checksumText);
  // passlib's scrypt checksum is always 32 bytes; anything else it refuses to parse.
  if (!salt || !expected || expected.length !== 32) return undefined;
  const derived = await scryptChecked(password, salt, Number(log2Text), Number(blockText), Number(parallelText), 32);
  if (!derived) return undefined;
  return constantTimeEqual(derived, expected);
}

/**
 * The `$7$` scrypt crypt format (Colin Percival / libsodium), which passlib's scrypt handler also
 * reads: N as one hash64 digit of log2, r and p as 30-bit little-endian hash64 numbers, then the salt
 * used verbatim as bytes, then a 32-byte hash64 checksum.
 */
async function verifyScrypt7(password: Buffer, storedHash: string): Promise<boolean | undefined> {
  const match = SCRYPT_7_PATTERN.exec(storedHash);
  if (!match) return undefined;
  const [, log2Text, blockText, parallelText, saltText, checksumText] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const derived = await scryptChecked(
    password,
    Buffer.from(saltText, 'utf8'),
    decodeHash64Integer(log2Text),
    decodeHash64Integer(blockText),
    decodeHash64Integer(parallelText),
    32,
  );
  if (!derived) return undefined;
  return constantTimeEqual(Buffer.from(encodeHash64(derived), 'ascii'), Buffer.from(checksumText, 'ascii'));
}

/** passlib `$pbkdf2-sha512$<rounds>$<salt>$<hash>`, adapted base64, 64-byte hash. */
async function verifyPbkdf2Sha512(password: Buffer, storedHash: string): Promise<boolean | undefined> {
  const match = PBKDF2_SHA512_PATTERN.exec(storedHash);
  if (!match) return undefined;
  const [, roundsText, saltText, checksumText] = match as unknown as [string, string, string, string];
  const rounds = Number(roundsText);
  if (rounds < 1 || rounds > PBKDF2_MAX_ROUNDS) return undefined;
  const salt = decodeUnpaddedBase64(saltText);
  const expected = decodeUnpaddedBase64(checksumText);
  if (!salt || !expected || expected.length !== 64) return undefined;
  const derived = await pbkdf2Sha512Async(password, salt, rounds, 64);
  return constantTimeEqual(derived, expected);
}

/** glibc `$6$[rounds=N$]<salt>$<86-char checksum>`. */
async function verifySha512Crypt(password: Buffer, storedHash: string): Promise<boolean | undefined> {
  const match = SHA512_CRYPT_PATTERN.exec(storedHash);
  if (!match) return undefined;
  const [, roundsText, saltText, checksumText] = match as unknown as [string, string | undefined, string, string];
  const rounds = roundsText === undefined ? SHA512_CRYPT_DEFAULT_ROUNDS : Number(roundsText);
  // glibc would silently clamp out-of-range values and truncate long salts, but it never writes
  // such strings itself; passlib rejects them, and so do we.
  if (rounds < SHA512_CRYPT_MIN_ROUNDS || rounds > SHA512_CRYPT_MAX_ROUNDS) return undefined;
  const salt = Buffer.from(saltText, 'utf8');
  if (salt.length > SHA512_CRYPT_MAX_SALT_BYTES) return undefined;
  // crypt(3) would stop at a NUL and passlib refuses such passwords outright.
  if (password.includes(0)) return undefined;
  const computed = await sha512CryptChecksum(password, salt, rounds);
  return constantTimeEqual(Buffer.from(computed, 'ascii'), Buffer.from(checksumText, 'ascii'));
}

/**
 * The 86-character checksum of Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512" (the
 * algorithm behind glibc's `$6$`), step numbers as in that specification.
 */
async function sha512CryptChecksum(password: Buffer, salt: Buffer, rounds: number): Promise<string> {
  const digestLength = 64;

  // Steps 4-8: digest B = SHA512(password, salt, password).
  const digestB = createHash('sha512').update(password).update(salt).update(password).digest();

  // Steps 1-3 and 9-12: digest A.
  const contextA = createHash('sha512').update(password).update(salt);
  let remaining = password.length;
  for (; remaining > digestLength; remaining -= digestLength) contextA.update(digestB);
  contextA.update(digestB.subarray(0, remaining));
  for (let bits = password.length; bits > 0; bits >>= 1) contextA.update(bits & 1 ? digestB : password);
  const digestA = contextA.digest();

  // Steps 13-16: byte sequence P, the password-length prefix of repeated SHA512(password × length).
  const contextDP = createHash('sha512');
  for (let index = 0; index < password.length; index += 1) contextDP.update(password);
  const sequenceP = repeatToExactLength(contextDP.digest(), password.length);

  // Steps 17-20: byte sequence S, the salt-length prefix of repeated SHA512(salt × (16 + A[0])).
  const contextDS = createHash('sha512');
  for (let index = 0; index < 16 + digestA[0]!; index += 1) contextDS.update(salt);
  const sequenceS = repeatToExactLength(contextDS.digest(), salt.length);

  // Step 21: the deliberately slow part.
  let digestC = digestA;
  for (let round = 0; round < rounds; round += 1) {
    const context = createHash('sha512');
    context.update(round & 1 ? sequenceP : digestC);
    if (round % 3 !== 0) context.update(sequenceS);
    if (round % 7 !== 0) context.update(sequenceP);
    context.update(round & 1 ? digestC : sequenceP);
    digestC = context.digest();
    if ((round + 1) % SHA512_CRYPT_ROUNDS_PER_SLICE === 0 && round + 1 < rounds) await yieldToEventLoop();
  }

  // Step 22: crypt base64 of the digest with the SHA-512 byte transposition.
  const byteTriples: ReadonlyArray<readonly [number, number, number]> = [
    [0, 21, 42], [22, 43, 1], [44, 2, 23], [3, 24, 45], [25, 46, 4], [47, 5, 26], [6, 27, 48],
    [28, 49, 7], [50, 8, 29], [9, 30, 51], [31, 52, 10], [53, 11, 32], [12, 33, 54], [34, 55, 13],
    [56, 14, 35], [15, 36, 57], [37, 58, 16], [59, 17, 38], [18, 39, 60], [40, 61, 19], [62, 20, 41],
  ];
  let encoded = '';
  for (const [high, middle, low] of byteTriples) {
    encoded += encodeCrypt24Bits((digestC[high]! << 16) | (digestC[middle]! << 8) | digestC[low]!, 4);
  }
  return encoded + encodeCrypt24Bits(digestC[63]!, 2);
}

function repeatToExactLength(source: Buffer, length: number): Buffer {
  const repeated = Buffer.alloc(length);
  for (let offset = 0; offset < length; offset += source.length) {
    source.copy(repeated, offset, 0, Math.min(source.length, length - offset));
  }
  return repeated;
}

/** crypt(3)'s b64_from_24bit: least significant six bits first. */
function encodeCrypt24Bits(value: number, characters: number): string {
  let encoded = '';
  for (let index = 0; index < characters; index += 1) {
    encoded += CRYPT_BASE64_ALPHABET[(value >> (6 * index)) & 0x3f];
  }
  return encoded;
}

/** passlib hash64 little-endian encoding of bytes (3 bytes → 4 characters, short tail allowed). */
function encodeHash64(bytes: Buffer): string {
  let encoded = '';
  for (let offset = 0; offset < bytes.length; offset += 3) {
    const chunk = bytes.subarray(offset, offset + 3);
    const value = chunk[0]! | ((chunk[1] ?? 0) << 8) | ((chunk[2] ?? 0) << 16);
    encoded += encodeCrypt24Bits(value, chunk.length + 1);
  }
  return encoded;
}

/** passlib hash64 little-endian integer (decode_int6 / decode_int30). */
function decodeHash64Integer(text: string): number {
  let value = 0;
  for (let index = text.length - 1; index >= 0; index -= 1) {
    value = value * 64 + CRYPT_BASE64_ALPHABET.indexOf(text[index]!);
  }
  return value;
}
