import type { NumberRecord } from './model';

// How a number shows at a moment: cool-offs and mask expiry take effect on read (provisioning's
// lifecycle and the directory's resolve both answer with it).

/** The stored state as it stands at `now`. */
function stateAt(number: NumberRecord, now: number, coolOff: number | undefined): NumberRecord['state'] | 'available' {
  const until = number.quarantinedUntil;
  if (number.state === 'quarantined') return (until ?? 0) > now ? 'quarantined' : 'available';
  // A mask's number stays `active` in storage, back in the pool from `until` (the mask's expiry
  // plus the cool-off): it cools off once its mask expired (or was closed), then it is free.
  if (number.entityType === 'mask' && number.state === 'active' && until !== undefined) {
    if (until <= now) return 'available';
    if (coolOff !== undefined && until - coolOff <= now) return 'quarantined';
  }
  return number.state;
}

/** The state a number shows at `now`: cool-offs and mask expiry take effect on read. */
export function numberView(number: NumberRecord, now: number, coolOff?: number) {
  const state = stateAt(number, now, coolOff);
  return {
    svcnum: number.svcnum,
    state,
    ...(number.svcnumId ? { holder: number.svcnumId } : {}),
    ...(number.entityType ? { entity_type: number.entityType } : {}),
    ...(number.quarantinedUntil ? { cool_off_until: new Date(number.quarantinedUntil).toISOString() } : {}),
    updated_at: new Date(number.updatedAt).toISOString(),
  };
}
