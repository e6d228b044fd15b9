import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RECORD_CACHE_TTL } from '../core/accounts';
import { systemRandom } from '../core/adapters/system';
import { newUlid } from '../core/kernel/ids';
import { MAX_DERIVED_HOPS, MESSAGE_RETENTION_MS } from '../core/messaging/send';
import { sharedReads } from '../core/kernel/cache';
import { createSequenceClaims } from '../core/messaging/sequences';
import { isTombstone, type StoredMessage } from '../core/messaging/store';
import { GAP_GRACE_MS } from '../core/messaging/follow';
import { POLL_INTERVAL_MS } from '../core/messaging/hub-polling';
import {
  CreateAgentRequest,
  type CreateAgentResponse,
  ExchangeTokenRequest,
  type ExchangeTokenResponse,
  IssueAgentTokenRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { type AccessToken, EntityType } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  CloseMaskRequest,
  CreateMaskRequest,
  type Mask,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ConfigureProgrammableRequest,
  type IncomingMessage,
  MessageKind,
  type ProgrammableConfig,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, clientCredentialsToken, failure, seedPool, type ProvisioningApp } from './support/grpc';
import { InboxFaults } from './support/message-faults';
import {
  messagingAccount,
  openStream,
  provisionNumber,
  sendMessage,
  type MessagingAccount,
  type OpenStream,
} from './support/messages';
import { startTestService, type TestService } from './support/service';

// The message flow end to end, over real HTTP (POST /api/messages) and gRPC (StreamAllMessages):
// senders, delivery and resume, gaps in an inbox's sequence, programmable behaviour (auto-reply,
// forward, loop bounds), mask bridging, and every refusal of the ingress. Each test uses its own
// owner accounts: a stream without a cursor starts with the oldest retained message, so sharing
// an owner would mix tests.

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
/** Streams re-list their numbers this rarely here: a number that joins at once was announced. */
const RELIST_MS = 600_000;
const inbox = new InboxFaults();
let service: TestService;
const apps: ProvisioningApp[] = [];
const streams: OpenStream[] = [];

beforeAll(async () => {
  service = await startTestService({ wrapStore: inbox.wrap, messagePolling: { relistMs: RELIST_MS } });
  await seedPool(service, '83', 400);
});
afterEach(() => {
  for (const stream of streams.splice(0)) stream.cancel();
  inbox.reset();
  vi.restoreAllMocks();
});
afterAll(async () => {
  for (const app of apps) app.close();
  await service?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Account = MessagingAccount;
const account = (accountType: 'business' | 'person' = 'business') => messagingAccount(service, apps, accountType);

const provision = provisionNumber;

const configure = (owner: Account, svcnumId: string, config: Partial<ProgrammableConfig>) =>
  call<ConfigureProgrammableRequest, ProgrammableNumber>(
    owner.app.numbers,
    'configureProgrammable',
    ConfigureProgrammableRequest.fromPartial({ svcnumId, config: { autoReply: '', forwardToSvcnumId: '', ...config } }),
    owner.app.token,
  );

const createAgent = (owner: Account, displayName: string) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    owner.app.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName }),
    owner.app.token,
  );

const agentToken = async (owner: Account, svcnumId: string) =>
  (
    await call<IssueAgentTokenRequest, AccessToken>(
      owner.app.agents,
      'issueAgentToken',
      IssueAgentTokenRequest.fromPartial({ svcnumId }),
      owner.app.token,
    )
  ).accessToken;

const createMask = (owner: Account, participantA: string, participantB: string, ttlSeconds = 600) =>
  call<CreateMaskRequest, Mask>(
    owner.app.masks,
    'createMask',
    CreateMaskRequest.fromPartial({ participantA, participantB, ttlSeconds, scope: 'test.bridge' }),
    owner.app.token,
  );

/** A stream of the account, cancelled after the test. */
function stream(owner: Account, cursor = ''): OpenStream {
  const opened = openStream(owner.app, cursor);
  streams.push(opened);
  return opened;
}

/** Sends and expects 202. */
async function send(token: string, body: Record<string, unknown>) {
  const reply = await sendMessage(service, token, body);
  expect(reply.status, JSON.stringify(reply.json)).toBe(202);
  return reply.json as { message_id: string; from: string; to: string; accepted_at: string };
}

/** The stored messages of an inbox (tombstones left out), oldest first. */
async function stored(inboxId: string): Promise<StoredMessage[]> {
  return (await service.core.store.readInbox(inboxId, 0, 1000)).filter(
    (entry): entry is StoredMessage => !isTombstone(entry),
  );
}

/**
 * How long "no more messages follow" is watched: derived messages are stored before the send
 * is answered, and a stream of this process is woken at once (other processes poll every 250 ms).
 */
const SETTLE_MS = 500;

/** The stream receives exactly `count` messages: waits for them, then makes sure no more follow. */
async function exactly(opened: OpenStream, count: number, timeoutMs = 10_000): Promise<IncomingMessage[]> {
  await opened.waitFor(count, timeoutMs);
  await sleep(SETTLE_MS);
  expect(opened.messages.map(summary)).toHaveLength(count);
  return opened.messages;
}

const KIND_NAMES: Record<number, string> = {
  [MessageKind.MESSAGE_KIND_MESSAGE]: 'message',
  [MessageKind.MESSAGE_KIND_AUTO_REPLY]: 'auto_reply',
  [MessageKind.MESSAGE_KIND_FORWARD]: 'forward',
};
/** A readable one-line view of a received message, for exact set assertions. */
const summary = (message: IncomingMessage) =>
  `${KIND_NAMES[message.kind] ?? message.kind} ${message.fromSvcnum}→${message.toSvcnum}${message.forwardedBy ? ` by ${message.forwardedBy}` : ''}: ${message.text}`;
const storedSummary = (message: StoredMessage) =>
  `${message.kind} ${message.fromSvcnum}→${message.toSvcnum}${message.forwardedBy ? ` by ${message.forwardedBy}` : ''}: ${message.text} (hops ${message.hops})`;

/**
 * The positions a cursor carries (readable, not secret): its JSON before the 32-byte HMAC tag
 * (core/kernel/page-token.ts).
 */
const cursorPositions = (cursor: string) =>
  JSON.parse(Buffer.from(cursor, 'base64url').subarray(0, -32).toString('utf8')) as Record<string, number>;

