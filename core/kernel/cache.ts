import type { Clock } from './ports';

/** What a read found, when it began, and its place in the order reads began. */
interface Entry<V> {
  value: V;
  readAt: number;
  order: number;
}

export interface TtlCacheOptions {
  /** The time the lifetime and the spacing of re-reads are measured by (the service's clock). */
  clock: Clock;
  /** How long a value read is trusted. */
  ttlMs: number;
  /** Past this many keys it starts over (a flood of distinct keys cannot grow it without bound). */
  maxEntries?: number;
  /** Re-reads of one key (`recheck`) begin at least this far apart, however many callers ask. */
  recheckSpacingMs?: number;
}

/**
 * A per-process read-through cache with a short lifetime, for records read on every request that
 * change rarely (clients, account status). Single flight: concurrent misses of a key share one
 * load, and a failed load is not kept. `recheck` reads a key again when the cached value does not
 * settle the question (a secret that does not match may be a new one), spaced per key so that
 * repeated refusals cannot force a read per request.
 */
export function ttlCache<V>(load: (key: string) => Promise<V>, options: TtlCacheOptions) {
  const { clock, ttlMs, maxEntries = 10_000, recheckSpacingMs = 250 } = options;
  const entries = new Map<string, Entry<V>>();
  /** Loads under way, shared by every miss of their key. */
  const loading = new Map<string, Promise<Entry<V>>>();
  /** Per key: when its last re-read began, and the next one while it waits for its turn. */
  const rechecks = new Map<string, { startedAt: number; next?: Promise<Entry<V>> }>();
  let reads = 0;

  function read(key: string): Promise<Entry<V>> {
    const order = ++reads;
    const readAt = clock.now();
    const reading = load(key)
      .then((value) => {
        const entry = { value, readAt, order };
        const current = entries.get(key);
        // A read that began earlier but ended later must not replace a newer value.
        if (!current || current.order < order) {
          if (!current && entries.size >= maxEntries) entries.clear();
          entries.set(key, entry);
        }
        return entry;
      })
      .finally(() => {
        if (loading.get(key) === reading) loading.delete(key);
      });
    loading.set(key, reading);
    return reading;
  }

  function entry(key: string): Promise<Entry<V>> {
    const hit = entries.get(key);
    if (hit && clock.now() - hit.readAt < ttlMs) return Promise.resolve(hit);
    return loading.get(key) ?? read(key);
  }

  /** A read that begins after this call: callers waiting for the same turn share it. */
  function reread(key: string): Promise<Entry<V>> {
    let state = rechecks.get(key);
    if (state?.next) return state.next;
    if (!state) {
      if (rechecks.size >= maxEntries) rechecks.clear();
      state = { startedAt: -Infinity };
      rechecks.set(key, state);
    }
    const turn = state;
    const wait = Math.max(0, turn.startedAt + recheckSpacingMs - clock.now());
    const next = new Promise<void>((resolve) => (wait > 0 ? setTimeout(resolve, wait) : resolve())).then(() => {
      turn.next = undefined;
      turn.startedAt = clock.now();
      return read(key);
    });
    turn.next = next;
    return next;
  }

  return {
    /** The value, from memory if read within the lifetime, else loaded (once for concurrent callers). */
    get: async (key: string): Promise<V> => (await entry(key)).value,
    /**
     * The cached value if `settled` accepts it; else the value as read again by a read that began
     * after this call (unless the value was just read for this call): what changed in the store
     * before the call is seen. Re-reads of one key are `recheckSpacingMs` apart, shared by callers.
     */
    async recheck(key: string, settled: (value: V) => boolean): Promise<V> {
      const before = reads;
      const found = await entry(key);
      if (settled(found.value) || found.order > before) return found.value;
      return (await reread(key)).value;
    },
  };
}

/**
 * Concurrent identical reads share one load, with no lifetime: a caller gets what a read already
 * in flight finds (begun at most one round trip before it), or starts one. For records that must
 * be current on every request, read by many requests at once (a busy inbox's routing, a stream
 * fan-out): nothing is kept once the read ends, and a failed read fails only its sharers.
 */
export function sharedReads<A extends unknown[], V>(
  load: (...args: A) => Promise<V>,
  keyOf: (...args: A) => string,
): (...args: A) => Promise<V> {
  const loading = new Map<string, Promise<V>>();
  return (...args) => {
    const key = keyOf(...args);
    let pending = loading.get(key);
    if (!pending) {
      pending = load(...args).finally(() => loading.delete(key));
      loading.set(key, pending);
    }
    return pending;
  };
}
