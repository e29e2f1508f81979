import { randomFillSync } from 'node:crypto';

/** Ids per refill of the pool (16 random bytes each), as Node's randomUUID buffers 128. */
const IDS_PER_REFILL = 256;
const pool = Buffer.allocUnsafe(16 * IDS_PER_REFILL);
let used = IDS_PER_REFILL;
/** The id is written here, then read out as one flat string. */
const text = Buffer.from('req-00000000-0000-4000-8000-000000000000', 'latin1');
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Where each of the uuid's 16 bytes stands in a request id (two hex digits each, the dashes skipped). */
export const REQUEST_ID_BYTE_AT: readonly number[] = [4, 6, 8, 10, 13, 15, 18, 20, 23, 25, 28, 30, 32, 34, 36, 38];

/**
 * A request id as Keystone makes them: `req-` and a random (version 4) uuid. Written into one
 * buffer and read out as one flat string: `req-${randomUUID()}` joins some twenty pieces per id
 * (~600 bytes of garbage a request, on the gateway's path) into a string every later use flattens.
 * The pool and the buffer are module state on purpose, as in token/random.ts: they only buffer the
 * CSPRNG, so nothing a caller could inject or observe differs from a randomUUID() per id.
 */
export function newRequestId(): string {
  if (used === IDS_PER_REFILL) {
    randomFillSync(pool);
    used = 0;
  }
  const from = used * 16;
  used += 1;
  for (let index = 0; index < 16; index++) {
    let byte = pool[from + index]!;
    if (index === 6) byte = (byte & 0x0f) | 0x40; // version 4
    else if (index === 8) byte = (byte & 0x3f) | 0x80; // RFC 9562 variant
    const at = REQUEST_ID_BYTE_AT[index]!;
    text[at] = HEX[byte >> 4]!;
    text[at + 1] = HEX[byte & 15]!;
  }
  return text.toString('latin1');
}
