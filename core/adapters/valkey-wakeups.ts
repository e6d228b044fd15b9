import { randomUUID } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { latestWakeups, PENDING_INBOXES_MAX, wakeupListeners, type InboxWakeups } from '../messaging/wakeups';
import { createIamTokens, type CredentialsSupplier, type IamAuth, type IamTokens } from './elasticache-iam';
import { createLogger, type Logger } from './log';
import { createEventCounter, WAKEUP_PUBLISH_FAILURES_METRIC } from './metrics';
import type { TelemetrySettings } from './runtime-config';

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

/** Where the engine is and how to sign in (runtime-config.ts reads it from VALKEY_URL, VALKEY_USERNAME, VALKEY_PASSWORD, VALKEY_IAM_AUTH). */
export interface WakeupEngine {
  /** `redis[s]://host:port`, without credentials: what logs name. */
  address: string;
  host: string;
  port: number;
  /** rediss://: TLS, the server's certificate checked against the host name. */
  tls: boolean;
  username?: string;
  password?: string;
  /** IAM authentication (VALKEY_IAM_AUTH): the password is an IAM auth token, never a `password`. */
  iam?: IamAuth;
}

export interface ValkeyWakeupsOptions {
  /** This process's (tests give their own). */
  telemetry?: TelemetrySettings;
  /** How long a publish waits for a connection that has not been ready yet (the first send of a process). */
  firstConnectMs?: number;
  /** Signs the IAM auth tokens (required with `engine.iam`): the process's AWS credentials. */
  credentials?: CredentialsSupplier;
  /** With IAM: how long a connection serves before it renews (IAM_RENEW_MS; tests shorten it). */
  iamRenewMs?: number;
  /** How long a command waits for the engine's answer before the engine counts as hung (COMMAND_TIMEOUT_MS; tests change it). */
  commandTimeoutMs?: number;
}

/** Publish failures are summed and reported at most this often (an engine outage means every send fails). */
export const REPORT_EVERY_MS = 10_000;
/** The subscriber's liveness check: a connection that stops answering is dropped and opened again. */
const PING_EVERY_MS = 10_000;
/** An engine that has not answered a command within this is hung: its connection is dropped. */
const COMMAND_TIMEOUT_MS = 1_000;
/** How long a dropped connection may take to close (a hung engine never answers the close). */
const DISCONNECT_MS = 500;
/** ioredis's rejection of a command that timed out. */
const TIMED_OUT = 'Command timed out';
const FIRST_CONNECT_MS = 1_000;
const SUBSCRIBE_BATCH = 500;
/** While no credentials can be had, another try this often. */
const CREDENTIALS_RETRY_MS = 2_000;

export const inboxChannel = (inboxId: string) => `inbox:{${inboxId}}`;
/** The key of an inbox's last published sequence (same hash tag, so the same slot, as its channel). */
export const inboxHeadKey = (inboxId: string) => `head:{${inboxId}}`;
/** How long the engine keeps an inbox's head after its last publish: what the hubs' engine checks look at. */
export const HEAD_TTL_SECONDS = 3_600;
/** Heads read per MGET. */
const HEADS_BATCH = 500;
/**
 * One inbox wake-up: records the sequence as the inbox's head unless a higher one is there, then
 * publishes it. KEYS[1] the head, ARGV: sequence, TTL seconds, channel, message.
 */
const WAKEUP_SCRIPT = `local seq = tonumber(ARGV[1])
if seq > tonumber(redis.call('GET', KEYS[1]) or '0') then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
return redis.call('SPUBLISH', ARGV[3], ARGV[4])`;
type WakeupConnection = Redis & { svcnumWakeup(head: string, seq: number, ttlSeconds: number, channel: string, message: string): Promise<number> };
const INBOX_CHANNEL = /^inbox:\{(.+)\}$/;
export const ownerChannel = (ownerId: string) => `owner:{${ownerId}}`;
const OWNER_CHANNEL = /^owner:\{(.+)\}$/;
/** Ids in an owner wake-up: what an id may look like (the streams check that the owner holds them). */
const ANNOUNCED_ID = /^[0-9A-Za-z_-]{1,64}$/;

