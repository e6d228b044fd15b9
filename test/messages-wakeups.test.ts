import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createValkeyWakeups, HEAD_TTL_SECONDS, inboxHeadKey } from '../core/adapters/valkey-wakeups';
import { readRuntimeConfig } from '../core/adapters/runtime-config';
import { newUlid } from '../core/kernel/ids';
import { systemRandom } from '../core/adapters/system';
import { MESSAGE_RETENTION_MS } from '../core/messaging/send';
import { latestWakeups, type InboxWakeups } from '../core/messaging/wakeups';
import type { ProgrammableNumber } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { seedPool, type ProvisioningApp } from './support/grpc';
import { InboxFaults } from './support/message-faults';
import {
  messagingAccount,
  openStream,
  provisionNumber,
  type MessagingAccount,
  type OpenStream,
} from './support/messages';
import { startRedis, type TestRedis } from './support/redis';
import { startSecondProcess, type SecondProcess } from './support/second-service';
import { startTestService, type TestService } from './support/service';
import { capturedStdout } from './support/stdout';

// Inbox wake-ups through a real pub/sub engine (redis-server on a loopback port): process 1 is
// the test service (its store wrapped to log every heads read, i.e. every poll), process 2 a child
// (test/support/second-process.ts) on the same embedded DynamoDB and the same engine. Process 1's
// safety-net poll is an hour, so every heads read it makes here is a catch-up after a subscription
// took effect, or the fast poll while the engine is lost; process 2's is one second. Process 1
// checks the heads the engine recorded every ENGINE_CHECK_MS (no store read).

const ENGINE_CHECK_MS = 300;

const inbox = new InboxFaults();
let redis: TestRedis;
let service: TestService;
let second: SecondProcess;
const apps: ProvisioningApp[] = [];
const streams: OpenStream[] = [];

