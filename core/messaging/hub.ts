import { sharedReads } from '../kernel/cache';
import type { PageTokenCodec } from '../kernel/page-token';
import { messageCursors } from './cursors';
import {
  appended,
  DEFAULT_HUB_POLLING,
  poll,
  pollInterval,
  RELIST_SAFETY_POLLS,
  schedule,
  scheduleCheck,
  stopChecks,
  type HubPolling,
  type HubState,
} from './hub-polling';
import type { MessagingPort } from './store';
import type { InboxWakeups, WakeupListener } from './wakeups';

// Delivery to open streams, across processes, without webhooks.
//
// Every process that holds streams runs one MessageHub. The hub learns that an inbox changed in
// two ways: from wake-ups (core/messaging/wakeups.ts: "inbox X has sequence N", said by the writer
// after its write), and by polling (core/messaging/hub-polling.ts: the inbox counters in the
// store, and with an engine the heads it recorded). A woken stream reads the inboxes that
// changed, from its cursor (core/messaging/follow.ts).
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

/** The hub's state, and its streams' owners and engine watchers. */
interface Hub extends HubState {
  /** Per owner: its streams, told of the numbers it gained (none named: re-list). */
  ownerWatchers: Map<string, Set<(inboxIds: readonly string[]) => void>>;
  /** Told when the engine is lost or back: the re-list interval changed. */
  engineWatchers: Set<() => void>;
}

function engineChanged(hub: Hub) {
  hub.engineWatchers.forEach((callback) => {
    callback();
  });
}

function relist(hub: Hub, ownerIds: Iterable<string>, inboxIds: readonly string[] = []) {
  for (const ownerId of ownerIds) {
    hub.ownerWatchers.get(ownerId)?.forEach((callback) => {
      callback(inboxIds);
    });
  }
}

function hubListener(hub: Hub): WakeupListener {
  return {
    wakeup: (inboxId, seq) => appended(hub, inboxId, seq),
    // Subscriptions in force again: read what was published while they were not, then poll slowly.
    ready: () => {
      void poll(hub);
      relist(hub, hub.ownerWatchers.keys());
      schedule(hub);
      engineChanged(hub);
    },
    lost: () => {
      schedule(hub);
      engineChanged(hub);
    },
    subscribed: (inboxIds) => void poll(hub, inboxIds),
    numbersChanged: (ownerId, inboxIds) => relist(hub, [ownerId], inboxIds),
    ownersSubscribed: (ownerIds) => relist(hub, ownerIds),
  };
}

/** Calls `onChange` with an inbox of `inboxIds` that may have new messages; returns the unsubscribe. */
function watchInboxes(hub: Hub, inboxIds: readonly string[], onChange: (inboxId: string) => void): () => void {
  const { watchers, wakeups } = hub;
  const added: string[] = [];
  for (const id of inboxIds) {
    let set = watchers.get(id);
    if (!set) {
      set = new Set();
      watchers.set(id, set);
      added.push(id);
    }
    set.add(onChange);
  }
  if (added.length > 0) wakeups.subscribe(added);
  if (!hub.timer && !hub.pollInFlight) schedule(hub);
  scheduleCheck(hub);
  return () => {
    const removed: string[] = [];
    for (const id of inboxIds) {
      const set = watchers.get(id);
      set?.delete(onChange);
      if (set?.size === 0) {
        watchers.delete(id);
        hub.heads.delete(id);
        hub.headsReadFrom.delete(id);
        removed.push(id);
      }
    }
    if (removed.length > 0) wakeups.unsubscribe(removed);
    if (watchers.size === 0) {
      schedule(hub);
      stopChecks(hub);
    }
  };
}

/**
 * Calls `onChange` when `ownerId` gained numbers (`inboxIds`, said by provisioning), or may have
 * (none named: its owner wake-ups may have been missed); returns the unsubscribe.
 */
function watchOwner(hub: Hub, ownerId: string, onChange: (inboxIds: readonly string[]) => void): () => void {
  const { ownerWatchers, wakeups } = hub;
  let set = ownerWatchers.get(ownerId);
  if (!set) {
    set = new Set();
    ownerWatchers.set(ownerId, set);
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
}

function closeHub(hub: Hub, stopListening: () => void) {
  const { watchers, ownerWatchers, wakeups } = hub;
  stopListening();
  if (watchers.size > 0) wakeups.unsubscribe([...watchers.keys()]);
  if (ownerWatchers.size > 0) wakeups.unsubscribeOwners([...ownerWatchers.keys()]);
  watchers.clear();
  ownerWatchers.clear();
  hub.engineWatchers.clear();
  schedule(hub);
  stopChecks(hub);
}

export function createMessageHub(
  store: MessagingPort,
  wakeups: InboxWakeups,
  pageTokens: PageTokenCodec,
  polling: HubPolling = DEFAULT_HUB_POLLING,
) {
  const hub: Hub = {
    store,
    wakeups,
    polling,
    watchers: new Map(),
    heads: new Map(),
    headsReadFrom: new Map(),
    toPoll: new Set(),
    pollInFlight: undefined,
    pollFailed: false,
    timer: undefined,
    checkTimer: undefined,
    checking: false,
    ownerWatchers: new Map(),
    engineWatchers: new Set(),
  };
  // Streams woken together at the same position share one Query (fan-out to many streams of one
  // inbox costs one read, not one per stream).
  const read = sharedReads(
    (inboxId: string, afterSeq: number, limit: number) => store.readInbox(inboxId, afterSeq, limit),
    (inboxId, afterSeq, limit) => `${inboxId}#${afterSeq}#${limit}`,
  );
  const stopListening = wakeups.listen(hubListener(hub));
  return {
    /** The streams' resume cursors. */
    cursors: messageCursors(pageTokens),
    /** Entries of an inbox after `afterSeq`; concurrent identical reads share one Query. */
    read,
    watch: (inboxIds: readonly string[], onChange: (inboxId: string) => void) => watchInboxes(hub, inboxIds, onChange),
    watchOwner: (ownerId: string, onChange: (inboxIds: readonly string[]) => void) =>
      watchOwner(hub, ownerId, onChange),
    /** Calls `onChange` whenever the engine is lost or back (`relistIntervalMs` changed); returns the unsubscribe. */
    onEngineChange(onChange: () => void): () => void {
      hub.engineWatchers.add(onChange);
      return () => hub.engineWatchers.delete(onChange);
    },
    /**
     * How often streams re-list their owner's numbers now (slower with the engine ready: owner
     * wake-ups reach every process).
     */
    relistIntervalMs: () =>
      wakeups.ready() ? Math.max(polling.relistMs, RELIST_SAFETY_POLLS * polling.safetyPollMs) : polling.relistMs,
    /** The last counter value the poll saw for an inbox (undefined before its first poll). */
    head: (inboxId: string): number | undefined => hub.heads.get(inboxId),
    /** When the last poll that read an inbox's counter began (Date.now(); undefined before one did). */
    headReadFrom: (inboxId: string): number | undefined => hub.headsReadFrom.get(inboxId),
    /** How many inboxes this process watches (for the docs' cost figures and tests). */
    watchedInboxes: () => hub.watchers.size,
    /** The poll interval of the moment (by how far wake-ups reach, and whether the engine is ready). */
    pollIntervalMs: () => pollInterval(hub),
    close: () => closeHub(hub, stopListening),
  };
}

export type MessageHub = ReturnType<typeof createMessageHub>;
