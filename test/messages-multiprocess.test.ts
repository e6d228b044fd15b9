import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { POLL_INTERVAL_MS } from '../core/messaging/hub-polling';
import { EntityType } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import { MessageKind, type ProgrammableNumber } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { seedPool, type ProvisioningApp } from './support/grpc';
import { InboxFaults } from './support/message-faults';
import {
  messagingAccount,
  openStream,
  provisionNumber,
  type MessagingAccount,
  type OpenStream,
} from './support/messages';
import { startSecondProcess, type SecondProcess } from './support/second-service';
import { startTestService, type TestService } from './support/service';

// Two service processes sharing one embedded DynamoDB, as several gRPC tasks and Lambdas share
// one table in AWS: process 1 is the test service (HTTP + gRPC, in this process), process 2 a
// child started from test/support/second-process.ts (its own core, gRPC server and message
// ingress). Nothing but DynamoDB connects them (no pub/sub engine here; test/messages-wakeups.test.ts
// has one): a stream learns of messages accepted elsewhere by
// polling its inboxes' counters every POLL_INTERVAL_MS.

/**
 * Neither process re-lists its streams' inboxes within the test (an hour): a message from the other
 * process can reach a stream only through the counter poll, so its arrival proves that path without
 * timing it. A wait this long is only a guard against a hang on a loaded machine.
 */
const RELIST_MS = 3_600_000;
const CROSS_PROCESS_DEADLINE_MS = 30_000;

const inbox = new InboxFaults();
let service: TestService;
let second: SecondProcess;
const apps: ProvisioningApp[] = [];
const streams: OpenStream[] = [];

beforeAll(async () => {
  service = await startTestService({ wrapStore: inbox.wrap, messagePolling: { relistMs: RELIST_MS } });
  await seedPool(service, '84', 80);
  second = await startSecondProcess(service, { MESSAGE_RELIST_MS: String(RELIST_MS) });
});
afterEach(() => {
  for (const stream of streams.splice(0)) stream.cancel();
  inbox.reset();
});
afterAll(async () => {
  await second?.stop();
  for (const app of apps) app.close();
  await service?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Account = MessagingAccount;
const account = () => messagingAccount(service, apps);

const provision = provisionNumber;

type Process = 1 | 2;

/** A stream of the account on process 1 or 2 (cancelled after the test). */
function streamOn(process: Process, owner: Account, cursor = ''): OpenStream {
  const opened = openStream(
    { numbers: process === 1 ? owner.app.numbers : second.numbers, token: owner.app.token },
    cursor,
  );
  streams.push(opened);
  return opened;
}

/** POST /api/messages on process 1 or 2; expects 202. */
async function sendVia(process: Process, token: string, body: Record<string, unknown>) {
  const base = process === 1 ? service.issuer : `http://127.0.0.1:${second.httpPort}`;
  const response = await fetch(`${base}/api/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as { message_id: string };
  expect(response.status, JSON.stringify(json)).toBe(202);
  return json;
}

/** Sends one message at a time and waits for it on `opened`, each at another point of the poll cycle. */
async function oneByOne(opened: OpenStream, via: Process, owner: Account, to: ProgrammableNumber, count: number) {
  for (let index = 0; index < count; index++) {
    const before = opened.messages.length;
    const sent = await sendVia(via, owner.api, {
      from: owner.app.owner.svcnum,
      to: to.svcnum,
      text: `p${via} #${index}`,
    });
    const [received] = (await opened.waitFor(before + 1, CROSS_PROCESS_DEADLINE_MS)).slice(before);
    expect(received!.messageId).toBe(sent.message_id);
    await sleep(Math.random() * POLL_INTERVAL_MS); // land at different points of the poll cycle
  }
}

