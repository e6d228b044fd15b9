import { invalidToken, requireScope, type AccessTokenClaims } from '../kernel/access';
import { sharedReads } from '../kernel/cache';
import { newUlid } from '../kernel/ids';
import { DomainError, invalidArgument, notFound } from '../kernel/errors';
import { inService, type Client, type User } from '../kernel/model';
import type { Clock, Random } from '../kernel/ports';
import type { MessageKind, MessagingPort, SenderEntityType, StoredMessage } from './store';
import { createSequenceClaims } from './sequences';
import type { InboxWakeups } from './wakeups';

// The message path: who is sending (from the token), where a message goes (a number's holder, or
// through a mask to the other participant), and what a programmable number does on arrival
// (auto_reply, forward_to_svcnum_id). A message is stored in its recipient's inbox before the
// sender gets an answer.

/** Messages are kept this long; streams resume within it. */
export const MESSAGE_RETENTION_MS = 30 * 86_400_000;
/** Derived messages (auto-replies, forwards) form chains of at most this many steps: no loops. */
export const MAX_DERIVED_HOPS = 3;
export const MAX_TEXT_LENGTH = 2000;

/** A number that exists but cannot send or receive now (suspended, an inactive account): 409 `not_in_service`. */
const notInService = (message: string) => new DomainError('failed_precondition', message, { code: 'not_in_service' });

export interface Sender {
  svcnumId: string;
  svcnum: string;
  entityType: SenderEntityType;
}

export interface AcceptedMessage {
  messageId: string;
  from: string;
  to: string;
  acceptedAt: number;
}

/** A derived message (auto-reply, forward) that could not be stored: ids only, never the text. */
export interface DerivedMessageFailure {
  kind: 'auto_reply' | 'forward';
  /**
   * The programmable number whose behaviour failed (its svcnum_id: the inbox of the message it
   * derives from).
   */
  inboxId: string;
  /** The message it derives from (stored and accepted regardless). */
  seq: number;
  messageId: string;
  /** Where it was going: the number replied to, or the forwarding target's svcnum_id. */
  target: string;
  error: unknown;
}

/** Told of every failed derived message: the process logs and counts it (core/adapters/derived-failures.ts). */
export type DerivedFailureReport = (failure: DerivedMessageFailure) => void;

const SENDER_TYPES: ReadonlySet<string> = new Set(['person', 'business', 'programmable', 'ai_agent']);

/** Digits of a number as people write it: +, spaces, dashes, dots and parentheses are dropped. */
export function normaliseNumber(value: string): string | undefined {
  if (!/^\+?[\d\s().-]+$/.test(value)) return undefined;
  const digits = value.replace(/\D/g, '');
  return /^\d{11,15}$/.test(digits) ? digits : undefined;
}

/** What the message path needs; reads of the store are shared between concurrent sends. */
interface SendContext {
  store: Pick<MessagingPort, 'getMask' | 'getNumber' | 'getUser' | 'appendMessage'>;
  clock: Clock;
  random: Random;
  wakeups: InboxWakeups;
  /** The next sequence of an inbox (claims grouped per inbox: core/messaging/sequences.ts). */
  claimSeq: (inboxId: string) => Promise<number>;
  reportDerivedFailure: DerivedFailureReport;
}

type NewMessage = Omit<StoredMessage, 'inboxId' | 'seq' | 'messageId' | 'acceptedAt'>;

/**
 * Sends into a busy inbox read the same records at once (the sender, the number, its holder):
 * concurrent identical reads share one round trip, and none is kept once it ends, so every send
 * still sees what was stored before a read that began at most one round trip earlier.
 */
function sharedStoreReads(store: MessagingPort): SendContext['store'] {
  const byId = (id: string) => id;
  return {
    getUser: sharedReads((id: string) => store.getUser(id), byId),
    getNumber: sharedReads((svcnum: string) => store.getNumber(svcnum), byId),
    getMask: sharedReads((maskId: string) => store.getMask(maskId), byId),
    appendMessage: (message, retainUntil) => store.appendMessage(message, retainUntil),
  };
}

/** A report that fails (it should not) must not fail the send either. */
function derivedFailed(
  context: SendContext,
  kind: DerivedMessageFailure['kind'],
  message: StoredMessage,
  target: string,
) {
  return (error: unknown) => {
    try {
      const { inboxId, seq, messageId } = message;
      context.reportDerivedFailure({ kind, inboxId, seq, messageId, target, error });
    } catch {
      // Nothing more can be done here; the message it derives from is stored.
    }
  };
}