function connectionOptions(engine: WakeupEngine, role: 'publisher' | 'subscriber', commandTimeoutMs: number): RedisOptions {
  return {
    host: engine.host,
    port: engine.port,
    ...(engine.username ? { username: engine.username } : {}),
    ...(engine.password && !engine.iam ? { password: engine.password } : {}),
    ...(engine.tls ? { tls: { servername: engine.host } } : {}),
    connectionName: `svcnum-wakeups-${role}`,
    lazyConnect: true,
    // Fail at once while disconnected (a send never waits for the engine to come back) …
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    // … and subscriptions are made again by us, so that `ready` means they are in force.
    autoResubscribe: false,
    connectTimeout: 2_000,
    // Also bounds the ready check of a (re)connection to a hung engine (it reconnects after).
    commandTimeout: commandTimeoutMs,
    // A hung engine never completes a close: the socket is destroyed after this (ioredis: 2 s),
    // and only then is the connection lost (what streams wait for to poll fast).
    disconnectTimeout: DISCONNECT_MS,
    keepAlive: 10_000,
    // Reconnects forever: at once, then at most every 2 s.
    retryStrategy: (times) => Math.min(times * 100, 2_000),
  };
}

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
    logger.warn('inbox wake-ups not published (streams see these messages at their next poll, new numbers at their next re-list)', { engine: address, failures: unreported, error: lastError });
    count(unreported);
    unreported = 0;
    reportedAt = Date.now();
  };
  return {
    failed(error: unknown) {
      unreported++;
      lastError = error instanceof Error ? error.message : String(error);
      const wait = reportedAt + REPORT_EVERY_MS - Date.now();
      if (wait <= 0) report();
      else if (!timer) (timer = setTimeout(report, wait)).unref();
    },
    flush: report,
  };
}

/** The engine's wake-ups when the configuration names one (VALKEY_URL); otherwise none (in-process). */
export const engineWakeups = (settings: { wakeupEngine?: WakeupEngine | undefined }, options: ValkeyWakeupsOptions = {}): InboxWakeups | undefined =>
  settings.wakeupEngine ? createValkeyWakeups(settings.wakeupEngine, options) : undefined;

/** IAM auth tokens when the engine signs in by IAM; none with a password (or no authentication). */
function iamTokens(engine: WakeupEngine, credentials: CredentialsSupplier | undefined, renewAfterMs?: number): IamTokens | undefined {
  if (!engine.iam) return undefined;
  if (!credentials) throw new Error('the engine signs in by IAM (VALKEY_IAM_AUTH): the process must give its AWS credentials');
  return createIamTokens(engine.iam, credentials, undefined, renewAfterMs);
}

/**
 * A connection of `role`, not open yet: `open()` connects once credentials are at hand (IAM), and
 * tries again while they cannot be had; ioredis reconnects on its own after that.
 */
function engineConnection(engine: WakeupEngine, role: 'publisher' | 'subscriber', commandTimeoutMs: number, tokens: IamTokens | undefined, isClosed: () => boolean, noCredentials: (error: unknown) => void) {
  const connection = new Redis(connectionOptions(engine, role, commandTimeoutMs));
  // ioredis reads the password at every connect: a token signed then (good for 15 minutes at AUTH),
  // not enumerable, so that nothing that walks the options (a log, an inspection) shows one.
  if (tokens) Object.defineProperty(connection.options, 'password', { get: () => tokens.token(), enumerable: false, configurable: true });
  const open = () => {
    if (isClosed()) return;
    (tokens ? tokens.ready() : Promise.resolve()).then(
      () => connection.connect().catch(() => undefined),
      (error: unknown) => {
        noCredentials(error);
        setTimeout(open, CREDENTIALS_RETRY_MS).unref();
      },
    );
  };
  return { connection, open };
}

/** Runs `renew` a while (IAM_RENEW_MS) after each `ready` of an IAM-signed connection, never after its close. */
function renewBeforeTheLimit(connection: Redis, tokens: IamTokens | undefined, renew: () => void) {
  if (!tokens) return;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
  };
  const schedule = () => {
    stop();
    (timer = setTimeout(renew, tokens.renewAfterMs)).unref();
  };
  connection.on('ready', schedule);
  connection.on('close', stop);
  return schedule;
}

