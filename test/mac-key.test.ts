import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GenerateMacCommand, KMSClient, KMSInvalidMacException, VerifyMacCommand } from '@aws-sdk/client-kms';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKmsMacKey } from '../core/adapters/kms-keys';
import { MAC_KEY_FILE, openLocalMacKey, PAGE_TOKEN_KEY_FILE } from '../core/adapters/local-keys';
import { DomainError } from '../core/kernel/errors';
import { createPageTokenCodec } from '../core/kernel/page-token';
import { openToken, sealToken } from '../core/kernel/secrets';

// The MacKey port (core/kernel/ports.ts) behind two keys: the sign-in MAC key (the sign-in CSRF token and
// device cookies) and the page-token key (the page-token key is derived from it,
// core/kernel/page-token.ts). The local adapter (an HMAC key file in DATA_DIR/keys per key) and the
// KMS adapter (GenerateMac / VerifyMac, KMS mocked: the exact requests are asserted, AWS is never
// called), the signed tokens on top, and the page-token key's derivation.

const ascii = (text: string) => new TextEncoder().encode(text);
const NOW = Date.UTC(2030, 0, 1);

describe('local MAC key', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svcnum-mac-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('is created on first open (mode 0600) and kept: processes sharing the folder, also opening at once, share one key', async () => {
    const opened = await Promise.all(Array.from({ length: 5 }, () => openLocalMacKey(join(dir, 'keys'))));
    expect(await readdir(join(dir, 'keys'))).toEqual([MAC_KEY_FILE]);
    expect((await stat(join(dir, 'keys', MAC_KEY_FILE))).mode & 0o777).toBe(0o600);
    const message = ascii('purpose\nfield\n123');
    const macs = await Promise.all(opened.map((key) => key.mac(message)));
    expect(macs[0]).toHaveLength(32);
    for (const mac of macs) expect(Buffer.from(mac).equals(Buffer.from(macs[0]!))).toBe(true);
    const reopened = await openLocalMacKey(join(dir, 'keys'));
    expect(await reopened.verify(message, macs[0]!)).toBe(true);
  });

  it('keeps the page-token key in a file of its own (page-token.key, mode 0600): another key than the sign-in MAC key', async () => {
    const keys = join(dir, 'keys');
    const signIn = await openLocalMacKey(keys);
    const pageToken = await openLocalMacKey(keys, PAGE_TOKEN_KEY_FILE);
    expect((await readdir(keys)).sort()).toEqual([MAC_KEY_FILE, PAGE_TOKEN_KEY_FILE].sort());
    expect((await stat(join(keys, PAGE_TOKEN_KEY_FILE))).mode & 0o777).toBe(0o600);
    const message = ascii('svcnum page-token key v1');
    const derived = await pageToken.mac(message);
    expect(Buffer.from(derived).equals(Buffer.from(await signIn.mac(message)))).toBe(false);
    expect(await signIn.verify(message, derived)).toBe(false);
    expect(await (await openLocalMacKey(keys, PAGE_TOKEN_KEY_FILE)).verify(message, derived)).toBe(true);
  });

  it('verifies only the MAC of the same message, in constant time, whatever the length', async () => {
    const key = await openLocalMacKey(dir);
    const mac = await key.mac(ascii('message'));
    expect(await key.verify(ascii('message'), mac)).toBe(true);
    expect(await key.verify(ascii('messagf'), mac)).toBe(false);
    expect(await key.verify(ascii('message'), mac.slice(0, 31))).toBe(false);
    expect(await key.verify(ascii('message'), new Uint8Array(0))).toBe(false);
  });

  it('refuses a key file that does not hold 32 bytes, with a message that says what to do', async () => {
    await writeFile(join(dir, MAC_KEY_FILE), 'short\n');
    await expect(openLocalMacKey(dir)).rejects.toThrow(/does not hold 32 bytes; delete it/);
  });
});