describe('send → stream', () => {
  it('delivers a message with every field, as the sender its token names', async () => {
    const owner = await account();
    const number = await provision(owner, 'Inbox');
    const lent = await provision(owner, 'Lent line');
    const agent = await createAgent(owner, 'Sender');
    const opened = stream(owner);

    // 1. An agent's token from IssueAgentToken sends as the agent.
    const issued = await agentToken(owner, agent.agent!.svcnumId);
    const sent = await send(issued, { to: number.svcnum, text: 'hello' });
    expect(sent).toEqual({
      message_id: expect.stringMatching(ULID),
      from: agent.agent!.svcnum,
      to: number.svcnum,
      accepted_at: expect.any(String),
    });
    expect(new Date(sent.accepted_at).toISOString()).toBe(sent.accepted_at);
    const [received] = await opened.waitFor(1);
    expect(received).toEqual({
      messageId: sent.message_id,
      cursor: expect.any(String),
      toSvcnumId: number.svcnumId,
      toSvcnum: number.svcnum,
      fromSvcnum: agent.agent!.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_AI_AGENT,
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
      text: 'hello',
      createTime: new Date(sent.accepted_at),
      forwardedBy: '',
    });
    expect(received!.cursor.length).toBeGreaterThan(0);

    // 2. The agent's own client_credentials token sends as the agent too.
    const ownToken = await clientCredentialsToken(service, agent.clientId, agent.clientSecret, 'messaging');
    expect((await send(ownToken, { to: number.svcnum, text: 'via client_credentials' })).from).toBe(
      agent.agent!.svcnum,
    );

    // 3. A lent number (token exchange: subject = the number, actor = the agent) sends as the number.
    const exchanged = await call<ExchangeTokenRequest, ExchangeTokenResponse>(
      owner.app.agents,
      'exchangeToken',
      ExchangeTokenRequest.fromPartial({
        subjectToken: lent.svcnumId,
        subjectTokenType: 'urn:svcnum:params:oauth:token-type:svcnum-id',
        actorToken: issued,
        actorTokenType: 'urn:ietf:params:oauth:token-type:access_token',
        scope: 'messaging',
      }),
      owner.app.token,
    );
    expect((await send(exchanged.accessToken, { to: number.svcnum, text: 'as the lent number' })).from).toBe(
      lent.svcnum,
    );

    // 4. The account's External API client sends from any number of the account: its own, a
    //    programmable number, an agent. Numbers may be written with +, spaces and dashes.
    expect(
      (await send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text: 'from the account' })).from,
    ).toBe(owner.app.owner.svcnum);
    expect((await send(owner.api, { from: `+${lent.svcnum}`, to: number.svcnum, text: 'from its number' })).from).toBe(
      lent.svcnum,
    );
    const spaced = `${number.svcnum.slice(0, 3)} ${number.svcnum.slice(3, 7)}-${number.svcnum.slice(7)}`;
    expect(await send(owner.api, { from: agent.agent!.svcnum, to: spaced, text: 'from its agent' })).toMatchObject({
      from: agent.agent!.svcnum,
      to: number.svcnum,
    });

    const all = await exactly(opened, 6);
    expect(all.map((message) => [message.fromSvcnum, message.senderEntityType, message.text])).toEqual([
      [agent.agent!.svcnum, EntityType.ENTITY_TYPE_AI_AGENT, 'hello'],
      [agent.agent!.svcnum, EntityType.ENTITY_TYPE_AI_AGENT, 'via client_credentials'],
      [lent.svcnum, EntityType.ENTITY_TYPE_PROGRAMMABLE, 'as the lent number'],
      [owner.app.owner.svcnum, EntityType.ENTITY_TYPE_BUSINESS, 'from the account'],
      [lent.svcnum, EntityType.ENTITY_TYPE_PROGRAMMABLE, 'from its number'],
      [agent.agent!.svcnum, EntityType.ENTITY_TYPE_AI_AGENT, 'from its agent'],
    ]);
    // Every message gets its own id; cursors move forward.
    expect(new Set(all.map((message) => message.messageId)).size).toBe(6);
    expect(all.map((message) => cursorPositions(message.cursor)[number.svcnumId])).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('delivers to several streams of one account open at once', async () => {
    const owner = await account();
    const number = await provision(owner, 'Shared inbox');
    const opened = [stream(owner), stream(owner), stream(owner)];
    const sent = [];
    for (const text of ['one', 'two', 'three'])
      sent.push((await send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text })).message_id);
    await Promise.all(opened.map((each) => exactly(each, 3)));
    for (const each of opened) expect(each.messages.map((message) => message.messageId)).toEqual(sent);
  });

  it('delivers what arrived while no stream was open first, then live, in order', async () => {
    const owner = await account();
    const number = await provision(owner, 'Backlog');
    for (const text of ['b1', 'b2', 'b3'])
      await send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text });
    const opened = stream(owner);
    expect((await opened.waitFor(3)).map((message) => message.text)).toEqual(['b1', 'b2', 'b3']);
    for (const text of ['l1', 'l2']) await send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text });
    expect((await exactly(opened, 5)).map((message) => message.text)).toEqual(['b1', 'b2', 'b3', 'l1', 'l2']);
  });

  it('keeps the order per number under 50 rapid sends', async () => {
    const owner = await account();
    const [first, second] = [await provision(owner, 'First'), await provision(owner, 'Second')];
    const opened = stream(owner);
    // Two senders, one per number, each firing 25 messages back to back, concurrently.
    const burst = (to: ProgrammableNumber) =>
      (async () => {
        for (let index = 0; index < 25; index++)
          await send(owner.api, { from: owner.app.owner.svcnum!, to: to.svcnum, text: `${to.displayName} ${index}` });
      })();
    await Promise.all([burst(first!), burst(second!)]);
    const received = await exactly(opened, 50);
    for (const number of [first!, second!]) {
      expect(
        received.filter((message) => message.toSvcnumId === number.svcnumId).map((message) => message.text),
      ).toEqual(Array.from({ length: 25 }, (_, index) => `${number.displayName} ${index}`));
    }
  });

  it("delivers 50 concurrent sends to one number exactly once, in the inbox's order", async () => {
    const owner = await account();
    const number = await provision(owner, 'Concurrent');
    const opened = stream(owner);
    const sent = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text: `c${index}` }),
      ),
    );
    const received = await exactly(opened, 50);
    expect(new Set(received.map((message) => message.messageId))).toEqual(
      new Set(sent.map((reply) => reply.message_id)),
    );
    expect(received.map((message) => message.messageId)).toEqual(
      (await stored(number.svcnumId)).map((message) => message.messageId),
    );
    expect(received.map((message) => cursorPositions(message.cursor)[number.svcnumId])).toEqual(
      Array.from({ length: 50 }, (_, index) => index + 1),
    );
  });

  it('resumes after a dropped stream from the last processed cursor: nothing lost, nothing repeated', async () => {
    const owner = await account();
    const numbers = [await provision(owner, 'R1'), await provision(owner, 'R2')];
    const from = owner.app.owner.svcnum!;
    const sentIds: string[] = [];
    let counter = 0;
    const sendNext = async () => {
      const index = counter++;
      sentIds.push((await send(owner.api, { from, to: numbers[index % 2]!.svcnum, text: `m${index}` })).message_id);
    };
    for (let index = 0; index < 6; index++) await sendNext();

    const first = stream(owner);
    // Live traffic while the stream runs; the client drops the stream mid-way.
    const live = (async () => {
      for (let index = 0; index < 14; index++) {
        await sendNext();
        await sleep(15);
      }
    })();
    await first.waitFor(9);
    first.cancel();
    // The client processed 8 messages; the 9th (and anything after) was in flight when it dropped.
    const processed = first.messages.slice(0, 8);
    const cursor = processed.at(-1)!.cursor;
    await live;
    for (let index = 0; index < 5; index++) await sendNext();
    expect(sentIds).toHaveLength(25);

    const resumed = stream(owner, cursor);
    const rest = await exactly(resumed, 25 - 8);
    const ids = [...processed, ...rest].map((message) => message.messageId);
    expect(new Set(ids).size).toBe(25);
    expect(new Set(ids)).toEqual(new Set(sentIds));
    // In order per number across the drop.
    for (const number of numbers) {
      expect(
        [...processed, ...rest]
          .filter((message) => message.toSvcnumId === number.svcnumId)
          .map((message) => message.messageId),
      ).toEqual((await stored(number.svcnumId)).map((message) => message.messageId));
    }

    // Resuming from an older cursor replays from exactly there (at least once, never before it).
    const replay = stream(owner, processed[2]!.cursor);
    await exactly(replay, 25 - 3);
    const perNumber = (messages: IncomingMessage[], number: ProgrammableNumber) =>
      messages.filter((message) => message.toSvcnumId === number.svcnumId).map((message) => message.messageId);
    for (const number of numbers)
      expect(perNumber(replay.messages, number)).toEqual(perNumber([...processed.slice(3), ...rest], number));
  });

  it('an ended stream leaves no timer behind (one would keep its state and call in memory until it fired)', async () => {
    const owner = await account();
    await provision(owner, 'Timers');
    // The streams' sleeps until their next re-list (what is left of RELIST_MS here, ten minutes;
    // no other timer is that long): each must be cleared when its stream ends.
    const sleeping = new Set<unknown>();
    const { setTimeout: set, clearTimeout: clear } = globalThis;
    vi.spyOn(globalThis, 'setTimeout').mockImplementation(((callback: () => void, ms?: number) => {
      const timer = set(callback, ms);
      if (ms !== undefined && ms > RELIST_MS / 2 && ms <= RELIST_MS) sleeping.add(timer);
      return timer;
    }) as typeof setTimeout);
    vi.spyOn(globalThis, 'clearTimeout').mockImplementation((timer) => {
      sleeping.delete(timer);
      clear(timer);
    });
    const opened = Array.from({ length: 20 }, () => openStream(owner.app));
    await sleep(SETTLE_MS);
    expect(sleeping.size).toBeGreaterThanOrEqual(20);
    for (const one of opened) one.cancel();
    await sleep(SETTLE_MS);
    expect(sleeping.size).toBe(0);
  });

  it('a message wakes a stream to read only the inbox it arrived in', async () => {
    const owner = await account();
    const numbers: ProgrammableNumber[] = [];
    for (let index = 0; index < 5; index++) numbers.push(await provision(owner, `Line ${index}`));
    const from = owner.app.owner.svcnum!;
    const opened = stream(owner);
    await send(owner.api, { from, to: numbers[0]!.svcnum, text: 'first' });
    await opened.waitFor(1);
    await sleep(SETTLE_MS);
    inbox.reads.length = 0;
    await send(owner.api, { from, to: numbers[3]!.svcnum, text: 'second' });
    await exactly(opened, 2);
    // Queries for the inbox that changed only (one, or two when a poll saw the counter move
    // before the local wake-up), not one per number of the account.
    expect(new Set(inbox.reads.map((read) => read.inboxId))).toEqual(new Set([numbers[3]!.svcnumId]));
    expect(inbox.reads.length).toBeLessThanOrEqual(2);
  });

  it('refuses a cursor of another account, and one that is not a cursor, with INVALID_ARGUMENT', async () => {
    const [owner, other] = await Promise.all([account(), account()]);
    const number = await provision(owner, 'Cursor owner');
    await send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text: 'x' });
    const [message] = await stream(owner).waitFor(1);

    const forged = Buffer.from(JSON.stringify({ o: other.app.owner.svcnumId, p: { [number.svcnumId]: -1 } })).toString(
      'base64url',
    );
    for (const cursor of [message!.cursor, 'not a cursor', forged]) {
      const refused = stream(other, cursor);
      await expect(refused.waitFor(1, 5_000)).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
      expect(refused.messages).toEqual([]);
      expect(refused.error!.details).toMatch(/resume_cursor/);
    }
  });

  /** An owner with one number ('Old') and a stream open on it that has received 'before'. */
  async function streamOfOneNumber() {
    const owner = await account();
    const old = await provision(owner, 'Old');
    const from = owner.app.owner.svcnum!;
    const opened = stream(owner);
    await send(owner.api, { from, to: old.svcnum, text: 'before' });
    await opened.waitFor(1);
    return { owner, old, from, opened };
  }

  it('a number provisioned while a stream is open joins it at once (an owner wake-up), with what it got since', async () => {
    const { owner, from, opened } = await streamOfOneNumber();

    // The periodic re-list is 10 minutes away (messageRelistMs): only the owner wake-up can add it.
    const added = await provision(owner, 'Added');
    await send(owner.api, { from, to: added.svcnum, text: 'early' });
    await send(owner.api, { from, to: added.svcnum, text: 'live' });
    const received = await exactly(opened, 3);
    expect(
      received.map((message) => `${message.toSvcnumId === added.svcnumId ? 'added' : 'old'}: ${message.text}`),
    ).toEqual(['old: before', 'added: early', 'added: live']);
  });

  it('a number whose owner wake-up was lost (written by another process) joins at the periodic re-list', async () => {
    const { owner, old, from, opened } = await streamOfOneNumber();

    // Provisioned elsewhere, nobody told: the number as ProvisionNumber commits it, without its notice.
    const numbers = service.core.provisioning.numbers;
    const quiet = vi.spyOn(service.core.messaging.wakeups, 'publishNumbersChanged').mockImplementation(() => undefined);
    const added = await numbers.provision(
      { ownerId: owner.app.owner.svcnumId, clientId: 'test' },
      { displayName: 'Unannounced' },
    );
    expect(quiet).toHaveBeenCalledTimes(1);
    quiet.mockRestore();
    await send(owner.api, { from, to: added.svcnum, text: 'early' });
    // Streams re-list every messageRelistMs (measured with Date.now). The test moves Date.now
    // past it instead of sleeping, and wakes the stream with a message.
    const realNow = Date.now.bind(Date);
    const jump = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + RELIST_MS + 1_000);
    try {
      await send(owner.api, { from, to: old.svcnum, text: 'wake' });
      await opened.waitFor(3);
    } finally {
      jump.mockRestore();
    }
    await send(owner.api, { from, to: added.svcnum, text: 'live' });
    const received = await exactly(opened, 4);
    expect(
      received.map((message) => `${message.toSvcnumId === added.svcnumId ? 'added' : 'old'}: ${message.text}`).sort(),
    ).toEqual(['added: early', 'added: live', 'old: before', 'old: wake']);
    expect(received.at(-1)!.text).toBe('live');
  });

  it('a stream checks its caller again at each re-list: once its account is disabled, it ends with UNAUTHENTICATED', async () => {
    const { owner, opened } = await streamOfOneNumber();
    await service.core.registration.disableUser(owner.app.owner.svcnumId);
    // Account status is cached for up to 30 s per process; past that, the next re-list refuses.
    service.clock.advance(RECORD_CACHE_TTL);
    // "The owner's numbers may have changed" (what a reconnected engine says): the stream re-lists now.
    service.core.messaging.wakeups.publishNumbersChanged(owner.app.owner.svcnumId, []);
    await vi.waitFor(() => expect(opened.error?.code).toBe(status.UNAUTHENTICATED), { timeout: 10_000, interval: 10 });
    expect(opened.error!.details).toBe('this token can no longer be used: its owner account is not active');
    expect(opened.messages.map((message) => message.text)).toEqual(['before']);
  });
});

