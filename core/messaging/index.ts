import type { NumberStreams, TokenStanding } from '../kernel/capabilities';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock, Random } from '../kernel/ports';
import type { MessagingPort } from './store';
import { createMessaging, type DerivedFailureReport } from './send';
import { followInboxes, type Delivery } from './follow';
import { createMessageHub } from './hub';
import { DEFAULT_HUB_POLLING, type HubPolling } from './hub-polling';
import { createInProcessWakeups, type InboxWakeups } from './wakeups';

/** The messaging module: the ingress (`sender`, `send`) and the streams of incoming messages. */
export function createMessagingModule(
  ports: {
    store: MessagingPort;
    clock: Clock;
    random: Random;
    pageTokens: PageTokenCodec;
    /** Wake-ups through a pub/sub engine (core/adapters/valkey-wakeups.ts); without, within this process only. */
    inboxWakeups?: InboxWakeups;
    /** The hub's intervals (MESSAGE_…_MS); each one not given is the default (DEFAULT_HUB_POLLING). */
    messagePolling?: Partial<HubPolling>;
    reportDerivedFailure?: DerivedFailureReport;
  },
  needs: { accounts: Pick<TokenStanding, 'tokenInForce'> },
) {
  const { store, clock, random, pageTokens } = ports;
  // Wakes streams at once when a message is stored: this process's, and through an engine every
  // process's.
  const wakeups = ports.inboxWakeups ?? createInProcessWakeups();
  const given = Object.entries(ports.messagePolling ?? {}).filter(([, value]) => value !== undefined);
  const polling: HubPolling = { ...DEFAULT_HUB_POLLING, ...Object.fromEntries(given) };
  // The notice goes out behind the answer (ProvisionNumber never waits for the engine).
  const numberStreams: NumberStreams = {
    numbersGained: async (ownerId, svcnumIds) => wakeups.publishNumbersChanged(ownerId, svcnumIds),
  };
  /** Open streams of this process and what they watch (polling starts with the first stream). */
  const hub = createMessageHub(store, wakeups, pageTokens, polling);
  return {
    ...createMessaging({
      store,
      clock,
      random,
      wakeups,
      tokenInForce: needs.accounts.tokenInForce,
      // Every process that serves messages gives one (core/adapters/derived-failures.ts); a module
      // built by hand without one reports nowhere.
      reportDerivedFailure: ports.reportDerivedFailure ?? (() => undefined),
    }),
    hub,
    wakeups,
    /** Provisioning tells the owner's open streams (of every process, through an engine) of a new number. */
    numberStreams,
    /** How often this process's open streams poll their inboxes without an engine. */
    pollIntervalMs: polling.pollIntervalMs,
    /**
     * The messages arriving in `owner`'s inboxes (listed by `listInboxes`, re-listed as they
     * change; a number announced by provisioning is checked with `holdsInbox` and followed at
     * once), from the resume cursor on, until `signal` aborts.
     */
    stream(
      owner: {
        ownerId: string;
        listInboxes: () => Promise<string[]>;
        holdsInbox: (inboxId: string) => Promise<boolean>;
      },
      resumeCursor: string | undefined,
      signal: AbortSignal,
    ): AsyncGenerator<Delivery> {
      const { ownerId, listInboxes, holdsInbox } = owner;
      return followInboxes({ store, hub, clock, ownerId, listInboxes, holdsInbox, resumeCursor, signal });
    },
  };
}
