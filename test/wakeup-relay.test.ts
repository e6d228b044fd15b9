import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readRuntimeConfig } from '../core/adapters/runtime-config';
import { createValkeyWakeups, type WakeupEngine } from '../core/adapters/valkey-wakeups';
import { seqKey } from '../core/adapters/dynamo-messaging-store';
import { wakeupRelayManifest } from '../lambdas/manifest';
import { createWakeupRelay, highestInserted, RELAY_SERVICE_NAME } from '../lambdas/wakeup-relay';
import { buildLambdaBundle } from '../lib/build-lambda';
import { repoRoot } from '../lib/util';
import { WAKEUP_USER_ACCESS_STRING } from '../lib/wakeup-engine';
import { RELAY_SERVICE_NAME as STACK_RELAY_SERVICE_NAME } from '../lib/wakeup-relay';
import { startRedis, type TestRedis } from './support/redis';
import { capturedStdout } from './support/stdout';

// The wake-up relay (lambdas/wakeup-relay.ts) against a real engine (redis-server): DynamoDB Streams
// events shaped as Lambda delivers them from the messages table (KEYS_ONLY), the wake-ups it
// publishes received by SSUBSCRIBE. Then the IAM path against a server whose wake-up user has exactly
// the stack's access string, the engine down, and the bundle as the stack ships it.

const STREAM_ARN =
  'arn:aws:dynamodb:eu-central-1:123456789012:table/svcnum-sandbox-messages/stream/2025-03-04T05:06:07.890';
let sequence = 1_000_000;

/** One stream record as Lambda hands it over (KEYS_ONLY view; a TTL removal is the service's). */
function record(eventName: 'INSERT' | 'MODIFY' | 'REMOVE', inboxId: string, seq: number | string): DynamoDBRecord {
  sequence++;
  return {
    eventID: `${sequence.toString(16)}c4ca4238a0b923820dcc509a`,
    eventName,
    eventVersion: '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: 'eu-central-1',
    dynamodb: {
      ApproximateCreationDateTime: 1_741_064_767,
      Keys: { inboxId: { S: inboxId }, seq: { S: typeof seq === 'number' ? seqKey(seq) : seq } },
      SequenceNumber: `4000000000000${sequence}`,
      SizeBytes: 60,
      StreamViewType: 'KEYS_ONLY',
    },
    eventSourceARN: STREAM_ARN,
    ...(eventName === 'REMOVE' ? { userIdentity: { type: 'Service', principalId: 'dynamodb.amazonaws.com' } } : {}),
  };
}
const streamEvent = (...records: DynamoDBRecord[]): DynamoDBStreamEvent => ({ Records: records });

const silent = { logLevel: 'SILENT' as const };
const metrics = { logLevel: 'INFO' as const, metricsNamespace: 'svcnum', serviceName: RELAY_SERVICE_NAME };

/**
 * An observer on the engine: SSUBSCRIBEs, and tells what arrived up to a marker it publishes itself (ordering on one
 * connection).
 */
async function observe(url: string, channels: string[], options: { username?: string; password?: string } = {}) {
  const subscriber = new Redis(url, { ...options, lazyConnect: true });
  const publisher = new Redis(url, { ...options, lazyConnect: true });
  await Promise.all([subscriber.connect(), publisher.connect()]);
  const received: Array<[string, string]> = [];
  subscriber.on('smessage', (channel: string, message: string) => received.push([channel, message]));
  await subscriber.ssubscribe(...channels);
  let markers = 0;
  return {
    /** Every message before a marker sent now (the channels' shards are one connection here). */
    async drain(): Promise<Array<[string, string]>> {
      const marker = `marker ${++markers}`;
      await publisher.spublish(channels[0]!, marker);
      await vi.waitFor(() => expect(received.some(([, message]) => message === marker)).toBe(true), {
        timeout: 5_000,
        interval: 10,
      });
      return received.splice(0).filter(([, message]) => !message.startsWith('marker '));
    },
    close: () => Promise.all([subscriber.quit(), publisher.quit()]),
  };
}

