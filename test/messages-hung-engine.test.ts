import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Redis } from 'ioredis';
import { createValkeyWakeups, inboxChannel, inboxHeadKey, ownerChannel } from '../core/adapters/valkey-wakeups';
import { seedPool, type ProvisioningApp } from './support/grpc';
import {
  messagingAccount,
  openStream,
  provisionNumber,
  sendMessage,
  type MessagingAccount,
  type OpenStream,
} from './support/messages';
import { startRedis, type TestRedis } from './support/redis';
import { startSecondProcess, type SecondProcess } from './support/second-service';
import { startTestService, type TestService } from './support/service';
import { stdoutCapture } from './support/stdout';

// A hung engine: a real redis-server stopped with SIGSTOP, its connections open (the kernel even
// accepts new ones), nothing answered until SIGCONT. Process 1 is the test service, its engine
// adapter's command timeout two minutes: a command written to the stopped engine stays unanswered
// for the whole stop, so a wake-up that arrives after SIGCONT was still in flight when the call
// that stored it answered. Process 2 (a child, the default one-second command timeout) holds the
// streams: it re-lists its owners' numbers every second while the engine is lost, every ten hours
// while it is ready (10 × its one-hour safety-net poll).

const HUNG_FOR_THE_TEST_MS = 120_000;

let redis: TestRedis;
let service: TestService;
let second: SecondProcess;
const apps: ProvisioningApp[] = [];
const streams: OpenStream[] = [];
const engines: Redis[] = [];

beforeAll(async () => {
  redis = await startRedis();
  service = await startTestService({
    wakeupEngine: redis.engine,
    wakeupOptions: { commandTimeoutMs: HUNG_FOR_THE_TEST_MS },
  });
  await seedPool(service, '86', 20);
  second = await startSecondProcess(service, {
    VALKEY_URL: redis.url,
    MESSAGE_SAFETY_POLL_MS: '3600000',
    MESSAGE_RELIST_MS: '1000',
    LOG_LEVEL: 'INFO',
  });
});
afterEach(() => {
  redis.resume();
  for (const stream of streams.splice(0)) stream.cancel();
  for (const engine of engines.splice(0)) engine.disconnect();
});
afterAll(async () => {
  await second?.stop();
  for (const app of apps) app.close();
  await service?.close();
  await redis?.stop();
});

const until = (condition: () => boolean | Promise<boolean>, what: string, timeout = 20_000) =>
  vi.waitFor(
    async () => {
      if (!(await condition())) throw new Error(`still waiting for ${what}`);
    },
    { timeout, interval: 10 },
  );

/** A client of the engine of our own (closed after the test). */
function engineClient(): Redis {
  const client = new Redis(redis.url);
  engines.push(client);
  return client;
}

/** Process 2's log lines with this message. */
const logged = (message: string) => second.lines.filter((line) => line.includes(`"message":"${message}`));

async function sent(owner: MessagingAccount, to: string, text: string) {
  const answer = await sendMessage(service, owner.api, { from: owner.app.owner.svcnum, to, text });
  expect(answer.status, JSON.stringify(answer.json)).toBe(202);
}

