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
  /**
   * Items read (what DynamoDB bills reads by, items of at most 4 KB): the keys a batch read asks
   * for, the items a query or a get returns, and 1 for a query or get that finds none.
   */
  itemsRead: number;
  /** The same, by method name. */
  itemsReadByMethod: Record<string, number>;
}

/** Store methods that read (the rest write; a write's returned record is not a read). */
const READS = /^(get|list|read|find|free|lastSeq|inboxHeads)/;

/** Items a read's result holds (see StoreCounters.itemsRead). */
function itemsIn(result: unknown): number {
  if (Array.isArray(result)) return Math.max(1, result.length);
  if (result instanceof Map) return Math.max(1, result.size);
  if (result && typeof result === 'object' && Array.isArray((result as { items?: unknown }).items))
    return Math.max(1, (result as { items: unknown[] }).items.length);
  return 1;
}

/** Calls of `method` in `counters` (0 when it was never called). */
export const methodCalls = (counters: StoreCounters, method: keyof Store & string): number =>
  counters.byMethod[method] ?? 0;

/** A copy that later calls do not change (for a stats reply or a before/after pair). */
export const snapshotCounters = (counters: StoreCounters): StoreCounters => ({
  ...counters,
  byMethod: { ...counters.byMethod },
  itemsReadByMethod: { ...counters.itemsReadByMethod },
});

/** Store calls between two snapshots, in all and by method (methods with no calls left out). */
export function countersDelta(
  before: StoreCounters,
  after: StoreCounters,
): { calls: number; byMethod: Record<string, number> } {
  const byMethod: Record<string, number> = {};
  for (const [method, count] of Object.entries(after.byMethod)) {
    const calls = count - (before.byMethod[method] ?? 0);
    if (calls > 0) byMethod[method] = calls;
  }
  return { calls: after.calls - before.calls, byMethod };
}

export function countingStore(store: Store): { store: Store; counters: StoreCounters } {
  const counters: StoreCounters = {
    calls: 0,
    byMethod: {},
    inboxHeadsIds: 0,
    batchGetItems: 0,
    itemsRead: 0,
    itemsReadByMethod: {},
  };
  const readItems = (method: string, items: number) => {
    counters.itemsRead += items;
    counters.itemsReadByMethod[method] = (counters.itemsReadByMethod[method] ?? 0) + items;
  };
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
            readItems(property, ids);
          }
          const result = Reflect.apply(method, target, args) as unknown;
          if (property === 'inboxHeads' || !READS.test(property) || !(result instanceof Promise)) return result;
          return result.then((value: unknown) => {
            readItems(property, itemsIn(value));
            return value;
          });
        };
        wrapped.set(property, wrapper);
      }
      return wrapper;
    },
  });
  return { store: counted, counters };
}
