import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CURSOR_MAX_INBOXES } from '../core/messaging/cursors';
import { callerOf, clientCredentialsToken, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { openStream, sendMessage, type OpenStream } from './support/messages';
import { startTestService, type TestService } from './support/service';

// The resume cursor of an owner with many numbers has a bounded size (core/messaging/cursors.ts:
// at most CURSOR_MAX_INBOXES inboxes named, a watermark for the others), and resuming from it
// delivers everything after it: nothing lost; messages delivered again only from inboxes it does
// not name, accepted at or after its watermark. An old cursor (positions of every inbox) is accepted.

const NUMBERS = 300;
/** The bound the code documents: 1,962 characters of base64url. */
const MAX_CURSOR_CHARS = 1_962;
let service: TestService;
let app: ProvisioningApp;
let sender: { number: string; token: () => Promise<string> };
const streams: OpenStream[] = [];
/** The owner's numbers: svcnum_id (its inbox) and number. */
let numbers: Array<{ svcnumId: string; svcnum: string }> = [];

beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '85', NUMBERS + 10);
  app = await provisioningApp(service);
  for (let next = 0; next < NUMBERS; next += 20) {
    numbers.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(20, NUMBERS - next) }, (_, index) =>
          service.core.provisioning.numbers.provision(callerOf(app), { displayName: `Line ${next + index}` }),
        ),
      )),
    );
  }
  numbers = numbers.map(({ svcnumId, svcnum }) => ({ svcnumId, svcnum }));
  const other = await provisioningApp(service);
  const { client, clientSecret } = await service.core.registration.createApiClient({
    name: 'Sender',
    scope: 'messaging',
    ownerId: other.owner.svcnumId,
  });
  sender = { number: other.owner.svcnum, token: () => clientCredentialsToken(service, client.clientId, clientSecret!) };
  other.close();
}, 120_000);
afterAll(async () => {
  for (const opened of streams) opened.cancel();
  app?.close();
  await service?.close();
});

/** Sends `text` to each number, 8 at a time; the message ids. */
async function sendTo(targets: typeof numbers, text: string): Promise<string[]> {
  const token = await sender.token();
  const ids: string[] = [];
  for (let next = 0; next < targets.length; next += 8) {
    ids.push(
      ...(await Promise.all(
        targets.slice(next, next + 8).map(async ({ svcnum }) => {
          const reply = await sendMessage(service, token, { from: sender.number, to: svcnum, text });
          expect(reply.status, JSON.stringify(reply.json)).toBe(202);
          return String(reply.json.message_id);
        }),
      )),
    );
  }
  return ids;
}

async function stream(cursor = ''): Promise<OpenStream> {
  const token = await clientCredentialsToken(service, app.clientId, app.clientSecret);
  const opened = openStream({ numbers: app.numbers, token }, cursor);
  streams.push(opened);
  return opened;
}

/** The cursor's JSON (readable, not secret): positions by inbox, and `w`, the watermark, if any. */
const cursorBody = (cursor: string) =>
  JSON.parse(Buffer.from(cursor, 'base64url').subarray(0, -32).toString('utf8')) as Record<string, number>;

describe('the resume cursor of an owner with 300 numbers', () => {
  it(`stays under ${MAX_CURSOR_CHARS} characters, and a resume delivers everything after it; repeats only unnamed inboxes' messages from its watermark on`, async () => {
    const early = await sendTo(numbers, 'early');
    // Two hours on: the early messages are long settled when the stream reads them.
    service.clock.advance(2 * 3_600_000);
    const first = await stream();
    const received = await first.waitFor(NUMBERS, 60_000);
    expect(new Set(received.map((message) => message.messageId))).toEqual(new Set(early));
    // Then messages into 40 inboxes (more than a cursor names), received live.
    const recent = await sendTo(numbers.slice(0, 40), 'recent');
    await first.waitFor(NUMBERS + recent.length, 60_000);
    const all = first.messages;
    for (const message of all) expect(message.cursor.length, 'cursor size').toBeLessThanOrEqual(MAX_CURSOR_CHARS);
    const cursor = all.at(-1)!.cursor;
    const { w: watermark, ...named } = cursorBody(cursor);
    expect(Object.keys(named).length).toBeLessThanOrEqual(CURSOR_MAX_INBOXES);
    expect(watermark).toBeGreaterThan(0);
    first.cancel();

    // Messages after the cursor, into 100 inboxes (named by the cursor and not).
    service.clock.advance(60_000);
    const later = await sendTo(numbers.slice(20, 120), 'later');
    const resumed = await stream(cursor);
    await resumed.waitFor(later.length, 60_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const got = resumed.messages.map((message) => message.messageId);
    // Nothing lost, each once.
    expect(new Set(got).size).toBe(got.length);
    for (const id of later) expect(got).toContain(id);
    // Repeated: only `recent` messages (accepted after the watermark) of inboxes the cursor does not name.
    const repeated = resumed.messages.filter((message) => !later.includes(message.messageId));
    expect(repeated.map((message) => message.text)).toEqual(Array(40 - Object.keys(named).length).fill('recent'));
    for (const message of repeated) expect(Object.keys(named)).not.toContain(message.toSvcnumId);
    expect(repeated.every((message) => recent.includes(message.messageId))).toBe(true);
    for (const message of resumed.messages) expect(message.cursor.length).toBeLessThanOrEqual(MAX_CURSOR_CHARS);
    resumed.cancel();

    // An old cursor (every inbox's position, no watermark) is accepted and resumes exactly.
    const positions = new Map(numbers.map(({ svcnumId }, index) => [svcnumId, index < 40 ? 2 : 1]));
    const old = await service.core.messaging.hub.cursors.seal(app.owner.svcnumId, { positions, watermark: 0 });
    expect(Object.keys(cursorBody(old))).toHaveLength(NUMBERS);
    const fromOld = await stream(old);
    await fromOld.waitFor(later.length, 60_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(fromOld.messages.map((message) => message.messageId).sort()).toEqual([...later].sort());
    for (const message of fromOld.messages) expect(message.cursor.length).toBeLessThanOrEqual(MAX_CURSOR_CHARS);
  }, 180_000);
});
