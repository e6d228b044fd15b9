import type { Clock } from '../kernel/ports';
import { inboxProgress, type InboxProgressFacts, type Positions, resumePoint, SETTLED_AFTER_MS } from './cursors';
import type { MessageHub } from './hub';
import { MESSAGE_RETENTION_MS } from './send';
import { type InboxEntry, isTombstone, type MessagingPort, type StoredMessage } from './store';

// Following an owner's inboxes: one open stream. It lists the owner's numbers (and follows those
// provisioning announces), watches their inboxes through the hub (core/messaging/hub.ts), and
// reads each inbox that changed from its position, handing out every message with a resume
// cursor (core/messaging/cursors.ts).
//
// Ordering and gaps: sequences are handed out by an atomic counter and written right after, so
// a reader can see sequence n+1 before n is written. It then waits; if n is still missing after
// GAP_GRACE_MS, its writer gave up (or died), and the reader tombstones n with a conditional put.
// A late writer's put then fails and it retries with a new sequence, so nothing is lost and
// nothing is delivered twice past a cursor. Likewise a counter seen ahead of what is stored (a
// writer between its two steps, maybe in another process) is looked at again every 500 ms for up
// to GAP_GRACE_MS: that write will not move the counter again, so no poll would announce it.

export const GAP_GRACE_MS = 3_000;
/** While a gap is waited for, the inbox is read again this often. */
const GAP_RECHECK_MS = 500;
const READ_BATCH = 100;
/** Start positions of inboxes a cursor does not name, looked up this many at once. */
const START_LOOKUPS = 16;

export interface Delivery {
  message: StoredMessage;
  cursor: string;
}

export interface FollowDeps {
  store: MessagingPort;
  hub: MessageHub;
  clock: Clock;
  ownerId: string;
  listInboxes: () => Promise<string[]>;
  /** Whether the owner holds this inbox now (a strongly consistent read: the listing may lag behind a new number). */
  holdsInbox: (inboxId: string) => Promise<boolean>;
  resumeCursor: string | undefined;
  signal: AbortSignal;
}

/** One stream's state. */
interface Follower {
  deps: FollowDeps;
  positions: Positions;
  watermark: number;
  /** Per inbox: the facts its cursor is made of (see core/messaging/cursors.ts). */
  progress: InboxProgressFacts;
  /** When the owner's numbers were last listed (the clock's time): inboxes joining later start from the watermark. */
  listedFrom: number;
  /** When the owner's numbers were last listed (Date.now(): the re-list interval). */
  listedAt: number;
  inboxes: string[];
  unwatch: (() => void) | undefined;
  /** An owner wake-up without names (or a missed one): list the owner's numbers at once. */
  relistNow: boolean;
  /** Numbers the owner gained, said by provisioning, not checked yet. */
  announced: Set<string>;
  /** Numbers checked: followed whatever a lagging listing says. */
  joined: Set<string>;
  /** Something changed since the last reads. */
  pending: boolean;
  /** Inboxes to read at the next wake: those that changed, and those waiting on a gap. */
  dirty: Set<string>;
  /** Per inbox: since when a missing sequence is waited for. */
  gapSince: Map<string, number>;
  /** Since when the inbox counter is ahead of what is stored (the counter value it was seen at). */
  tailSince: Map<string, { head: number; since: number }>;
  /** This round of reads left a gap waited for: read again shortly. */
  waitingOnGap: boolean;
  /** Ends the sleep at once (while sleeping). */
  wakeUp: (() => void) | undefined;
}

const settledGap = (entry: InboxEntry, now: number) => !isTombstone(entry) && now - entry.acceptedAt > SETTLED_AFTER_MS;

function cursor(follower: Follower): Promise<string> {
  const { hub, clock, ownerId } = follower.deps;
  const progress = follower.progress.of(follower.inboxes, follower.positions, hub, clock.now() - Date.now());
  return hub.cursors.seal(ownerId, resumePoint(progress, follower.listedFrom));
}

function onChange(follower: Follower, inboxId: string) {
  follower.dirty.add(inboxId);
  follower.pending = true;
  follower.wakeUp?.();
}

function onNumbersChanged(follower: Follower, inboxIds: readonly string[]) {
  if (inboxIds.length === 0) follower.relistNow = true;
  for (const inboxId of inboxIds) if (!follower.inboxes.includes(inboxId)) follower.announced.add(inboxId);
  follower.pending = true;
  follower.wakeUp?.();
}