describe("gaps in an inbox's sequence", () => {
  it('a writer that took a sequence and never wrote: later messages arrive after GAP_GRACE_MS, the gap is tombstoned', async () => {
    const owner = await account();
    const number = await provision(owner, 'Gap');
    const from = owner.app.owner.svcnum!;
    await send(owner.api, { from, to: number.svcnum, text: 'first' });
    // Two streams: both wait on the same gap, only one of them can write its tombstone.
    const opened = [stream(owner), stream(owner)];
    for (const each of opened) await each.waitFor(1);

    inbox.deadWriter(number.svcnumId);
    // Measured on the service's clock, which the grace is counted on (not on this machine's load).
    const started = service.clock.now();
    await send(owner.api, { from, to: number.svcnum, text: 'after the gap' });
    expect(inbox.burnt).toEqual([{ inboxId: number.svcnumId, seq: 2 }]);
    // In order: nothing past the gap is delivered while its writer may still be in flight.
    await sleep(GAP_GRACE_MS / 2);
    for (const each of opened) expect(each.messages).toHaveLength(1);
    await Promise.all(opened.map((each) => exactly(each, 2, GAP_GRACE_MS + 5_000)));
    for (const each of opened) expect(each.messages.map((message) => message.text)).toEqual(['first', 'after the gap']);
    expect(service.clock.now() - started).toBeGreaterThanOrEqual(GAP_GRACE_MS);
    const entries = await service.core.store.readInbox(number.svcnumId, 0, 10);
    expect(
      entries.map((entry) => (isTombstone(entry) ? `${entry.seq} tombstone` : `${entry.seq} ${entry.text}`)),
    ).toEqual(['1 first', '2 tombstone', '3 after the gap']);
    // Exactly one tombstone write won; the other reader found it and moved on.
    expect(inbox.tombstones.filter((attempt) => attempt.written)).toEqual([
      { inboxId: number.svcnumId, seq: 2, written: true },
    ]);

    // The inbox is healthy afterwards: the next message comes with the clock stopped, so without
    // waiting any grace (a grace would never pass).
    service.clock.freeze();
    try {
      await send(owner.api, { from, to: number.svcnum, text: 'next' });
      for (const each of opened) await each.waitFor(3, 30_000);
    } finally {
      service.clock.release();
    }
  });

  it('a late writer whose sequence was tombstoned retries with a new sequence and is delivered', async () => {
    const owner = await account();
    const number = await provision(owner, 'Late writer');
    const from = owner.app.owner.svcnum!;
    const opened = stream(owner);
    await send(owner.api, { from, to: number.svcnum, text: 'first' });
    await opened.waitFor(1);

    const held = inbox.holdAppend('late');
    const late = sendMessage(service, owner.api, { from, to: number.svcnum, text: 'late' });
    await held.reached; // 'late' took sequence 2 and stalls before writing it
    await send(owner.api, { from, to: number.svcnum, text: 'next' }); // sequence 3
    await inbox.gapSeen(number.svcnumId);
    service.clock.advance(GAP_GRACE_MS); // the grace runs on the service clock
    await opened.waitFor(2, 5_000);
    expect(inbox.tombstones).toContainEqual({ inboxId: number.svcnumId, seq: 2, written: true });

    held.release();
    const reply = await late;
    expect(reply.status, JSON.stringify(reply.json)).toBe(202);
    const received = await exactly(opened, 3);
    expect(received.map((message) => message.text)).toEqual(['first', 'next', 'late']);
    expect(received[2]!.messageId).toBe(reply.json.message_id);
    expect(inbox.appends.filter((append) => append.text === 'late')).toEqual([
      { text: 'late', seq: 2, written: false },
      { text: 'late', seq: 4, written: true },
    ]);
    const entries = await service.core.store.readInbox(number.svcnumId, 0, 10);
    expect(
      entries.map((entry) => (isTombstone(entry) ? `${entry.seq} tombstone` : `${entry.seq} ${entry.text}`)),
    ).toEqual(['1 first', '2 tombstone', '3 next', '4 late']);
  });

  it('a slow writer that lands within the grace is delivered in its place, before what follows', async () => {
    const owner = await account();
    const number = await provision(owner, 'Slow writer');
    const from = owner.app.owner.svcnum!;
    const opened = stream(owner);
    const held = inbox.holdAppend('slow');
    const slow = sendMessage(service, owner.api, { from, to: number.svcnum, text: 'slow' });
    await held.reached;
    await send(owner.api, { from, to: number.svcnum, text: 'fast' });
    await inbox.gapSeen(number.svcnumId);
    await sleep(300);
    expect(opened.messages).toEqual([]);
    held.release();
    expect((await slow).status).toBe(202);
    expect((await exactly(opened, 2)).map((message) => message.text)).toEqual(['slow', 'fast']);
    expect(inbox.tombstones).toEqual([]);
  });

  it("a late message written by another process just before the reader's tombstone is still delivered at once", async () => {
    const owner = await account();
    const number = await provision(owner, 'Race');
    const from = owner.app.owner.svcnum!;
    const opened = stream(owner);
    inbox.deadWriter(number.svcnumId); // another process took sequence 1...
    await send(owner.api, { from, to: number.svcnum, text: 'second' });
    // ...and writes it right before this reader's tombstone: the tombstone fails, the reader must
    // read the inbox again. Written through the raw store: no in-process notification.
    inbox.beforeTombstone(async (inboxId, seq) => {
      if (inboxId !== number.svcnumId || seq !== 1) return;
      const now = service.clock.now();
      await inbox.raw.appendMessage(
        {
          inboxId,
          seq,
          messageId: newUlid(service.clock, systemRandom),
          fromSvcnum: from,
          senderEntityType: 'business',
          toSvcnum: number.svcnum,
          text: 'first, late',
          kind: 'message',
          hops: 0,
          acceptedAt: now,
        },
        now + MESSAGE_RETENTION_MS,
      );
    });
    await inbox.gapSeen(number.svcnumId);
    service.clock.advance(GAP_GRACE_MS);
    expect((await exactly(opened, 2, 3_000)).map((message) => message.text)).toEqual(['first, late', 'second']);
    expect(inbox.tombstones).toEqual([{ inboxId: number.svcnumId, seq: 1, written: false }]);
  });
  it('a message of another process written after the stream saw its sequence counted is still delivered', async () => {
    const owner = await account();
    const number = await provision(owner, 'Counted first');
    const from = owner.app.owner.svcnum!;
    const opened = stream(owner);
    await send(owner.api, { from, to: number.svcnum, text: 'first' });
    await opened.waitFor(1);
    // A writer in another process takes sequence 2; this process polls the counter, sees 2,
    // reads the inbox and finds nothing new yet...
    const seq = await inbox.raw.nextSeq(number.svcnumId);
    expect(seq).toBe(2);
    await sleep(3 * POLL_INTERVAL_MS);
    // ...then the message is written. No notification reaches this process, and the counter
    // does not move again: the stream must still look again.
    const now = service.clock.now();
    await inbox.raw.appendMessage(
      {
        inboxId: number.svcnumId,
        seq,
        messageId: newUlid(service.clock, systemRandom),
        fromSvcnum: from,
        senderEntityType: 'business',
        toSvcnum: number.svcnum,
        text: 'written after the count',
        kind: 'message',
        hops: 0,
        acceptedAt: now,
      },
      now + MESSAGE_RETENTION_MS,
    );
    expect((await exactly(opened, 2, GAP_GRACE_MS)).map((message) => message.text)).toEqual([
      'first',
      'written after the count',
    ]);
  });
});

