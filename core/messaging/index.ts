import type { AccountStatus, ClientLookup } from '../kernel/capabilities';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock, Random } from '../kernel/ports';
import type { MessagingPort } from './store';
import { createMessaging, InboxNotifier, type DerivedFailureReport } from './send';
import { createMessageHub, followInboxes, POLL_INTERVAL_MS, type Delivery } from './stream';

/** The messaging module: the ingress (`sender`, `send`) and the streams of incoming messages. */
export function createMessagingModule(
  ports: { store: MessagingPort; clock: Clock; random: Random; pageTokens: PageTokenCodec; messagePollIntervalMs?: number; reportDerivedFailure?: DerivedFailureReport },
  needs: { accounts: Pick<ClientLookup, 'getClient'> & Pick<AccountStatus, 'accountActive'> },
) {
  const { store, clock, random, pageTokens } = ports;
  // Wakes streams of this process at once when this process accepts a message.
  const notifier = new InboxNotifier();
  const pollIntervalMs = ports.messagePollIntervalMs ?? POLL_INTERVAL_MS;
  /** Open streams of this process and what they watch (polling starts with the first stream). */
  const hub = createMessageHub(store, notifier, pageTokens, pollIntervalMs);
  return {
    ...createMessaging({
      store, clock, random, notifier, getClient: needs.accounts.getClient, accountActive: needs.accounts.accountActive,
      // Every process that serves messages gives one (core/adapters/derived-failures.ts); a module built by hand without one reports nowhere.
      reportDerivedFailure: ports.reportDerivedFailure ?? (() => undefined),
    }),
    hub,
    /** How often this process's open streams poll their inboxes. */
    pollIntervalMs,
    /**
     * The messages arriving in `owner`'s inboxes (listed by `listInboxes`, re-listed as they
     * change), from the resume cursor on, until `signal` aborts.
     */
    stream(owner: { ownerId: string; listInboxes: () => Promise<string[]> }, resumeCursor: string | undefined, signal: AbortSignal): AsyncGenerator<Delivery> {
      return followInboxes({ store, hub, clock, ownerId: owner.ownerId, listInboxes: owner.listInboxes, resumeCursor, signal });
    },
  };
}
