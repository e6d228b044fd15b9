import { sharedReads } from '../kernel/cache';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock } from '../kernel/ports';
import type { MessagingPort } from './store';
import { MESSAGE_RETENTION_MS } from './send';
import { isTombstone, type InboxEntry, type StoredMessage } from './store';
import type { InboxWakeups, WakeupListener } from './wakeups';

// Delivery to open streams, across processes, without webhooks.
//
// Every process that holds streams runs one MessageHub. The hub learns that an inbox changed in
// two ways: from wake-ups (core/messaging/wakeups.ts: "inbox X has sequence N", said by the writer
// after its write), and by polling the inbox counters of every inbox any of its streams watches:
// one strongly consistent BatchGetItem per 100 watched inboxes per poll, whatever the number of
// streams or messages. A woken stream reads the inboxes that changed, from its cursor.
//
// With an engine, the hub also asks the engine, every ENGINE_CHECK_INTERVAL_MS, for the last
// sequence published per watched inbox (the writers' publish also records it: `head:{inboxId}`,
// kept an hour). An inbox ahead of what the hub knows is woken: a wake-up that reached the engine
// but not this process arrives within that interval, at no store read. A publish that never
// reached the engine (the writer lost it; in AWS the relay Lambda publishes every message again
// from the table's stream) waits for the store poll below.
//
// How often the hub polls the store depends on how far wake-ups reach:
// - in-process wake-ups only (`npm start`, no engine): every POLL_INTERVAL_MS, as the only way to
//   see messages accepted by another process (none, in one process; a second process in tests);
// - a pub/sub engine, subscriber ready: every SAFETY_POLL_INTERVAL_MS, a safety net for a lost
//   wake-up (a writer whose publish failed). Each time the subscriptions are (again) in force,
//   one catch-up poll of the inboxes concerned reads what was published while they were not;
// - the engine lost: every ENGINE_LOST_POLL_INTERVAL_MS until it is back.
// Polling and wake-ups only say "look now": what a stream delivers is what it reads from its
// cursor, so a late, lost or repeated wake-up never loses or repeats a message.
//
// The owner's numbers: a stream lists them when it starts, and follows a new one at once when
// provisioning says "owner O gained X" (an owner wake-up, through the same port), and again
// whenever the owner's subscription takes effect (what was published before was not received).
// The periodic re-list is the safety net: every `relistMs` (MESSAGE_RELIST_MS), and with the
// engine ready, where owner wake-ups reach every process, at most every RELIST_SAFETY_POLLS
// safety-net polls. A stream's wait is judged again whenever the engine is lost or back
// (`onEngineChange`): one that began to sleep while the engine was ready re-lists at `relistMs`
// once it is lost (at once, if its last listing is older than that). With the defaults an idle
// watched inbox then costs 60/90 + 60/900 ≈ 0.73 item reads a minute (its counter, and its share
// of the listing).
//
// Ordering and gaps: sequences are handed out by an atomic counter and written right after, so
// a reader can see sequence n+1 before n is written. It then waits; if n is still missing after
// GAP_GRACE_MS, its writer gave up (or died), and the reader tombstones n with a conditional put.
// A late writer's put then fails and it retries with a new sequence, so nothing is lost and
// nothing is delivered twice past a cursor. Likewise a counter seen ahead of what is stored (a
// writer between its two steps, maybe in another process) is looked at again every 500 ms for up
// to GAP_GRACE_MS: that write will not move the counter again, so no poll would announce it.

export const POLL_INTERVAL_MS = 250;
/** With a pub/sub engine whose subscriber is ready: the bound on the delay of a wake-up that never reached the engine. */
export const SAFETY_POLL_INTERVAL_MS = 90_000;
/** With a pub/sub engine whose subscriber is ready: the bound on the delay of a wake-up that reached the engine but not this process. */
export const ENGINE_CHECK_INTERVAL_MS = 3_000;
/** With the engine ready, streams re-list at most once every this many safety-net polls (15 min by default). */
export const RELIST_SAFETY_POLLS = 10;
/** With the engine lost (its subscriber not ready): the bound on other processes' messages' delay. */
export const ENGINE_LOST_POLL_INTERVAL_MS = 2_000;
export const GAP_GRACE_MS = 3_000;
/** Streams re-list their numbers this often (without an engine, or with it lost): the safety net of owner wake-ups. */
export const INBOX_REFRESH_MS = 30_000;
const READ_BATCH = 100;
/** Start positions of inboxes a cursor does not name, looked up this many at once. */
const START_LOOKUPS = 16;

