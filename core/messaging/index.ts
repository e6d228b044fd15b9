import type { AccountStatus, ClientLookup } from '../kernel/capabilities';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock, Random } from '../kernel/ports';
import type { MessagingPort } from './store';
import { createMessaging, type DerivedFailureReport } from './send';
import { createMessageHub, DEFAULT_HUB_POLLING, followInboxes, type Delivery } from './stream';
import { createInProcessWakeups, type InboxWakeups } from './wakeups';

/** The messaging module: the ingress (`sender`, `send`) and the streams of incoming messages. */
export function createMessagingModule(
  ports: {
    store: MessagingPort; clock: Clock; random: Random; pageTokens: PageTokenCodec;
    /** Wake-ups through a pub/sub engine (core/adapters/valkey-wakeups.ts); without, within this process only. */
    inboxWakeups?: InboxWakeups;
    messagePollIntervalMs?: number; messageSafetyPollMs?: number; messageEngineLostPollMs?: number;
    reportDerivedFailure?: DerivedFailureReport;
  },
  needs: { accounts: Pick<ClientLookup, 'getClient'> & Pick<AccountStatus, 'accountActive'> },
) {
  const { store, clock, random, pageTokens } = ports;
  // Wakes streams at once when a message is stored: this process's, and through an engine every process's.
  const wakeups = ports.inboxWakeups ?? createInProcessWakeups();
  const polling = {
    pollIntervalMs: ports.messagePollIntervalMs ?? DEFAULT_HUB_POLLING.pollIntervalMs,
    safetyPollMs: ports.messageSafetyPollMs ?? DEFAULT_HUB_POLLING.safetyPollMs,
    engineLostPollMs: ports.messageEngineLostPollMs ?? DEFAULT_HUB_POLLING.engineLostPollMs,
  };
  /** Open streams of this process and what they watch (polling starts with the first stream). */
  const hub = createMessageHub(store, wakeups, pageTokens, polling);
  return {
    ...createMessaging({
      store, clock, random, wakeups, getClient: needs.accounts.getClient, accountActive: needs.accounts.accountActive,
      // Every process that serves messages gives one (core/adapters/derived-failures.ts); a module built by hand without one reports nowhere.
      reportDerivedFailure: ports.reportDerivedFailure ?? (() => undefined),
    }),
    hub,
    wakeups,
    /** How often this process's open streams poll their inboxes without an engine. */
    pollIntervalMs: polling.pollIntervalMs,
    /**
     * The messages arriving in `owner`'s inboxes (listed by `listInboxes`, re-listed as they
     * change), from the resume cursor on, until `signal` aborts.
     */
    stream(owner: { ownerId: string; listInboxes: () => Promise<string[]> }, resumeCursor: string | undefined, signal: AbortSignal): AsyncGenerator<Delivery> {
      return followInboxes({ store, hub, clock, ownerId: owner.ownerId, listInboxes: owner.listInboxes, resumeCursor, signal });
    },
  };
}