/** Follows `listed` and every number joined by an announcement; inboxes new to the stream start as the cursor says. */
async function follow(follower: Follower, listed: readonly string[]) {
  const { positions, watermark } = follower;
  const next = [...new Set([...listed, ...follower.joined])].sort();
  // An inbox the cursor does not name starts after its last message accepted before the
  // watermark (every one, without a watermark), a few at a time.
  const starting = next.filter((inboxId) => !positions.has(inboxId));
  for (let index = 0; index < starting.length; index += START_LOOKUPS) {
    await Promise.all(
      starting.slice(index, index + START_LOOKUPS).map(async (inboxId) => {
        positions.set(inboxId, watermark > 0 ? await follower.deps.store.lastSeqBefore(inboxId, watermark) : 0);
        follower.progress.raiseSince(inboxId, watermark);
      }),
    );
  }
  if (next.join() === follower.inboxes.join()) return;
  // Watched anew before the old watch ends: inboxes in both stay subscribed throughout.
  const previous = follower.unwatch;
  follower.inboxes = next;
  follower.unwatch = follower.deps.hub.watch(follower.inboxes, (inboxId) => onChange(follower, inboxId));
  previous?.();
  for (const inboxId of follower.inboxes) follower.dirty.add(inboxId);
  follower.pending = true;
}

/** Lists the owner's numbers when told to, or when the last listing is older than the re-list interval. */
async function relistIfDue(follower: Follower) {
  const { hub, clock } = follower.deps;
  if (!follower.relistNow && Date.now() - follower.listedAt < hub.relistIntervalMs()) return;
  follower.relistNow = false;
  const listingFrom = clock.now();
  const listed = await follower.deps.listInboxes();
  await follow(follower, listed);
  follower.listedFrom = listingFrom;
  follower.listedAt = Date.now();
}

/**
 * Numbers announced by provisioning: checked one by one (the owner's listing comes from an index
 * that may not have them yet).
 */
async function joinAnnounced(follower: Follower) {
  if (follower.announced.size === 0) return;
  const candidates = [...follower.announced].filter((inboxId) => !follower.inboxes.includes(inboxId));
  follower.announced.clear();
  // A failed check leaves the number to the next re-list.
  const held = await Promise.all(candidates.map((inboxId) => follower.deps.holdsInbox(inboxId).catch(() => false)));
  candidates.forEach((inboxId, index) => {
    if (held[index]) follower.joined.add(inboxId);
  });
  if (held.some(Boolean)) await follow(follower, follower.inboxes);
}

/**
 * A hole before `entry` (at `position` + 1 on): still within its grace (`wait`), or tombstoned
 * (`passed`), or filled meanwhile (`reread`).
 */
async function passGap(
  follower: Follower,
  inboxId: string,
  position: number,
  entry: InboxEntry,
): Promise<'wait' | 'passed' | 'reread'> {
  const { store, clock } = follower.deps;
  // A sequence is missing: its writer is in flight, or gave up.
  const since = follower.gapSince.get(inboxId) ?? clock.now();
  follower.gapSince.set(inboxId, since);
  if (clock.now() - since < GAP_GRACE_MS) return 'wait';
  let filled = false;
  for (let seq = position + 1; seq < entry.seq; seq++) {
    if (!(await store.tombstone(inboxId, seq, clock.now() + MESSAGE_RETENTION_MS))) filled = true;
  }
  follower.gapSince.delete(inboxId);
  // A late message (or another reader's tombstone) is there now: read again from `position` at
  // once. Nothing else would wake this stream: the inbox counter did not move, and a writer in
  // another process notifies nobody here.
  return filled ? 'reread' : 'passed';
}

/**
 * One read of `inboxId` from its position, each message delivered: `aborted`, `blocked` (a gap in
 * its grace), `reread` (at once), `more` (a full batch: read on), or `done`.
 */
async function* readBatch(
  follower: Follower,
  inboxId: string,
): AsyncGenerator<Delivery, 'aborted' | 'blocked' | 'reread' | 'more' | 'done'> {
  const { hub, clock, signal } = follower.deps;
  const from = follower.positions.get(inboxId) ?? 0;
  const readFrom = clock.now();
  const entries = await hub.read(inboxId, from, READ_BATCH);
  let position = from;
  for (const entry of entries) {
    // A hole before a message long settled: no writer can still fill it (the hole is history
    // swept by DynamoDB's TTL). Skipped, without tombstones.
    if (entry.seq !== position + 1 && !settledGap(entry, clock.now())) {
      const gap = await passGap(follower, inboxId, position, entry);
      if (gap === 'wait') return 'blocked';
      if (gap === 'reread') return 'reread';
    }
    follower.gapSince.delete(inboxId);
    position = entry.seq;
    follower.positions.set(inboxId, position);
    if (!isTombstone(entry)) follower.progress.accepted(inboxId, entry.acceptedAt);
    // Every read checks expiry: a message past its retention is passed over, whatever the sweeper did.
    if (!isTombstone(entry) && entry.acceptedAt + MESSAGE_RETENTION_MS > clock.now()) {
      yield { message: entry, cursor: await cursor(follower) };
    }
    if (signal.aborted) return 'aborted';
  }
  // Nothing past the position when the read began: a later message's writer took its sequence
  // after that, or was alive then.
  if (entries.length < READ_BATCH) follower.progress.readToEnd(inboxId, readFrom);
  return entries.length < READ_BATCH || position === from ? 'done' : 'more';
}

