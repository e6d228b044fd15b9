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
//
// Candidates come from a per-process supply (one pool query per CANDIDATES_PER_QUERY
// allocations, see candidateSupply); it is only a hint: the conditional lease write alone decides
// who gets a number, so no number is held by two holders whatever the supplies hold.

export type EntityType = NonNullable<NumberRecord['entityType']>;

/**
 * Told the allocatable numbers each pool query saw, those this process has not handed out yet:
 * the free pool's size, counted up to CANDIDATES_PER_QUERY (a reading of 100 means 100 or more).
 * Queries run as numbers are allocated, which is the only way the pool shrinks.
 */
export type FreeNumbersReport = (count: number) => void;

/** How to finish a lapsed lease whose holder did commit; `undefined`: the holder never committed. */
export type LeaseResolver = (
  number: NumberRecord,
) => Promise<{ state: NumberRecord['state']; poolFrom?: number } | undefined>;

/**
 * Allocatable numbers one pool query reads. Each process keeps them as its own supply and hands
 * each to one allocation only, so concurrent allocations of a process neither query the pool
 * index per call nor race each other for the same number (processes still may: the conditional
 * lease decides).
 */
export const CANDIDATES_PER_QUERY = 100;
/**
 * A supply older than this is dropped unused: numbers freed since (returned, lapsed, cooled off)
 * are seen at the next query, and few stale candidates are tried in vain.
 */
const SUPPLY_LIFETIME = 5_000;
/**
 * Pool queries one allocation may wait for before UNAVAILABLE (others keep taking them); it tries
 * at most one query's worth of candidates.
 */
const QUERIES_PER_LEASE = 4;
/** Handed-out candidates remembered (see candidateSupply): a few queries' worth. */
const HANDED_OUT_KEPT = 4 * CANDIDATES_PER_QUERY;

const poolBusy = () => new DomainError('unavailable', 'the number pool is busy; retry the call');

/** A random permutation (Fisher-Yates). */
export function shuffled<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

/**
 * This process's candidates from the last pool query, each handed out once. A query is single
 * flight: the allocations that find the supply empty at the same time wait for one query.
 */
function candidateSupply(store: ProvisioningPort, clock: Clock, report: FreeNumbersReport) {
  /** `complete`: the query read every allocatable number (fewer than it asked for). */
  let supply: { candidates: NumberRecord[]; readAt: number; complete: boolean } = {
    candidates: [],
    readAt: -Infinity,
    complete: false,
  };
  let query: Promise<void> | undefined;
  /**
   * The candidates this process handed out last (number and availableAt as read), oldest first.
   * A query that reads one of them again unchanged does not hand it out again: its lease is still
   * under way, or the index has not caught up with it yet (DynamoDB's indexes lag their table).
   */
  const handedOut = new Set<string>();
  const readAs = (number: NumberRecord) => `${number.svcnum}@${number.availableAt ?? ''}`;
  /** Handed-out candidates whose lease is under way: still free in the index, so a query reads that many more. */
  let underway = 0;

  const refill = () =>
    (query ??= (async () => {
      const readAt = clock.now();
      const limit = CANDIDATES_PER_QUERY + underway;
      try {
        const found = await store.freeNumbers(readAt, limit);
        // Random order: allocations in other processes, reading the same head of the index, rarely
        // race for the same number.
        const candidates = shuffled(found.filter((number) => !handedOut.has(readAs(number))));
        supply = { candidates, readAt, complete: found.length < limit };
        report(supply.candidates.length);
      } finally {
        query = undefined;
      }
    })());

  return {
    /**
     * The next candidate for one allocation, to be `settle`d once tried; undefined when the pool
     * is empty: a query made for it read every allocatable number and others of this process
     * took them all. `queries` counts the queries this allocation waited for.
     */
    async take(queries: { count: number }): Promise<NumberRecord | undefined> {
      for (;;) {
        if (clock.now() - supply.readAt >= SUPPLY_LIFETIME) {
          supply = { candidates: [], readAt: -Infinity, complete: false };
        }
        const candidate = supply.candidates.pop();
        if (candidate) {
          handedOut.add(readAs(candidate));
          if (handedOut.size > HANDED_OUT_KEPT) handedOut.delete(handedOut.values().next().value!);
          underway++;
          return candidate;
        }
        if (queries.count >= QUERIES_PER_LEASE) throw poolBusy();
        queries.count++;
        await refill();
        if (supply.candidates.length === 0 && supply.complete) return undefined;
      }
    },

    /**
     * A candidate taken was tried: leased, rolled forward or lost to another process (`failed`
     * false), or the try failed: then it may still be free as read, and may be handed out again.
     */
    settle(candidate: NumberRecord, failed: boolean) {
      underway--;
      if (failed) handedOut.delete(readAs(candidate));
    },
  };
}

export function createNumberPool(
  store: ProvisioningPort,
  clock: Clock,
  config: ProvisioningConfig,
  resolveLapsed: LeaseResolver,
  report: FreeNumbersReport = () => undefined,
) {
  const supply = candidateSupply(store, clock, report);

  /** Leases `candidate` if it is still as read; a lapsed lease whose holder committed is rolled forward instead. */
  async function leaseCandidate(candidate: NumberRecord, holder: string, entityType: EntityType): Promise<boolean> {
    const now = clock.now();
    if (candidate.state === 'leased' && candidate.svcnumId) {
      const committed = await resolveLapsed(candidate);
      if (committed) {
        await store.confirmNumber(candidate.svcnum, candidate.svcnumId, committed.state, now, committed.poolFrom);
        return false;
      }
    }
    return store.leaseNumber(candidate, holder, entityType, now + config.lease, now);
  }

  return {
    /** Leases a free number to `holder`; throws FAILED_PRECONDITION when the pool is empty. */
    async lease(holder: string, entityType: EntityType): Promise<string> {
      const queries = { count: 0 };
      for (let tried = 0; tried < CANDIDATES_PER_QUERY; tried++) {
        const candidate = await supply.take(queries);
        if (!candidate) {
          throw new DomainError(
            'failed_precondition',
            'no number is free in the pool; an operator must seed more numbers',
          );
        }
        let failed = true;
        try {
          const leased = await leaseCandidate(candidate, holder, entityType);
          failed = false;
          if (leased) return candidate.svcnum;
        } finally {
          supply.settle(candidate, failed);
        }
      }
      throw poolBusy();
    },

    /** Makes a lease permanent. Fails loudly if the number was lost (the lease lapsed and was taken). */
    async confirm(svcnum: string, holder: string, state: NumberRecord['state'], poolFrom?: number) {
      if (!(await store.confirmNumber(svcnum, holder, state, clock.now(), poolFrom))) {
        throw new Error(`number ${svcnum} is no longer leased to ${holder}`);
      }
    },

    giveBack: (svcnum: string, holder: string) => store.returnNumber(svcnum, holder, clock.now()),

    /** Retires a holder's number into quarantine for the cool-off period. */
    quarantine: (svcnum: string, holder: string) =>
      store.quarantineNumber(svcnum, holder, clock.now() + config.coolOff, clock.now()),
  };
}

export type NumberPool = ReturnType<typeof createNumberPool>;