export interface EnginePublisher {
  /** SPUBLISH on the publisher connection (opened on first use); rejects when it fails. */
  spublish(channel: string, message: string): Promise<void>;
  /** "inbox X has sequence N" (from `publisherId`): its head recorded and its wake-up published, one round trip; rejects when it fails. */
  wakeup(inboxId: string, seq: number, publisherId: string): Promise<void>;
  /** The recorded heads of these inboxes (those with none are left out); rejects when the engine cannot answer. */
  heads(inboxIds: readonly string[]): Promise<Map<string, number>>;
  close(): void;
}

/** The publishing connection of a process: every writer's (the relay Lambda's alone). */
export function createEnginePublisher(engine: WakeupEngine, options: { logger: Logger; credentials?: CredentialsSupplier; firstConnectMs?: number }): EnginePublisher {
  const tokens = iamTokens(engine, options.credentials);
  const publisher = enginePublisher(engine, options.logger, tokens, { firstConnectMs: options.firstConnectMs });
  return {
    ...publisher,
    close() {
      publisher.close();
      tokens?.close();
    },
  };
}

/** The publisher with the process's tokens (shared with its subscriber); `hung` is told when the engine stops answering. */
function enginePublisher(
  engine: WakeupEngine, logger: Logger, tokens: IamTokens | undefined,
  options: { firstConnectMs?: number | undefined; commandTimeoutMs?: number | undefined; hung?: () => void },
): EnginePublisher {
  const { firstConnectMs, hung } = options;
  let closed = false;
  /** The connection was dropped as hung and is not ready again yet (its close may take DISCONNECT_MS). */
  let dropped = false;
  let publisher: WakeupConnection | undefined;
  let publisherReady: Promise<void> | undefined;
  function publisherConnection(): { connection: WakeupConnection; firstReady: Promise<void> } {
    if (!publisher) {
      const { connection, open } = engineConnection(engine, 'publisher', options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS, tokens, () => closed, (error) => {
        logger.warn('inbox wake-ups: no AWS credentials to sign in to the engine', { engine: engine.address, error: error instanceof Error ? error.message : String(error) });
      });
      connection.defineCommand('svcnumWakeup', { numberOfKeys: 1, lua: WAKEUP_SCRIPT });
      publisher = connection as WakeupConnection;
      // Reported through the failed publishes; without a listener ioredis would print each attempt.
      connection.on('error', () => undefined);
      connection.on('ready', () => {
        dropped = false;
        logger.info('inbox wake-ups: publishing', { engine: engine.address });
      });
      // Signed in again with a fresh token (extends the 12 hours); a refusal opens a new connection.
      const renewed = renewBeforeTheLimit(connection, tokens, () => {
        connection.auth(engine.username ?? 'default', tokens!.token()).then(() => renewed?.(), () => !closed && connection.disconnect(true));
      });
      publisherReady = new Promise<void>((resolve) => {
        connection.once('ready', resolve);
        setTimeout(resolve, firstConnectMs ?? FIRST_CONNECT_MS).unref();
      });
      open();
    }
    return { connection: publisher!, firstReady: publisherReady! };
  }
  /**
   * Runs `command` on the publisher connection (after its first connect, or FIRST_CONNECT_MS, on
   * first use), only while it is ready: nothing waits behind a connection being (re)opened. A
   * command that times out drops the connection (the engine is hung): those in flight fail with
   * it, and the next wait for a new one to be ready.
   */
  async function send<T>(command: (connection: WakeupConnection) => Promise<T>): Promise<T> {
    const { connection, firstReady } = publisherConnection();
    if (connection.status !== 'ready') await firstReady;
    if (connection.status !== 'ready' || dropped) throw new Error(`the engine is not ready (${dropped ? 'hung' : connection.status})`);
    try {
      return await command(connection);
    } catch (error) {
      // Commands in flight together time out together: the first drops the connection.
      if (error instanceof Error && error.message === TIMED_OUT && !dropped && !closed) {
        dropped = true;
        logger.warn('inbox wake-ups: the engine does not answer, publishing stops until a new connection is ready', { engine: engine.address });
        connection.disconnect(true);
        hung?.();
      }
      throw error;
    }
  }
  return {
    async spublish(channel, message) {
      if (closed) return;
      await send((connection) => connection.spublish(channel, message));
    },
    async wakeup(inboxId, seq, publisherId) {
      if (closed) return;
      await send((connection) => connection.svcnumWakeup(inboxHeadKey(inboxId), seq, HEAD_TTL_SECONDS, inboxChannel(inboxId), inboxWakeupMessage(seq, publisherId)));
    },
    async heads(inboxIds) {
      const heads = new Map<string, number>();
      if (closed) return heads;
      for (let start = 0; start < inboxIds.length; start += HEADS_BATCH) {
        const batch = inboxIds.slice(start, start + HEADS_BATCH);
        const values = await send((connection) => connection.mget(...batch.map(inboxHeadKey)));
        values.forEach((value, index) => {
          if (value !== null && /^\d{1,15}$/.test(value)) heads.set(batch[index]!, Number(value));
        });
      }
      return heads;
    },
    close() {
      closed = true;
      publisher?.disconnect();
    },
  };
}

