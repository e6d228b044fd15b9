import type { MessagingPort } from './store';
import type { InboxWakeups } from './wakeups';

// How the hub (core/messaging/hub.ts) learns that an inbox changed without a wake-up reaching it.
//
// It polls the inbox counters of every inbox any of its streams watches: one strongly consistent
// BatchGetItem per 100 watched inboxes per poll, whatever the number of streams or messages.
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

export const POLL_INTERVAL_MS = 250;
/**
 * With a pub/sub engine whose subscriber is ready: the bound on the delay of a wake-up that never
 * reached the engine.
 */
export const SAFETY_POLL_INTERVAL_MS = 90_000;
/**
 * With a pub/sub engine whose subscriber is ready: the bound on the delay of a wake-up that
 * reached the engine but not this process.
 */
export const ENGINE_CHECK_INTERVAL_MS = 3_000;
/** With the engine ready, streams re-list at most once every this many safety-net polls (15 min by default). */
export const RELIST_SAFETY_POLLS = 10;
/** With the engine lost (its subscriber not ready): the bound on other processes' messages' delay. */
export const ENGINE_LOST_POLL_INTERVAL_MS = 2_000;
/** Streams re-list their numbers this often (without an engine, or with it lost): the safety net of owner wake-ups. */
export const INBOX_REFRESH_MS = 30_000;

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
  /**
   * Streams re-list their owner's numbers (MESSAGE_RELIST_MS); with the engine ready, at most
   * every RELIST_SAFETY_POLLS safety polls.
   */
  relistMs: number;
}

export const DEFAULT_HUB_POLLING: HubPolling = {
  pollIntervalMs: POLL_INTERVAL_MS,
  safetyPollMs: SAFETY_POLL_INTERVAL_MS,
  engineLostPollMs: ENGINE_LOST_POLL_INTERVAL_MS,
  engineCheckMs: ENGINE_CHECK_INTERVAL_MS,
  relistMs: INBOX_REFRESH_MS,
};

/** What the hub knows of the inboxes it watches, and the state of its polls. */
export interface HubState {
  store: MessagingPort;
  wakeups: InboxWakeups;
  polling: HubPolling;
  /** Per watched inbox: its streams' callbacks. */
  watchers: Map<string, Set<(inboxId: string) => void>>;
  /** Per watched inbox: the last counter value the poll (or a wake-up) saw. */
  heads: Map<string, number>;
  /** Per inbox: when the last poll that read its counter began (Date.now()); the counter was at most `heads` then. */
  headsReadFrom: Map<string, number>;
  /** Inboxes the poll in flight (or the next one) reads; a catch-up asked for meanwhile is never dropped. */
  toPoll: Set<string>;
  pollInFlight: Promise<void> | undefined;
  /** The last heads read failed: the next comes sooner (a catch-up may be what failed). */
  pollFailed: boolean;
  /** The next poll of the store. */
  timer: NodeJS.Timeout | undefined;
  /** The next check of the heads the engine recorded. */
  checkTimer: NodeJS.Timeout | undefined;
  checking: boolean;
}

/** The poll interval of the moment (by how far wake-ups reach, and whether the engine is ready). */
export function pollInterval({ wakeups, polling, pollFailed }: HubState): number {
  const base =
    wakeups.reach === 'process'
      ? polling.pollIntervalMs
      : wakeups.ready()
        ? polling.safetyPollMs
        : polling.engineLostPollMs;
  return pollFailed ? Math.min(base, polling.engineLostPollMs) : base;
}

export function wake(hub: HubState, inboxId: string) {
  hub.watchers.get(inboxId)?.forEach((callback) => {
    callback(inboxId);
  });
}

/** A wake-up: wake at once, and count it, so the next poll does not wake again for it. */
export function appended(hub: HubState, inboxId: string, seq: number) {
  if (!hub.watchers.has(inboxId)) return;
  if (seq > (hub.heads.get(inboxId) ?? 0)) hub.heads.set(inboxId, seq);
  wake(hub, inboxId);
}

async function readHeads(hub: HubState, inboxIds: string[]) {
  const { watchers, heads } = hub;
  try {
    const readFrom = Date.now();
    const latest = await hub.store.inboxHeads(inboxIds);
    hub.pollFailed = false;
    for (const [inboxId, head] of latest) {
      if (watchers.has(inboxId)) hub.headsReadFrom.set(inboxId, readFrom);
      // Counters only grow: a lower value is a read that started before a local append. An
      // inbox's first read wakes its streams only if it has messages (a stream reads on watching).
      const known = heads.get(inboxId);
      if (!watchers.has(inboxId) || (known !== undefined && head <= known)) continue;
      heads.set(inboxId, head);
      if (head > (known ?? 0)) wake(hub, inboxId);
    }
  } catch {
    // Retried at the next poll, which comes sooner; streams also re-check on their own timers.
    hub.pollFailed = true;
  }
}

/** Reads the heads of `inboxIds` (every watched inbox without), after the poll in flight if any. */
export function poll(hub: HubState, inboxIds?: Iterable<string>): Promise<void> {
  for (const inboxId of inboxIds ?? hub.watchers.keys()) if (hub.watchers.has(inboxId)) hub.toPoll.add(inboxId);
  if (!hub.pollInFlight && hub.toPoll.size > 0) hub.pollInFlight = drainPolls(hub);
  return hub.pollInFlight ?? Promise.resolve();
}

async function drainPolls(hub: HubState) {
  // Runs after the caller's turn: `pollInFlight` is set before the finally below clears it.
  await Promise.resolve();
  try {
    while (hub.toPoll.size > 0) {
      const inboxIds = [...hub.toPoll];
      hub.toPoll.clear();
      await readHeads(hub, inboxIds);
    }
  } finally {
    hub.pollInFlight = undefined;
  }
}

/**
 * Every engineCheckMs while an engine is ready and something is watched: the heads the engine
 * recorded, taken as wake-ups. Inboxes the store poll has not read yet are left to it (their
 * first read is a catch-up of its own).
 */
export function scheduleCheck(hub: HubState) {
  const { wakeups, watchers, heads } = hub;
  if (hub.checkTimer || hub.checking || !wakeups.heads || watchers.size === 0) return;
  hub.checkTimer = setTimeout(() => {
    hub.checkTimer = undefined;
    const watched = [...watchers.keys()].filter((inboxId) => heads.has(inboxId));
    if (!wakeups.ready() || watched.length === 0) return scheduleCheck(hub);
    hub.checking = true;
    wakeups.heads!(watched)
      .then(
        (recorded) => {
          for (const [inboxId, seq] of recorded)
            if (seq > (heads.get(inboxId) ?? Infinity)) appended(hub, inboxId, seq);
        },
        () => undefined,
      )
      .finally(() => {
        hub.checking = false;
        scheduleCheck(hub);
      });
  }, hub.polling.engineCheckMs);
  hub.checkTimer.unref();
}

export function stopChecks(hub: HubState) {
  clearTimeout(hub.checkTimer);
  hub.checkTimer = undefined;
}

/** (Re)arms the poll timer at the interval of the moment; none while nothing is watched. */
export function schedule(hub: HubState) {
  if (hub.timer) clearTimeout(hub.timer);
  hub.timer = undefined;
  if (hub.watchers.size === 0) return;
  hub.timer = setTimeout(() => {
    hub.timer = undefined;
    void poll(hub).finally(() => {
      if (!hub.timer) schedule(hub);
    });
  }, pollInterval(hub));
  hub.timer.unref();
}