describe('two processes sharing one DynamoDB', () => {
  it('the second process is a separate process with its own gRPC port', async () => {
    expect(second.child.pid).not.toBe(process.pid);
    expect(second.grpcPort).not.toBe(service.grpcPort);
  });

  it('a message accepted by process 1 reaches a stream open on process 2', async () => {
    const owner = await account();
    const number = await provision(owner, 'Inbox on 2');
    const opened = streamOn(2, owner);
    await oneByOne(opened, 1, owner, number, 5);
    expect(opened.messages.map((message) => message.text)).toEqual(['p1 #0', 'p1 #1', 'p1 #2', 'p1 #3', 'p1 #4']);
    expect(opened.messages[0]).toMatchObject({
      toSvcnumId: number.svcnumId,
      fromSvcnum: owner.app.owner.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_BUSINESS,
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
    });
  });

  it('a message accepted by process 2 reaches a stream open on process 1', async () => {
    const owner = await account();
    const number = await provision(owner, 'Inbox on 1');
    const opened = streamOn(1, owner);
    await oneByOne(opened, 2, owner, number, 5);
    expect(opened.messages.map((message) => message.text)).toEqual(['p2 #0', 'p2 #1', 'p2 #2', 'p2 #3', 'p2 #4']);
  });

  it('streams on both processes receive every message, whichever process accepted it, in the same order', async () => {
    const owner = await account();
    const [first, other] = [await provision(owner, 'N1'), await provision(owner, 'N2')];
    const [on1, on2] = [streamOn(1, owner), streamOn(2, owner)];
    // Concurrent senders through both processes, to both numbers.
    await Promise.all(
      ([1, 2] as const).map(async (via) => {
        for (let index = 0; index < 10; index++) {
          await sendVia(via, owner.api, {
            from: owner.app.owner.svcnum,
            to: (index % 2 ? first : other)!.svcnum,
            text: `via ${via} #${index}`,
          });
        }
      }),
    );
    await Promise.all([on1.waitFor(20), on2.waitFor(20)]);
    await sleep(2 * POLL_INTERVAL_MS + 200);
    expect(on1.messages).toHaveLength(20);
    expect(on2.messages).toHaveLength(20);
    for (const number of [first!, other!]) {
      const order = (opened: OpenStream) =>
        opened.messages.filter((message) => message.toSvcnumId === number.svcnumId).map((message) => message.messageId);
      const stored = (await service.core.store.readInbox(number.svcnumId, 0, 100)).map((entry) =>
        'messageId' in entry ? entry.messageId : 'tombstone',
      );
      expect(order(on1)).toEqual(stored);
      expect(order(on2)).toEqual(stored);
    }
  });

  it("an auto-reply produced by process 2 reaches the sender's stream on process 1", async () => {
    const [ownerA, ownerB] = await Promise.all([account(), account()]);
    const a = await provision(ownerA, 'A', { autoReply: 'A answers' });
    const b = await provision(ownerB, 'B');
    const [streamA, streamB] = [streamOn(1, ownerA), streamOn(1, ownerB)];
    await sendVia(2, ownerB.api, { from: b.svcnum, to: a.svcnum, text: 'question' });
    const [reply] = await streamB.waitFor(1, CROSS_PROCESS_DEADLINE_MS);
    expect(reply).toMatchObject({
      kind: MessageKind.MESSAGE_KIND_AUTO_REPLY,
      fromSvcnum: a.svcnum,
      toSvcnumId: b.svcnumId,
      text: 'A answers',
    });
    expect((await streamA.waitFor(1, CROSS_PROCESS_DEADLINE_MS))[0]).toMatchObject({
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
      fromSvcnum: b.svcnum,
      text: 'question',
    });
  });

  it('a message written after the other process saw its sequence counted is still delivered there', async () => {
    const owner = await account();
    const number = await provision(owner, 'Slow write');
    const from = owner.app.owner.svcnum;
    const on2 = streamOn(2, owner);
    await sendVia(1, owner.api, { from, to: number.svcnum, text: 'first' });
    await on2.waitFor(1, CROSS_PROCESS_DEADLINE_MS);
    // Process 1 takes the next sequence and stalls before writing it; process 2 polls the
    // counter meanwhile, sees it move and reads nothing new. Then the write lands: the counter
    // does not move again, and process 2 gets no notification.
    const held = inbox.holdAppend('slow write');
    const sending = sendVia(1, owner.api, { from, to: number.svcnum, text: 'slow write' });
    await held.reached;
    await sleep(3 * POLL_INTERVAL_MS);
    held.release();
    await sending;
    await on2.waitFor(2, CROSS_PROCESS_DEADLINE_MS);
    expect(on2.messages.map((message) => message.text)).toEqual(['first', 'slow write']);
  });

  // Last: it stops the second process.
  it('a draining process ends its streams with UNAVAILABLE; the client resumes on the other process, nothing lost or repeated', async () => {
    const owner = await account();
    const number = await provision(owner, 'Failover');
    const from = owner.app.owner.svcnum;
    const on2 = streamOn(2, owner);
    for (let index = 0; index < 3; index++) await sendVia(1, owner.api, { from, to: number.svcnum, text: `m${index}` });
    await on2.waitFor(3, CROSS_PROCESS_DEADLINE_MS + 1_000);

    await second.stop(); // SIGTERM: NOT_SERVING, open streams end, the process exits
    // UNAVAILABLE (14), as gRPC servers end calls on shutdown: a retry policy calls again (OK would read as done).
    for (let waited = 0; !on2.error && waited < 5_000; waited += 10) await sleep(10);
    expect(on2.error?.code).toBe(status.UNAVAILABLE);
    for (let index = 3; index < 6; index++) await sendVia(1, owner.api, { from, to: number.svcnum, text: `m${index}` });

    const resumed = streamOn(1, owner, on2.messages.at(-1)!.cursor);
    await resumed.waitFor(3);
    await sleep(500);
    expect([...on2.messages, ...resumed.messages].map((message) => message.text)).toEqual([
      'm0',
      'm1',
      'm2',
      'm3',
      'm4',
      'm5',
    ]);
  });
});