/** Reads `inboxId` from its position to its end (or a gap in its grace); false when the stream was aborted. */
async function* readInbox(follower: Follower, inboxId: string): AsyncGenerator<Delivery, boolean> {
  for (;;) {
    const outcome = yield* readBatch(follower, inboxId);
    if (outcome === 'aborted') return false;
    if (outcome === 'blocked') {
      follower.waitingOnGap = true;
      follower.dirty.add(inboxId);
    }
    if (outcome === 'reread' || outcome === 'more') continue;
    break;
  }
  watchTail(follower, inboxId);
  return true;
}

/**
 * The counter is ahead of what is stored: a writer (maybe in another process) took a sequence and
 * has not written it yet. Nothing will announce that write here (the counter has already moved),
 * so look again shortly, as long as a gap is waited for; a writer that never writes leaves a gap
 * that the next message resolves.
 */
function watchTail(follower: Follower, inboxId: string) {
  const { hub, clock } = follower.deps;
  const counted = hub.head(inboxId) ?? 0;
  if ((follower.positions.get(inboxId) ?? 0) >= counted) {
    follower.tailSince.delete(inboxId);
    return;
  }
  const tail = follower.tailSince.get(inboxId);
  const since = tail?.head === counted ? tail.since : clock.now();
  follower.tailSince.set(inboxId, { head: counted, since });
  if (clock.now() - since < GAP_GRACE_MS) {
    follower.waitingOnGap = true;
    follower.dirty.add(inboxId);
  }
}

/** Sleeps until a change, a pending gap's grace, the next list refresh, or the engine's change. */
function sleep(follower: Follower): Promise<void> {
  const { hub } = follower.deps;
  return new Promise<void>((resolve) => {
    const timeout = setTimeout(
      () => {
        if (follower.waitingOnGap) follower.pending = true;
        resolve();
      },
      follower.waitingOnGap ? GAP_RECHECK_MS : Math.max(0, follower.listedAt + hub.relistIntervalMs() - Date.now()),
    );
    timeout.unref();
    // Woken early, the timer goes too: left to run (up to the re-list interval, 15 min with
    // the engine), it would keep an ended stream's state and its call in memory until then.
    follower.wakeUp = () => {
      clearTimeout(timeout);
      resolve();
    };
    if (follower.pending) follower.wakeUp();
  });
}

/** Reads every inbox that changed (or waits on a gap); false when the stream was aborted meanwhile. */
async function* readChanged(follower: Follower): AsyncGenerator<Delivery, boolean> {
  follower.waitingOnGap = false;
  if (!follower.pending) return true;
  follower.pending = false;
  const changed = follower.inboxes.filter((inboxId) => follower.dirty.has(inboxId));
  follower.dirty.clear();
  for (const inboxId of changed) if (!(yield* readInbox(follower, inboxId))) return false;
  return true;
}

/**
 * The messages of an owner's inboxes after `resumeCursor` (every retained one without it): first
 * the backlog, then live, until `signal` aborts. At least once, in order per inbox; a cursor comes
 * with every message.
 */
export async function* followInboxes(deps: FollowDeps): AsyncGenerator<Delivery> {
  const { hub, clock, ownerId, signal } = deps;
  // A cursor that is not this owner's is refused before anything is read.
  const { positions, watermark } = await hub.cursors.open(ownerId, deps.resumeCursor);
  const follower: Follower = {
    deps,
    positions,
    watermark,
    progress: inboxProgress(),
    listedFrom: clock.now(),
    listedAt: -Infinity,
    inboxes: [],
    unwatch: undefined,
    relistNow: true,
    announced: new Set(),
    joined: new Set(),
    pending: true,
    dirty: new Set(),
    gapSince: new Map(),
    tailSince: new Map(),
    waitingOnGap: false,
    wakeUp: undefined,
  };
  const onAbort = () => follower.wakeUp?.();
  signal.addEventListener('abort', onAbort);
  // Before the first listing: a number provisioned meanwhile is announced, not missed.
  const unwatchOwner = hub.watchOwner(ownerId, (inboxIds) => onNumbersChanged(follower, inboxIds));
  // The engine lost (or back): the next re-list is judged again, at the interval of the moment.
  const unwatchEngine = hub.onEngineChange(() => follower.wakeUp?.());
  try {
    while (!signal.aborted) {
      await relistIfDue(follower);
      await joinAnnounced(follower);
      if (!(yield* readChanged(follower))) return;
      if (signal.aborted) break;
      await sleep(follower);
      follower.wakeUp = undefined;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    unwatchEngine();
    unwatchOwner();
    follower.unwatch?.();
  }
}
