import { createHash, sign } from 'node:crypto';
import { encodeCBOR } from '@levischuck/tiny-cbor';
import { describe, expect, it } from 'vitest';
import {
  type CredentialJson,
  coseKey,
  decodeCbor,
  relyingParty,
  verifyAssertion,
  verifyRegistration,
} from '../core/oauth/webauthn';
import { authenticatorData, clientDataJson, type SoftwareKey, softwareKey } from './support/passkeys';

// The WebAuthn checks of core/oauth/webauthn.ts without a browser (test/browser-passkeys.test.ts
// drives them from Chromium): our CBOR decoder against tiny-cbor's encoder, COSE keys of each
// algorithm we accept, and each field of an answer that must make it fail.

const rp = relyingParty('https://id.example.com');
const b64 = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();

describe('CBOR', () => {
  it('decodes what an encoder writes: integers, strings, arrays, maps, simple values', () => {
    const values = [
      0,
      23,
      24,
      255,
      256,
      65_535,
      65_536,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 48 - 1,
      -1,
      -25,
      -257,
      -(2 ** 40),
      'text',
      '',
      new Uint8Array([1, 2, 3]),
      new Uint8Array(300),
      true,
      false,
      null,
      [1, [2, [3]]],
      new Map<string | number, never>([
        [1, 2 as never],
        ['a', 'b' as never],
        [-3, 'c' as never],
      ]),
    ];
    for (const value of values) {
      const decoded = decodeCbor(Buffer.from(encodeCBOR(value as never)));
      expect(decoded instanceof Buffer ? new Uint8Array(decoded) : decoded).toEqual(value);
    }
    // A text's length counts UTF-8 bytes (tiny-cbor 0.2's encoder counts characters, so not from it).
    expect(decodeCbor(Buffer.concat([Buffer.from([0x69]), Buffer.from('ünïcode')]))).toBe('ünïcode');
  });

  it('refuses data cut short, left over, of indefinite length, tagged, floats, and nesting over 8', () => {
    const bad = [
      [],
      [0x19, 0x01],
      [0x43, 1, 2],
      [0x82, 1],
      [0xa1, 1],
      [0x01, 0x01],
      [0x5f, 0x41, 0, 0xff],
      [0xc1, 0x00],
      [0xf9, 0x3c, 0x00],
      [0x1b, 0, 1, 0, 0, 0, 0, 0, 0],
      [...Array(10).fill(0x81), 0x00],
    ];
    for (const bytes of bad) expect(() => decodeCbor(Buffer.from(bytes)), JSON.stringify(bytes)).toThrow('cbor');
  });
});

/** An answer to get() by `key`, with a change to make it wrong. */
function assertion(key: SoftwareKey, change: { flags?: number; origin?: string; rpId?: string } = {}) {
  const data = authenticatorData(change.rpId ?? rp.id, 7, change.flags !== undefined ? { flags: change.flags } : {});
  const client = clientDataJson('webauthn.get', 'challenge-1', change.origin ?? rp.origin);
  const signature = sign(key.digest, Buffer.concat([data, sha256(client)]), key.privateKey);
  return {
    id: 'cred',
    type: 'public-key',
    response: {
      clientDataJSON: b64(client),
      authenticatorData: b64(data),
      signature: b64(signature),
      userHandle: b64('user'),
    },
  } satisfies CredentialJson;
}

describe('WebAuthn answers', () => {
  it('verifies a signature of each COSE algorithm we accept, and nothing else', () => {
    for (const alg of [-8, -7, -257] as const) {
      const key = softwareKey(alg);
      expect(verifyAssertion(assertion(key), rp, b64(key.cose))).toEqual({ counter: 7, backedUp: false });
      const other = softwareKey(alg);
      expect(() => verifyAssertion(assertion(other), rp, b64(key.cose))).toThrow('signature');
    }
    const es384 = new Map<number, never>([
      [1, 2],
      [3, -35],
      [-1, 2],
    ] as never);
    expect(() => coseKey(Buffer.from(encodeCBOR(es384)))).toThrow('alg');
  });

  it('refuses an assertion without user verification or presence, for another RP ID, or another origin', () => {
    const key = softwareKey(-7);
    const publicKey = b64(key.cose);
    expect(() => verifyAssertion(assertion(key, { flags: 0x01 }), rp, publicKey)).toThrow('uv');
    expect(() => verifyAssertion(assertion(key, { flags: 0x04 }), rp, publicKey)).toThrow('up');
    expect(() => verifyAssertion(assertion(key, { rpId: 'example.com' }), rp, publicKey)).toThrow('rp-id');
    expect(() => verifyRegistration({ ...assertion(key), response: {} }, rp)).toThrow();
  });

  it('reads a registration: credential id, COSE key, flags, transports; refuses another origin', () => {
    const key = softwareKey(-8);
    const id = Buffer.from('credential-id');
    const attestation = encodeCBOR(
      new Map<string, never>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', new Uint8Array(authenticatorData(rp.id, 0, { flags: 0x1d, attested: { id, cose: key.cose } }))],
      ] as never),
    );
    const credential = (origin?: string) => ({
      id: b64(id),
      type: 'public-key',
      response: {
        clientDataJSON: b64(clientDataJson('webauthn.create', 'challenge-2', origin ?? rp.origin)),
        attestationObject: b64(attestation),
        transports: ['internal', 'made-up'],
      },
    });
    expect(verifyRegistration(credential(), rp)).toEqual({
      challenge: 'challenge-2',
      credentialId: b64(id),
      publicKey: b64(key.cose),
      counter: 0,
      backupEligible: true,
      backedUp: true,
      transports: ['internal'],
    });
    expect(() => verifyRegistration(credential('https://id.example.com.evil.test'), rp)).toThrow('origin');
  });
});
