import { randomBytes } from 'node:crypto';
import type { Clock, Random } from '../kernel/ports';

export const systemClock: Clock = { now: () => Date.now() };

export const systemRandom: Random = { bytes: (length) => new Uint8Array(randomBytes(length)) };
