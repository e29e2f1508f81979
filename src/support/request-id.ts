import { randomFillSync } from 'node:crypto';

/** Ids per refill of the pool (16 random bytes each), as Node's randomUUID buffers 128. */
const IDS_PER_REFILL = 256;
/** Each refill takes a new pool: the bytes of an id drawn are never written again (DrawnRequestId). */
let pool = new Uint8Array(0);
let used = IDS_PER_REFILL;
/** The id is written here, then read out as one flat string. */
const text = Buffer.alloc(40);
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Where each of the uuid's 16 bytes stands in a request id (two hex digits each, the dashes skipped). */
export const REQUEST_ID_BYTE_AT: readonly number[] = [4, 6, 8, 10, 13, 15, 18, 20, 23, 25, 28, 30, 32, 34, 36, 38];
const DASH = 45;

/**
 * A request id and the 16 bytes it was written from (`bytes`, from `at`): whoever keeps ids as bytes
 * (the gateway's decision store) copies them instead of reading the text back.
 */
export class DrawnRequestId {
  constructor(
    readonly text: string,
    readonly bytes: Uint8Array,
    readonly at: number,
  ) {}
}

/**
 * A request id as Keystone makes them: `req-` and a random (version 4) uuid. Written into one
 * buffer and read out as one flat string: `req-${randomUUID()}` joins some twenty pieces per id
 * (~600 bytes of garbage a request, on the gateway's path) into a string every later use flattens.
 * The pool and the buffer are module state on purpose, as in token/random.ts: they only buffer the
 * CSPRNG, so nothing a caller could inject or observe differs from a randomUUID() per id.
 */
export function newRequestId(): string {
  const from = drawBytes();
  return requestIdText(pool, from, text);
}

/** newRequestId, with the bytes it was written from. */
export function drawRequestId(): DrawnRequestId {
  const from = drawBytes();
  return new DrawnRequestId(requestIdText(pool, from, text), pool, from);
}

/** The next id's 16 bytes in `pool`, made a version 4 uuid's: where they start. */
function drawBytes(): number {
  if (used === IDS_PER_REFILL) {
    pool = new Uint8Array(16 * IDS_PER_REFILL);
    randomFillSync(pool);
    used = 0;
  }
  const from = used * 16;
  used += 1;
  pool[from + 6] = (pool[from + 6]! & 0x0f) | 0x40; // version 4
  pool[from + 8] = (pool[from + 8]! & 0x3f) | 0x80; // RFC 9562 variant
  return from;
}

/**
 * The request id (`req-` and a uuid's 36 characters) of the 16 bytes at `offset`, written into
 * `scratch` (40 bytes or more) and read out as one flat string.
 */
export function requestIdText(bytes: Uint8Array, offset: number, scratch: Buffer): string {
  scratch[0] = 114; // 'r'
  scratch[1] = 101; // 'e'
  scratch[2] = 113; // 'q'
  scratch[3] = scratch[12] = scratch[17] = scratch[22] = scratch[27] = DASH;
  for (let index = 0; index < 16; index++) {
    const byte = bytes[offset + index]!;
    const at = REQUEST_ID_BYTE_AT[index]!;
    scratch[at] = HEX[byte >> 4]!;
    scratch[at + 1] = HEX[byte & 15]!;
  }
  return scratch.toString('latin1', 0, 40);
}