/** How often the hub polls, by how far wake-ups reach (see above). */
export interface HubPolling {
  /** In-process wake-ups only (MESSAGE_POLL_INTERVAL_MS). */
  pollIntervalMs: number;
  /** Engine ready (MESSAGE_SAFETY_POLL_MS). */
  safetyPollMs: number;
  /** Engine lost (MESSAGE_ENGINE_LOST_POLL_MS). */
  engineLostPollMs: number;
  /** Engine ready: the check of the heads the engine recorded (MESSAGE_ENGINE_CHECK_MS). */
  engineCheckMs: number;
  /** Streams re-list their owner's numbers (MESSAGE_RELIST_MS); with the engine ready, at most every RELIST_SAFETY_POLLS safety polls. */
  relistMs: number;
}

export const DEFAULT_HUB_POLLING: HubPolling = {
  pollIntervalMs: POLL_INTERVAL_MS, safetyPollMs: SAFETY_POLL_INTERVAL_MS, engineLostPollMs: ENGINE_LOST_POLL_INTERVAL_MS,
  engineCheckMs: ENGINE_CHECK_INTERVAL_MS, relistMs: INBOX_REFRESH_MS,
};

export function createMessageHub(store: MessagingPort, wakeups: InboxWakeups, pageTokens: PageTokenCodec, polling: HubPolling = DEFAULT_HUB_POLLING) {
  const watchers = new Map<string, Set<(inboxId: string) => void>>();
  const heads = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  /** Per inbox: when the last poll that read its counter began (Date.now()); the counter was at most `heads` then. */
  const headsReadFrom = new Map<string, number>();
  /** Inboxes the poll in flight (or the next one) reads; a catch-up asked for meanwhile is never dropped. */
  const toPoll = new Set<string>();
  let pollInFlight: Promise<void> | undefined;
  /** The last heads read failed: the next comes sooner (a catch-up may be what failed). */
  let pollFailed = false;

  const interval = () => {
    const base = wakeups.reach === 'process' ? polling.pollIntervalMs : wakeups.ready() ? polling.safetyPollMs : polling.engineLostPollMs;
    return pollFailed ? Math.min(base, polling.engineLostPollMs) : base;
  };

  const wake = (inboxId: string) => watchers.get(inboxId)?.forEach((callback) => callback(inboxId));
  /** Per owner: its streams, told of the numbers it gained (none named: re-list). */
  const ownerWatchers = new Map<string, Set<(inboxIds: readonly string[]) => void>>();
  /** Told when the engine is lost or back: the re-list interval changed. */
  const engineWatchers = new Set<() => void>();
  const engineChanged = () => engineWatchers.forEach((callback) => callback());
  const relist = (ownerIds: Iterable<string>, inboxIds: readonly string[] = []) => {
    for (const ownerId of ownerIds) ownerWatchers.get(ownerId)?.forEach((callback) => callback(inboxIds));
  };
  /** A wake-up: wake at once, and count it, so the next poll does not wake again for it. */
  const appended = (inboxId: string, seq: number) => {
    if (!watchers.has(inboxId)) return;
    if (seq > (heads.get(inboxId) ?? 0)) heads.set(inboxId, seq);
    wake(inboxId);
  };
  // Streams woken together at the same position share one Query (fan-out to many streams of one
  // inbox costs one read, not one per stream).
  const read = sharedReads((inboxId: string, afterSeq: number, limit: number) => store.readInbox(inboxId, afterSeq, limit),
    (inboxId, afterSeq, limit) => `${inboxId}#${afterSeq}#${limit}`);

  async function readHeads(inboxIds: string[]) {
    try {
      const readFrom = Date.now();
      const latest = await store.inboxHeads(inboxIds);
      pollFailed = false;
      for (const [inboxId, head] of latest) {
        if (watchers.has(inboxId)) headsReadFrom.set(inboxId, readFrom);
        // Counters only grow: a lower value is a read that started before a local append. An
        // inbox's first read wakes its streams only if it has messages (a stream reads on watching).
        const known = heads.get(inboxId);
        if (!watchers.has(inboxId) || (known !== undefined && head <= known)) continue;
        heads.set(inboxId, head);
        if (head > (known ?? 0)) wake(inboxId);
      }
    } catch {
      // Retried at the next poll, which comes sooner; streams also re-check on their own timers.
      pollFailed = true;
    }
  }

  /** Reads the heads of `inboxIds` (every watched inbox without), after the poll in flight if any. */
  function poll(inboxIds?: Iterable<string>): Promise<void> {
    for (const inboxId of inboxIds ?? watchers.keys()) if (watchers.has(inboxId)) toPoll.add(inboxId);
    if (!pollInFlight && toPoll.size > 0) pollInFlight = drainPolls();
    return pollInFlight ?? Promise.resolve();
  }

  async function drainPolls() {
    // Runs after the caller's turn: `pollInFlight` is set before the finally below clears it.
    await Promise.resolve();
    try {
      while (toPoll.size > 0) {
        const inboxIds = [...toPoll];
        toPoll.clear();
        await readHeads(inboxIds);
      }
    } finally {
      pollInFlight = undefined;
    }
  }

  let checkTimer: NodeJS.Timeout | undefined;
  let checking = false;
  /**
   * Every engineCheckMs while an engine is ready and something is watched: the heads the engine
   * recorded, taken as wake-ups. Inboxes the store poll has not read yet are left to it (their
   * first read is a catch-up of its own).
   */
  function scheduleCheck() {
    if (checkTimer || checking || !wakeups.heads || watchers.size === 0) return;
    checkTimer = setTimeout(() => {
      checkTimer = undefined;
      const watched = [...watchers.keys()].filter((inboxId) => heads.has(inboxId));
      if (!wakeups.ready() || watched.length === 0) return scheduleCheck();
      checking = true;
      wakeups.heads!(watched).then((recorded) => {
        for (const [inboxId, seq] of recorded) if (seq > (heads.get(inboxId) ?? Infinity)) appended(inboxId, seq);
      }, () => undefined).finally(() => {
        checking = false;
        scheduleCheck();
      });
    }, polling.engineCheckMs);
    checkTimer.unref();
  }
  function stopChecks() {
    clearTimeout(checkTimer);
    checkTimer = undefined;
  }

  /** (Re)arms the poll timer at the interval of the moment; none while nothing is watched. */
  function schedule() {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (watchers.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void poll().finally(() => {
        if (!timer) schedule();
      });
    }, interval());
    timer.unref();
  }

  const listener: WakeupListener = {
    wakeup: appended,
    // Subscriptions in force again: read what was published while they were not, then poll slowly.
    ready: () => {
      void poll();
      relist(ownerWatchers.keys());
      schedule();
      engineChanged();
    },
    lost: () => {
      schedule();
      engineChanged();
    },
    subscribed: (inboxIds) => void poll(inboxIds),
    numbersChanged: (ownerId, inboxIds) => relist([ownerId], inboxIds),
    ownersSubscribed: (ownerIds) => relist(ownerIds),
  };
  const stopListening = wakeups.listen(listener);

  return {
    /** The streams' resume cursors. */
    cursors: messageCursors(pageTokens),
    /** Entries of an inbox after `afterSeq`; concurrent identical reads share one Query. */
    read,
    /** Calls `onChange` with an inbox of `inboxIds` that may have new messages; returns the unsubscribe. */
    watch(inboxIds: readonly string[], onChange: (inboxId: string) => void): () => void {
      const added: string[] = [];
      for (const id of inboxIds) {
        let set = watchers.get(id);
        if (!set) {
          watchers.set(id, (set = new Set()));
          added.push(id);
        }
        set.add(onChange);
      }
      if (added.length > 0) wakeups.subscribe(added);
      if (!timer && !pollInFlight) schedule();
      scheduleCheck();
      return () => {
        const removed: string[] = [];
        for (const id of inboxIds) {
          const set = watchers.get(id);
          set?.delete(onChange);
          if (set?.size === 0) {
            watchers.delete(id);
            heads.delete(id);
            headsReadFrom.delete(id);
            removed.push(id);
          }
        }
        if (removed.length > 0) wakeups.unsubscribe(removed);
        if (watchers.size === 0) {
          schedule();
          stopChecks();
        }
      };
    },
    /**
     * Calls `onChange` when `ownerId` gained numbers (`inboxIds`, said by provisioning), or may
     * have (none named: its owner wake-ups may have been missed); returns the unsubscribe.
     */
    watchOwner(ownerId: string, onChange: (inboxIds: readonly string[]) => void): () => void {
      let set = ownerWatchers.get(ownerId);
      if (!set) {
        ownerWatchers.set(ownerId, (set = new Set()));
        wakeups.subscribeOwners([ownerId]);
      }
      set.add(onChange);
      return () => {
        set.delete(onChange);
        if (set.size === 0 && ownerWatchers.get(ownerId) === set) {
          ownerWatchers.delete(ownerId);
          wakeups.unsubscribeOwners([ownerId]);
        }
      };
    },
    /** Calls `onChange` whenever the engine is lost or back (`relistIntervalMs` changed); returns the unsubscribe. */
    onEngineChange(onChange: () => void): () => void {
      engineWatchers.add(onChange);
      return () => engineWatchers.delete(onChange);
    },
    /** How often streams re-list their owner's numbers now (slower with the engine ready: owner wake-ups reach every process). */
    relistIntervalMs: () => (wakeups.ready() ? Math.max(polling.relistMs, RELIST_SAFETY_POLLS * polling.safetyPollMs) : polling.relistMs),
    /** The last counter value the poll saw for an inbox (undefined before its first poll). */
    head: (inboxId: string): number | undefined => heads.get(inboxId),
    /** When the last poll that read an inbox's counter began (Date.now(); undefined before one did). */
    headReadFrom: (inboxId: string): number | undefined => headsReadFrom.get(inboxId),
    /** How many inboxes this process watches (for the docs' cost figures and tests). */
    watchedInboxes: () => watchers.size,
    /** The poll interval of the moment (by how far wake-ups reach, and whether the engine is ready). */
    pollIntervalMs: interval,
    close() {
      stopListening();
      if (watchers.size > 0) wakeups.unsubscribe([...watchers.keys()]);
      if (ownerWatchers.size > 0) wakeups.unsubscribeOwners([...ownerWatchers.keys()]);
      watchers.clear();
      ownerWatchers.clear();
      engineWatchers.clear();
      schedule();
      stopChecks();
    },
  };
}

