import { randomUUID } from 'node:crypto';
import { latestWakeups, PENDING_INBOXES_MAX, wakeupListeners, type InboxWakeups } from '../messaging/wakeups';
import type { CredentialsSupplier } from './elasticache-iam';
import { createLogger, type Logger } from './log';
import { createEventCounter, WAKEUP_PUBLISH_FAILURES_METRIC } from './metrics';
import type { TelemetrySettings } from './telemetry-settings';
import { COMMAND_TIMEOUT_MS, iamTokens, inboxChannel, messageOf, ownerChannel } from './valkey-wakeups-connection';
import { enginePublisher } from './valkey-wakeups-publisher';
import { EngineSubscriber } from './valkey-wakeups-subscriber';
import type { WakeupEngine } from './wakeup-engine-config';

// Inbox wake-ups through a Valkey/Redis engine (>= 7): sharded pub/sub, one channel per inbox,
// `inbox:{<inboxId>}` (the hash tag puts the channel in the inbox's slot). A writer SPUBLISHes the
// sequence it stored; a process SSUBSCRIBEs to the inboxes its streams watch. Likewise one channel
// per owner, `owner:{<ownerId>}`: provisioning publishes the numbers an owner gained, and a process
// subscribes to the owners whose numbers its streams follow. An inbox wake-up also records the
// sequence as the inbox's head, `head:{<inboxId>}` (same slot; kept HEAD_TTL_SECONDS, never
// lowered), in the same round trip (a script): subscribers read the heads of what they watch every
// few seconds (`heads`), so a wake-up that reached the engine but not them still arrives. Client: ioredis
// (docs/decisions.md): maintained by Redis, speaks sharded pub/sub, TLS and AUTH (ACL users).
//
// Two connections per process, each opened on first use: the publisher (every process that
// accepts messages, a Lambda too) and the subscriber (only processes holding streams). The
// subscriber is `ready` once every subscription is in force on its current connection; when it is
// lost, listeners hear `lost` (the hub polls fast), and on reconnection everything is subscribed
// again before `ready` (the hub catches up). A publish never fails or delays a send: it runs in
// the background (`latestWakeups`: bounded, folded per inbox), DynamoDB has the message, and a
// failure is logged and counted (WakeupPublishFailures), at most one line per REPORT_EVERY_MS with
// the failures since the last. No line carries a message, a password or an inbox id.
//
// A hung engine (stopped, its connections open) answers nothing: a command that times out
// (COMMAND_TIMEOUT_MS) drops the publisher's connection and opens it again; until that one is
// ready, publishes fail at once (counted) instead of waiting behind the hung one, and the
// subscriber is checked at once (a ping), so that streams poll fast while the engine is lost.
//
// With IAM authentication (ElastiCache, `engine.iam`) the password is an IAM auth token: signed
// afresh at every (re)connect from the process's credentials (a getter on the options, which ioredis
// reads at each connect), and, since ElastiCache closes an IAM connection after 12 hours, each
// connection renews itself before that: the publisher authenticates again with a fresh token, the
// subscriber (which cannot send AUTH while subscribed) reconnects and subscribes again.

// Files: this one composes the process's wake-ups (InboxWakeups) from the publisher
// (valkey-wakeups-publisher.ts) and the subscriber (valkey-wakeups-subscriber.ts), which share
// valkey-wakeups-connection.ts; the engine's settings (WakeupEngine) come from wakeup-engine-config.ts.

export {
  HEAD_TTL_SECONDS,
  inboxChannel,
  inboxHeadKey,
  inboxWakeupMessage,
  ownerChannel,
} from './valkey-wakeups-connection';
export { createEnginePublisher, type EnginePublisher } from './valkey-wakeups-publisher';
export type { WakeupEngine } from './wakeup-engine-config';

export interface ValkeyWakeupsOptions {
  /** This process's (tests give their own). */
  telemetry?: TelemetrySettings;
  /** How long a publish waits for a connection that has not been ready yet (the first send of a process). */
  firstConnectMs?: number;
  /** Signs the IAM auth tokens (required with `engine.iam`): the process's AWS credentials. */
  credentials?: CredentialsSupplier;
  /** With IAM: how long a connection serves before it renews (IAM_RENEW_MS; tests shorten it). */
  iamRenewMs?: number;
  /**
   * How long a command waits for the engine's answer before the engine counts as hung
   * (COMMAND_TIMEOUT_MS; tests change it).
   */
  commandTimeoutMs?: number;
}

/** Publish failures are summed and reported at most this often (an engine outage means every send fails). */
export const REPORT_EVERY_MS = 10_000;

