import { Redis, type RedisOptions } from 'ioredis';
import { createIamTokens, type CredentialsSupplier, type IamTokens } from './elasticache-iam';
import type { WakeupEngine } from './wakeup-engine-config';

// What the publisher and the subscriber of valkey-wakeups.ts share: the channel and key names, the
// connection options (fail at once while disconnected, reconnect forever), opening a connection
// once IAM credentials are at hand, and renewing an IAM-signed connection before its 12 hours.

/** An engine that has not answered a command within this is hung: its connection is dropped. */
export const COMMAND_TIMEOUT_MS = 1_000;
/** How long a dropped connection may take to close (a hung engine never answers the close). */
const DISCONNECT_MS = 500;
/** While no credentials can be had, another try this often. */
const CREDENTIALS_RETRY_MS = 2_000;

export type ConnectionRole = 'publisher' | 'subscriber';

export const inboxChannel = (inboxId: string) => `inbox:{${inboxId}}`;
/** The key of an inbox's last published sequence (same hash tag, so the same slot, as its channel). */
export const inboxHeadKey = (inboxId: string) => `head:{${inboxId}}`;
export const ownerChannel = (ownerId: string) => `owner:{${ownerId}}`;
/** How long the engine keeps an inbox's head after its last publish: what the hubs' engine checks look at. */
export const HEAD_TTL_SECONDS = 3_600;
/** An inbox wake-up's message: the sequence, and who published it (its own listeners heard it already). */
export const inboxWakeupMessage = (seq: number, publisherId: string) => `${seq} ${publisherId}`;

/** An error as a log field: its message. */
export const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

function connectionOptions(engine: WakeupEngine, role: ConnectionRole, commandTimeoutMs: number): RedisOptions {
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

/** IAM auth tokens when the engine signs in by IAM; none with a password (or no authentication). */
export function iamTokens(
  engine: WakeupEngine,
  credentials: CredentialsSupplier | undefined,
  renewAfterMs?: number,
): IamTokens | undefined {
  if (!engine.iam) return undefined;
  if (!credentials) {
    throw new Error('the engine signs in by IAM (VALKEY_IAM_AUTH): the process must give its AWS credentials');
  }
  return createIamTokens(engine.iam, credentials, undefined, renewAfterMs);
}

/** How a connection is made: its engine, its role, and what it is told. */
export interface ConnectionSetup {
  engine: WakeupEngine;
  role: ConnectionRole;
  commandTimeoutMs: number;
  tokens: IamTokens | undefined;
  isClosed: () => boolean;
  /** No credentials could be had (IAM); another try follows. */
  noCredentials: (error: unknown) => void;
}

/**
 * A connection of `role`, not open yet: `open()` connects once credentials are at hand (IAM), and
 * tries again while they cannot be had; ioredis reconnects on its own after that.
 */
export function engineConnection({ engine, role, commandTimeoutMs, tokens, isClosed, noCredentials }: ConnectionSetup) {
  const connection = new Redis(connectionOptions(engine, role, commandTimeoutMs));
  // ioredis reads the password at every connect: a token signed then (good for 15 minutes at AUTH),
  // not enumerable, so that nothing that walks the options (a log, an inspection) shows one.
  if (tokens) {
    const signedAtConnect = { get: () => tokens.token(), enumerable: false, configurable: true };
    Object.defineProperty(connection.options, 'password', signedAtConnect);
  }
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
export function renewBeforeTheLimit(connection: Redis, tokens: IamTokens | undefined, renew: () => void) {
  if (!tokens) return;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
  };
  const schedule = () => {
    stop();
    timer = setTimeout(renew, tokens.renewAfterMs);
    timer.unref();
  };
  connection.on('ready', schedule);
  connection.on('close', stop);
  return schedule;
}
