import type { SharedStore } from '../kernel/store';
// The store port of the message flow. Every recipient has an inbox: a counter (the last sequence
// number handed out) and its messages keyed by that sequence, so each inbox is totally ordered
// whichever process accepted its messages.

export type SenderEntityType = 'person' | 'business' | 'programmable' | 'ai_agent' | 'mask';
export type MessageKind = 'message' | 'auto_reply' | 'forward';

export interface StoredMessage {
  inboxId: string;
  seq: number;
  messageId: string;
  /** The number the recipient sees as sender (a mask's number for bridged messages). */
  fromSvcnum: string;
  senderEntityType: SenderEntityType;
  /** The number the message was addressed to (the recipient's number, or the mask's). */
  toSvcnum: string;
  text: string;
  kind: MessageKind;
  /** How many forwards this copy has gone through (bounds forward chains). */
  hops: number;
  /** For a forwarded copy: the programmable number that forwarded it. */
  forwardedBy?: string;
  acceptedAt: number;
}

/** A sequence number given up by its writer, or skipped by a reader after a grace period. */
export interface Tombstone {
  inboxId: string;
  seq: number;
  tombstone: true;
}

export type InboxEntry = StoredMessage | Tombstone;

export const isTombstone = (entry: InboxEntry): entry is Tombstone => (entry as Tombstone).tombstone === true;

export interface MessagingStore {
  /**
   * Hands out the next `count` sequence numbers of an inbox (default 1; an atomic counter) and
   * returns the first of them: concurrent appends to one inbox claim theirs in one call.
   */
  nextSeq(inboxId: string, count?: number): Promise<number>;
  /** Writes a message at its sequence; false if that sequence was tombstoned meanwhile. */
  appendMessage(message: StoredMessage, retainUntil: number): Promise<boolean>;
  /** Marks a sequence as skipped; false if its message exists (then read it). */
  tombstone(inboxId: string, seq: number, retainUntil: number): Promise<boolean>;
  /** Entries of an inbox after `afterSeq`, in order (strongly consistent). */
  readInbox(inboxId: string, afterSeq: number, limit: number): Promise<InboxEntry[]>;
  /** The last sequence handed out per inbox (0 for an inbox that never got one). */
  inboxHeads(inboxIds: readonly string[]): Promise<Map<string, number>>;
  /**
   * The highest sequence of an inbox whose message was accepted before `acceptedBefore` (0 if no
   * retained one was): read newest first (strongly consistent), so it costs the entries newer than that, plus one.
   */
  lastSeqBefore(inboxId: string, acceptedBefore: number): Promise<number>;
}

/** Exactly the store methods the messaging module calls. */
export type MessagingPort = Pick<
  MessagingStore & SharedStore,
  | 'appendMessage'
  | 'getMask'
  | 'getNumber'
  | 'getUser'
  | 'inboxHeads'
  | 'lastSeqBefore'
  | 'nextSeq'
  | 'readInbox'
  | 'tombstone'
>;
