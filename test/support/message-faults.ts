import type { InboxEntry, StoredMessage } from '../../core/messaging/store';
import type { Store } from '../../core/store';

// Fault injection for the message path (`startTestService({ wrapStore: inbox.wrap })`): writers
// that take a sequence and never append (a crashed writer of another process), writers held
// between taking their sequence and appending (a slow one), hooks before a reader's tombstone,
// and a log of inbox reads so a test can tell when a reader has seen a gap. Nothing is armed by
// default: the wrapped store behaves exactly like the real one.

export interface InboxRead {
  inboxId: string;
  afterSeq: number;
  seqs: number[];
}

export class InboxFaults {
  /** The real store behind the wrapper (writes through it bypass the hooks and the notifier). */
  raw!: Store;
  /** Every readInbox call and the sequences it returned, in order. */
  readonly reads: InboxRead[] = [];
  /** Sequences taken by simulated dead writers, per inbox. */
  readonly burnt: Array<{ inboxId: string; seq: number }> = [];
  /** Every tombstone attempt and whether it was written. */
  readonly tombstones: Array<{ inboxId: string; seq: number; written: boolean }> = [];
  /** Appends (message text → seq, result) in order, including failed ones. */
  readonly appends: Array<{ text: string; seq: number; written: boolean }> = [];
  /** Every inboxHeads call (a hub's poll): the inboxes it read. */
  readonly headsReads: string[][] = [];

  private deadWriters = new Map<string, number>();
  private heldAppends = new Map<string, { release: Promise<void>; reached: () => void }>();
  private tombstoneHooks: Array<(inboxId: string, seq: number) => Promise<void> | void> = [];
  private failingUsers = new Set<string>();

  /** The next nextSeq of `inboxId` first burns `count` sequences that are never written. */
  deadWriter(inboxId: string, count = 1): this {
    this.deadWriters.set(inboxId, count);
    return this;
  }

  /**
   * The append of the message with this exact text waits, after its sequence was taken, until
   * `release` is called. `reached` resolves once the writer is held.
   */
  holdAppend(text: string): { reached: Promise<void>; release: () => void } {
    let release!: () => void;
    let reached!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    this.heldAppends.set(text, { release: released, reached });
    return { reached: reachedPromise, release };
  }

  /** Runs `hook` before every tombstone a reader writes (until `reset`). */
  beforeTombstone(hook: (inboxId: string, seq: number) => Promise<void> | void): this {
    this.tombstoneHooks.push(hook);
    return this;
  }

  /** getUser of this id fails (a store outage on that read) until `reset`. */
  failGetUser(svcnumId: string): this {
    this.failingUsers.add(svcnumId);
    return this;
  }

  /** Waits until a read of `inboxId` returned entries starting past `afterSeq + 1` (a gap seen). */
  async gapSeen(inboxId: string, timeoutMs = 5_000): Promise<InboxRead> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const read = this.reads.find((r) => r.inboxId === inboxId && r.seqs.length > 0 && r.seqs[0]! > r.afterSeq + 1);
      if (read) return read;
      if (Date.now() > deadline) throw new Error(`no reader saw a gap in inbox ${inboxId}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  reset(): void {
    this.deadWriters.clear();
    for (const held of this.heldAppends.values()) held.reached();
    this.heldAppends.clear();
    this.tombstoneHooks = [];
    this.failingUsers.clear();
    this.reads.length = 0;
    this.burnt.length = 0;
    this.tombstones.length = 0;
    this.appends.length = 0;
    this.headsReads.length = 0;
  }

  /** Waits until a heads read (a poll) included `inboxId`; returns its index in `headsReads`. */
  async headsReadOf(inboxId: string, timeoutMs = 10_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.headsReads.findIndex((ids) => ids.includes(inboxId));
      if (index >= 0) return index;
      if (Date.now() > deadline) throw new Error(`no poll read inbox ${inboxId}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  readonly wrap = (store: Store): Store => {
    this.raw = store;
    const overrides: Partial<Store> = {
      nextSeq: async (inboxId: string, count?: number) => {
        const dead = this.deadWriters.get(inboxId);
        if (dead) {
          this.deadWriters.delete(inboxId);
          for (let i = 0; i < dead; i++) this.burnt.push({ inboxId, seq: await store.nextSeq(inboxId) });
        }
        return store.nextSeq(inboxId, count);
      },
      appendMessage: async (message: StoredMessage, retainUntil: number) => {
        const held = this.heldAppends.get(message.text);
        if (held) {
          this.heldAppends.delete(message.text);
          held.reached();
          await held.release;
        }
        const written = await store.appendMessage(message, retainUntil);
        this.appends.push({ text: message.text, seq: message.seq, written });
        return written;
      },
      tombstone: async (inboxId: string, seq: number, retainUntil: number) => {
        for (const hook of this.tombstoneHooks) await hook(inboxId, seq);
        const written = await store.tombstone(inboxId, seq, retainUntil);
        this.tombstones.push({ inboxId, seq, written });
        return written;
      },
      readInbox: async (inboxId: string, afterSeq: number, limit: number): Promise<InboxEntry[]> => {
        const entries = await store.readInbox(inboxId, afterSeq, limit);
        this.reads.push({ inboxId, afterSeq, seqs: entries.map((entry) => entry.seq) });
        if (this.reads.length > 10_000) this.reads.splice(0, 5_000);
        return entries;
      },
      inboxHeads: (inboxIds: readonly string[]) => {
        this.headsReads.push([...inboxIds]);
        if (this.headsReads.length > 10_000) this.headsReads.splice(0, 5_000);
        return store.inboxHeads(inboxIds);
      },
      getUser: async (svcnumId: string) => {
        if (this.failingUsers.has(svcnumId)) throw new Error(`injected failure reading ${svcnumId}`);
        return store.getUser(svcnumId);
      },
    };
    return new Proxy(store, {
      get: (target, property, receiver) =>
        property in overrides ? overrides[property as keyof Store] : Reflect.get(target, property, receiver),
    });
  };
}
