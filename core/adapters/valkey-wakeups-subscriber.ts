import type { Redis } from 'ioredis';
import type { wakeupListeners } from '../messaging/wakeups';
import type { IamTokens } from './elasticache-iam';
import type { Logger } from './log';
import { engineConnection, messageOf, renewBeforeTheLimit } from './valkey-wakeups-connection';
import type { WakeupEngine } from './wakeup-engine-config';

// The subscribing connection of a process holding streams (valkey-wakeups.ts): opened on the first
// subscription, `ready` once every wanted channel is subscribed on the current connection. When it
// is lost, listeners hear `lost` (the hub polls fast); on reconnection everything is subscribed
// again before `ready` (the hub catches up). A ping every PING_EVERY_MS (or at once, when a
// publish found the engine hung) that goes unanswered drops the connection.

/** The subscriber's liveness check: a connection that stops answering is dropped and opened again. */
const PING_EVERY_MS = 10_000;
const SUBSCRIBE_BATCH = 500;
const INBOX_CHANNEL = /^inbox:\{(.+)\}$/;
const OWNER_CHANNEL = /^owner:\{(.+)\}$/;
/** Ids in an owner wake-up: what an id may look like (the streams check that the owner holds them). */
const ANNOUNCED_ID = /^[0-9A-Za-z_-]{1,64}$/;

export type WakeupListeners = ReturnType<typeof wakeupListeners>;

export interface SubscriberSetup {
  engine: WakeupEngine;
  logger: Logger;
  tokens: IamTokens | undefined;
  commandTimeoutMs: number;
  /** Who hears the wake-ups, `ready` and `lost`. */
  listeners: WakeupListeners;
  /** This process's publisher id: the echo of its own publishes is dropped. */
  self: string;
}

async function ssubscribe(connection: Redis, channels: readonly string[]) {
  for (let start = 0; start < channels.length; start += SUBSCRIBE_BATCH) {
    await connection.ssubscribe(...channels.slice(start, start + SUBSCRIBE_BATCH));
  }
}

