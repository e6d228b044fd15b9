/**
 * A per-process read-through cache with a short lifetime, for records read on every request that
 * change rarely (clients, account status). Bounded: past `maxEntries` it starts over. `fresh`
 * bypasses (and refreshes) it where staleness is not acceptable.
 */
export function ttlCache<V>(load: (key: string) => Promise<V>, ttlMs: number, maxEntries = 10_000) {
  const entries = new Map<string, { value: V; at: number }>();
  async function fresh(key: string): Promise<V> {
    const value = await load(key);
    if (entries.size > maxEntries) entries.clear();
    entries.set(key, { value, at: Date.now() });
    return value;
  }
  async function get(key: string): Promise<V> {
    const hit = entries.get(key);
    return hit && Date.now() - hit.at < ttlMs ? hit.value : fresh(key);
  }
  return { get, fresh };
}
