import type { Store } from '../core/store';

// Counts every store call in a bench server process, so the benchmarks report what a request
// actually costs in store round trips (and what message streams cost in polls and reads) instead
// of what the design says it should. Each store method is one round trip to DynamoDB: a batch
// read (BatchGetItem) counts once, like any other call. The wrapper is generic (a Proxy), so a
// method added to the store is counted without a change here.

/** BatchGetItem takes at most this many keys (core/adapters/dynamo-messaging-store.ts). */
const BATCH_GET_LIMIT = 100;

export interface StoreCounters {
  /** Every store method call since the process started. */
  calls: number;
  /** The same, by method name (a method never called is absent). */
  byMethod: Record<string, number>;
  /** Inbox ids asked for over all MessageHub polls (store.inboxHeads). */
  inboxHeadsIds: number;
  /** BatchGetItem requests those polls needed (100 keys each; throttling retries not counted). */
  batchGetItems: number;
}

/** Calls of `method` in `counters` (0 when it was never called). */
export const methodCalls = (counters: StoreCounters, method: keyof Store & string): number => counters.byMethod[method] ?? 0;

/** A copy that later calls do not change (for a stats reply or a before/after pair). */
export const snapshotCounters = (counters: StoreCounters): StoreCounters => ({ ...counters, byMethod: { ...counters.byMethod } });

/** Store calls between two snapshots, in all and by method (methods with no calls left out). */
export function countersDelta(before: StoreCounters, after: StoreCounters): { calls: number; byMethod: Record<string, number> } {
  const byMethod: Record<string, number> = {};
  for (const [method, count] of Object.entries(after.byMethod)) {
    const calls = count - (before.byMethod[method] ?? 0);
    if (calls > 0) byMethod[method] = calls;
  }
  return { calls: after.calls - before.calls, byMethod };
}

export function countingStore(store: Store): { store: Store; counters: StoreCounters } {
  const counters: StoreCounters = { calls: 0, byMethod: {}, inboxHeadsIds: 0, batchGetItems: 0 };
  // One wrapper per method, made on first use: the counted path allocates nothing per call.
  const wrapped = new Map<string, (...args: unknown[]) => unknown>();
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      let wrapper = wrapped.get(property);
      if (!wrapper) {
        const method = value as (...args: unknown[]) => unknown;
        wrapper = (...args: unknown[]) => {
          counters.calls++;
          counters.byMethod[property] = (counters.byMethod[property] ?? 0) + 1;
          if (property === 'inboxHeads') {
            const ids = (args[0] as readonly string[]).length;
            counters.inboxHeadsIds += ids;
            counters.batchGetItems += Math.ceil(ids / BATCH_GET_LIMIT);
          }
          return Reflect.apply(method, target, args);
        };
        wrapped.set(property, wrapper);
      }
      return wrapper;
    },
  });
  return { store: counted, counters };
}