export type MessageHub = ReturnType<typeof createMessageHub>;

/** Resume position: the last sequence delivered per inbox. */
export type Positions = Map<string, number>;

// A resume cursor of bounded size, whatever the owner's number count. It names at most
// CURSOR_MAX_INBOXES inboxes with their exact positions, and carries a watermark W (ms): every
// other inbox resumes after its last message accepted before W (store.lastSeqBefore). That skips
// nothing because the stream keeps, per inbox, `since`: a time no message after its position can
// have been accepted before; W is at most the `since` of every inbox not named. `since` grows
// only from facts (a later sequence is stamped after its writer took it):
//   - the message at the position was accepted at t: later ones not before t - STAMP_SLACK_MS
//     (writers' clock skew, a stall between taking a sequence and stamping it);
//   - the hub's poll, begun at h, read the inbox's counter at most at the position: h - STAMP_SLACK_MS;
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

/** Inboxes a cursor names exactly; any others resume from its watermark. */
export const CURSOR_MAX_INBOXES = 32;
/** How much earlier than a message of an inbox a later sequence of it may be stamped (clock skew between writers, a stall). */
const STAMP_SLACK_MS = 10_000;
/** The owner's numbers are listed from an eventually consistent index: a number this new may be missing from a listing. */
const LIST_LAG_MS = 60_000;
/** The watermark's key in a cursor (never an inbox id: those are 26-character ULIDs). */
const WATERMARK_KEY = 'w';

