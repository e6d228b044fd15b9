import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StoredMessage } from '../core/messaging/store';
import { StoreFaults } from './support/faults';
import { seedPool, type ProvisioningApp } from './support/grpc';
import { messagingAccount, provisionNumber, sendMessage } from './support/messages';
import type { TestService } from './support/service';

// A derived message (auto-reply, forward) that cannot be stored does not fail the send it derives
// from, and is no longer swallowed: the local runner, with the metrics namespace a deployed
// process has, writes one log line (ids, never the text) and one DerivedMessageFailures EMF count
// by kind. The failure is injected into the derived message's own write (the store's appendMessage).

const faults = new StoreFaults();
let service: TestService;
const apps: ProvisioningApp[] = [];
const lines: string[] = [];

beforeAll(async () => {
  vi.stubEnv('METRICS_NAMESPACE', 'svcnum');
  vi.stubEnv('LOG_LEVEL', 'INFO');
  // Telemetry settings are read once per process: a fresh module graph reads them with the above.
  vi.resetModules();
  const { startTestService } = await import('./support/service');
  service = await startTestService({ wrapStore: faults.wrap });
  await seedPool(service, '84', 40);
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return true;
  });
});
afterEach(() => faults.reset());
afterAll(async () => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  for (const app of apps) app.close();
  await service?.close();
});

const account = () => messagingAccount(service, apps);

const provision = provisionNumber;

const stored = async (inboxId: string) => (await service.core.store.readInbox(inboxId, 0, 100)) as StoredMessage[];

/** The JSON lines written from here on: the derived-failure log lines and the DerivedMessageFailures counts. */
function observe() {
  const from = lines.length;
  const written = () =>
    lines.slice(from).flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  return {
    logged: () => written().filter((line) => line.message === 'derived message failed'),
    counted: () => written().filter((line) => 'DerivedMessageFailures' in line),
    text: () => lines.slice(from).join('\n'),
  };
}

const countLine = (kind: string) => ({
  service: 'svcnum',
  kind,
  DerivedMessageFailures: 1,
  _aws: {
    Timestamp: expect.any(Number),
    CloudWatchMetrics: [
      {
        Namespace: 'svcnum',
        Dimensions: [['service', 'kind']],
        Metrics: [{ Name: 'DerivedMessageFailures', Unit: 'Count' }],
      },
    ],
  },
});

describe('a derived message that fails', () => {
  it('forward: the send succeeds, the failure is logged once with ids only and counted by kind', async () => {
    const [owner, sender] = await Promise.all([account(), account()]);
    const target = await provision(owner, 'Target');
    const forwarder = await provision(owner, 'Forwarder', { forwardToSvcnumId: target.svcnumId });
    const seen = observe();
    // The 1st append is the original, the 2nd the forwarded copy.
    faults.failOn('appendMessage', 2);
    const reply = await sendMessage(service, sender.api, {
      from: sender.app.owner.svcnum!,
      to: forwarder.svcnum,
      text: 'secret words to pass on',
    });

    expect(reply.status, JSON.stringify(reply.json)).toBe(202);
    expect(faults.fired).toEqual(['appendMessage#2']);
    expect((await stored(forwarder.svcnumId)).map((message) => message.messageId)).toEqual([reply.json.message_id]);
    expect(await stored(target.svcnumId)).toEqual([]);
    const logged = seen.logged();
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      level: 'ERROR',
      service: 'svcnum',
      kind: 'forward',
      inboxId: forwarder.svcnumId,
      seq: 1,
      messageId: reply.json.message_id,
      target: target.svcnumId,
      error: { name: 'Error', message: 'injected failure in appendMessage' },
    });
    expect(seen.counted()).toEqual([countLine('forward')]);
    expect(seen.text()).not.toContain('secret words');
  });

  it('auto_reply: the send succeeds, the failure is logged and counted; a refusal is a warning, counted too', async () => {
    const [owner, sender] = await Promise.all([account(), account()]);
    const replier = await provision(owner, 'Replier', { autoReply: 'private auto reply' });
    const from = sender.app.owner.svcnum!;
    const seen = observe();
    faults.failOn('appendMessage', 2);
    const reply = await sendMessage(service, sender.api, { from, to: replier.svcnum, text: 'hello there' });
    expect(reply.status, JSON.stringify(reply.json)).toBe(202);
    expect(faults.fired).toEqual(['appendMessage#2']);
    expect((await stored(replier.svcnumId)).map((message) => message.messageId)).toEqual([reply.json.message_id]);
    expect(seen.logged()).toEqual([
      expect.objectContaining({
        level: 'ERROR',
        kind: 'auto_reply',
        inboxId: replier.svcnumId,
        messageId: reply.json.message_id,
        target: from,
      }),
    ]);
    expect(seen.counted()).toEqual([countLine('auto_reply')]);

    // The number replied to is found out of service meanwhile (getNumber: the sender's number, the
    // recipient's, then the auto-reply's recipient): the domain refuses, a warning, still counted.
    faults.reset();
    const refused = observe();
    faults.answerOn('getNumber', 3, () => undefined);
    const second = await sendMessage(service, sender.api, { from, to: replier.svcnum, text: 'hello again' });
    expect(second.status, JSON.stringify(second.json)).toBe(202);
    expect(faults.fired).toEqual(['getNumber#3=answer']);
    expect(refused.logged()).toEqual([
      expect.objectContaining({
        level: 'WARN',
        kind: 'auto_reply',
        inboxId: replier.svcnumId,
        seq: 2,
        messageId: second.json.message_id,
        target: from,
        refusal: 'not_found',
      }),
    ]);
    expect(refused.counted()).toEqual([countLine('auto_reply')]);
    expect(seen.text()).not.toMatch(/private auto reply|hello there|hello again/);
  });
});
