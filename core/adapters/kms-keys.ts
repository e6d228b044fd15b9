import {
  GenerateMacCommand,
  GetPublicKeyCommand,
  KMSInvalidMacException,
  SignCommand,
  VerifyMacCommand,
  type KMSClient,
} from '@aws-sdk/client-kms';
import { createHash } from 'node:crypto';
import { publicJwk as publicJwkOf } from '../kernel/jwk';
import type { KeyRing, MacKey, PublicJwk, Signer, SigningAlg } from '../kernel/ports';
import { callKms, rethrowKmsFailure } from './kms-client';

export interface KmsKeyRingOptions {
  client: KMSClient;
  /** KMS key id, ARN or alias of the key that signs new tokens. */
  activeKeyId: string;
  /** Keys that verifiers must still (or already) accept: one being introduced, one being retired. */
  additionalKeyIds?: string[];
  /**
   * Public keys (DER SPKI) by key id, published by the deploy (KMS_PUBLIC_KEYS): a key found here
   * costs no GetPublicKey. A key of the ring missing here (added to the configuration without the
   * deploy that publishes it) is fetched with GetPublicKey, once per process.
   */
  publicKeys?: ReadonlyMap<string, Uint8Array>;
  /** The ring's algorithm: EdDSA (Ed25519 keys, the default) or RS256 (RSA_2048 keys, ID tokens only). */
  alg?: SigningAlg;
}

const EXPECTED_KEY_USAGE = 'SIGN_VERIFY';
// KMS refuses RAW messages above this size, and pure Ed25519 has no pre-hash fallback,
// so fail with a clear message instead of an opaque ValidationException.
const KMS_MAX_RAW_MESSAGE_BYTES = 4096;

/**
 * How each algorithm's keys sign in KMS. ED25519_SHA_512 with RAW is KMS's pure Ed25519 (RFC 8032),
 * which is what JWS EdDSA verifiers expect; ED25519_PH_SHA_512/DIGEST would produce Ed25519ph
 * signatures. RS256 sends the SHA-256 digest of the signing input (MessageType DIGEST): 32 bytes
 * whatever the token's size, and KMS signs exactly what RAW would (RSASSA-PKCS1-v1_5 over SHA-256).
 */
export const KMS_SIGNING = {
  EdDSA: { keySpec: 'ECC_NIST_EDWARDS25519', signingAlgorithm: 'ED25519_SHA_512', signatureLength: 64 },
  RS256: { keySpec: 'RSA_2048', signingAlgorithm: 'RSASSA_PKCS1_V1_5_SHA_256', signatureLength: 256 },
} as const;

/** What Sign is sent for `message`: RAW for Ed25519 (at most 4096 bytes), its SHA-256 DIGEST for RSA. */
function signedMessage(alg: SigningAlg, message: Uint8Array) {
  if (alg === 'RS256') {
    return { Message: createHash('sha256').update(message).digest(), MessageType: 'DIGEST' } as const;
  }
  if (message.length > KMS_MAX_RAW_MESSAGE_BYTES) {
    throw new Error(
      `KMS can sign at most ${KMS_MAX_RAW_MESSAGE_BYTES} bytes with MessageType RAW; got ${message.length}`,
    );
  }
  return { Message: message, MessageType: 'RAW' } as const;
}