/** Where a stream resumes: exact positions, and W for every other inbox (0: from its oldest retained message). */
export interface ResumePoint { positions: Positions; watermark: number }

/** resume_cursor: a resume point, as a token bound to the owner it was issued to (core/kernel/page-token.ts). */
export function messageCursors(pageTokens: PageTokenCodec) {
  const binding = (ownerId: string) => ({ list: 'messages', caller: ownerId });
  return {
    seal: (ownerId: string, point: ResumePoint) => pageTokens.seal(binding(ownerId), {
      ...Object.fromEntries(point.positions), ...(point.watermark > 0 ? { [WATERMARK_KEY]: point.watermark } : {}),
    }),
    /** The resume point of a cursor issued to `ownerId`; none (the oldest retained message on) without one. */
    async open(ownerId: string, cursor: string | undefined): Promise<ResumePoint> {
      const { [WATERMARK_KEY]: watermark = 0, ...positions } = await pageTokens.open<Record<string, number>>(binding(ownerId), cursor, 'resume_cursor') ?? {};
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

/**
 * The resume point a cursor carries for the watched inboxes, at most CURSOR_MAX_INBOXES named;
 * `listedFrom`: when the owner's numbers were last listed (the clock's time).
 */
export function resumePoint(watched: ReadonlyMap<string, InboxProgress>, listedFrom: number): ResumePoint {
  const inboxes = [...watched].map(([inboxId, progress]) => ({ inboxId, ...progress }));
  // Without a watermark, an inbox not named resumes from its start: position 0 need not be named.
  if (inboxes.length <= CURSOR_MAX_INBOXES) {
    return { positions: new Map(inboxes.filter(({ position }) => position > 0).map(({ inboxId, position }) => [inboxId, position])), watermark: 0 };
  }
  // Named first: inboxes nothing is known of yet (not named, they would take W to 0), unless there
  // are too many for that to help; then those whose delivered messages are newest (not named, they
  // would be delivered again back to W).
  const unknown = inboxes.filter(({ since }) => since <= 0);
  const byNewest = (list: typeof inboxes) => [...list].sort((a, b) => b.lastAccepted - a.lastAccepted);
  const chosen = unknown.length <= CURSOR_MAX_INBOXES
    ? [...unknown, ...byNewest(inboxes.filter(({ since }) => since > 0))].slice(0, CURSOR_MAX_INBOXES)
    : byNewest(inboxes.filter(({ position }) => position > 0)).slice(0, CURSOR_MAX_INBOXES);
  const isNamed = new Set(chosen.map(({ inboxId }) => inboxId));
  const watermark = Math.min(listedFrom - LIST_LAG_MS, ...inboxes.filter(({ inboxId }) => !isNamed.has(inboxId)).map(({ since }) => since));
  return { positions: new Map(chosen.map(({ inboxId, position }) => [inboxId, position])), watermark: Math.max(0, watermark) };
}

export interface Delivery { message: StoredMessage; cursor: string }

/** Older than any writer can live (a Lambda runs 15 minutes at most): a hole before it is history. */
const SETTLED_AFTER_MS = 60 * 60_000;

const settledGap = (entry: InboxEntry, now: number) => !isTombstone(entry) && now - entry.acceptedAt > SETTLED_AFTER_MS;

/**
 * The messages of an owner's inboxes after `resumeCursor` (every retained one without it): first
 * the backlog, then live, until `signal` aborts. At least once, in order per inbox; a cursor comes
 * with every message.
 */
export async function* followInboxes(deps: {
  store: MessagingPort; hub: MessageHub; clock: Clock; ownerId: string;
  listInboxes: () => Promise<string[]>;
  /** Whether the owner holds this inbox now (a strongly consistent read: the listing may lag behind a new number). */
  holdsInbox: (inboxId: string) => Promise<boolean>;
  resumeCursor: string | undefined; signal: AbortSignal;
}): AsyncGenerator<Delivery> {
  const { store, hub, clock, ownerId, signal } = deps;
  // A cursor that is not this owner's is refused before anything is read.
  const { positions, watermark } = await hub.cursors.open(ownerId, deps.resumeCursor);
  /** Per inbox: no message after its position was accepted before this (see `resumePoint`). */
  const since = new Map<string, number>();
  const raiseSince = (inboxId: string, at: number) => {
    if (at > (since.get(inboxId) ?? 0)) since.set(inboxId, at);
  };
  /** Per inbox: when the message at its position was accepted. */
  const lastAccepted = new Map<string, number>();
  /** When the owner's numbers were last listed (the clock's time): inboxes joining later start from the watermark. */
  let listedFrom = clock.now();
  const cursor = () => {
    const clockAhead = clock.now() - Date.now();
    const progress = new Map(inboxes.map((inboxId) => {
      const position = positions.get(inboxId) ?? 0;
      // The hub read the counter at most at our position: later sequences were taken after that read.
      const polledFrom = hub.headReadFrom(inboxId);
      if (polledFrom !== undefined && (hub.head(inboxId) ?? Infinity) <= position) raiseSince(inboxId, polledFrom + clockAhead - STAMP_SLACK_MS);
      return [inboxId, { position, since: since.get(inboxId) ?? 0, lastAccepted: lastAccepted.get(inboxId) ?? 0 }];
    }));
    return hub.cursors.seal(ownerId, resumePoint(progress, listedFrom));
  };
  const gapSince = new Map<string, number>();
  /** Since when the inbox counter is ahead of what is stored (the counter value it was seen at). */
  const tailSince = new Map<string, { head: number; since: number }>();
  let inboxes: string[] = [];
  let unwatch: (() => void) | undefined;
  let listedAt = -Infinity;
  /** An owner wake-up without names (or a missed one): list the owner's numbers at once. */
  let relistNow = true;
  /** Numbers the owner gained, said by provisioning, not checked yet; and those checked: followed whatever a lagging listing says. */
  const announced = new Set<string>();
  const joined = new Set<string>();
  let pending = true;
  /** Inboxes to read at the next wake: those that changed, and those waiting on a gap. */
  const dirty = new Set<string>();
  let wakeUp: (() => void) | undefined;
  const onChange = (inboxId: string) => {
    dirty.add(inboxId);
    pending = true;
    wakeUp?.();
  };
  const onNumbersChanged = (inboxIds: readonly string[]) => {
    if (inboxIds.length === 0) relistNow = true;
    for (const inboxId of inboxIds) if (!inboxes.includes(inboxId)) announced.add(inboxId);
    pending = true;
    wakeUp?.();
  };
  const onAbort = () => wakeUp?.();
  signal.addEventListener('abort', onAbort);
  // Before the first listing: a number provisioned meanwhile is announced, not missed.
  const unwatchOwner = hub.watchOwner(ownerId, onNumbersChanged);
  // The engine lost (or back): the next re-list is judged again, at the interval of the moment.
  const unwatchEngine = hub.onEngineChange(() => wakeUp?.());

  /** Follows `listed` and every number joined by an announcement; inboxes new to the stream start as the cursor says. */
  async function follow(listed: readonly string[]) {
    const next = [...new Set([...listed, ...joined])].sort();
    // An inbox the cursor does not name starts after its last message accepted before the
    // watermark (every one, without a watermark), a few at a time.
    const starting = next.filter((inboxId) => !positions.has(inboxId));
    for (let index = 0; index < starting.length; index += START_LOOKUPS) {
      await Promise.all(starting.slice(index, index + START_LOOKUPS).map(async (inboxId) => {
        positions.set(inboxId, watermark > 0 ? await store.lastSeqBefore(inboxId, watermark) : 0);
        raiseSince(inboxId, watermark);
      }));
    }
    if (next.join() === inboxes.join()) return;
    // Watched anew before the old watch ends: inboxes in both stay subscribed throughout.
    const previous = unwatch;
    inboxes = next;
    unwatch = hub.watch(inboxes, (inboxId) => onChange(inboxId));
    previous?.();
    for (const inboxId of inboxes) dirty.add(inboxId);
    pending = true;
  }

  try {
    while (!signal.aborted) {
      if (relistNow || Date.now() - listedAt >= hub.relistIntervalMs()) {
        relistNow = false;
        const listingFrom = clock.now();
        const listed = await deps.listInboxes();
        await follow(listed);
        listedFrom = listingFrom;
        listedAt = Date.now();
      }
      if (announced.size > 0) {
        // Checked one by one (the owner's listing comes from an index that may not have them yet).
        const candidates = [...announced].filter((inboxId) => !inboxes.includes(inboxId));
        announced.clear();
        // A failed check leaves the number to the next re-list.
        const held = await Promise.all(candidates.map((inboxId) => deps.holdsInbox(inboxId).catch(() => false)));
        candidates.forEach((inboxId, index) => held[index] && joined.add(inboxId));
        if (held.some(Boolean)) await follow(inboxes);
      }
      let waitingOnGap = false;
      if (pending) {
        pending = false;
        const changed = inboxes.filter((inboxId) => dirty.has(inboxId));
        dirty.clear();
        for (const inboxId of changed) {
          for (;;) {
            const from = positions.get(inboxId) ?? 0;
            const readFrom = clock.now();
            const entries = await hub.read(inboxId, from, READ_BATCH);
            let position = from;
            let blocked = false;
            let reread = false;
            for (const entry of entries) {
              if (entry.seq !== position + 1 && settledGap(entry, clock.now())) {
                // The message after the hole is long settled: no writer can still fill it (the
                // hole is history swept by DynamoDB's TTL). Skip it, without tombstones.
                position = entry.seq - 1;
              }
              if (entry.seq !== position + 1) {
                // A sequence is missing: its writer is in flight, or gave up.
                const since = gapSince.get(inboxId) ?? clock.now();
                gapSince.set(inboxId, since);
                if (clock.now() - since < GAP_GRACE_MS) {
                  blocked = true;
                  break;
                }
                let filled = false;
                for (let seq = position + 1; seq < entry.seq; seq++) {
                  if (!(await store.tombstone(inboxId, seq, clock.now() + MESSAGE_RETENTION_MS))) filled = true;
                }
                gapSince.delete(inboxId);
                if (filled) {
                  // A late message (or another reader's tombstone) is there now: read again from
                  // `position` at once. Nothing else would wake this stream: the inbox counter
                  // did not move, and a writer in another process notifies nobody here.
                  reread = true;
                  break;
                }
                position = entry.seq - 1;
              }
              gapSince.delete(inboxId);
              position = entry.seq;
              positions.set(inboxId, position);
              if (!isTombstone(entry)) {
                raiseSince(inboxId, entry.acceptedAt - STAMP_SLACK_MS);
                lastAccepted.set(inboxId, entry.acceptedAt);
              }
              // Every read checks expiry: a message past its retention is passed over, whatever the sweeper did.
              if (!isTombstone(entry) && entry.acceptedAt + MESSAGE_RETENTION_MS > clock.now()) {
                yield { message: entry, cursor: await cursor() };
              }
              if (signal.aborted) return;
            }
            if (blocked) {
              waitingOnGap = true;
              dirty.add(inboxId);
            }
            if (reread) continue;
            // Nothing past the position when the read began: a later message's writer took its
            // sequence after that, or was alive then.
            if (!blocked && entries.length < READ_BATCH) raiseSince(inboxId, readFrom - SETTLED_AFTER_MS);
            if (blocked || entries.length < READ_BATCH || position === from) break;
          }
          // The counter is ahead of what is stored: a writer (maybe in another process) took a
          // sequence and has not written it yet. Nothing will announce that write here (the
          // counter has already moved), so look again shortly, as long as a gap is waited for;
          // a writer that never writes leaves a gap that the next message resolves.
          const counted = hub.head(inboxId) ?? 0;
          if ((positions.get(inboxId) ?? 0) < counted) {
            const tail = tailSince.get(inboxId);
            const since = tail?.head === counted ? tail.since : clock.now();
            tailSince.set(inboxId, { head: counted, since });
            if (clock.now() - since < GAP_GRACE_MS) {
              waitingOnGap = true;
              dirty.add(inboxId);
            }
          } else {
            tailSince.delete(inboxId);
          }
        }
      }
      if (signal.aborted) break;
      // Sleep until a change, a pending gap's grace, the next list refresh, or the engine's change.
      await new Promise<void>((resolve) => {
        const timeout = setTimeout(() => {
          if (waitingOnGap) pending = true;
          resolve();
        }, waitingOnGap ? 500 : Math.max(0, listedAt + hub.relistIntervalMs() - Date.now()));
        timeout.unref();
        // Woken early, the timer goes too: left to run (up to the re-list interval, 15 min with
        // the engine), it would keep an ended stream's state and its call in memory until then.
        wakeUp = () => {
          clearTimeout(timeout);
          resolve();
        };
        if (pending) wakeUp();
      });
      wakeUp = undefined;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    unwatchEngine();
    unwatchOwner();
    unwatch?.();
  }
}
