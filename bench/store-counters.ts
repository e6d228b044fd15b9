import type { Store } from '../core/store';

// Counts the store calls of the message path in a bench server process, so the messages
// benchmark reports what the streams actually cost (polls, reads) instead of what the design
// says they should. Only the counted methods are replaced; every other method is the store's own.

/** BatchGetItem takes at most this many keys (core/adapters/dynamo-messaging-store.ts). */
const BATCH_GET_LIMIT = 100;

export interface StoreCounters {
  /** MessageHub polls: store.inboxHeads calls. */
  inboxHeadsCalls: number;
  /** Inbox ids asked for over all polls. */
  inboxHeadsIds: number;
  /** BatchGetItem requests those polls needed (100 keys each; throttling retries not counted). */
  batchGetItems: number;
  /** Stream reads: one Query per woken stream and inbox (store.readInbox). */
  readInboxCalls: number;
  /** Messages written (store.appendMessage). */
  appendMessageCalls: number;
}

export function countingStore(store: Store): { store: Store; counters: StoreCounters } {
  const counters: StoreCounters = { inboxHeadsCalls: 0, inboxHeadsIds: 0, batchGetItems: 0, readInboxCalls: 0, appendMessageCalls: 0 };
  const counted: Store = {
    ...store,
    inboxHeads(inboxIds) {
      counters.inboxHeadsCalls++;
      counters.inboxHeadsIds += inboxIds.length;
      counters.batchGetItems += Math.ceil(inboxIds.length / BATCH_GET_LIMIT);
      return store.inboxHeads(inboxIds);
    },
    readInbox(inboxId, afterSeq, limit) {
      counters.readInboxCalls++;
      return store.readInbox(inboxId, afterSeq, limit);
    },
    appendMessage(message, retainUntil) {
      counters.appendMessageCalls++;
      return store.appendMessage(message, retainUntil);
    },
  };
  return { store: counted, counters };
}