/** Sums failures and reports them (one log line, one metric line) at most every REPORT_EVERY_MS. */
function failureReporter(logger: Logger, count: (failures: number) => void, address: string) {
  let reportedAt = -Infinity;
  let unreported = 0;
  let lastError = '';
  let timer: NodeJS.Timeout | undefined;
  const report = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (unreported === 0) return;
    const warning =
      'inbox wake-ups not published (streams see these messages at their next poll, ' +
      'new numbers at their next re-list)';
    logger.warn(warning, { engine: address, failures: unreported, error: lastError });
    count(unreported);
    unreported = 0;
    reportedAt = Date.now();
  };
  return {
    failed(error: unknown) {
      unreported++;
      lastError = messageOf(error);
      const wait = reportedAt + REPORT_EVERY_MS - Date.now();
      if (wait <= 0) report();
      else if (!timer) {
        timer = setTimeout(report, wait);
        timer.unref();
      }
    },
    flush: report,
  };
}

/** The engine's wake-ups when the configuration names one (VALKEY_URL); otherwise none (in-process). */
export const engineWakeups = (
  settings: { wakeupEngine?: WakeupEngine | undefined },
  options: ValkeyWakeupsOptions = {},
): InboxWakeups | undefined =>
  settings.wakeupEngine ? createValkeyWakeups(settings.wakeupEngine, options) : undefined;

/** Inbox wake-ups through the engine; connections open on first use and reconnect on their own. */
export function createValkeyWakeups(engine: WakeupEngine, options: ValkeyWakeupsOptions = {}): InboxWakeups {
  const logger = createLogger('svcnum-messaging', options.telemetry);
  const counter = createEventCounter(WAKEUP_PUBLISH_FAILURES_METRIC, 'svcnum', [], options.telemetry);
  const failures = failureReporter(logger, (count) => counter(undefined, count), engine.address);
  const listeners = wakeupListeners();
  // Our own publishes have woken our listeners already: their echo is dropped.
  const self = randomUUID();
  let closed = false;
  /** Set when close() starts: publishes are no longer taken (those waiting still go out). */
  let closing = false;
  const tokens = iamTokens(engine, options.credentials, options.iamRenewMs);
  const commandTimeoutMs = options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS;
  const subscriber = new EngineSubscriber({ engine, logger, tokens, commandTimeoutMs, listeners, self });
  // A hung engine found by a publish: the subscriber is checked at once, not at its next ping.
  const publisher = enginePublisher(engine, logger, tokens, {
    firstConnectMs: options.firstConnectMs,
    commandTimeoutMs,
    hung: () => subscriber.check(),
  });

  /** Never rejects: a failure is counted and reported. */
  async function reported(publish: () => Promise<void>) {
    if (closed) return;
    try {
      await publish();
    } catch (error) {
      failures.failed(error);
    }
  }

  /** Inbox wake-ups waiting for the engine, and owner wake-ups in flight: nobody waits for them but `close`. */
  const inboxPublishes = latestWakeups((inboxId, seq) => reported(() => publisher.wakeup(inboxId, seq, self)));
  const ownerPublishes = new Set<Promise<void>>();
  const tooMany = () => failures.failed(new Error(`more than ${PENDING_INBOXES_MAX} wake-ups wait for the engine`));

  return {
    reach: 'engine',
    publish(inboxId, seq) {
      listeners.wakeup(inboxId, seq);
      if (!closing && !inboxPublishes.push(inboxId, seq)) tooMany();
    },
    subscribe: (inboxIds) => subscriber.want(inboxIds, inboxChannel, listeners.subscribed),
    unsubscribe: (inboxIds) => subscriber.unwant(inboxIds.map(inboxChannel)),
    publishNumbersChanged(ownerId, inboxIds) {
      listeners.numbersChanged(ownerId, inboxIds);
      if (closing) return;
      if (ownerPublishes.size >= PENDING_INBOXES_MAX) return tooMany();
      const publishing = reported(() =>
        publisher.spublish(ownerChannel(ownerId), `${self} ${inboxIds.join(',')}`),
      ).finally(() => ownerPublishes.delete(publishing));
      ownerPublishes.add(publishing);
    },
    subscribeOwners: (ownerIds) => subscriber.want(ownerIds, ownerChannel, listeners.ownersSubscribed),
    unsubscribeOwners: (ownerIds) => subscriber.unwant(ownerIds.map(ownerChannel)),
    listen: listeners.add,
    ready: () => subscriber.ready(),
    heads: (inboxIds) => publisher.heads(inboxIds),
    async close() {
      // What waits is published (or fails, counted) first: each publish ends within a command
      // timeout, and a hung engine fails the rest at once. Nothing new is taken meanwhile (calls
      // still running after a drain), so the wait ends.
      closing = true;
      await Promise.all([inboxPublishes.settled(), ...ownerPublishes]);
      closed = true;
      subscriber.close();
      failures.flush();
      publisher.close();
      tokens?.close();
    },
  };
}
