import type { PageTokenCodec } from '../kernel/page-token';

// The streams' resume cursors: where a stream resumes, as a token bound to its owner.
//
// A resume cursor of bounded size, whatever the owner's number count. It names at most
// CURSOR_MAX_INBOXES inboxes with their exact positions, and carries a watermark W (ms): every
// other inbox resumes after its last message accepted before W (store.lastSeqBefore). That skips
// nothing because the stream keeps, per inbox, `since`: a time no message after its position can
// have been accepted before; W is at most the `since` of every inbox not named. `since` grows
// only from facts (a later sequence is stamped after its writer took it):
//   - the message at the position was accepted at t: later ones not before t - STAMP_SLACK_MS
//     (writers' clock skew, a stall between taking a sequence and stamping it);
//   - the hub's poll, begun at h, read the inbox's counter at most at the position:
//     h - STAMP_SLACK_MS;
//   - a read begun at r found nothing past the position: a later writer took its sequence after
//     r, or was alive then (r - SETTLED_AFTER_MS).
// An inbox that joins after the cursor (a new number) was missing from the last listing of the
// owner's numbers, so W is also at most that listing's start less LIST_LAG_MS: its messages from
// before W (a lent number's history), if any, came before it was the owner's.
// Named first: inboxes nothing is known of yet, then those whose delivered messages are newest.
// The price of the bound: on resume, messages of inboxes not named accepted at or after W come
// again (at least once, never skipped). With the hub polling, W trails the cursor by about
// LIST_LAG_MS plus the re-list interval; while more than CURSOR_MAX_INBOXES inboxes are still
// unread (a first backlog), W is 0 and inboxes not named come again from their start. While
// every watched inbox fits, W is 0 and the cursor is exact, in the format it always had: an old
// cursor (positions only) reads as W = 0, so it is accepted, and resumes exactly.
// Size: at most 32 × (26-character id + 12-digit sequence) and a 13-digit W in JSON, plus the
// 32-byte tag: at most 1,962 characters of base64url.

/** Resume position: the last sequence delivered per inbox. */
export type Positions = Map<string, number>;

/** Inboxes a cursor names exactly; any others resume from its watermark. */
export const CURSOR_MAX_INBOXES = 32;
/**
 * How much earlier than a message of an inbox a later sequence of it may be stamped (clock skew
 * between writers, a stall).
 */
const STAMP_SLACK_MS = 10_000;
/**
 * The owner's numbers are listed from an eventually consistent index: a number this new may be
 * missing from a listing.
 */
const LIST_LAG_MS = 60_000;
/** The watermark's key in a cursor (never an inbox id: those are 26-character ULIDs). */
const WATERMARK_KEY = 'w';
/** Older than any writer can live (a Lambda runs 15 minutes at most): a hole before it is history. */
export const SETTLED_AFTER_MS = 60 * 60_000;

/**
 * Where a stream resumes: exact positions, and W for every other inbox (0: from its oldest
 * retained message).
 */
export interface ResumePoint {
  positions: Positions;
  watermark: number;
}

/** resume_cursor: a resume point, as a token bound to the owner it was issued to (core/kernel/page-token.ts). */
export function messageCursors(pageTokens: PageTokenCodec) {
  const binding = (ownerId: string) => ({ list: 'messages', caller: ownerId });
  return {
    seal: (ownerId: string, point: ResumePoint) =>
      pageTokens.seal(binding(ownerId), {
        ...Object.fromEntries(point.positions),
        ...(point.watermark > 0 ? { [WATERMARK_KEY]: point.watermark } : {}),
      }),
    /** The resume point of a cursor issued to `ownerId`; none (the oldest retained message on) without one. */
    async open(ownerId: string, cursor: string | undefined): Promise<ResumePoint> {
      const opened = await pageTokens.open<Record<string, number>>(binding(ownerId), cursor, 'resume_cursor');
      const { [WATERMARK_KEY]: watermark = 0, ...positions } = opened ?? {};
      return { positions: new Map(Object.entries(positions)), watermark };
    },
  };
}

export type MessageCursors = ReturnType<typeof messageCursors>;

/** What the stream knows of one inbox, for its cursor. */
export interface InboxProgress {
  /** The last sequence delivered or passed over. */
  position: number;
  /** No message after `position` was accepted before this (0: nothing known, from its start). */
  since: number;
  /** When the message at `position` was accepted (0: none seen). */
  lastAccepted: number;
}

