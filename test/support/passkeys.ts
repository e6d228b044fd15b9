import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { encodeCBOR } from '@levischuck/tiny-cbor';

// A software authenticator for tests without a browser: COSE keys of the algorithms we accept,
// authenticator data, and the JSON a browser's `toJSON()` gives for create() and get() answers.

const b64 = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();
const field = (value: string | undefined) => new Uint8Array(Buffer.from(value!, 'base64url'));

export interface SoftwareKey {
  cose: Buffer;
  privateKey: KeyObject;
  digest: 'sha256' | null;
}

/** A COSE key (RFC 9053) for a new node:crypto key pair, and how it signs. */
export function softwareKey(alg: -8 | -7 | -257 = -7): SoftwareKey {
  const cose = (entries: Array<[number, unknown]>) => Buffer.from(encodeCBOR(new Map(entries) as never));
  if (alg === -8) {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const { x } = publicKey.export({ format: 'jwk' });
    return {
      cose: cose([
        [1, 1],
        [3, -8],
        [-1, 6],
        [-2, field(x)],
      ]),
      privateKey,
      digest: null,
    };
  }
  if (alg === -7) {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { x, y } = publicKey.export({ format: 'jwk' });
    return {
      cose: cose([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, field(x)],
        [-3, field(y)],
      ]),
      privateKey,
      digest: 'sha256',
    };
  }
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const { n, e } = publicKey.export({ format: 'jwk' });
  return {
    cose: cose([
      [1, 3],
      [3, -257],
      [-1, field(n)],
      [-2, field(e)],
    ]),
    privateKey,
    digest: 'sha256',
  };
}

/** Authenticator data: RP ID hash, flags (UP and UV by default), counter, and an attested credential. */
export function authenticatorData(
  rpId: string,
  counter: number,
  options: { flags?: number; attested?: { id: Buffer; cose: Buffer } } = {},
) {
  const head = Buffer.alloc(37);
  sha256(rpId).copy(head);
  head[32] = (options.flags ?? 0x05) | (options.attested ? 0x40 : 0);
  head.writeUInt32BE(counter, 33);
  if (!options.attested) return head;
  const length = Buffer.alloc(2);
  length.writeUInt16BE(options.attested.id.length);
  return Buffer.concat([head, Buffer.alloc(16), length, options.attested.id, options.attested.cose]);
}

export const clientDataJson = (type: 'webauthn.create' | 'webauthn.get', challenge: string, origin: string) =>
  Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));

/** A discoverable passkey held in memory: what an authenticator answers for it. */
export function softwarePasskey(rpId: string, origin: string, alg: -8 | -7 | -257 = -7) {
  const key = softwareKey(alg);
  const id = randomBytes(16);
  let counter = 0;
  return {
    key,
    credentialId: b64(id),
    /** The answer to create() for `challenge`, with attestation `none`. */
    register(challenge: string, flags = 0x05) {
      const authData = new Uint8Array(authenticatorData(rpId, counter, { flags, attested: { id, cose: key.cose } }));
      const attestation = new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]);
      return {
        id: b64(id),
        rawId: b64(id),
        type: 'public-key',
        response: {
          clientDataJSON: b64(clientDataJson('webauthn.create', challenge, origin)),
          attestationObject: b64(encodeCBOR(attestation as never)),
          transports: ['internal'],
        },
        clientExtensionResults: {},
      };
    },
    /** The answer to get() for `challenge` as the account with this user handle; each use counts up. */
    assert(challenge: string, userHandle: string, options: { flags?: number; origin?: string; rpId?: string } = {}) {
      const authData = authenticatorData(options.rpId ?? rpId, ++counter, options);
      const client = clientDataJson('webauthn.get', challenge, options.origin ?? origin);
      const signature = sign(key.digest, Buffer.concat([authData, sha256(client)]), key.privateKey);
      return {
        id: b64(id),
        rawId: b64(id),
        type: 'public-key',
        response: {
          clientDataJSON: b64(client),
          authenticatorData: b64(authData),
          signature: b64(signature),
          userHandle: b64(userHandle),
        },
        clientExtensionResults: {},
      };
    },
  };
}