/** Appends to an inbox at the next sequence; a sequence a reader gave up on is retried. */
async function append(context: SendContext, inboxId: string, fields: NewMessage): Promise<StoredMessage> {
  const { clock, store } = context;
  const messageId = newUlid(clock, context.random);
  for (let attempt = 0; attempt < 5; attempt++) {
    const seq = await context.claimSeq(inboxId);
    const acceptedAt = clock.now();
    const message: StoredMessage = { inboxId, seq, messageId, acceptedAt, ...fields };
    if (await store.appendMessage(message, acceptedAt + MESSAGE_RETENTION_MS)) {
      // Not waited for (the engine's publish runs behind the answer, whatever the engine's
      // state); a lost wake-up only delays the message to the streams' next poll.
      context.wakeups.publish(inboxId, seq);
      return message;
    }
  }
  throw new Error(`could not append to inbox ${inboxId}`);
}

/** Where a message to mask `to` goes: to the other participant, from the mask's number. */
async function routeThroughMask(context: SendContext, sender: Sender, to: string, maskId: string) {
  const { store, clock } = context;
  const mask = await store.getMask(maskId);
  if (!mask || mask.svcnum !== to) throw notFound(`number ${to} is not in service`);
  if (mask.expiresAt <= clock.now()) throw new DomainError('gone', `mask ${to} has expired`);
  const other =
    sender.svcnumId === mask.participantA
      ? mask.participantB
      : sender.svcnumId === mask.participantB
        ? mask.participantA
        : undefined;
  if (!other) throw new DomainError('forbidden', `only the two participants of mask ${to} can send to it`);
  const recipient = await store.getUser(other);
  if (!inService(recipient)) throw notInService('the other participant cannot receive messages now');
  // Bridged: the recipient sees the mask's number, never the sender's number or id.
  return { recipient: recipient!, fromSvcnum: mask.svcnum, senderEntityType: 'mask' as const, toSvcnum: mask.svcnum };
}

/** Where a message to `to` goes, as whom it appears, or why it cannot go. */
async function route(context: SendContext, sender: Sender, to: string) {
  const number = await context.store.getNumber(to);
  if (!number?.svcnumId || !['active', 'suspended'].includes(number.state)) {
    throw notFound(`number ${to} is not in service`);
  }
  if (number.state === 'suspended') throw notInService(`number ${to} is suspended`);
  if (number.entityType === 'mask') return routeThroughMask(context, sender, to, number.svcnumId);
  const recipient = await context.store.getUser(number.svcnumId);
  if (!recipient || recipient.svcnum !== to || recipient.status !== 'active') {
    throw notFound(`number ${to} is not in service`);
  }
  return { recipient, fromSvcnum: sender.svcnum, senderEntityType: sender.entityType, toSvcnum: to };
}

/** Delivers to `to` and runs the recipient's programmable behaviour. */
async function deliver(
  context: SendContext,
  sender: Sender,
  to: string,
  text: string,
  kind: MessageKind,
  hops: number,
): Promise<StoredMessage> {
  const { recipient, ...addressing } = await route(context, sender, to);
  const message = await append(context, recipient.svcnumId, { ...addressing, text, kind, hops });
  if (recipient.accountType === 'programmable') await behave(context, recipient, message);
  return message;
}

/**
 * auto_reply answers direct messages only; forwards are bounded by the hop budget. Never
 * throws: derived messages are best effort, the message they derive from is already stored,
 * and a failure here must not turn its acceptance into an error (the sender would retry and
 * store it twice). A failure is reported instead (logged and counted by the process).
 */
async function behave(context: SendContext, number: User, message: StoredMessage) {
  if (message.hops >= MAX_DERIVED_HOPS) return;
  const self: Sender = { svcnumId: number.svcnumId, svcnum: number.svcnum, entityType: 'programmable' };
  if (number.autoReply && message.kind === 'message') {
    await deliver(context, self, message.fromSvcnum, number.autoReply, 'auto_reply', message.hops + 1).catch(
      derivedFailed(context, 'auto_reply', message, message.fromSvcnum),
    );
  }
  if (number.forwardToSvcnumId) {
    await forward(context, number, number.forwardToSvcnumId, message).catch(
      derivedFailed(context, 'forward', message, number.forwardToSvcnumId),
    );
  }
}

async function forward(context: SendContext, number: User, targetId: string, message: StoredMessage) {
  const target = await context.store.getUser(targetId);
  if (!inService(target) || target!.svcnumId === number.svcnumId) return;
  const copy = await append(context, target!.svcnumId, {
    fromSvcnum: message.fromSvcnum,
    senderEntityType: message.senderEntityType,
    toSvcnum: target!.svcnum,
    text: message.text,
    kind: 'forward',
    hops: message.hops + 1,
    // Through a mask, the forwarder is named by the mask's number: a participant's own number never leaks.
    forwardedBy: message.senderEntityType === 'mask' ? message.toSvcnum : number.svcnum,
  });
  if (target!.accountType === 'programmable') await behave(context, target!, copy);
}

