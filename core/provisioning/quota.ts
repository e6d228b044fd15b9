import type { QuotaSlot, User } from '../kernel/model';
import type { Clock } from '../kernel/ports';
import type { ProvisioningConfig } from './config';
import { DomainError } from '../kernel/errors';
import type { ProvisioningPort } from './store';

// Exact per-owner quotas without transactions: a quota of N is N slot items (`owner#kind#0` …
// `#N-1`), each claimed with a conditional put. Concurrent creations can never hold more than N.
// A claim carries a lease until its holder commits, so a crashed creation frees its slot by
// itself. A mask's slot is held until the mask expires (`heldUntil`): it is free from that very
// millisecond, as the mask is expired, with no sweeper; closing a mask or deactivating a number
// frees its slot at once.

export type QuotaKind = 'independent' | 'dependent' | 'masks' | 'numbers';

/** What each quota counts (in refusals), the owner record's override and the default. */
const QUOTAS: Record<
  QuotaKind,
  {
    counts: string;
    override: keyof User & `${string}Quota`;
    fallback: keyof ProvisioningConfig & `${string}Quota`;
  }
> = {
  independent: { counts: 'independent agents', override: 'independentAgentQuota', fallback: 'independentAgentQuota' },
  dependent: { counts: 'dependent agents', override: 'dependentAgentQuota', fallback: 'dependentAgentQuota' },
  masks: { counts: 'live masks', override: 'maskQuota', fallback: 'maskQuota' },
  numbers: { counts: 'programmable numbers', override: 'numberQuota', fallback: 'numberQuota' },
};

/** An owner's quota of `kind`: its record's override, else the process's default. */
export const quotaLimit = (owner: User | undefined, kind: QuotaKind, config: ProvisioningConfig): number =>
  (owner?.[QUOTAS[kind].override] as number | undefined) ?? config[QUOTAS[kind].fallback];

/**
 * Whether the holder of a lapsed slot committed with that slot, and until when it holds it
 * (`heldUntil`, for a slot that ends by itself); undefined when it never committed or gave it up.
 */
export type SlotHolder = (slot: QuotaSlot) => Promise<{ heldUntil?: number } | undefined>;

export const slotKey = (ownerId: string, kind: QuotaKind, index: number) => `${ownerId}#${kind}#${index}`;
const slotIndex = (key: string) => Number(key.slice(key.lastIndexOf('#') + 1));

/** Owners whose next probe start this process remembers (a hint only: forgetting costs probes, never exactness). */
const HINTS_KEPT = 10_000;

export function createQuota(store: ProvisioningPort, clock: Clock, config: ProvisioningConfig, holderOf: SlotHolder) {
  // Where this process's next claim of an owner's kind starts probing: after where the last one
  // started, or at the lowest slot it freed since. Concurrent claims of a process start at
  // different slots, so a creation usually costs one conditional put however high the quota, and
  // an owner's slots are the lowest ones.
  const hints = new Map<string, number>();
  /** The slot to start at, and the next claim's start after it. */
  const nextStart = (ownerKind: string, limit: number) => {
    if (hints.size >= HINTS_KEPT && !hints.has(ownerKind)) hints.clear();
    const start = (hints.get(ownerKind) ?? 0) % limit;
    hints.set(ownerKind, start + 1);
    return start;
  };
  const freed = (key: string) => {
    const ownerKind = key.slice(0, key.lastIndexOf('#'));
    const index = slotIndex(key);
    if (index < (hints.get(ownerKind) ?? 0)) hints.set(ownerKind, index);
  };

  return {
    /** Claims a free slot for `holder`; RESOURCE_EXHAUSTED when all `limit` slots are held. */
    async claim(ownerId: string, kind: QuotaKind, holder: string, limit: number): Promise<string> {
      // Every slot is probed at most once, from the hint on, wrapping around. A slot still leased
      // to `holder` (an interrupted attempt of the same request) counts as free for it; lapsed
      // slots of others are taken over only when no such slot comes up, so a retry does not take
      // a second slot while its first one is still leased.
      const start = limit > 0 ? nextStart(`${ownerId}#${kind}`, limit) : 0;
      const lapsed: QuotaSlot[] = [];
      for (let probe = 0; probe < limit; probe++) {
        const index = (start + probe) % limit;
        const key = slotKey(ownerId, kind, index);
        const now = clock.now();
        const claim = await store.claimSlot(key, holder, now + config.lease, now);
        if (claim.outcome === 'claimed') return key;
        if (claim.outcome === 'lapsed') {
          const held = await holderOf(claim.slot);
          if (held && (held.heldUntil === undefined || held.heldUntil > clock.now())) {
            await store.confirmSlot(key, claim.slot.holder, held.heldUntil);
          } else {
            lapsed.push(claim.slot);
          }
        }
      }
      for (const slot of lapsed) {
        if (await store.takeOverSlot(slot, holder, clock.now() + config.lease)) return slot.slotKey;
      }
      throw new DomainError(
        'exhausted',
        `the quota of ${limit} ${QUOTAS[kind].counts} for ${ownerId} is used up; ` +
          'higher quotas are available on request',
      );
    },

    /** Makes a claim permanent for its holder, or (`heldUntil`) until then. */
    confirm: async (key: string, holder: string, heldUntil?: number) => {
      if (!(await store.confirmSlot(key, holder, heldUntil))) {
        throw new Error(`quota slot ${key} is no longer held by ${holder}`);
      }
    },

    /** Gives back a claim whose creation failed before its commit. */
    release: async (key: string, holder: string) => {
      await store.releaseSlot(key, holder);
      freed(key);
    },

    /** Frees the slot of a holder that ended (a closed mask, a deactivated number); repeating it changes nothing. */
    end: async (key: string, holder: string) => {
      await store.endSlot(key, holder);
      freed(key);
    },
  };
}

export type Quota = ReturnType<typeof createQuota>;
