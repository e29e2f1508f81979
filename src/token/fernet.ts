import { createCipheriv, createDecipheriv, createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { randomChunk } from './random.ts';

const VERSION = 0x80;
const TIMESTAMP_OFFSET = 1;
const IV_OFFSET = 9;
const CIPHERTEXT_OFFSET = 25;
const IV_LENGTH = 16;
const HMAC_LENGTH = 32;
const BLOCK_LENGTH = 16;
const FRAMING_LENGTH = CIPHERTEXT_OFFSET + HMAC_LENGTH;
const KEY_LENGTH = 32;

const BASE64URL_TOKEN = /^[A-Za-z0-9_-]+={0,2}$/;
const BASE64URL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** The token is not a Fernet token, or none of our keys made it. */
export class InvalidFernetTokenError extends Error {
  override name = 'InvalidFernetTokenError';

  constructor(message = 'Could not recognize Fernet token') {
    super(message);
  }
}

interface KeyPair {
  signing: KeyObject;
  encryption: KeyObject;
}

/**
 * Fernet (spec version 0x80) over an ordered key list: the first key encrypts, every key is tried in
 * order when decrypting. No TTL here: Keystone keeps expiry in the payload.
 */
export class FernetKeys {
  private readonly keys: readonly KeyPair[];

  constructor(keys: readonly Uint8Array[]) {
    if (keys.length === 0) throw new RangeError('Fernet needs at least one key');
    this.keys = keys.map((key, index) => {
      if (key.length !== KEY_LENGTH) throw new RangeError(`Fernet key ${index} must be ${KEY_LENGTH} bytes, got ${key.length}`);
      return { signing: createSecretKey(key.subarray(0, 16)), encryption: createSecretKey(key.subarray(16, 32)) };
    });
  }

  get size(): number {
    return this.keys.length;
  }

  /** Encrypts with the primary key; the IV parameter exists for reproducible test vectors. */
  encrypt(plaintext: Uint8Array, timestampSeconds: number, iv: Uint8Array = randomChunk(IV_LENGTH)): string {
    if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
      throw new RangeError(`Fernet timestamp must be a non-negative integer, got ${timestampSeconds}`);
    }
    if (iv.length !== IV_LENGTH) throw new RangeError(`Fernet IV must be ${IV_LENGTH} bytes, got ${iv.length}`);
    const key = this.keys[0]!;
    const cipher = createCipheriv('aes-128-cbc', key.encryption, iv);
    const body = cipher.update(plaintext);
    const tail = cipher.final();
    const signedLength = CIPHERTEXT_OFFSET + body.length + tail.length;
    const raw = Buffer.allocUnsafe(signedLength + HMAC_LENGTH);
    raw[0] = VERSION;
    raw.writeUInt32BE(Math.floor(timestampSeconds / 2 ** 32), TIMESTAMP_OFFSET);
    raw.writeUInt32BE(timestampSeconds % 2 ** 32, TIMESTAMP_OFFSET + 4);
    raw.set(iv, IV_OFFSET);
    raw.set(body, CIPHERTEXT_OFFSET);
    raw.set(tail, CIPHERTEXT_OFFSET + body.length);
    createHmac('sha256', key.signing).update(raw.subarray(0, signedLength)).digest().copy(raw, signedLength);
    return raw.toString('base64url');
  }

  decrypt(token: string): { plaintext: Buffer; timestampSeconds: number } {
    const raw = decodeToken(token);
    const signedLength = raw.length - HMAC_LENGTH;
    const signed = raw.subarray(0, signedLength);
    const mac = raw.subarray(signedLength);
    for (const key of this.keys) {
      if (!timingSafeEqual(createHmac('sha256', key.signing).update(signed).digest(), mac)) continue;
      return {
        plaintext: decryptVerified(key.encryption, raw.subarray(IV_OFFSET, CIPHERTEXT_OFFSET), raw.subarray(CIPHERTEXT_OFFSET, signedLength)),
        timestampSeconds: readTimestamp(raw),
      };
    }
    throw new InvalidFernetTokenError();
  }
}

/** Strict base64url with optional padding and canonical trailing bits, so each token has one spelling. */
function decodeToken(token: string): Buffer {
  if (typeof token !== 'string' || !BASE64URL_TOKEN.test(token)) throw new InvalidFernetTokenError();
  let bodyLength = token.length;
  while (token.charCodeAt(bodyLength - 1) === 0x3d /* = */) bodyLength--;
  const remainder = bodyLength % 4;
  if (remainder === 1) throw new InvalidFernetTokenError();
  if (bodyLength !== token.length && token.length % 4 !== 0) throw new InvalidFernetTokenError();
  if (remainder !== 0) {
    const last = BASE64URL_ALPHABET.indexOf(token[bodyLength - 1]!);
    const unusedBits = remainder === 2 ? 0x0f : 0x03;
    if ((last & unusedBits) !== 0) throw new InvalidFernetTokenError();
  }
  const raw = Buffer.from(bodyLength === token.length ? token : token.slice(0, bodyLength), 'base64url');
  if (raw[0] !== VERSION || raw.length < FRAMING_LENGTH + BLOCK_LENGTH || (raw.length - FRAMING_LENGTH) % BLOCK_LENGTH !== 0) {
    throw new InvalidFernetTokenError();
  }
  return raw;
}

// Padding is checked by hand so the plaintext is one buffer (no update/final concatenation).
function decryptVerified(encryption: KeyObject, iv: Buffer, ciphertext: Buffer): Buffer {
  const decipher = createDecipheriv('aes-128-cbc', encryption, iv);
  decipher.setAutoPadding(false);
  const padded = decipher.update(ciphertext);
  decipher.final();
  const padding = padded[padded.length - 1]!;
  if (padding < 1 || padding > BLOCK_LENGTH || padding > padded.length) throw new InvalidFernetTokenError();
  for (let index = padded.length - padding; index < padded.length; index++) {
    if (padded[index] !== padding) throw new InvalidFernetTokenError();
  }
  return padded.subarray(0, padded.length - padding);
}

function readTimestamp(raw: Buffer): number {
  const high = raw.readUInt32BE(TIMESTAMP_OFFSET);
  // Beyond 2^53 a Number would round (and Python could not render such a time anyway).
  if (high > 0x1fffff) throw new InvalidFernetTokenError();
  return high * 2 ** 32 + raw.readUInt32BE(TIMESTAMP_OFFSET + 4);
}