/** What the hub's poll read of inbox counters (core/messaging/hub.ts). */
interface PolledHeads {
  /** The last counter value the poll saw for an inbox (undefined before its first poll). */
  head(inboxId: string): number | undefined;
  /** When the last poll that read an inbox's counter began (Date.now(); undefined before one did). */
  headReadFrom(inboxId: string): number | undefined;
}

/** A stream's facts per inbox for its cursor: `since` (it only grows) and when its last message was accepted. */
export function inboxProgress() {
  const since = new Map<string, number>();
  const lastAccepted = new Map<string, number>();
  const raiseSince = (inboxId: string, at: number) => {
    if (at > (since.get(inboxId) ?? 0)) since.set(inboxId, at);
  };
  return {
    /** No message after the inbox's position was accepted before `at`. */
    raiseSince,
    /** The message at the inbox's position was accepted at `acceptedAt`. */
    accepted(inboxId: string, acceptedAt: number) {
      raiseSince(inboxId, acceptedAt - STAMP_SLACK_MS);
      lastAccepted.set(inboxId, acceptedAt);
    },
    /** A read begun at `readFrom` (the clock's time) found nothing past the inbox's position. */
    readToEnd(inboxId: string, readFrom: number) {
      raiseSince(inboxId, readFrom - SETTLED_AFTER_MS);
    },
    /**
     * The progress of `inboxes` at `positions`; the hub's poll read the counter at most at a
     * position: later sequences were taken after that read (`clockAhead`: the clock's time less
     * Date.now(), the poll's).
     */
    of(inboxes: readonly string[], positions: Positions, polled: PolledHeads, clockAhead: number) {
      return new Map(
        inboxes.map((inboxId): [string, InboxProgress] => {
          const position = positions.get(inboxId) ?? 0;
          const polledFrom = polled.headReadFrom(inboxId);
          if (polledFrom !== undefined && (polled.head(inboxId) ?? Infinity) <= position) {
            raiseSince(inboxId, polledFrom + clockAhead - STAMP_SLACK_MS);
          }
          return [inboxId, { position, since: since.get(inboxId) ?? 0, lastAccepted: lastAccepted.get(inboxId) ?? 0 }];
        }),
      );
    },
  };
}

export type InboxProgressFacts = ReturnType<typeof inboxProgress>;

/**
 * The resume point a cursor carries for the watched inboxes, at most CURSOR_MAX_INBOXES named;
 * `listedFrom`: when the owner's numbers were last listed (the clock's time).
 */
export function resumePoint(watched: ReadonlyMap<string, InboxProgress>, listedFrom: number): ResumePoint {
  const inboxes = [...watched].map(([inboxId, progress]) => ({ inboxId, ...progress }));
  // Without a watermark, an inbox not named resumes from its start: position 0 need not be named.
  if (inboxes.length <= CURSOR_MAX_INBOXES) {
    const named = inboxes.filter(({ position }) => position > 0);
    return { positions: new Map(named.map(({ inboxId, position }) => [inboxId, position])), watermark: 0 };
  }
  // Named first: inboxes nothing is known of yet (not named, they would take W to 0), unless there
  // are too many for that to help; then those whose delivered messages are newest (not named, they
  // would be delivered again back to W).
  const unknown = inboxes.filter(({ since }) => since <= 0);
  const byNewest = (list: typeof inboxes) => [...list].sort((a, b) => b.lastAccepted - a.lastAccepted);
  const chosen =
    unknown.length <= CURSOR_MAX_INBOXES
      ? [...unknown, ...byNewest(inboxes.filter(({ since }) => since > 0))].slice(0, CURSOR_MAX_INBOXES)
      : byNewest(inboxes.filter(({ position }) => position > 0)).slice(0, CURSOR_MAX_INBOXES);
  const isNamed = new Set(chosen.map(({ inboxId }) => inboxId));
  const sinceOfOthers = inboxes.filter(({ inboxId }) => !isNamed.has(inboxId)).map(({ since }) => since);
  const watermark = Math.min(listedFrom - LIST_LAG_MS, ...sinceOfOthers);
  const positions: Positions = new Map(chosen.map(({ inboxId, position }) => [inboxId, position]));
  return { positions, watermark: Math.max(0, watermark) };
}
