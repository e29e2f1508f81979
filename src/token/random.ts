import { randomFillSync } from 'node:crypto';

const POOL_SIZE = 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let offset = POOL_SIZE;

/**
 * `length` (≤ 256) bytes from the CSPRNG, taken from a pool refilled 4 KiB at a time (as Node does
 * for randomUUID): each token needs an IV and an audit id, and a randomBytes() call apiece cost
 * more than the rest of the Fernet work. Every byte is handed out once; the result is a copy.
 * The pool is module state on purpose, like Node's own randomUUID pool: it only buffers the
 * CSPRNG, so nothing a caller or test could inject or observe differs from calling
 * randomFillSync per value, and one pool per process keeps the refills rare.
 */
export function randomChunk(length: number): Buffer {
  if (length > 256) throw new RangeError('randomChunk is for short values');
  if (offset + length > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const chunk = Buffer.from(pool.subarray(offset, offset + length));
  offset += length;
  return chunk;
}
