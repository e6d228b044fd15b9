import type { QuotaSlot } from '../kernel/model';
import type { Clock } from '../kernel/ports';
import type { ProvisioningConfig } from './config';
import { DomainError } from '../kernel/errors';
import type { ProvisioningPort } from './store';

// Exact quotas without transactions: a quota of N is N slot items (`owner#kind#0` … `#N-1`),
// each claimed with a conditional put. Concurrent creations can never hold more than N. A claim
// carries a lease until its agent commits, so a crashed creation frees its slot by itself.

export type AgentQuotaKind = 'independent' | 'dependent';

/** Whether the holder of a lapsed slot committed with that slot: such a slot is kept. */
export type SlotCommitted = (slot: QuotaSlot) => Promise<boolean>;

export const slotKey = (ownerId: string, kind: AgentQuotaKind, index: number) => `${ownerId}#${kind}#${index}`;

export function createQuota(store: ProvisioningPort, clock: Clock, config: ProvisioningConfig, committed: SlotCommitted) {
  return {
    /** Claims a free slot for `holder`; RESOURCE_EXHAUSTED when all `limit` slots are held. */
    async claim(ownerId: string, kind: AgentQuotaKind, holder: string, limit: number): Promise<string> {
      // Lowest free slot first: a quota lowered below slots still held cannot be exceeded. A slot
      // still leased to `holder` (an interrupted attempt of the same request) counts as free for
      // it; lapsed slots of others are taken over only when no such slot comes up, so a retry
      // does not take a second slot while its first one is still leased.
      const lapsed: QuotaSlot[] = [];
      for (let index = 0; index < limit; index++) {
        const key = slotKey(ownerId, kind, index);
        const now = clock.now();
        const claim = await store.claimSlot(key, holder, now + config.lease, now);
        if (claim.outcome === 'claimed') return key;
        if (claim.outcome === 'lapsed') {
          if (await committed(claim.slot)) await store.confirmSlot(key, claim.slot.holder);
          else lapsed.push(claim.slot);
        }
      }
      for (const slot of lapsed) {
        if (await store.takeOverSlot(slot, holder, clock.now() + config.lease)) return slot.slotKey;
      }
      throw new DomainError('exhausted', `the quota of ${limit} ${kind} agents for ${ownerId} is used up; higher quotas are available on request`);
    },

    confirm: async (key: string, holder: string) => {
      if (!(await store.confirmSlot(key, holder))) throw new Error(`quota slot ${key} is no longer held by ${holder}`);
    },

    release: (key: string, holder: string) => store.releaseSlot(key, holder),
  };
}

export type Quota = ReturnType<typeof createQuota>;