describe('a busy inbox: sequence claims and reads shared', () => {
  it('appends that wait for a claim in flight share the next one, a block of exactly as many; a lone append claims one', async () => {
    const inboxId = newUlid(service.clock, systemRandom);
    const counts: number[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const claim = createSequenceClaims({
      nextSeq: async (id, count = 1) => {
        counts.push(count);
        if (counts.length === 1) await held;
        return inbox.raw.nextSeq(id, count);
      },
    });
    const first = claim(inboxId);
    const waiting = Array.from({ length: 5 }, () => claim(inboxId));
    release();
    expect(await first).toBe(1);
    expect(await Promise.all(waiting)).toEqual([2, 3, 4, 5, 6]);
    expect(await claim(inboxId)).toBe(7);
    expect(counts).toEqual([1, 5, 1]);
  });

  it('a failed claim fails each append of its block, and the next claim starts afresh', async () => {
    const inboxId = newUlid(service.clock, systemRandom);
    let failNext = true;
    const claim = createSequenceClaims({
      nextSeq: async (id, count) => {
        if (failNext) {
          failNext = false;
          throw new Error('throttled');
        }
        return inbox.raw.nextSeq(id, count);
      },
    });
    const outcomes = await Promise.allSettled([claim(inboxId), claim(inboxId)]);
    expect(outcomes[0]).toMatchObject({ status: 'rejected', reason: { message: 'throttled' } });
    expect(outcomes[1]).toEqual({ status: 'fulfilled', value: 1 });
    expect(await claim(inboxId)).toBe(2);
  });

  it('concurrent identical reads share one load while it runs; none is kept after it, a failure included', async () => {
    const loads: string[] = [];
    let fail = true;
    const read = sharedReads(
      async (id: string) => {
        loads.push(id);
        await sleep(5);
        if (fail) throw new Error(`no ${id}`);
        return { id, read: loads.length };
      },
      (id) => id,
    );
    const failed = await Promise.allSettled([read('a'), read('a')]);
    expect(failed.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    const [first, second, other] = await Promise.all([read('a'), read('a'), read('b')]);
    expect(first).toBe(second);
    expect(other).toEqual({ id: 'b', read: 3 });
    expect(await read('a')).toEqual({ id: 'a', read: 4 });
    expect(loads).toEqual(['a', 'a', 'b', 'a']);
  });

  it('50 concurrent sends to one inbox claim exactly 50 sequences, in blocks, and leave no gap', async () => {
    const owner = await account();
    const number = await provision(owner, 'Claims');
    const opened = stream(owner);
    const updates = vi.spyOn(inbox.raw, 'nextSeq');
    await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        send(owner.api, { from: owner.app.owner.svcnum!, to: number.svcnum, text: `b${index}` }),
      ),
    );
    const claimed = updates.mock.calls
      .filter(([inboxId]) => inboxId === number.svcnumId)
      .map(([, count]) => count ?? 1);
    expect(claimed.reduce((sum, count) => sum + count, 0)).toBe(50);
    expect((await stored(number.svcnumId)).map((message) => message.seq)).toEqual(
      Array.from({ length: 50 }, (_, index) => index + 1),
    );
    expect(await exactly(opened, 50)).toHaveLength(50);
  });
});