/** An External API client's token sends from `fromNumber`, a number its owner account controls. */
async function apiClientSender(context: SendContext, client: Client, fromNumber: string | undefined) {
  if (client.kind !== 'api' || !client.ownerId) {
    throw new DomainError('forbidden', 'this client has no owner account, so it has no number to send from');
  }
  if (!fromNumber) throw invalidArgument('from is required: a number of the account this client belongs to');
  const holder = (await context.store.getNumber(fromNumber))?.svcnumId;
  const entity = holder ? await context.store.getUser(holder) : undefined;
  const controlled =
    entity && entity.svcnum === fromNumber && (entity.svcnumId === client.ownerId || entity.ownerId === client.ownerId);
  if (!controlled) throw new DomainError('forbidden', `number ${fromNumber} is not a number of this client's account`);
  // Read just now: the owner disabled less than the cache's lifetime ago is refused alike.
  if (entity!.svcnumId === client.ownerId && entity!.status !== 'active') {
    throw invalidToken('this token can no longer be used: its owner account is not active');
  }
  return entity;
}

/** An entity's own token (an agent, a lent number, a dependent) sends as that entity. */
async function entitySender(context: SendContext, claims: AccessTokenClaims, fromNumber: string | undefined) {
  const entity = await context.store.getUser(claims.sub);
  if (!entity) throw new DomainError('forbidden', 'the token does not name an account that can send');
  if (fromNumber && fromNumber !== entity.svcnum) {
    throw new DomainError('forbidden', `this token sends as ${entity.svcnum} only`);
  }
  // Read just now: the account disabled less than the cache's lifetime ago is refused alike.
  if (entity.status !== 'active') throw invalidToken('this token can no longer be used: its account is not active');
  return entity;
}

async function senderOf(
  context: SendContext,
  tokenInForce: (claims: AccessTokenClaims) => Promise<Client>,
  claims: AccessTokenClaims,
  from: string | undefined,
): Promise<Sender> {
  // Whatever its scope, a token whose client, account, actor or owner is disabled is refused (401).
  const client = await tokenInForce(claims);
  requireScope(claims, 'messaging');
  const fromNumber = from === undefined ? undefined : normaliseNumber(from);
  if (from !== undefined && !fromNumber) throw invalidArgument('from must be a number of 11 to 15 digits');
  const entity: User | undefined =
    claims.sub === client.clientId
      ? await apiClientSender(context, client, fromNumber)
      : await entitySender(context, claims, fromNumber);
  if (!SENDER_TYPES.has(entity!.accountType)) throw new DomainError('forbidden', 'this account cannot send messages');
  if (!inService(entity)) {
    throw notInService(`number ${entity!.svcnum} cannot send now (${entity!.numberState ?? entity!.status})`);
  }
  return { svcnumId: entity!.svcnumId, svcnum: entity!.svcnum, entityType: entity!.accountType as SenderEntityType };
}

async function send(
  context: SendContext,
  sender: Sender,
  input: { to?: unknown; text?: unknown },
): Promise<AcceptedMessage> {
  if (typeof input.to !== 'string' || !normaliseNumber(input.to)) {
    throw invalidArgument('to must be a number of 11 to 15 digits');
  }
  if (typeof input.text !== 'string' || input.text.length === 0) throw invalidArgument('text is required');
  if ([...input.text].length > MAX_TEXT_LENGTH) {
    throw invalidArgument(`text is longer than ${MAX_TEXT_LENGTH} characters`);
  }
  const to = normaliseNumber(input.to)!;
  const message = await deliver(context, sender, to, input.text, 'message', 0);
  return { messageId: message.messageId, from: sender.svcnum, to, acceptedAt: message.acceptedAt };
}

export function createMessaging(deps: {
  store: MessagingPort;
  clock: Clock;
  random: Random;
  /** Told of every stored message, so that open streams (of this process, or any through the engine) look at once. */
  wakeups: InboxWakeups;
  /**
   * Disabled means disabled: the token's client if every party it names is enabled, else
   * invalid_token (core/accounts/token-standing.ts).
   */
  tokenInForce: (claims: AccessTokenClaims) => Promise<Client>;
  reportDerivedFailure: DerivedFailureReport;
}) {
  const context: SendContext = {
    store: sharedStoreReads(deps.store),
    clock: deps.clock,
    random: deps.random,
    wakeups: deps.wakeups,
    claimSeq: createSequenceClaims(deps.store),
    reportDerivedFailure: deps.reportDerivedFailure,
  };
  return {
    /**
     * The sender behind a token with the `messaging` scope: an entity's own token (an agent, a
     * lent number, a dependent) sends as that entity; an External API client's token sends from
     * `from`, which must be a number its owner account controls.
     */
    sender: (claims: AccessTokenClaims, from: string | undefined): Promise<Sender> =>
      senderOf(context, deps.tokenInForce, claims, from),
    send: (sender: Sender, input: { to?: unknown; text?: unknown }): Promise<AcceptedMessage> =>
      send(context, sender, input),
  };
}

export type Messaging = ReturnType<typeof createMessaging>;
