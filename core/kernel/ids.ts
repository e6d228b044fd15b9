import { encodeTime } from 'ulid';
import type { Clock, Random } from './ports';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A ULID from the injected clock and random source (80 random bits, one random read). */
export function newUlid(clock: Clock, random: Random): string {
  const bytes = random.bytes(16);
  let randomPart = '';
  for (const byte of bytes) randomPart += CROCKFORD[byte & 31];
  return encodeTime(clock.now(), 10) + randomPart;
}

export const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;
