import { randomBytes, randomFillSync } from 'node:crypto';
import type { Clock, Random } from '../kernel/ports';

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Random bytes are drawn from the CSPRNG in blocks of this many and handed out once each: one call
 * per block, not per id.
 */
const POOL_BYTES = 4096;
let pool = new Uint8Array(0);
let offset = 0;

export const systemRandom: Random = {
  bytes(length) {
    if (length > POOL_BYTES / 4) return new Uint8Array(randomBytes(length));
    if (offset + length > pool.length) {
      pool = randomFillSync(new Uint8Array(POOL_BYTES));
      offset = 0;
    }
    // A copy: no two callers ever share (or see) the same bytes.
    const bytes = pool.slice(offset, offset + length);
    offset += length;
    return bytes;
  },
};