export class EngineSubscriber {
  /** Channels of the inboxes and owners the hub watches: subscribed on every (re)connection. */
  private readonly wanted = new Set<string>();
  private connection: Redis | undefined;
  /** Every wanted channel's subscription is in force on the current connection. */
  private inForce = false;
  /** Connections so far: work of an older one is abandoned. */
  private generation = 0;
  private unreachableSaid = false;
  /** The connection is reconnecting on purpose (the 12-hour limit of IAM), not lost. */
  private renewing = false;
  private pinging = false;
  private pinger: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly setup: SubscriberSetup) {}

  ready(): boolean {
    return this.inForce;
  }

  /**
   * Subscribes the ids' channels not wanted yet; `inForce` is told the ids whose subscription took
   * effect on a ready connection.
   */
  want(ids: readonly string[], channelOf: (id: string) => string, inForce: (ids: readonly string[]) => void) {
    const fresh = ids.filter((id) => !this.wanted.has(channelOf(id)));
    if (fresh.length === 0 || this.closed) return;
    for (const id of fresh) this.wanted.add(channelOf(id));
    const connection = this.connect();
    // Not ready: the (re)connection subscribes everything wanted, this included.
    if (!this.inForce) return;
    const current = this.generation;
    ssubscribe(connection, fresh.map(channelOf)).then(
      () => current === this.generation && inForce(fresh),
      () => current === this.generation && !this.closed && connection.disconnect(true),
    );
  }

  unwant(channels: readonly string[]) {
    for (const channel of channels) this.wanted.delete(channel);
    // Sent after any subscription of the same channels (one connection keeps the order).
    if (this.connection?.status === 'ready' && channels.length > 0) {
      this.connection.sunsubscribe(...channels).catch(() => undefined);
    }
  }

  /** The liveness check: a ping unanswered (COMMAND_TIMEOUT_MS) drops the connection (lost). */
  check() {
    const connection = this.connection;
    if (!connection || !this.inForce || this.pinging) return;
    this.pinging = true;
    const current = this.generation;
    connection
      .ping()
      .then(
        () => undefined,
        () => {
          if (current === this.generation && !this.closed) connection.disconnect(true);
        },
      )
      .finally(() => (this.pinging = false));
  }

  close() {
    this.closed = true;
    this.inForce = false;
    if (this.pinger) clearInterval(this.pinger);
    this.connection?.disconnect();
  }

  /** The connection, opened on first use with its handlers and its liveness check. */
  private connect(): Redis {
    if (this.connection) return this.connection;
    const { engine, tokens, commandTimeoutMs } = this.setup;
    const { connection, open } = engineConnection({
      engine,
      role: 'subscriber',
      commandTimeoutMs,
      tokens,
      isClosed: () => this.closed,
      noCredentials: (error) => this.noCredentials(error),
    });
    this.connection = connection;
    // A subscribed connection cannot send AUTH (RESP2): it reconnects and subscribes again instead.
    renewBeforeTheLimit(connection, tokens, () => {
      if (this.closed) return;
      this.renewing = true;
      connection.disconnect(true);
    });
    connection.on('smessage', (channel: string, message: string) => this.heard(channel, message));
    connection.on('ready', () => {
      const current = ++this.generation;
      this.subscribeAll(connection, current).catch(() => {
        // A subscription refused or timed out: start over on a new connection.
        if (current === this.generation && !this.closed) connection.disconnect(true);
      });
    });
    connection.on('close', () => this.lost());
    connection.on('error', (error: Error) => this.unreachable(error));
    this.pinger = setInterval(() => this.check(), PING_EVERY_MS);
    this.pinger.unref();
    open();
    return connection;
  }

  /** A fresh connection: subscribe everything wanted (also what is asked for meanwhile), then ready. */
  private async subscribeAll(connection: Redis, current: number) {
    const done = new Set<string>();
    for (;;) {
      const missing = [...this.wanted].filter((channel) => !done.has(channel));
      if (missing.length === 0) break;
      await ssubscribe(connection, missing);
      if (current !== this.generation) return;
      for (const channel of missing) done.add(channel);
    }
    this.inForce = true;
    this.unreachableSaid = false;
    this.renewing = false;
    const fields = { engine: this.setup.engine.address, channels: this.wanted.size };
    this.setup.logger.info('inbox wake-ups: subscribed', fields);
    this.setup.listeners.ready();
  }

  /** A message on an inbox's channel (`<seq> <publisher>`) or an owner's (`<publisher> <id>,<id>…`). */
  private heard(channel: string, message: string) {
    const { listeners, self } = this.setup;
    const inboxId = INBOX_CHANNEL.exec(channel)?.[1];
    if (inboxId) {
      const [seq, publisherId] = message.split(' ');
      if (publisherId !== self && /^\d{1,15}$/.test(seq ?? '')) listeners.wakeup(inboxId, Number(seq));
      return;
    }
    const ownerId = OWNER_CHANNEL.exec(channel)?.[1];
    const [publisherId, ids = ''] = message.split(' ');
    if (!ownerId || publisherId === self) return;
    listeners.numbersChanged(
      ownerId,
      ids.split(',').filter((id) => ANNOUNCED_ID.test(id)),
    );
  }

  private lost() {
    this.generation++;
    if (!this.inForce) return;
    this.inForce = false;
    if (this.closed) return;
    const { logger, engine } = this.setup;
    if (this.renewing) {
      const renewal =
        'inbox wake-ups: renewing the engine connection (IAM sign-in lasts 12 hours), ' +
        'streams poll until it is back';
      logger.info(renewal, { engine: engine.address });
    } else {
      logger.warn('inbox wake-ups: engine lost, streams poll until it is back', { engine: engine.address });
    }
    this.setup.listeners.lost();
  }

  private unreachable(error: Error) {
    if (this.unreachableSaid || this.inForce || this.closed) return;
    this.unreachableSaid = true;
    const fields = { engine: this.setup.engine.address, error: error.message };
    this.setup.logger.warn('inbox wake-ups: engine unreachable, streams poll until it is back', fields);
  }

  private noCredentials(error: unknown) {
    if (this.unreachableSaid) return;
    this.unreachableSaid = true;
    const fields = { engine: this.setup.engine.address, error: messageOf(error) };
    const warning = 'inbox wake-ups: no AWS credentials to sign in to the engine, streams poll until it is back';
    this.setup.logger.warn(warning, fields);
  }
}