export function createKmsKeyRing(options: KmsKeyRingOptions): KeyRing {
  const { client, activeKeyId } = options;
  const alg = options.alg ?? 'EdDSA';
  const signing = KMS_SIGNING[alg];
  // Active first so that the published order tells operators which key is signing;
  // duplicates dropped so a misconfigured rotation does not publish the same kid twice.
  const keyIds = [...new Set([activeKeyId, ...(options.additionalKeyIds ?? [])])];

  // Public keys never change for a KMS key id, so one fetch per process is enough. The promise
  // (not the value) is cached so that concurrent cold-start requests share one GetPublicKey call.
  const cache = new Map<string, Promise<PublicJwk>>();

  function publicJwk(keyId: string): Promise<PublicJwk> {
    const cached = cache.get(keyId);
    if (cached) return cached;
    const published = options.publicKeys?.get(keyId);
    const pending = published ? publicJwkOf(alg, published) : fetchPublicJwk(client, keyId, alg);
    cache.set(keyId, pending);
    // A transient KMS failure must not poison the cache for the life of the process.
    pending.catch(() => {
      if (cache.get(keyId) === pending) cache.delete(keyId);
    });
    return pending;
  }

  return {
    publicKeys: () => Promise.all(keyIds.map(publicJwk)),

    async activeSigner(): Promise<Signer> {
      // The kid comes from the real public key, so a token can never name a key we do not publish.
      const { kid } = await publicJwk(activeKeyId);
      return {
        kid,
        async sign(message: Uint8Array): Promise<Uint8Array> {
          const signed = signedMessage(alg, message);
          const response = await callKms(() =>
            client.send(new SignCommand({ KeyId: activeKeyId, ...signed, SigningAlgorithm: signing.signingAlgorithm })),
          );
          const signature = response.Signature;
          if (!signature) {
            throw new Error(`KMS Sign for key ${activeKeyId} returned no Signature`);
          }
          if (signature.length !== signing.signatureLength) {
            throw new Error(
              `KMS Sign for key ${activeKeyId} returned a ${signature.length}-byte signature; ` +
                `expected a ${signing.signatureLength}-byte ${alg} signature`,
            );
          }
          return signature;
        },
      };
    },
  };
}

async function fetchPublicJwk(client: KMSClient, keyId: string, alg: SigningAlg): Promise<PublicJwk> {
  const response = await callKms(() => client.send(new GetPublicKeyCommand({ KeyId: keyId })));
  // Checked up front so that a wrongly provisioned key fails at start-up with a readable
  // message rather than later as unverifiable tokens.
  const expectedSpec = KMS_SIGNING[alg].keySpec;
  if (response.KeySpec !== expectedSpec) {
    throw new Error(`KMS key ${keyId} has KeySpec ${response.KeySpec ?? '(none)'}; expected ${expectedSpec}`);
  }
  if (response.KeyUsage !== EXPECTED_KEY_USAGE) {
    throw new Error(`KMS key ${keyId} has KeyUsage ${response.KeyUsage ?? '(none)'}; expected ${EXPECTED_KEY_USAGE}`);
  }
  if (!response.PublicKey) {
    throw new Error(`KMS GetPublicKey for key ${keyId} returned no PublicKey`);
  }
  return publicJwkOf(alg, response.PublicKey);
}

/**
 * A MAC key in KMS (an HMAC_256 key, usage GENERATE_VERIFY_MAC: the sign-in MAC key or the
 * page-token key): every MAC is made and checked by KMS, so the key never reaches the process.
 */
export function createKmsMacKey(options: { client: KMSClient; keyId: string }): MacKey {
  const { client, keyId } = options;
  return {
    async mac(message) {
      const response = await callKms(() =>
        client.send(new GenerateMacCommand({ KeyId: keyId, Message: message, MacAlgorithm: 'HMAC_SHA_256' })),
      );
      if (!response.Mac) throw new Error(`KMS GenerateMac for key ${keyId} returned no Mac`);
      return response.Mac;
    },
    async verify(message, mac) {
      try {
        const response = await client.send(
          new VerifyMacCommand({
            KeyId: keyId,
            Message: message,
            Mac: mac,
            MacAlgorithm: 'HMAC_SHA_256',
          }),
        );
        return response.MacValid === true;
      } catch (error) {
        // KMS answers a wrong MAC with this exception rather than MacValid: false.
        if (error instanceof KMSInvalidMacException) return false;
        return rethrowKmsFailure(error);
      }
    },
  };
}