/** An inbox wake-up's message: the sequence, and who published it (its own listeners heard it already). */
export const inboxWakeupMessage = (seq: number, publisherId: string) => `${seq} ${publisherId}`;

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
  // A hung engine found by a publish: the subscriber is checked at once, not at its next ping.
  const publisher = enginePublisher(engine, logger, tokens, { firstConnectMs: options.firstConnectMs, commandTimeoutMs, hung: () => checkSubscriber() });

  /** Channels of the inboxes and owners the hub watches: subscribed on every (re)connection. */
  const wanted = new Set<string>();
  let subscriber: Redis | undefined;
  /** Every wanted inbox's subscription is in force on the current connection. */
  let ready = false;
  /** Connections so far: work of an older one is abandoned. */
  let generation = 0;
  let unreachableSaid = false;
  let pinger: NodeJS.Timeout | undefined;
  /** The subscriber's liveness check: a ping unanswered (COMMAND_TIMEOUT_MS) drops the connection (lost). */
  let checkSubscriber = () => undefined as void;

  async function ssubscribe(connection: Redis, channels: readonly string[]) {
    for (let start = 0; start < channels.length; start += SUBSCRIBE_BATCH) {
      await connection.ssubscribe(...channels.slice(start, start + SUBSCRIBE_BATCH));
    }
  }

  /** A fresh connection: subscribe everything wanted (also what is asked for meanwhile), then ready. */
  async function subscribeAll(connection: Redis, current: number) {
    const done = new Set<string>();
    for (;;) {
      const missing = [...wanted].filter((channel) => !done.has(channel));
      if (missing.length === 0) break;
      await ssubscribe(connection, missing);
      if (current !== generation) return;
      for (const channel of missing) done.add(channel);
    }
    ready = true;
    unreachableSaid = false;
    renewing = false;
    logger.info('inbox wake-ups: subscribed', { engine: engine.address, channels: wanted.size });
    listeners.ready();
  }

  /** The subscriber is reconnecting on purpose (the 12-hour limit of IAM), not lost. */
  let renewing = false;

  function subscriberConnection(): Redis {
    if (subscriber) return subscriber;
    const { connection, open } = engineConnection(engine, 'subscriber', commandTimeoutMs, tokens, () => closed, (error) => {
      if (unreachableSaid) return;
      unreachableSaid = true;
      logger.warn('inbox wake-ups: no AWS credentials to sign in to the engine, streams poll until it is back', { engine: engine.address, error: error instanceof Error ? error.message : String(error) });
    });
    subscriber = connection;
    // A subscribed connection cannot send AUTH (RESP2): it reconnects and subscribes again instead.
    renewBeforeTheLimit(connection, tokens, () => {
      if (closed) return;
      renewing = true;
      connection.disconnect(true);
    });
    connection.on('smessage', (channel: string, message: string) => {
      const inboxId = INBOX_CHANNEL.exec(channel)?.[1];
      if (inboxId) {
        const [seq, publisherId] = message.split(' ');
        if (publisherId !== self && /^\d{1,15}$/.test(seq ?? '')) listeners.wakeup(inboxId, Number(seq));
        return;
      }
      const ownerId = OWNER_CHANNEL.exec(channel)?.[1];
      const [publisherId, ids = ''] = message.split(' ');
      if (!ownerId || publisherId === self) return;
      listeners.numbersChanged(ownerId, ids.split(',').filter((id) => ANNOUNCED_ID.test(id)));
    });
    connection.on('ready', () => {
      const current = ++generation;
      subscribeAll(connection, current).catch(() => {
        // A subscription refused or timed out: start over on a new connection.
        if (current === generation && !closed) connection.disconnect(true);
      });
    });
    connection.on('close', () => {
      generation++;
      if (!ready) return;
      ready = false;
      if (!closed) {
        if (renewing) logger.info('inbox wake-ups: renewing the engine connection (IAM sign-in lasts 12 hours), streams poll until it is back', { engine: engine.address });
        else logger.warn('inbox wake-ups: engine lost, streams poll until it is back', { engine: engine.address });
        listeners.lost();
      }
    });
    connection.on('error', (error: Error) => {
      if (unreachableSaid || ready || closed) return;
      unreachableSaid = true;
      logger.warn('inbox wake-ups: engine unreachable, streams poll until it is back', { engine: engine.address, error: error.message });
    });
    let pinging = false;
    checkSubscriber = () => {
      if (!ready || pinging) return;
      pinging = true;
      const current = generation;
      connection.ping().then(() => undefined, () => {
        if (current === generation && !closed) connection.disconnect(true);
      }).finally(() => (pinging = false));
    };
    pinger = setInterval(checkSubscriber, PING_EVERY_MS);
    pinger.unref();
    open();
    return connection;
  }

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

  /** Subscribes the ids' channels not wanted yet; `inForce` is told the ids whose subscription took effect on a ready connection. */
  function want(ids: readonly string[], channelOf: (id: string) => string, inForce: (ids: readonly string[]) => void) {
    const fresh = ids.filter((id) => !wanted.has(channelOf(id)));
    if (fresh.length === 0 || closed) return;
    for (const id of fresh) wanted.add(channelOf(id));
    const connection = subscriberConnection();
    // Not ready: the (re)connection subscribes everything wanted, this included.
    if (!ready) return;
    const current = generation;
    ssubscribe(connection, fresh.map(channelOf)).then(
      () => current === generation && inForce(fresh),
      () => current === generation && !closed && connection.disconnect(true),
    );
  }

  function unwant(channels: readonly string[]) {
    for (const channel of channels) wanted.delete(channel);
    // Sent after any subscription of the same channels (one connection keeps the order).
    if (subscriber?.status === 'ready' && channels.length > 0) {
      subscriber.sunsubscribe(...channels).catch(() => undefined);
    }
  }

  return {
    reach: 'engine',
    publish(inboxId, seq) {
      listeners.wakeup(inboxId, seq);
      if (!closing && !inboxPublishes.push(inboxId, seq)) tooMany();
    },
    subscribe: (inboxIds) => want(inboxIds, inboxChannel, listeners.subscribed),
    unsubscribe: (inboxIds) => unwant(inboxIds.map(inboxChannel)),
    publishNumbersChanged(ownerId, inboxIds) {
      listeners.numbersChanged(ownerId, inboxIds);
      if (closing) return;
      if (ownerPublishes.size >= PENDING_INBOXES_MAX) return tooMany();
      const publishing = reported(() => publisher.spublish(ownerChannel(ownerId), `${self} ${inboxIds.join(',')}`))
        .finally(() => ownerPublishes.delete(publishing));
      ownerPublishes.add(publishing);
    },
    subscribeOwners: (ownerIds) => want(ownerIds, ownerChannel, listeners.ownersSubscribed),
    unsubscribeOwners: (ownerIds) => unwant(ownerIds.map(ownerChannel)),
    listen: listeners.add,
    ready: () => ready,
    heads: (inboxIds) => publisher.heads(inboxIds),
    async close() {
      // What waits is published (or fails, counted) first: each publish ends within a command
      // timeout, and a hung engine fails the rest at once. Nothing new is taken meanwhile (calls
      // still running after a drain), so the wait ends.
      closing = true;
      await Promise.all([inboxPublishes.settled(), ...ownerPublishes]);
      closed = true;
      ready = false;
      if (pinger) clearInterval(pinger);
      failures.flush();
      publisher.close();
      tokens?.close();
      subscriber?.disconnect();
    },
  };
}
