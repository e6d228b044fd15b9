import type { NumberRecord } from '../kernel/model';
import type { Clock } from '../kernel/ports';
import type { ProvisioningConfig } from './config';
import { DomainError } from '../kernel/errors';
import type { ProvisioningPort } from './store';

// The number pool. Allocation leases a free number to a holder that has not committed yet; the
// operation then commits (writes its entity or mask) and confirms the lease. If it fails, it
// gives the number back; if it dies, the lease lapses and the number returns to the pool by
// itself, unless the holder did commit, in which case the next allocator rolls the lease
// forward instead of stealing the number.

export type EntityType = NonNullable<NumberRecord['entityType']>;

/** How to finish a lapsed lease whose holder did commit; `undefined`: the holder never committed. */
export type LeaseResolver = (number: NumberRecord) => Promise<{ state: NumberRecord['state']; poolFrom?: number } | undefined>;

const CANDIDATES_PER_QUERY = 25;
const ATTEMPTS = 4;

/** A random permutation (Fisher-Yates). */
export function shuffled<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

export function createNumberPool(store: ProvisioningPort, clock: Clock, config: ProvisioningConfig, resolveLapsed: LeaseResolver) {
  return {
    /** Leases a free number to `holder`; throws FAILED_PRECONDITION when the pool is empty. */
    async lease(holder: string, entityType: EntityType): Promise<string> {
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        const now = clock.now();
        const candidates = await store.freeNumbers(now, CANDIDATES_PER_QUERY);
        if (candidates.length === 0) {
          throw new DomainError('failed_precondition', 'no number is free in the pool; an operator must seed more numbers');
        }
        // Random order: concurrent allocations rarely race for the same number.
        for (const candidate of shuffled(candidates)) {
          if (candidate.state === 'leased' && candidate.svcnumId) {
            const committed = await resolveLapsed(candidate);
            if (committed) {
              await store.confirmNumber(candidate.svcnum, candidate.svcnumId, committed.state, now, committed.poolFrom);
              continue;
            }
          }
          if (await store.leaseNumber(candidate, holder, entityType, now + config.lease, now)) return candidate.svcnum;
        }
      }
      throw new DomainError('unavailable', 'the number pool is busy; retry the call');
    },

    /** Makes a lease permanent. Fails loudly if the number was lost (the lease lapsed and was taken). */
    async confirm(svcnum: string, holder: string, state: NumberRecord['state'], poolFrom?: number) {
      if (!(await store.confirmNumber(svcnum, holder, state, clock.now(), poolFrom))) {
        throw new Error(`number ${svcnum} is no longer leased to ${holder}`);
      }
    },

    giveBack: (svcnum: string, holder: string) => store.returnNumber(svcnum, holder, clock.now()),

    /** Retires a holder's number into quarantine for the cool-off period. */
    quarantine: (svcnum: string, holder: string) => store.quarantineNumber(svcnum, holder, clock.now() + config.coolOff, clock.now()),
  };
}

export type NumberPool = ReturnType<typeof createNumberPool>;