beforeAll(async () => {
  redis = await startRedis();
  // Streams re-list their owner's numbers only every hour: a new number that joins was announced.
  service = await startTestService({
    wrapStore: inbox.wrap,
    wakeupEngine: redis.engine,
    messagePolling: { safetyPollMs: 3_600_000, relistMs: 3_600_000, engineCheckMs: ENGINE_CHECK_MS },
  });
  await seedPool(service, '85', 40);
  second = await startSecondProcess(service, {
    VALKEY_URL: redis.url,
    MESSAGE_SAFETY_POLL_MS: '1000',
    MESSAGE_RELIST_MS: '3600000',
    LOG_LEVEL: 'INFO',
  });
});
afterEach(() => {
  for (const stream of streams.splice(0)) stream.cancel();
  inbox.reset();
});
afterAll(async () => {
  await second?.stop();
  for (const app of apps) app.close();
  await service?.close();
  await redis?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, what: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

type Account = MessagingAccount;
const account = () => messagingAccount(service, apps);

const provision = (owner: Account, displayName: string, on: 1 | 2 = 1) =>
  provisionNumber(owner, displayName, {}, on === 1 ? owner.app.numbers : second.numbers);

function streamOn(process: 1 | 2, owner: Account, cursor = ''): OpenStream {
  const opened = openStream(
    { numbers: process === 1 ? owner.app.numbers : second.numbers, token: owner.app.token },
    cursor,
  );
  streams.push(opened);
  return opened;
}

/** POST /api/messages on process 1 or 2; expects 202 (a send never fails over the engine). */
async function sendVia(process: 1 | 2, owner: Account, to: ProgrammableNumber, text: string) {
  const base = process === 1 ? service.issuer : `http://127.0.0.1:${second.httpPort}`;
  const response = await fetch(`${base}/api/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${owner.api}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ from: owner.app.owner.svcnum, to: to.svcnum, text }),
  });
  const json = (await response.json()) as { message_id: string };
  expect(response.status, JSON.stringify(json)).toBe(202);
  return json.message_id;
}

const wakeups = () => service.core.messaging.wakeups;
/** Process 1's stream watches `number` with its subscription in force (its catch-up read done). */
async function subscribed(number: ProgrammableNumber) {
  await inbox.headsReadOf(number.svcnumId);
  await until(() => wakeups().ready(), 'the subscriber to be ready');
}
/** Stores a message in `number`'s inbox as a writer would, and tells no one (its wake-up lost); returns its id. */
async function storeUnannounced(
  owner: Account,
  number: ProgrammableNumber,
  text: string,
): Promise<{ seq: number; messageId: string }> {
  const seq = await inbox.raw.nextSeq(number.svcnumId);
  const acceptedAt = Date.now();
  const messageId = newUlid({ now: () => acceptedAt }, systemRandom);
  await inbox.raw.appendMessage(
    {
      inboxId: number.svcnumId,
      seq,
      messageId,
      acceptedAt,
      fromSvcnum: owner.app.owner.svcnum,
      senderEntityType: 'business',
      toSvcnum: number.svcnum,
      text,
      kind: 'message',
      hops: 0,
    },
    acceptedAt + MESSAGE_RETENTION_MS,
  );
  return { seq, messageId };
}
/** The message ids stored in an inbox, in order (what a stream must deliver, exactly). */
const stored = async (inboxId: string) =>
  (await inbox.raw.readInbox(inboxId, 0, 100)).flatMap((entry) => ('messageId' in entry ? [entry.messageId] : []));
/** Process 2's log lines with this message. */
const logged = (message: string) => second.lines.filter((line) => line.includes(`"message":"${message}`));

describe('wake-ups across processes through the engine', () => {
  it('a message accepted by process 2 wakes a stream on process 1 through the engine: no poll', async () => {
    const owner = await account();
    const number = await provision(owner, 'Woken on 1');
    const opened = streamOn(1, owner);
    await subscribed(number);
    const polls = inbox.headsReads.length;
    const sent: string[] = [];
    for (let index = 0; index < 5; index++) {
      sent.push(await sendVia(2, owner, number, `p2 #${index}`));
      await opened.waitFor(index + 1);
    }
    expect(opened.messages.map((message) => message.messageId)).toEqual(sent);
    expect(inbox.headsReads.slice(polls)).toEqual([]);
  });

  it('an idle watched inbox costs no store read between safety-net polls', async () => {
    const owner = await account();
    const number = await provision(owner, 'Idle');
    streamOn(1, owner);
    await subscribed(number);
    await sleep(500); // the stream's first read settles
    const [polls, reads] = [inbox.headsReads.length, inbox.reads.length];
    // Without an engine this is a dozen polls (every 250 ms); with it, none until the safety net.
    await sleep(3_000);
    expect(inbox.headsReads.slice(polls)).toEqual([]);
    expect(inbox.reads.slice(reads).filter((read) => read.inboxId === number.svcnumId)).toEqual([]);
  });

  it('a wake-up that was never published is delivered by the safety-net poll (process 2: MESSAGE_SAFETY_POLL_MS=1000)', async () => {
    const owner = await account();
    const number = await provision(owner, 'Missed on 2');
    const opened = streamOn(2, owner);
    await sendVia(1, owner, number, 'published');
    await opened.waitFor(1);
    // A writer whose publish was lost: the message is stored, nobody is told.
    const { messageId } = await storeUnannounced(owner, number, 'never announced');
    const [, missed] = await opened.waitFor(2, 15_000);
    expect(missed).toMatchObject({ messageId, text: 'never announced' });
  });

  it("a wake-up that reached the engine but not the stream's process arrives by the engine check (process 1: every 300 ms), with no store poll", async () => {
    const owner = await account();
    const number = await provision(owner, 'Missed on 1');
    const opened = streamOn(1, owner);
    await subscribed(number);
    await sendVia(1, owner, number, 'published');
    await opened.waitFor(1);
    const polls = inbox.headsReads.length;
    // Stored, and its head recorded in the engine as a writer's wake-up does, but the publish
    // itself never reached process 1 (process 1's store poll is an hour away).
    const { seq, messageId } = await storeUnannounced(owner, number, 'heard of by the engine only');
    const engine = new Redis(redis.url);
    try {
      await engine.set(inboxHeadKey(number.svcnumId), String(seq), 'EX', HEAD_TTL_SECONDS);
    } finally {
      engine.disconnect();
    }
    const [, missed] = await opened.waitFor(2, 15_000);
    expect(missed).toMatchObject({ messageId, text: 'heard of by the engine only' });
    expect(inbox.headsReads.slice(polls)).toEqual([]);
  });

  it('a number provisioned on process 2 joins a stream open on process 1 at once (owner wake-up through the engine), and the reverse', async () => {
    const owner = await account();
    const old = await provision(owner, 'Old');
    const onOne = streamOn(1, owner);
    const onTwo = streamOn(2, owner);
    await sendVia(1, owner, old, 'before');
    await Promise.all([onOne.waitFor(1), onTwo.waitFor(1)]);
    // Process 1's owner subscription is in force: it was asked for before the inbox's, on one connection.
    await subscribed(old);

    const fromTwo = await provision(owner, 'Provisioned on 2', 2);
    const fromOne = await provision(owner, 'Provisioned on 1', 1);
    const sent = [
      await sendVia(2, owner, fromTwo, 'to the number of 2'),
      await sendVia(1, owner, fromOne, 'to the number of 1'),
    ];
    for (const opened of [onOne, onTwo]) {
      const received = await opened.waitFor(3);
      expect(
        received
          .slice(1)
          .map((message) => message.messageId)
          .sort(),
      ).toEqual([...sent].sort());
    }
  });

  // Stops and restarts the engine: the other tests keep it running.
  it('the engine killed mid-run: sends still succeed, streams poll fast, nothing is lost or repeated; back on the same port, wake-ups resume', async () => {
    const owner = await account();
    const number = await provision(owner, 'Through the outage');
    const opened = streamOn(1, owner);
    await subscribed(number);
    let sent = 0;
    const send = async (via: 1 | 2) => {
      await sendVia(via, owner, number, `m${sent} via ${via}`);
      sent++;
    };
    for (let index = 0; index < 3; index++) await send(2);
    await opened.waitFor(sent);
    const publishing = logged('inbox wake-ups: publishing').length;
    expect(publishing).toBeGreaterThan(0);

    await redis.kill();
    await until(() => !wakeups().ready(), 'process 1 to see the engine lost');
    // Sends keep coming through both processes while the engine is gone.
    for (let index = 0; index < 6; index++) {
      await send(index % 2 === 0 ? 2 : 1);
      await opened.waitFor(sent, 15_000);
    }
    // Process 2 could not publish: said and counted, the sends succeeded all the same.
    expect(logged('inbox wake-ups not published').length).toBeGreaterThan(0);
    // Process 1 found process 2's messages by its fast poll.
    expect(inbox.headsReads.filter((ids) => ids.includes(number.svcnumId)).length).toBeGreaterThan(0);

    await redis.restart();
    await until(() => wakeups().ready(), 'process 1 to subscribe again');
    await until(() => logged('inbox wake-ups: publishing').length > publishing, 'process 2 to publish again');
    await sleep(500); // the catch-up poll that follows the resubscription settles
    const polls = inbox.headsReads.length;
    for (let index = 0; index < 3; index++) {
      await send(2);
      await opened.waitFor(sent);
    }
    expect(inbox.headsReads.slice(polls)).toEqual([]);

    await sleep(500);
    const ids = opened.messages.map((message) => message.messageId);
    expect(ids).toEqual(await stored(number.svcnumId));
    expect(new Set(ids).size).toBe(sent);
    expect(opened.messages.map((message) => message.text)).toEqual(
      Array.from({ length: sent }, (_, index) => expect.stringMatching(new RegExp(`^m${index} via`))),
    );
  });
});

/** The JSON lines written to stdout while `run` runs. */
async function linesOf(run: () => Promise<unknown>): Promise<Array<Record<string, unknown>>> {
  return (await capturedStdout(run))
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('the engine adapter (core/adapters/valkey-wakeups.ts)', () => {
  const telemetry = { logLevel: 'INFO' as const, metricsNamespace: 'svcnum', serviceName: 'svcnum-task' };

  it('a publish that fails (inbox or owner) wakes this process all the same, and is logged and counted without password, inbox or owner', async () => {
    const gone = await startRedis();
    await gone.stop();
    const engine = { ...gone.engine, username: 'svcnum', password: 'never-logged-pw' };
    const woken: Array<[string, number]> = [];
    const gained: Array<[string, readonly string[]]> = [];
    let adapter: InboxWakeups | undefined;
    const lines = await linesOf(async () => {
      adapter = createValkeyWakeups(engine, { telemetry, firstConnectMs: 200 });
      adapter.listen({
        wakeup: (inboxId, seq) => woken.push([inboxId, seq]),
        numbersChanged: (ownerId, inboxIds) => gained.push([ownerId, inboxIds]),
      });
      // Returned at once; close waits for them to end (here: fail).
      adapter.publish('inbox-secret-id', 7);
      adapter.publish('inbox-secret-id', 8);
      adapter.publishNumbersChanged('owner-secret-id', ['inbox-secret-id']);
      await adapter.close();
    });
    expect(woken).toEqual([
      ['inbox-secret-id', 7],
      ['inbox-secret-id', 8],
    ]);
    expect(gained).toEqual([['owner-secret-id', ['inbox-secret-id']]]);
    // The first failure is said at once; the next are summed into the line written at close.
    const warnings = lines.filter((line) => line.level === 'WARN');
    expect(warnings.map((line) => line.failures)).toEqual([1, 2]);
    expect(warnings[0]).toMatchObject({ service: 'svcnum-task', engine: gone.engine.address });
    const counted = lines.filter((line) => 'WakeupPublishFailures' in line);
    expect(counted.map((line) => line.WakeupPublishFailures)).toEqual([1, 2]);
    expect(counted[0]!._aws).toMatchObject({
      CloudWatchMetrics: [
        { Namespace: 'svcnum', Dimensions: [['service']], Metrics: [{ Name: 'WakeupPublishFailures', Unit: 'Count' }] },
      ],
    });
    for (const line of lines)
      expect(JSON.stringify(line)).not.toMatch(/never-logged-pw|inbox-secret-id|owner-secret-id/);
  });

  it('wake-ups of one inbox stored while one is being published are folded into one, of the highest sequence, behind the caller; past the bound of inboxes one is refused', async () => {
    const published: Array<[string, number]> = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const queue = latestWakeups(async (inboxId, seq) => {
      published.push([inboxId, seq]);
      if (published.length === 1) await held;
    }, 2);
    // Every push returns at once, the first publish still held.
    expect([1, 3, 2, 5, 4].map((seq) => queue.push('a', seq))).toEqual([true, true, true, true, true]);
    expect(queue.push('b', 7)).toBe(true);
    // Two inboxes wait: a third is refused (its caller counts it), a waiting one still folds.
    expect(queue.push('c', 1)).toBe(false);
    expect(queue.push('a', 6)).toBe(true);
    expect(queue.pending()).toBe(2);
    let settled = false;
    const settling = queue.settled().then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    release();
    await settling;
    expect(published).toEqual([
      ['a', 1],
      ['b', 7],
      ['a', 6],
    ]);
    expect(queue.pending()).toBe(0);
    // Nothing waits: the next one goes at once, alone.
    queue.push('a', 8);
    await queue.settled();
    expect(published.at(-1)).toEqual(['a', 8]);
  });

  it('signs in with the user and password of VALKEY_URL (an ACL user); a wrong password never becomes ready', async () => {
    const secured = await startRedis({
      extra: ['--user', 'default', 'off', '--user', 'svcnum', 'on', '>s3cret-pw', '~*', '&*', '+@all'],
    });
    const engine = (url: string) => readRuntimeConfig('local', { VALKEY_URL: url }).service.wakeupEngine!;
    const good = engine(`redis://svcnum:s3cret-pw@127.0.0.1:${secured.port}`);
    const subscriber = createValkeyWakeups(good, { telemetry: { logLevel: 'SILENT' } });
    const publisher = createValkeyWakeups(good, { telemetry: { logLevel: 'SILENT' } });
    const wrong = createValkeyWakeups(engine(`redis://svcnum:wrong@127.0.0.1:${secured.port}`), {
      telemetry: { logLevel: 'SILENT' },
    });
    try {
      const woken: Array<[string, number]> = [];
      subscriber.listen({ wakeup: (inboxId, seq) => woken.push([inboxId, seq]) });
      subscriber.subscribe(['inbox-a']);
      await until(() => subscriber.ready(), 'the subscriber to sign in');
      await publisher.publish('inbox-a', 3);
      await until(() => woken.length > 0, 'the wake-up');
      expect(woken).toEqual([['inbox-a', 3]]);

      wrong.subscribe(['inbox-a']);
      await wrong.publish('inbox-a', 4);
      await sleep(300);
      expect(wrong.ready()).toBe(false);
      expect(woken).toEqual([['inbox-a', 3]]);
    } finally {
      await Promise.all([subscriber.close(), publisher.close(), wrong.close()]);
      await secured.stop();
    }
  });
});