describe('programmable behaviour', () => {
  it('auto_reply answers the sender, once', async () => {
    const [ownerA, ownerB] = await Promise.all([account(), account()]);
    const a = await provision(ownerA, 'A', { autoReply: 'A here, thanks' });
    const b = await provision(ownerB, 'B');
    const [streamA, streamB] = [stream(ownerA), stream(ownerB)];
    await send(ownerB.api, { from: b.svcnum, to: a.svcnum, text: 'hi A' });

    const [toA] = await exactly(streamA, 1);
    expect(toA).toMatchObject({
      fromSvcnum: b.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_PROGRAMMABLE,
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
      text: 'hi A',
    });
    const [reply] = await exactly(streamB, 1);
    expect(reply).toMatchObject({
      fromSvcnum: a.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_PROGRAMMABLE,
      kind: MessageKind.MESSAGE_KIND_AUTO_REPLY,
      text: 'A here, thanks',
      toSvcnumId: b.svcnumId,
      toSvcnum: b.svcnum,
      forwardedBy: '',
    });

    // An agent sender gets the auto-reply in its own inbox (agents have no stream).
    const agent = await createAgent(ownerB, 'Asker');
    await send(await agentToken(ownerB, agent.agent!.svcnumId), { to: a.svcnum, text: 'agent asks' });
    expect((await stored(agent.agent!.svcnumId)).map(storedSummary)).toEqual([
      `auto_reply ${a.svcnum}→${agent.agent!.svcnum}: A here, thanks (hops 1)`,
    ]);
    await exactly(streamA, 2);
  });

  it('two auto-replying numbers: exactly one auto-reply each way, never a reply to a reply', async () => {
    const [ownerA, ownerB] = await Promise.all([account(), account()]);
    const a = await provision(ownerA, 'A', { autoReply: 'auto from A' });
    const b = await provision(ownerB, 'B', { autoReply: 'auto from B' });
    const [streamA, streamB] = [stream(ownerA), stream(ownerB)];
    await send(ownerB.api, { from: b.svcnum, to: a.svcnum, text: 'hi A' });
    await send(ownerA.api, { from: a.svcnum, to: b.svcnum, text: 'hi B' });

    expect((await exactly(streamA, 2)).map(summary)).toEqual([
      `message ${b.svcnum}→${a.svcnum}: hi A`,
      `auto_reply ${b.svcnum}→${a.svcnum}: auto from B`,
    ]);
    expect((await exactly(streamB, 2)).map(summary)).toEqual([
      `auto_reply ${a.svcnum}→${b.svcnum}: auto from A`,
      `message ${a.svcnum}→${b.svcnum}: hi B`,
    ]);
    expect((await stored(a.svcnumId)).map((message) => message.hops)).toEqual([0, 1]);
    expect((await stored(b.svcnumId)).map((message) => message.hops)).toEqual([1, 0]);
  });

  it('forward_to_svcnum_id forwards a copy; the target does not auto-reply to a copy', async () => {
    const [owner, other, sender] = await Promise.all([account(), account(), account()]);
    const target = await provision(other, 'Target', { autoReply: 'target auto' });
    const forwarder = await provision(owner, 'Forwarder', {
      forwardToSvcnumId: target.svcnumId,
      autoReply: 'forwarder auto',
    });
    const from = await provision(sender, 'Sender');
    const [ownerStream, otherStream, senderStream] = [stream(owner), stream(other), stream(sender)];
    const sent = await send(sender.api, { from: from.svcnum, to: forwarder.svcnum, text: 'please pass on' });

    const [original] = await exactly(ownerStream, 1);
    expect(original).toMatchObject({
      messageId: sent.message_id,
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
      fromSvcnum: from.svcnum,
      forwardedBy: '',
    });
    const [copy] = await exactly(otherStream, 1);
    expect(copy).toMatchObject({
      kind: MessageKind.MESSAGE_KIND_FORWARD,
      fromSvcnum: from.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_PROGRAMMABLE,
      toSvcnumId: target.svcnumId,
      toSvcnum: target.svcnum,
      text: 'please pass on',
      forwardedBy: forwarder.svcnum,
    });
    expect(copy!.messageId).not.toBe(sent.message_id);
    // The sender hears from the forwarder only (its auto-reply), not from the target.
    expect((await exactly(senderStream, 1)).map(summary)).toEqual([
      `auto_reply ${forwarder.svcnum}→${from.svcnum}: forwarder auto`,
    ]);

    // Forwarding to an agent stores the copy in the agent's inbox.
    const agent = await createAgent(owner, 'Collector');
    await configure(owner, forwarder.svcnumId, { forwardToSvcnumId: agent.agent!.svcnumId });
    await send(sender.api, { from: from.svcnum, to: forwarder.svcnum, text: 'for the agent' });
    expect((await stored(agent.agent!.svcnumId)).map(storedSummary)).toEqual([
      `forward ${from.svcnum}→${agent.agent!.svcnum} by ${forwarder.svcnum}: for the agent (hops 1)`,
    ]);

    // A number cannot forward to itself.
    const self = await failure(configure(owner, forwarder.svcnumId, { forwardToSvcnumId: forwarder.svcnumId }));
    expect(self.code).toBe(status.INVALID_ARGUMENT);
  });

  it('a forward loop between two numbers stops after MAX_DERIVED_HOPS copies', async () => {
    const [owner, sender] = await Promise.all([account(), account()]);
    const a = await provision(owner, 'A');
    const b = await provision(owner, 'B', { forwardToSvcnumId: a.svcnumId });
    await configure(owner, a.svcnumId, { forwardToSvcnumId: b.svcnumId });
    const opened = stream(owner);
    await send(sender.api, { from: sender.app.owner.svcnum!, to: a.svcnum, text: 'ping' });
    const x = sender.app.owner.svcnum!;
    expect(MAX_DERIVED_HOPS).toBe(3);
    // message (hops 0) → copy to B (1) → copy to A (2) → copy to B (3): stop.
    expect((await exactly(opened, 4)).map(summary)).toEqual([
      `message ${x}→${a.svcnum}: ping`,
      `forward ${x}→${b.svcnum} by ${a.svcnum}: ping`,
      `forward ${x}→${a.svcnum} by ${b.svcnum}: ping`,
      `forward ${x}→${b.svcnum} by ${a.svcnum}: ping`,
    ]);
    expect((await stored(a.svcnumId)).map((message) => message.hops)).toEqual([0, 2]);
    expect((await stored(b.svcnumId)).map((message) => message.hops)).toEqual([1, 3]);
  });

  it('a forward cycle of three auto-replying numbers: one auto-reply to the sender, MAX_DERIVED_HOPS copies', async () => {
    const [owner, sender] = await Promise.all([account(), account()]);
    const a = await provision(owner, 'A', { autoReply: 'auto A' });
    const b = await provision(owner, 'B', { autoReply: 'auto B' });
    const c = await provision(owner, 'C', { autoReply: 'auto C', forwardToSvcnumId: a.svcnumId });
    await configure(owner, a.svcnumId, { autoReply: 'auto A', forwardToSvcnumId: b.svcnumId });
    await configure(owner, b.svcnumId, { autoReply: 'auto B', forwardToSvcnumId: c.svcnumId });
    const x = await provision(sender, 'X', { autoReply: 'auto X' });
    const [ownerStream, senderStream] = [stream(owner), stream(sender)];
    await send(sender.api, { from: x.svcnum, to: a.svcnum, text: 'round' });

    expect((await exactly(ownerStream, 4)).map(summary).sort()).toEqual(
      [
        `message ${x.svcnum}→${a.svcnum}: round`,
        `forward ${x.svcnum}→${b.svcnum} by ${a.svcnum}: round`,
        `forward ${x.svcnum}→${c.svcnum} by ${b.svcnum}: round`,
        `forward ${x.svcnum}→${a.svcnum} by ${c.svcnum}: round`,
      ].sort(),
    );
    // Only A got a direct message, so only A auto-replies; X's auto-reply never answers it.
    expect((await exactly(senderStream, 1)).map(summary)).toEqual([`auto_reply ${a.svcnum}→${x.svcnum}: auto A`]);
    expect((await stored(a.svcnumId)).map((message) => message.hops)).toEqual([0, 3]);
  });

  it('a failing derived message never fails the send it derives from', async () => {
    const [owner, sender] = await Promise.all([account(), account()]);
    const target = await provision(owner, 'Unreachable target');
    const forwarder = await provision(owner, 'Forwarder', { forwardToSvcnumId: target.svcnumId });
    const opened = stream(owner);
    inbox.failGetUser(target.svcnumId);
    const reply = await sendMessage(service, sender.api, {
      from: sender.app.owner.svcnum!,
      to: forwarder.svcnum,
      text: 'stored anyway',
    });
    // The original is stored before anything is derived from it: the sender gets 202 (a 5xx
    // would make it retry, and store the message twice).
    expect(reply.status, JSON.stringify(reply.json)).toBe(202);
    expect((await stored(forwarder.svcnumId)).map((message) => message.messageId)).toEqual([reply.json.message_id]);
    inbox.reset();
    expect((await exactly(opened, 1)).map((message) => message.text)).toEqual(['stored anyway']);
  });
});

