import { decodeTime, encodeTime } from 'ulid';
import type { Clock, Random } from './ports';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A ULID from the injected clock and random source (80 random bits, one random read). */
export function newUlid(clock: Clock, random: Random): string {
  const bytes = random.bytes(16);
  let randomPart = '';
  for (const byte of bytes) randomPart += CROCKFORD[byte & 31];
  return encodeTime(clock.now(), 10) + randomPart;
}

/**
 * When a resource created under a ULID was first asked for: the time in its id. Lists are ordered
 * by id, so this `create_time` orders them the same way (oldest first), however their commits
 * interleave (a resource's id is chosen when its request is first recorded, core/provisioning/requests.ts).
 */
export const idTime = (id: string): number => decodeTime(id);

export const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;
