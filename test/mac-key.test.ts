import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GenerateMacCommand, KMSClient, KMSInvalidMacException, VerifyMacCommand } from '@aws-sdk/client-kms';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKmsMacKey } from '../core/adapters/kms-keys';
import { MAC_KEY_FILE, openLocalMacKey } from '../core/adapters/local-keys';
import { openToken, sealToken } from '../core/secrets';

// The MacKey port (core/ports.ts) that signs the sign-in CSRF token and device cookies: the local
// adapter (an HMAC key file in DATA_DIR/keys) and the KMS adapter (GenerateMac / VerifyMac, KMS
// mocked: the exact requests are asserted, AWS is never called), and the signed tokens on top.

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
    kmsMock.on(GenerateMacCommand).callsFake((input) => ({ KeyId: input.KeyId, MacAlgorithm: input.MacAlgorithm, Mac: hmac(input.Message) }));
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
    expect(calls[0]!.args[0].input).toEqual({ KeyId: KEY_ID, Message: message, Mac: mac, MacAlgorithm: 'HMAC_SHA_256' });
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
    for (const malformed of ['', 'x', 'a.b', 'a.123.short', `a.b.${'9'.repeat(13)}.${'A'.repeat(43)}`, 'x'.repeat(401)]) {
      expect(await openToken(key, 'device', malformed, NOW)).toBeUndefined();
    }
    expect(kmsMock.commandCalls(VerifyMacCommand).length - before).toBe(0);
  });
});