describe('masks', () => {
  /** Two accounts with one programmable number each, bridged by a mask that P's account created. */
  async function bridged(ttlSeconds = 600, config: { q?: Partial<ProgrammableConfig> } = {}) {
    const [ownerP, ownerQ] = await Promise.all([account(), account()]);
    const p = await provision(ownerP, 'P');
    const q = await provision(ownerQ, 'Q', config.q ?? {});
    const mask = await createMask(ownerP, p.svcnumId, q.svcnumId, ttlSeconds);
    return { ownerP, ownerQ, p, q, mask, streamP: stream(ownerP), streamQ: stream(ownerQ) };
  }

  /** Nothing in a received message (cursor included) names the hidden participant. */
  function revealsNothing(message: IncomingMessage, hidden: { svcnum: string; svcnumId: string }, hiddenOwner: string) {
    const visible = JSON.stringify({ ...message, cursor: cursorPositions(message.cursor) });
    for (const secret of [hidden.svcnum, hidden.svcnumId, hiddenOwner].filter(Boolean))
      expect(visible).not.toContain(secret);
  }

  it('a participant that forwards to the other participant is named by the mask number, never its own', async () => {
    const { ownerP, ownerQ, p, q, mask, streamP, streamQ } = await bridged();
    await configure(ownerQ, q.svcnumId, { forwardToSvcnumId: p.svcnumId });
    await send(ownerP.api, { from: p.svcnum, to: mask.svcnum, text: 'forward me' });
    await exactly(streamQ, 1);
    const [copy] = await exactly(streamP, 1);
    expect(copy).toMatchObject({
      kind: MessageKind.MESSAGE_KIND_FORWARD,
      fromSvcnum: mask.svcnum,
      forwardedBy: mask.svcnum,
    });
    revealsNothing(copy!, q, '');
  });

  it('bridges both ways: each participant sees only the mask number', async () => {
    const { ownerP, ownerQ, p, q, mask, streamP, streamQ } = await bridged();
    const sent = await send(ownerP.api, { from: p.svcnum, to: mask.svcnum, text: 'hello through the mask' });
    expect(sent).toMatchObject({ from: p.svcnum, to: mask.svcnum });
    const [atQ] = await exactly(streamQ, 1);
    expect(atQ).toMatchObject({
      messageId: sent.message_id,
      fromSvcnum: mask.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_MASK,
      toSvcnum: mask.svcnum,
      toSvcnumId: q.svcnumId,
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
      text: 'hello through the mask',
    });
    revealsNothing(atQ!, p, ownerP.app.owner.svcnumId);

    await send(ownerQ.api, { from: q.svcnum, to: mask.svcnum, text: 'and back' });
    const [atP] = await exactly(streamP, 1);
    expect(atP).toMatchObject({
      fromSvcnum: mask.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_MASK,
      toSvcnum: mask.svcnum,
      toSvcnumId: p.svcnumId,
      text: 'and back',
    });
    revealsNothing(atP!, q, ownerQ.app.owner.svcnumId);
    // Stored as seen: the recipient's inbox holds no trace of the real sender.
    for (const [holder, hidden] of [
      [q, p],
      [p, q],
    ] as const) {
      const [message] = await stored(holder.svcnumId);
      expect(JSON.stringify(message)).not.toContain(hidden.svcnum);
      expect(JSON.stringify(message)).not.toContain(hidden.svcnumId);
    }
  });

  it('an auto-reply through a mask comes from the mask number too', async () => {
    const { ownerP, p, q, mask, streamP, streamQ } = await bridged(600, { q: { autoReply: 'Q is away' } });
    await send(ownerP.api, { from: p.svcnum, to: mask.svcnum, text: 'anyone there?' });
    await exactly(streamQ, 1);
    const [reply] = await exactly(streamP, 1);
    expect(reply).toMatchObject({
      fromSvcnum: mask.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_MASK,
      kind: MessageKind.MESSAGE_KIND_AUTO_REPLY,
      text: 'Q is away',
    });
    revealsNothing(reply!, q, '');
  });

  it('refuses senders that are not participants with 403', async () => {
    const { ownerP, mask, streamQ } = await bridged();
    const stranger = await account();
    for (const [token, body] of [
      [stranger.api, { from: stranger.app.owner.svcnum!, to: mask.svcnum, text: 'let me in' }],
      // The creator's own number is not a participant either.
      [ownerP.api, { from: ownerP.app.owner.svcnum!, to: mask.svcnum, text: 'me neither' }],
    ] as const) {
      const reply = await sendMessage(service, token, body);
      expect(reply.status).toBe(403);
      expect(reply.json).toEqual({ error: 'forbidden', error_description: expect.stringMatching(/participants/) });
    }
    await sleep(SETTLE_MS);
    expect(streamQ.messages).toEqual([]);
  });

  it('refuses both directions with 410 once the mask has expired', async () => {
    const { ownerP, ownerQ, p, q, mask, streamQ } = await bridged(60);
    await send(ownerP.api, { from: p.svcnum, to: mask.svcnum, text: 'in time' });
    service.clock.advance(60_000);
    for (const [owner, from] of [
      [ownerP, p],
      [ownerQ, q],
    ] as const) {
      const reply = await sendMessage(service, owner.api, { from: from.svcnum, to: mask.svcnum, text: 'too late' });
      expect(reply.status).toBe(410);
      expect(reply.json).toEqual({ error: 'gone', error_description: expect.stringMatching(/expired/) });
    }
    expect((await exactly(streamQ, 1)).map((message) => message.text)).toEqual(['in time']);
  });

  it('refuses with 410 after the mask was closed', async () => {
    const { ownerP, ownerQ, p, q, mask } = await bridged();
    await send(ownerQ.api, { from: q.svcnum, to: mask.svcnum, text: 'open' });
    await call<CloseMaskRequest, Mask>(
      ownerP.app.masks,
      'closeMask',
      CloseMaskRequest.fromPartial({ maskId: mask.maskId }),
      ownerP.app.token,
    );
    for (const [owner, from] of [
      [ownerP, p],
      [ownerQ, q],
    ] as const) {
      const reply = await sendMessage(service, owner.api, { from: from.svcnum, to: mask.svcnum, text: 'closed' });
      expect(reply.status).toBe(410);
      expect(reply.json.error).toBe('gone');
    }
  });
});