describe('createKmsMacKey', () => {
  const KEY_ID = 'arn:aws:kms:eu-west-1:111122223333:key/mac-3333';
  const secret = Buffer.from('an HMAC key only the fake KMS holds');
  const kmsMock = mockClient(KMSClient);
  const client = new KMSClient({ region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  const hmac = (message: Uint8Array) => new Uint8Array(createHmac('sha256', secret).update(message).digest());

  beforeEach(() => {
    kmsMock.reset();
    // Behaves like KMS: GenerateMac answers the HMAC; VerifyMac throws KMSInvalidMacException for a wrong one.
    kmsMock
      .on(GenerateMacCommand)
      .callsFake((input) => ({ KeyId: input.KeyId, MacAlgorithm: input.MacAlgorithm, Mac: hmac(input.Message) }));
    kmsMock.on(VerifyMacCommand).callsFake((input) => {
      const expected = hmac(input.Message);
      if (input.Mac.length !== expected.length || !timingSafeEqual(expected, input.Mac)) {
        throw new KMSInvalidMacException({ message: 'Invalid MAC', $metadata: {} });
      }
      return { KeyId: input.KeyId, MacAlgorithm: input.MacAlgorithm, MacValid: true };
    });
  });

  it('sends exactly a GenerateMac request with HMAC_SHA_256 on the configured key', async () => {
    const key = createKmsMacKey({ client, keyId: KEY_ID });
    const message = ascii('sign-in-csrf\nnonce\n1893456000');
    const mac = await key.mac(message);
    const calls = kmsMock.commandCalls(GenerateMacCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toEqual({ KeyId: KEY_ID, Message: message, MacAlgorithm: 'HMAC_SHA_256' });
    expect(mac).toEqual(hmac(message));
  });

  it('sends exactly a VerifyMac request; a wrong MAC (KMSInvalidMacException) is false, any other error is thrown', async () => {
    const key = createKmsMacKey({ client, keyId: KEY_ID });
    const message = ascii('device\nid\n1893456000');
    const mac = hmac(message);
    expect(await key.verify(message, mac)).toBe(true);
    const calls = kmsMock.commandCalls(VerifyMacCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toEqual({
      KeyId: KEY_ID,
      Message: message,
      Mac: mac,
      MacAlgorithm: 'HMAC_SHA_256',
    });
    const wrong = mac.slice();
    wrong[0] = wrong[0]! ^ 1;
    expect(await key.verify(message, wrong)).toBe(false);
    kmsMock.on(VerifyMacCommand).rejects(new Error('ThrottlingException: Rate exceeded'));
    await expect(key.verify(message, mac)).rejects.toThrow(/ThrottlingException/);
  });

  it('signs tokens that open with the same purpose before their expiry, and with nothing else', async () => {
    const key = createKmsMacKey({ client, keyId: KEY_ID });
    const token = await sealToken(key, 'device', ['01HZXJ0000000000000000ABCD', 'deviceid'], NOW + 1000);
    expect(await openToken(key, 'device', token, NOW)).toEqual(['01HZXJ0000000000000000ABCD', 'deviceid']);
    expect(await openToken(key, 'sign-in-csrf', token, NOW)).toBeUndefined();
    expect(await openToken(key, 'device', token, NOW + 1000)).toBeUndefined();
    expect(await openToken(key, 'device', token.replace('deviceid', 'deviceie'), NOW)).toBeUndefined();
    // Malformed tokens never reach KMS.
    const before = kmsMock.commandCalls(VerifyMacCommand).length;
    for (const malformed of [
      '',
      'x',
      'a.b',
      'a.123.short',
      `a.b.${'9'.repeat(13)}.${'A'.repeat(43)}`,
      'x'.repeat(401),
    ]) {
      expect(await openToken(key, 'device', malformed, NOW)).toBeUndefined();
    }
    expect(kmsMock.commandCalls(VerifyMacCommand).length - before).toBe(0);
  });

  describe('page-token key', () => {
    // Its own KMS key (PAGE_TOKEN_KEY_ID), not the sign-in MAC key.
    const PAGE_TOKEN_KEY_ID = 'arn:aws:kms:eu-west-1:111122223333:key/page-token-4444';
    const numbers = { list: 'numbers', caller: '01HZXJ0000000000000000OWNR' };
    const position = { svcnumId: '01HZXJ0000000000000000ABCD', ownerId: '01HZXJ0000000000000000OWNR' };

    it('is derived with exactly one GenerateMac of "svcnum page-token key v1" per process, lazily and single flight; then tokens cost no KMS call', async () => {
      const codec = createPageTokenCodec(createKmsMacKey({ client, keyId: PAGE_TOKEN_KEY_ID }));
      expect(kmsMock.commandCalls(GenerateMacCommand)).toHaveLength(0);
      const tokens = await Promise.all(
        Array.from({ length: 20 }, (_, index) => codec.seal(numbers, { ...position, n: index })),
      );
      const opened = await Promise.all(tokens.map((token) => codec.open(numbers, token)));
      expect(opened).toEqual(tokens.map((_, index) => ({ ...position, n: index })));
      await expect(codec.open(numbers, tokens[0]!.slice(0, -2))).rejects.toBeInstanceOf(DomainError);
      const calls = kmsMock.commandCalls(GenerateMacCommand);
      expect(calls).toHaveLength(1);
      expect(calls[0]!.args[0].input).toEqual({
        KeyId: PAGE_TOKEN_KEY_ID,
        Message: ascii('svcnum page-token key v1'),
        MacAlgorithm: 'HMAC_SHA_256',
      });
      expect(kmsMock.commandCalls(VerifyMacCommand)).toHaveLength(0);
    });

    it('agrees across processes of one environment (same KMS key)', async () => {
      const first = createPageTokenCodec(createKmsMacKey({ client, keyId: PAGE_TOKEN_KEY_ID }));
      const second = createPageTokenCodec(createKmsMacKey({ client, keyId: PAGE_TOKEN_KEY_ID }));
      const token = await first.seal(numbers, position);
      expect(await second.open(numbers, token)).toEqual(position);
      expect(await second.seal(numbers, position)).toBe(token);

      expect(kmsMock.commandCalls(GenerateMacCommand)).toHaveLength(2);
    });

    it('remembers a failed derivation for 5 s: meanwhile every token is unavailable (Retry-After) without a KMS call; then it asks KMS again', async () => {
      const token = await createPageTokenCodec(createKmsMacKey({ client, keyId: PAGE_TOKEN_KEY_ID })).seal(
        numbers,
        position,
      );
      let now = NOW;
      const codec = createPageTokenCodec(createKmsMacKey({ client, keyId: PAGE_TOKEN_KEY_ID }), { now: () => now });
      const kmsCalls = () => kmsMock.commandCalls(GenerateMacCommand).length;
      const before = kmsCalls();
      kmsMock.on(GenerateMacCommand).rejects(new Error('ThrottlingException: Rate exceeded'));

      // The calls waiting for the one derivation get its failure (the edge logs it as a fault).
      const waiting = await Promise.all(
        [codec.open(numbers, token), codec.seal(numbers, position)].map((pending) =>
          pending.catch((error: unknown) => error),
        ),
      );
      for (const error of waiting) expect(String(error)).toMatch(/ThrottlingException/);
      expect(kmsCalls() - before).toBe(1);

      // For 5 s: unavailable at once, with the seconds left, for opening and sealing alike; KMS is not asked.
      for (const [elapsed, seconds] of [
        [0, 5],
        [1000, 4],
        [4001, 1],
        [4999, 1],
      ] as const) {
        now = NOW + elapsed;
        for (const attempt of [() => codec.open(numbers, token), () => codec.seal(numbers, position)]) {
          const refused = await attempt().catch((error: unknown) => error);
          expect(refused).toBeInstanceOf(DomainError);
          expect(refused).toMatchObject({ kind: 'unavailable', retryAfterSeconds: seconds });
        }
      }
      await Promise.all(Array.from({ length: 50 }, () => codec.open(numbers, token).catch(() => undefined)));
      expect(kmsCalls() - before).toBe(1);

      // KMS is back; after the 5 s the next token derives the key (one call) and works.
      kmsMock
        .on(GenerateMacCommand)
        .callsFake((input) => ({ KeyId: input.KeyId, MacAlgorithm: input.MacAlgorithm, Mac: hmac(input.Message) }));
      now = NOW + 5000;
      expect(await codec.open(numbers, token)).toEqual(position);
      expect(await codec.seal(numbers, position)).toBe(token);
      expect(kmsCalls() - before).toBe(2);
    });

    it('refuses, as invalid_argument naming the field, a token under another key, list, filter or caller', async () => {
      const codec = createPageTokenCodec(createKmsMacKey({ client, keyId: PAGE_TOKEN_KEY_ID }));
      const token = await codec.seal({ ...numbers, filter: 'all' }, position);
      const otherKey = createPageTokenCodec({
        mac: async (message) => new Uint8Array(createHmac('sha256', 'another environment').update(message).digest()),
        verify: async () => false,
      });
      for (const [binding, opener] of [
        [{ ...numbers, filter: 'all' }, otherKey],
        [{ ...numbers, list: 'masks', filter: 'all' }, codec],
        [{ ...numbers, filter: 'independent' }, codec],
        [numbers, codec],
        [{ ...numbers, filter: 'all', caller: '01HZXJ0000000000000000OTHR' }, codec],
      ] as const) {
        const refused = await opener.open(binding, token, 'resume_cursor').catch((error: unknown) => error);
        expect(refused).toBeInstanceOf(DomainError);
        expect(refused).toMatchObject({
          kind: 'invalid_argument',
          message: 'resume_cursor is not valid for this call; start again without it',
        });
      }
      expect(await codec.open({ ...numbers, filter: 'all' }, token)).toEqual(position);
      expect(await codec.open(numbers, '')).toBeUndefined();
      expect(await codec.open(numbers, undefined)).toBeUndefined();
    });
  });
});