describe('which wake-ups a batch makes', () => {
  it("each inbox's highest inserted sequence once; removals (TTL), changes and keys that are not ours ignored", () => {
    expect(
      highestInserted(
        streamEvent(
          record('INSERT', 'inbox-a', 3),
          record('INSERT', 'inbox-a', 5),
          record('INSERT', 'inbox-a', 4),
          record('INSERT', 'inbox-b', 1),
          record('REMOVE', 'inbox-b', 9),
          record('MODIFY', 'inbox-c', 7),
          record('REMOVE', 'inbox-d', 2),
          record('INSERT', 'inbox-e', 'not-a-seq'),
          record('INSERT', '', 2),
          { ...record('INSERT', 'inbox-f', 1), dynamodb: { Keys: { svcnumId: { S: 'inbox-f' } } } },
        ).Records,
      ),
    ).toStrictEqual(
      new Map([
        ['inbox-a', 5],
        ['inbox-b', 1],
      ]),
    );
    expect(STACK_RELAY_SERVICE_NAME).toBe(RELAY_SERVICE_NAME);
  });
});

describe('the relay on a real engine', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis?.stop());

  it('publishes inbox:{id} with the highest sequence per inbox, once per batch, and nothing for removals', async () => {
    const observer = await observe(redis.url, ['inbox:{inbox-a}', 'inbox:{inbox-b}', 'inbox:{inbox-c}']);
    const relay = createWakeupRelay(redis.engine, { telemetry: silent });
    try {
      await relay.handler(
        streamEvent(
          record('INSERT', 'inbox-a', 41),
          record('INSERT', 'inbox-b', 7),
          record('INSERT', 'inbox-a', 42),
          record('REMOVE', 'inbox-c', 3),
          record('MODIFY', 'inbox-c', 4),
        ),
      );
      const first = await observer.drain();
      const publisherId = first[0]![1].split(' ')[1];
      expect(publisherId).toMatch(/^[0-9a-f-]{36}$/);
      expect(first.sort()).toStrictEqual([
        ['inbox:{inbox-a}', `42 ${publisherId}`],
        ['inbox:{inbox-b}', `7 ${publisherId}`],
      ]);
      // A batch of removals only (messages expiring) publishes nothing.
      await relay.handler(streamEvent(record('REMOVE', 'inbox-a', 41), record('REMOVE', 'inbox-b', 7)));
      expect(await observer.drain()).toStrictEqual([]);
      // The next batch: the next highest, the same publisher (the connection is kept across invocations).
      await relay.handler(streamEvent(record('INSERT', 'inbox-c', 1)));
      expect(await observer.drain()).toStrictEqual([['inbox:{inbox-c}', `1 ${publisherId}`]]);
    } finally {
      relay.close();
      await observer.close();
    }
  });

  it("wakes a process's stream listener through the adapter's subscription (the relay's id is never the listener's own)", async () => {
    const subscriber = createValkeyWakeups(redis.engine, { telemetry: silent });
    const relay = createWakeupRelay(redis.engine, { telemetry: silent });
    const woken: Array<[string, number]> = [];
    subscriber.listen({ wakeup: (inboxId, seq) => woken.push([inboxId, seq]) });
    try {
      subscriber.subscribe(['inbox-z']);
      await vi.waitFor(() => expect(subscriber.ready()).toBe(true), { timeout: 5_000, interval: 10 });
      await relay.handler(streamEvent(record('INSERT', 'inbox-z', 12), record('INSERT', 'inbox-z', 13)));
      await vi.waitFor(() => expect(woken).toStrictEqual([['inbox-z', 13]]), { timeout: 5_000, interval: 10 });
    } finally {
      relay.close();
      await subscriber.close();
    }
  });

  it('with the engine down: the batch still succeeds; the failures are one log line (no inbox id) and one WakeupPublishFailures count', async () => {
    const down = await startRedis();
    const engine = down.engine;
    const relay = createWakeupRelay(engine, { telemetry: metrics });
    try {
      // Connected first (its "publishing" line kept out of the test output), then the engine goes.
      await capturedStdout(() => relay.handler(streamEvent(record('INSERT', 'inbox-up', 1))));
      await down.kill();
      const output = await capturedStdout(() =>
        relay.handler(
          streamEvent(
            record('INSERT', 'secret-inbox-1', 5),
            record('INSERT', 'secret-inbox-2', 6),
            record('INSERT', 'secret-inbox-1', 7),
          ),
        ),
      );
      const lines = output
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      const warnings = lines.filter((line) => line.level === 'WARN');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({
        message: 'inbox wake-ups not published (streams see these messages at their next poll)',
        service: RELAY_SERVICE_NAME,
        engine: engine.address,
        failures: 2,
        inboxes: 2,
        records: 3,
      });
      expect(warnings[0]!.firstSequenceNumber).toMatch(/^4000000000000\d+$/);
      expect(output).not.toContain('secret-inbox');
      const counted = lines.filter((line) => '_aws' in line);
      expect(counted).toHaveLength(1);
      expect(counted[0]).toMatchObject({
        _aws: {
          CloudWatchMetrics: [
            {
              Namespace: 'svcnum',
              Dimensions: [['service']],
              Metrics: [{ Name: 'WakeupPublishFailures', Unit: 'Count' }],
            },
          ],
        },
        service: RELAY_SERVICE_NAME,
        WakeupPublishFailures: 2,
      });
    } finally {
      relay.close();
      await down.stop();
    }
  });
});