describe('POST /api/messages refusals', () => {
  const post = (init: {
    token?: string;
    authorization?: string;
    contentType?: string;
    body?: string;
    method?: string;
  }) =>
    fetch(`${service.issuer}/api/messages`, {
      method: init.method ?? 'POST',
      headers: {
        ...(init.authorization
          ? { Authorization: init.authorization }
          : init.token
            ? { Authorization: `Bearer ${init.token}` }
            : {}),
        ...(init.contentType ? { 'Content-Type': init.contentType } : {}),
      },
      ...(init.body !== undefined ? { body: init.body } : {}),
    });

  /** A JSON error answer with this status and code (never a 500, never an HTML page). */
  async function refused(response: Response, statusCode: number, error: string) {
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await response.json()) as Record<string, unknown>;
    expect({ status: response.status, error: body.error }).toEqual({ status: statusCode, error });
    expect(body.error_description).toEqual(expect.any(String));
    return { response, body };
  }

  let owner: Account;
  let number: ProgrammableNumber;
  let valid: string;
  beforeAll(async () => {
    owner = await account();
    number = await provision(owner, 'Refusals');
    valid = JSON.stringify({ from: owner.app.owner.svcnum, to: number.svcnum, text: 'ok' });
  });

  it('needs a Bearer access token: 401 with a Bearer challenge', async () => {
    // RFC 6750 §3.1: no credential at all, or another scheme → a bare challenge and no error
    // information: `{}`, no error code in the body or the challenge.
    // (DPoP is served: test/rp-libraries-dpop.test.ts; an unbound token under it is invalid_token.)
    for (const authorization of [undefined, 'Basic dXNlcjpwYXNz', 'Token abc']) {
      const response = await post({
        ...(authorization !== undefined ? { authorization } : {}),
        contentType: 'application/json',
        body: valid,
      });
      expect({ status: response.status, body: await response.text() }, String(authorization)).toEqual({
        status: 401,
        body: '{}',
      });
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="messaging"');
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(response.headers.get('cache-control')).toBe('no-store');
    }
    for (const token of ['not-a-jwt', `${owner.api.slice(0, -4)}AAAA`]) {
      const invalid = await refused(
        await post({ token, contentType: 'application/json', body: valid }),
        401,
        'invalid_token',
      );
      expect(invalid.response.headers.get('www-authenticate')).toMatch(
        /^Bearer realm="messaging", error="invalid_token"/,
      );
    }
  });

  it('needs the messaging scope: a provisioning token gets 403 insufficient_scope', async () => {
    const { response } = await refused(
      await post({ token: owner.app.token, contentType: 'application/json', body: valid }),
      403,
      'insufficient_scope',
    );
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm="messaging", error="insufficient_scope"/);
    expect(response.headers.get('www-authenticate')).toContain('scope="messaging"');
  });

  it('refuses an API client without owner account, and numbers its account does not control', async () => {
    const { client, clientSecret } = await service.core.registration.createApiClient({
      name: 'Ownerless',
      scope: 'messaging',
    });
    const ownerless = await clientCredentialsToken(service, client.clientId, clientSecret!);
    await refused(await post({ token: ownerless, contentType: 'application/json', body: valid }), 403, 'forbidden');

    const other = await account();
    const theirs = await provision(other, 'Not yours');
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: theirs.svcnum, to: number.svcnum, text: 'x' }),
      }),
      403,
      'forbidden',
    );
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: other.app.owner.svcnum, to: number.svcnum, text: 'x' }),
      }),
      403,
      'forbidden',
    );
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: '00000000000', to: number.svcnum, text: 'x' }),
      }),
      403,
      'forbidden',
    );
    // from is required for an API client, and must look like a number.
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ to: number.svcnum, text: 'x' }),
      }),
      400,
      'invalid_request',
    );
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: 'me', to: number.svcnum, text: 'x' }),
      }),
      400,
      'invalid_request',
    );
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: 42, to: number.svcnum, text: 'x' }),
      }),
      400,
      'invalid_request',
    );
    // An entity's own token sends as itself only.
    const agent = await createAgent(owner, 'Only itself');
    const token = await agentToken(owner, agent.agent!.svcnumId);
    await refused(
      await post({
        token,
        contentType: 'application/json',
        body: JSON.stringify({ from: number.svcnum, to: number.svcnum, text: 'x' }),
      }),
      403,
      'forbidden',
    );
  });

  it('refuses a disabled API client, and one whose account was disabled', async () => {
    const other = await account();
    const line = await provision(other, 'Account line');
    await send(other.api, { from: line.svcnum, to: number.svcnum, text: 'still enabled' });
    await service.core.store.setClientDisabled(other.apiClientId, true);
    // Client records are cached for up to 30 s per process; past that, a disabled client stops.
    const realNow = Date.now.bind(Date);
    const later = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 31_000);
    try {
      const { response } = await refused(
        await post({
          token: other.api,
          contentType: 'application/json',
          body: JSON.stringify({ from: line.svcnum, to: number.svcnum, text: 'x' }),
        }),
        401,
        'invalid_token',
      );
      expect(response.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
    } finally {
      later.mockRestore();
    }

    // A disabled account: its API client, its agents and its own number stop sending, although
    // their tokens are still within their lifetime: 401 invalid_token, as for a disabled client.
    const third = await account();
    const theirLine = await provision(third, 'Disabled account line');
    const theirAgent = await createAgent(third, 'Agent of a disabled account');
    const theirAgentToken = await agentToken(third, theirAgent.agent!.svcnumId);
    await service.core.registration.disableUser(third.app.owner.svcnumId);
    // Account status is cached for up to 30 s too (getting the app's token read it).
    service.clock.advance(RECORD_CACHE_TTL);
    for (const from of [theirLine.svcnum, theirAgent.agent!.svcnum, third.app.owner.svcnum]) {
      await refused(
        await post({
          token: third.api,
          contentType: 'application/json',
          body: JSON.stringify({ from, to: number.svcnum, text: 'x' }),
        }),
        401,
        'invalid_token',
      );
    }
    await refused(
      await post({
        token: theirAgentToken,
        contentType: 'application/json',
        body: JSON.stringify({ to: number.svcnum, text: 'x' }),
      }),
      401,
      'invalid_token',
    );
  });

  it('404 for a number not in service, 409 for a suspended one', async () => {
    const send404 = (to: string) =>
      post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: owner.app.owner.svcnum, to, text: 'x' }),
      });
    await refused(await send404('99999999999'), 404, 'not_found');
    // A pool number nobody holds (allocation takes pool numbers in random order: find one still free).
    let free = 399;
    while ((await service.core.store.getNumber(`83000000${free}`))?.state !== 'available') free--;
    await refused(await send404(`83000000${free}`), 404, 'not_found');
    const retired = await provision(owner, 'Retired');
    await service.core.provisioning.lifecycle.deactivate(retired.svcnum);
    expect((await service.core.provisioning.lifecycle.show(retired.svcnum)).state).toBe('quarantined');
    await refused(await send404(retired.svcnum), 404, 'not_found');

    const paused = await provision(owner, 'Paused');
    await service.core.provisioning.lifecycle.suspend(paused.svcnum);
    await refused(await send404(paused.svcnum), 409, 'not_in_service');
    // A suspended sender cannot send either.
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from: paused.svcnum, to: number.svcnum, text: 'x' }),
      }),
      409,
      'not_in_service',
    );
    await service.core.provisioning.lifecycle.reactivate(paused.svcnum);
    expect(
      (
        await post({
          token: owner.api,
          contentType: 'application/json',
          body: JSON.stringify({ from: owner.app.owner.svcnum, to: paused.svcnum, text: 'x' }),
        })
      ).status,
    ).toBe(202);
  });

  it('refuses malformed requests with 400, 413 and 415, always as JSON', async () => {
    const json = (body: unknown) =>
      post({ token: owner.api, contentType: 'application/json', body: JSON.stringify(body) });
    const from = owner.app.owner.svcnum;
    await refused(await post({ token: owner.api, contentType: 'text/plain', body: valid }), 415, 'invalid_request');
    await refused(
      await post({ token: owner.api, contentType: 'application/x-www-form-urlencoded', body: 'to=1&text=x' }),
      415,
      'invalid_request',
    );
    await refused(await post({ token: owner.api, body: valid }), 415, 'invalid_request');
    await refused(
      await post({ token: owner.api, contentType: 'application/json', body: '{"to": ' }),
      400,
      'invalid_request',
    );
    await refused(await post({ token: owner.api, contentType: 'application/json', body: '' }), 400, 'invalid_request');
    for (const body of [[1, 2], null, 'text', 42]) await refused(await json(body), 400, 'invalid_request');
    await refused(await json({ from, to: number.svcnum }), 400, 'invalid_request');
    await refused(await json({ from, to: number.svcnum, text: '' }), 400, 'invalid_request');
    await refused(await json({ from, to: number.svcnum, text: 7 }), 400, 'invalid_request');
    await refused(await json({ from, to: number.svcnum, text: 'x'.repeat(2001) }), 400, 'invalid_request');
    await refused(await json({ from, text: 'no recipient' }), 400, 'invalid_request');
    await refused(await json({ from, to: 'someone', text: 'x' }), 400, 'invalid_request');
    await refused(await json({ from, to: 12345678901, text: 'x' }), 400, 'invalid_request');
    await refused(
      await post({
        token: owner.api,
        contentType: 'application/json',
        body: JSON.stringify({ from, to: number.svcnum, text: 'x'.repeat(70_000) }),
      }),
      413,
      'invalid_request',
    );
    // 2000 characters is the limit, counted in characters (code points), not UTF-16 units.
    expect((await json({ from, to: number.svcnum, text: 'x'.repeat(2000) })).status).toBe(202);
    expect((await json({ from, to: number.svcnum, text: '🙂'.repeat(2000) })).status).toBe(202);
    await refused(await json({ from, to: number.svcnum, text: '🙂'.repeat(2001) }), 400, 'invalid_request');
    // Only POST.
    const get = await post({ token: owner.api, method: 'GET' });
    expect(get.status).toBe(405);
    expect(get.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('stores the message durably before answering 202', async () => {
    const reply = await sendMessage(service, owner.api, {
      from: owner.app.owner.svcnum,
      to: number.svcnum,
      text: 'durable',
    });
    expect(reply.status).toBe(202);
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    // Read straight from DynamoDB (strongly consistent), right after the answer.
    const message = (await stored(number.svcnumId)).find((entry) => entry.messageId === reply.json.message_id);
    expect(message).toMatchObject({
      inboxId: number.svcnumId,
      fromSvcnum: owner.app.owner.svcnum,
      senderEntityType: 'business',
      toSvcnum: number.svcnum,
      text: 'durable',
      kind: 'message',
      hops: 0,
      acceptedAt: Date.parse(String(reply.json.accepted_at)),
    });
  });
});
