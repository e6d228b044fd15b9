import type { Redis } from 'ioredis';
import type { CredentialsSupplier, IamTokens } from './elasticache-iam';
import type { Logger } from './log';
import {
  COMMAND_TIMEOUT_MS,
  engineConnection,
  HEAD_TTL_SECONDS,
  iamTokens,
  inboxChannel,
  inboxHeadKey,
  inboxWakeupMessage,
  messageOf,
  renewBeforeTheLimit,
} from './valkey-wakeups-connection';
import type { WakeupEngine } from './wakeup-engine-config';

// The publishing connection of a process (valkey-wakeups.ts): every writer's, the relay Lambda's
// alone. An inbox wake-up records the sequence as the inbox's head and publishes it in one round
// trip (a script). A command that times out (the engine is hung) drops the connection; until a new
// one is ready, commands fail at once instead of waiting behind the hung one.

/** ioredis's rejection of a command that timed out. */
const TIMED_OUT = 'Command timed out';
const FIRST_CONNECT_MS = 1_000;
/** Heads read per MGET. */
const HEADS_BATCH = 500;
/**
 * One inbox wake-up: records the sequence as the inbox's head unless a higher one is there, then
 * publishes it. KEYS[1] the head, ARGV: sequence, TTL seconds, channel, message.
 */
const WAKEUP_SCRIPT = `local seq = tonumber(ARGV[1])
if seq > tonumber(redis.call('GET', KEYS[1]) or '0') then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
return redis.call('SPUBLISH', ARGV[3], ARGV[4])`;
type WakeupConnection = Redis & {
  svcnumWakeup(head: string, seq: number, ttlSeconds: number, channel: string, message: string): Promise<number>;
};

export interface EnginePublisher {
  /** SPUBLISH on the publisher connection (opened on first use); rejects when it fails. */
  spublish(channel: string, message: string): Promise<void>;
  /**
   * "inbox X has sequence N" (from `publisherId`): its head recorded and its wake-up published, one
   * round trip; rejects when it fails.
   */
  wakeup(inboxId: string, seq: number, publisherId: string): Promise<void>;
  /** The recorded heads of these inboxes (those with none are left out); rejects when the engine cannot answer. */
  heads(inboxIds: readonly string[]): Promise<Map<string, number>>;
  close(): void;
}

export interface PublisherOptions {
  /** How long a command waits for the first connection of the process to be ready (FIRST_CONNECT_MS). */
  firstConnectMs?: number | undefined;
  /** How long a command waits for the engine's answer before the engine counts as hung (COMMAND_TIMEOUT_MS). */
  commandTimeoutMs?: number | undefined;
  /** Told when the engine stops answering (a command timed out). */
  hung?: () => void;
}

/** The publishing connection of a process: every writer's (the relay Lambda's alone). */
export function createEnginePublisher(
  engine: WakeupEngine,
  options: { logger: Logger; credentials?: CredentialsSupplier; firstConnectMs?: number },
): EnginePublisher {
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

/**
 * The publisher connection, opened now: `firstReady` settles at its first ready or after
 * `firstConnectMs`, whichever comes first; `onReady` is told of every ready.
 */
function openPublisher(
  engine: WakeupEngine,
  logger: Logger,
  tokens: IamTokens | undefined,
  options: PublisherOptions & { isClosed: () => boolean; onReady: () => void },
): { connection: WakeupConnection; firstReady: Promise<void> } {
  const { connection, open } = engineConnection({
    engine,
    role: 'publisher',
    commandTimeoutMs: options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
    tokens,
    isClosed: options.isClosed,
    noCredentials: (error) => {
      const fields = { engine: engine.address, error: messageOf(error) };
      logger.warn('inbox wake-ups: no AWS credentials to sign in to the engine', fields);
    },
  });
  connection.defineCommand('svcnumWakeup', { numberOfKeys: 1, lua: WAKEUP_SCRIPT });
  // Reported through the failed publishes; without a listener ioredis would print each attempt.
  connection.on('error', () => undefined);
  connection.on('ready', () => {
    options.onReady();
    logger.info('inbox wake-ups: publishing', { engine: engine.address });
  });
  // Signed in again with a fresh token (extends the 12 hours); a refusal opens a new connection.
  const renewed = renewBeforeTheLimit(connection, tokens, () => {
    const disconnect = () => !options.isClosed() && connection.disconnect(true);
    connection.auth(engine.username ?? 'default', tokens!.token()).then(() => renewed?.(), disconnect);
  });
  const firstReady = new Promise<void>((resolve) => {
    connection.once('ready', resolve);
    setTimeout(resolve, options.firstConnectMs ?? FIRST_CONNECT_MS).unref();
  });
  open();
  return { connection: connection as WakeupConnection, firstReady };
}

/** The publisher with the process's tokens (shared with its subscriber). */
export function enginePublisher(
  engine: WakeupEngine,
  logger: Logger,
  tokens: IamTokens | undefined,
  options: PublisherOptions,
): EnginePublisher {
  let closed = false;
  /** The connection was dropped as hung and is not ready again yet (its close may take DISCONNECT_MS). */
  let dropped = false;
  let opened: ReturnType<typeof openPublisher> | undefined;
  const isClosed = () => closed;
  const onReady = () => (dropped = false);
  /**
   * Runs `command` on the publisher connection (after its first connect, or FIRST_CONNECT_MS, on
   * first use), only while it is ready: nothing waits behind a connection being (re)opened. A
   * command that times out drops the connection (the engine is hung): those in flight fail with
   * it, and the next wait for a new one to be ready.
   */
  async function send<T>(command: (connection: WakeupConnection) => Promise<T>): Promise<T> {
    opened ??= openPublisher(engine, logger, tokens, { ...options, isClosed, onReady });
    const { connection, firstReady } = opened;
    if (connection.status !== 'ready') await firstReady;
    if (connection.status !== 'ready' || dropped) {
      throw new Error(`the engine is not ready (${dropped ? 'hung' : connection.status})`);
    }
    try {
      return await command(connection);
    } catch (error) {
      // Commands in flight together time out together: the first drops the connection.
      if (error instanceof Error && error.message === TIMED_OUT && !dropped && !closed) {
        dropped = true;
        const warning = 'inbox wake-ups: the engine does not answer, publishing stops until a new connection is ready';
        logger.warn(warning, { engine: engine.address });
        connection.disconnect(true);
        options.hung?.();
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
      const message = inboxWakeupMessage(seq, publisherId);
      await send((connection) =>
        connection.svcnumWakeup(inboxHeadKey(inboxId), seq, HEAD_TTL_SECONDS, inboxChannel(inboxId), message),
      );
    },
    heads: (inboxIds) => (closed ? Promise.resolve(new Map()) : readHeads(inboxIds, send)),
    close() {
      closed = true;
      opened?.connection.disconnect();
    },
  };
}

/** The recorded heads of `inboxIds`, HEADS_BATCH per MGET. */
async function readHeads(
  inboxIds: readonly string[],
  send: <T>(command: (connection: WakeupConnection) => Promise<T>) => Promise<T>,
): Promise<Map<string, number>> {
  const heads = new Map<string, number>();
  for (let start = 0; start < inboxIds.length; start += HEADS_BATCH) {
    const batch = inboxIds.slice(start, start + HEADS_BATCH);
    const values = await send((connection) => connection.mget(...batch.map(inboxHeadKey)));
    values.forEach((value, index) => {
      if (value !== null && /^\d{1,15}$/.test(value)) heads.set(batch[index]!, Number(value));
    });
  }
  return heads;
}