describe("IAM authentication, against the stack's access string", () => {
  const USER = 'svcnum-wakeups-test';
  let redis: TestRedis;
  beforeAll(async () => {
    // The default user off (as the stack's user group has it); the wake-up user with exactly the
    // stack's rules, accepting any password (ElastiCache checks the token, redis-server cannot);
    // an observer allowed everything.
    redis = await startRedis({
      extra: [
        '--user',
        'default',
        'off',
        '--user',
        USER,
        'nopass',
        ...WAKEUP_USER_ACCESS_STRING.split(' '),
        '--user',
        'observer',
        'on',
        '>observer-password',
        '~*',
        '&*',
        '+@all',
      ],
    });
  });
  afterAll(() => redis?.stop());

  it('the relay and a subscriber sign in as the wake-up user with a token signed from the credentials, and the rules suffice', async () => {
    const engine: WakeupEngine = {
      ...readRuntimeConfig('local', { VALKEY_URL: redis.url }).service.wakeupEngine!,
      username: USER,
      iam: { replicationGroupId: 'svcnum-test-wakeups', userId: USER, region: 'eu-central-1' },
    };
    let credentialReads = 0;
    const credentials = () => {
      credentialReads++;
      return Promise.resolve({
        accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
        secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
      });
    };
    const subscriber = createValkeyWakeups(engine, { telemetry: silent, credentials });
    const relay = createWakeupRelay(engine, { telemetry: silent, credentials });
    const observer = new Redis(redis.url, { username: 'observer', password: 'observer-password' });
    const woken: Array<[string, number]> = [];
    subscriber.listen({ wakeup: (inboxId, seq) => woken.push([inboxId, seq]) });
    try {
      subscriber.subscribe(['inbox-iam']);
      subscriber.subscribeOwners(['owner-iam']);
      await vi.waitFor(() => expect(subscriber.ready()).toBe(true), { timeout: 5_000, interval: 10 });
      await relay.handler(streamEvent(record('INSERT', 'inbox-iam', 3)));
      await vi.waitFor(() => expect(woken).toStrictEqual([['inbox-iam', 3]]), { timeout: 5_000, interval: 10 });
      expect(credentialReads).toBeGreaterThanOrEqual(2);
      // Signed in as the wake-up user (the subscriber's connection and the relay's), by name.
      const clients = ((await observer.client('LIST')) as string).split('\n').filter(Boolean);
      expect(
        clients
          .filter((line) => line.includes(`user=${USER}`))
          .map((line) => /name=(\S*)/.exec(line)![1])
          .sort(),
      ).toStrictEqual(['svcnum-wakeups-publisher', 'svcnum-wakeups-subscriber']);
      // The relay's wake-up recorded the inbox's head too, which a subscribing process reads (on its publisher
      // connection).
      expect(await subscriber.heads!(['inbox-iam', 'inbox-none'])).toStrictEqual(new Map([['inbox-iam', 3]]));
      // The rules give no other key and no other command.
      const asUser = new Redis(redis.url, { username: USER, password: 'any token', lazyConnect: true });
      await asUser.connect();
      await expect(asUser.get('anything')).rejects.toThrow(/NOPERM/);
      await expect(asUser.set('head-less', '1')).rejects.toThrow(/NOPERM/);
      await expect(asUser.eval("return redis.call('GET', KEYS[1])", 1, 'anything')).rejects.toThrow(/NOPERM/);
      await expect(asUser.spublish('elsewhere:{x}', '1')).rejects.toThrow(/NOPERM/);
      asUser.disconnect();
    } finally {
      relay.close();
      await subscriber.close();
      observer.disconnect();
    }
  });
});

