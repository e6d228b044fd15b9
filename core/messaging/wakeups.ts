// Wake-ups of open streams: "inbox X has sequence N", said by the writer after its write. A wake-up
// only tells a process to look now; DynamoDB stays the source of truth, so a lost wake-up delays a
// message (to the hub's next safety-net poll) but never loses or repeats one.
//
// Two implementations: the in-process one below (`npm start`, one process: wake-ups reach the
// streams of the writing process only, other processes' messages are seen by polling) and the
// pub/sub engine's (core/adapters/valkey-wakeups.ts: every process that watches the inbox).
//
// Owners have wake-ups too: "owner O gained numbers X…", said by provisioning after its write, so
// that O's open streams follow a new number at once instead of at their next re-list.

export interface WakeupListener {
  /** A message was stored at `seq` in `inboxId` (by this process or, through the engine, another). */
  wakeup(inboxId: string, seq: number): void;
  /**
   * Every subscription is in force (first connection, or again after a reconnection): wake-ups
   * published before were not received, so catch up by reading what was missed.
   */
  ready?(): void;
  /** The engine is lost: no wake-up of another process arrives until `ready`. */
  lost?(): void;
  /** These newly subscribed inboxes' subscriptions are in force; what was published before was not received. */
  subscribed?(inboxIds: readonly string[]): void;
  /** Owner `ownerId` gained these numbers (their inboxes), or (none named) its numbers may have changed. */
  numbersChanged?(ownerId: string, inboxIds: readonly string[]): void;
  /** These newly subscribed owners' subscriptions are in force; what was published before was not received. */
  ownersSubscribed?(ownerIds: readonly string[]): void;
}

export interface InboxWakeups {
  /**
   * `process`: wake-ups reach this process's streams only; `engine`: every subscribed process's,
   * while `ready()`.
   */
  readonly reach: 'process' | 'engine';
  /**
   * After a message is stored at `seq`: wakes this process's listeners at once, and hands the
   * engine's publish (the other processes') to the background: the caller never waits for the
   * engine, however slow or hung. A failure is logged and counted by the adapter.
   */
  publish(inboxId: string, seq: number): void;
  /** Wake-ups of these inboxes from other processes are wanted from now on (the hub watches them). */
  subscribe(inboxIds: readonly string[]): void;
  /** …no longer wanted. */
  unsubscribe(inboxIds: readonly string[]): void;
  /**
   * After an owner gained numbers (their store write done): wakes this process's listeners at
   * once, and through the engine the other processes', in the background like `publish`.
   */
  publishNumbersChanged(ownerId: string, inboxIds: readonly string[]): void;
  /** Owner wake-ups of these owners from other processes are wanted from now on (the hub streams their numbers). */
  subscribeOwners(ownerIds: readonly string[]): void;
  /** …no longer wanted. */
  unsubscribeOwners(ownerIds: readonly string[]): void;
  listen(listener: WakeupListener): () => void;
  /** Whether wake-ups of other processes arrive now (the engine's subscriber connection is ready). */
  ready(): boolean;
  /**
   * The engine's only: the last sequence published per inbox, as the engine recorded it (kept a
   * while: an inbox without a recent publish is left out). Rejects when the engine cannot answer.
   */
  heads?(inboxIds: readonly string[]): Promise<Map<string, number>>;
  close(): Promise<void>;
}

/** The listeners of a wake-up source: every implementation fans out the same way. */
export function wakeupListeners() {
  const listeners = new Set<WakeupListener>();
  const each = (call: (listener: WakeupListener) => void) => {
    listeners.forEach((listener) => {
      call(listener);
    });
  };
  return {
    add(listener: WakeupListener): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    wakeup: (inboxId: string, seq: number) => each((listener) => listener.wakeup(inboxId, seq)),
    ready: () => each((listener) => listener.ready?.()),
    lost: () => each((listener) => listener.lost?.()),
    subscribed: (inboxIds: readonly string[]) => each((listener) => listener.subscribed?.(inboxIds)),
    numbersChanged: (ownerId: string, inboxIds: readonly string[]) =>
      each((listener) => listener.numbersChanged?.(ownerId, inboxIds)),
    ownersSubscribed: (ownerIds: readonly string[]) => each((listener) => listener.ownersSubscribed?.(ownerIds)),
  };
}

/** Wake-ups within this process only: what one process (`npm start`) needs, and nothing to run. */
export function createInProcessWakeups(): InboxWakeups {
  const listeners = wakeupListeners();
  return {
    reach: 'process',
    publish: listeners.wakeup,
    subscribe: () => undefined,
    unsubscribe: () => undefined,
    publishNumbersChanged: listeners.numbersChanged,
    subscribeOwners: () => undefined,
    unsubscribeOwners: () => undefined,
    listen: listeners.add,
    ready: () => false,
    close: () => Promise.resolve(),
  };
}

/** Inboxes whose engine publishes may wait at once (in flight or folded); past it a wake-up is dropped, and counted. */
export const PENDING_INBOXES_MAX = 10_000;

/** Wake-ups waiting for the engine, published in the background (`latestWakeups`). */
export interface WakeupQueue {
  /**
   * Queues "inbox X has sequence N" and returns at once. False when `maxInboxes` other inboxes
   * wait already: the wake-up is not queued (the caller counts it; the streams' polls find the message).
   */
  push(inboxId: string, seq: number): boolean;
  /** Inboxes waiting now. */
  pending(): number;
  /** Resolves once nothing waits (every publish ended, published or failed). */
  settled(): Promise<void>;
}

/**
 * Publishes through `publishOne` in the background, one wake-up per inbox at a time: those stored
 * while one is being published are folded into one, of the highest sequence, published next
 * ("inbox X has sequence N" says all that any lower N says: a stream reads from its cursor). Under
 * load into one inbox that is one engine round trip per round trip, not one per message; while
 * the engine is slow or hung an inbox holds at most one publish in flight and one folded, and at
 * most `maxInboxes` inboxes wait. `publishOne` reports its own failures.
 */
export function latestWakeups(
  publishOne: (inboxId: string, seq: number) => Promise<void>,
  maxInboxes = PENDING_INBOXES_MAX,
): WakeupQueue {
  /** Per inbox with a publish in flight: the highest sequence stored since, if any. */
  const next = new Map<string, number | undefined>();
  let idle: { promise: Promise<void>; resolve: () => void } | undefined;

  async function publishInTurn(inboxId: string, first: number) {
    for (let seq: number | undefined = first; seq !== undefined; seq = next.get(inboxId)) {
      next.set(inboxId, undefined);
      await publishOne(inboxId, seq).catch(() => undefined);
    }
    next.delete(inboxId);
    if (next.size === 0) {
      idle?.resolve();
      idle = undefined;
    }
  }

  return {
    push(inboxId, seq) {
      if (next.has(inboxId)) {
        next.set(inboxId, Math.max(next.get(inboxId) ?? 0, seq));
        return true;
      }
      if (next.size >= maxInboxes) return false;
      void publishInTurn(inboxId, seq);
      return true;
    },
    pending: () => next.size,
    settled() {
      if (next.size === 0) return Promise.resolve();
      if (!idle) {
        let resolve!: () => void;
        const promise = new Promise<void>((done) => (resolve = done));
        idle = { promise, resolve };
      }
      return idle.promise;
    },
  };
}