describe('a hung engine costs nothing', () => {
  it('sends and ProvisionNumber answer while the engine is stopped; their wake-ups go out behind the answer, once it answers again', async () => {
    const owner = await messagingAccount(service, apps);
    const heard: Array<[string, string]> = [];
    const listener = engineClient();
    listener.on('smessage', (channel: string, message: string) => heard.push([channel, message]));
    await listener.ssubscribe(ownerChannel(owner.app.owner.svcnumId));
    // Healthy first: process 1's publisher is connected (its wake-ups reach the engine).
    const number = await provisionNumber(owner, 'Before the stop');
    await listener.ssubscribe(inboxChannel(number.svcnumId));
    await until(
      () => heard.some(([channel]) => channel === ownerChannel(owner.app.owner.svcnumId)),
      'the owner wake-up of the healthy engine',
    );
    await sent(owner, number.svcnum, 'healthy');
    await until(
      () => heard.some(([channel, message]) => channel === inboxChannel(number.svcnumId) && message.startsWith('1 ')),
      'the inbox wake-up of the healthy engine',
    );
    const before = heard.length;

    redis.pause();
    // Both answer although the engine answers nothing (and would not for two minutes).
    await sent(owner, number.svcnum, 'while the engine is stopped');
    const added = await provisionNumber(owner, 'While the engine is stopped');
    expect(heard.length).toBe(before);
    redis.resume();

    // Their wake-ups were in flight all along: the engine handles them now, after the answers.
    await until(() => heard.length >= before + 2, 'the wake-ups written while the engine was stopped');
    expect(heard.slice(before).sort()).toEqual(
      [
        [inboxChannel(number.svcnumId), expect.stringMatching(/^2 /)],
        [ownerChannel(owner.app.owner.svcnumId), expect.stringMatching(new RegExp(` ${added.svcnumId}$`))],
      ].sort(),
    );
  });

  it('while the engine is lost, a stream that slept on the ready interval re-lists at the lost interval: a number provisioned elsewhere joins it', async () => {
    const owner = await messagingAccount(service, apps);
    const old = await provisionNumber(owner, 'Followed');
    const subscribedBefore = logged('inbox wake-ups: subscribed').length;
    const lostBefore = logged('inbox wake-ups: engine lost').length;
    const opened = openStream({ numbers: second.numbers, token: owner.app.token });
    streams.push(opened);
    await until(() => logged('inbox wake-ups: subscribed').length > subscribedBefore, 'process 2 to subscribe');
    // Woken through the engine: the stream has listed with the engine ready and sleeps on that interval (ten hours).
    await sent(owner, old.svcnum, 'engine ready');
    await opened.waitFor(1);

    redis.pause();
    // Process 2 finds the engine hung (a command or ping unanswered within a second) and polls.
    await until(() => logged('inbox wake-ups: engine lost').length > lostBefore, 'process 2 to find the engine lost');
    // Provisioned on process 1: its owner wake-up cannot go through the stopped engine.
    const added = await provisionNumber(owner, 'Provisioned during the outage');
    await sent(owner, added.svcnum, 'to the new number');
    const [, received] = await opened.waitFor(2, 20_000);
    expect(received).toMatchObject({ toSvcnumId: added.svcnumId, text: 'to the new number' });
  });
});

describe('the engine adapter with a hung engine (core/adapters/valkey-wakeups.ts)', () => {
  it('a publish that times out drops the connection; publishes until a new one is ready fail at once, counted, and are never sent behind it', async () => {
    const engine = engineClient();
    const capture = stdoutCapture();
    const adapter = createValkeyWakeups(redis.engine, {
      telemetry: { logLevel: 'INFO', metricsNamespace: 'svcnum', serviceName: 'svcnum-task' },
      commandTimeoutMs: 300,
    });
    const lines = () =>
      capture
        .written()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    try {
      adapter.publish('hung-a', 1);
      await until(async () => (await engine.get(inboxHeadKey('hung-a'))) === '1', 'the healthy publish');

      redis.pause();
      adapter.publish('hung-b', 1);
      await until(
        () =>
          lines().some(
            (line) =>
              line.message ===
              'inbox wake-ups: the engine does not answer, publishing stops until a new connection is ready',
          ),
        'the timed-out publish',
      );
      adapter.publish('hung-c', 1);
      adapter.publish('hung-d', 1);
      adapter.publishNumbersChanged('hung-owner', ['hung-e']);
      // Close waits for what is pending: here, failures (the engine is stopped throughout).
      await adapter.close();
    } finally {
      capture.restore();
      redis.resume();
    }
    const failures = lines()
      .filter((line) => 'WakeupPublishFailures' in line)
      .map((line) => line.WakeupPublishFailures);
    expect(failures).toEqual([1, 3]);
    // The timed-out one was written before the drop (the engine handles it on SIGCONT); those after never were.
    await until(
      async () => (await engine.get(inboxHeadKey('hung-b'))) === '1',
      'the engine to handle what was written before it stopped',
    );
    expect(await engine.mget(inboxHeadKey('hung-c'), inboxHeadKey('hung-d'))).toEqual([null, null]);
  });
});