describe("IAM connections renew themselves before ElastiCache's 12-hour limit (shortened here)", () => {
  const USER = 'svcnum-wakeups-test';
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis({
      extra: [
        '--user',
        'default',
        'off',
        '--user',
        USER,
        'nopass',
        ...WAKEUP_USER_ACCESS_STRING.split(' '),
        '--user',
        'observer',
        'on',
        '>observer-password',
        '~*',
        '&*',
        '+@all',
      ],
    });
  });
  afterAll(() => redis?.stop());

  it('the publisher signs in again on its connection; the subscriber reconnects, subscribes again and is ready (lost, then ready, heard)', async () => {
    const engine: WakeupEngine = {
      ...readRuntimeConfig('local', { VALKEY_URL: redis.url }).service.wakeupEngine!,
      username: USER,
      iam: { replicationGroupId: 'svcnum-test-wakeups', userId: USER, region: 'eu-central-1' },
    };
    const credentials = () =>
      Promise.resolve({
        accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
        secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
      });
    const wakeups = createValkeyWakeups(engine, { telemetry: silent, credentials, iamRenewMs: 400 });
    const other = createWakeupRelay(engine, { telemetry: silent, credentials });
    const observer = new Redis(redis.url, { username: 'observer', password: 'observer-password' });
    const heard: string[] = [];
    const woken: Array<[string, number]> = [];
    wakeups.listen({
      wakeup: (inboxId, seq) => woken.push([inboxId, seq]),
      ready: () => heard.push('ready'),
      lost: () => heard.push('lost'),
    });
    const clients = async () =>
      Object.fromEntries(
        ((await observer.client('LIST')) as string)
          .split('\n')
          .filter((line) => line.includes(`user=${USER}`))
          .map((line) => [
            /name=(\S*)/.exec(line)![1]!,
            { id: /(?:^| )id=(\d+)/.exec(line)![1]!, cmd: /cmd=(\S*)/.exec(line)![1]! },
          ]),
      );
    try {
      wakeups.subscribe(['inbox-renewed']);
      wakeups.publish('inbox-other', 1);
      await vi.waitFor(() => expect(wakeups.ready()).toBe(true), { timeout: 5_000, interval: 10 });
      // The publish goes out behind the call: its connection is open once it is listed.
      const before = await vi.waitFor(
        async () => {
          const listed = await clients();
          expect(Object.keys(listed).sort()).toStrictEqual(['svcnum-wakeups-publisher', 'svcnum-wakeups-subscriber']);
          return listed;
        },
        { timeout: 5_000, interval: 10 },
      );
      // The publisher's own connection authenticates again (AUTH is its last command); the subscriber's is a new one.
      await vi.waitFor(
        async () => {
          const now = await clients();
          expect(now['svcnum-wakeups-publisher']).toStrictEqual({
            id: before['svcnum-wakeups-publisher']!.id,
            cmd: 'auth',
          });
          expect(now['svcnum-wakeups-subscriber']?.id).not.toBe(before['svcnum-wakeups-subscriber']!.id);
        },
        { timeout: 5_000, interval: 50 },
      );
      await vi.waitFor(() => expect(heard.slice(0, 3)).toStrictEqual(['ready', 'lost', 'ready']), {
        timeout: 5_000,
        interval: 10,
      });
      // Still woken by another process once ready again.
      await vi.waitFor(
        async () => {
          expect(wakeups.ready()).toBe(true);
          await other.handler(streamEvent(record('INSERT', 'inbox-renewed', 8)));
          expect(woken).toContainEqual(['inbox-renewed', 8]);
        },
        { timeout: 5_000, interval: 50 },
      );
    } finally {
      other.close();
      await wakeups.close();
      observer.disconnect();
    }
  });
});

describe('the relay bundle, as the stack builds it', () => {
  const root = mkdtempSync(join(tmpdir(), 'svcnum-relay-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('is at most 300 KB, holds the engine client but no DynamoDB or KMS client, and loads under plain Node', async () => {
    const built = await buildLambdaBundle(join(repoRoot, wakeupRelayManifest.entry), root);
    const output = Object.values(built.metafile.outputs)[0]!;
    expect(output.bytes, `${output.bytes} bytes`).toBeLessThanOrEqual(300_000);
    const held = (fragment: string) =>
      Object.entries(output.inputs).some(([input, { bytesInOutput }]) => input.includes(fragment) && bytesInOutput > 0);
    expect(held('node_modules/ioredis/')).toBe(true);
    for (const client of [
      '@aws-sdk/client-dynamodb',
      '@aws-sdk/client-kms',
      '@aws-sdk/lib-dynamodb',
      'core/registry.ts',
    ])
      expect(held(client), client).toBe(false);
    const loaded = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(built.outfile)}); console.log(typeof m.handler);`,
      ],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'SILENT' },
      },
    );
    expect(loaded.trim()).toBe('function');
  }, 60_000);
});
