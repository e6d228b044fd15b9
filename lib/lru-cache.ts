// Stands in for mnemonist/lru-cache in the Lambda bundles (lib/bundling.ts `alias`). Its one user
// there is the DynamoDB client's endpoint-discovery cache (@aws-sdk/endpoint-cache), built with
// every client though DynamoDB's endpoint discovery is off unless asked for; mnemonist's typed-array
// LRU and its helpers are about 6 KiB of every minified bundle. A Map keeps insertion order, so
// re-inserting on use gives the same least-recently-used eviction. Same default export and the
// methods that cache calls: get, set, has, peek, clear.

export default class LRUCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    if (!this.entries.has(key)) return undefined;
    const value = this.entries.get(key)!;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  set(key: K, value: V): this {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as K);
    return this;
  }

  has(key: K): boolean {
    return this.entries.has(key);
  }

  peek(key: K): V | undefined {
    return this.entries.get(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
