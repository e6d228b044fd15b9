import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import type { PublicJwk, SigningAlg } from './ports';

/**
 * RFC 7638 §3: the SHA-256 of the key's required members in lexicographic order, without
 * whitespace, base64url. `members` come in that order; their values are base64url strings, so
 * JSON.stringify writes them as the RFC does. (jose's calculateJwkThumbprint gives the same, as
 * test/kms-signer.test.ts checks; not imported here, to keep jose out of bundles that only verify.)
 */
const thumbprint = (members: Record<string, string>) =>
  createHash('sha256').update(JSON.stringify(members)).digest('base64url');

const asKeyObject = (key: KeyObject | Uint8Array) =>
  key instanceof Uint8Array ? createPublicKey({ key: Buffer.from(key), format: 'der', type: 'spki' }) : key;

/**
 * Turns an Ed25519 public key (a KeyObject, or DER SubjectPublicKeyInfo as KMS GetPublicKey
 * returns it) into the JWK we publish. The `kid` is the RFC 7638 thumbprint, so it is stable
 * for a key wherever the key lives and needs no separate bookkeeping.
 */
export async function ed25519PublicJwk(key: KeyObject | Uint8Array): Promise<PublicJwk> {
  const keyObject = asKeyObject(key);
  if (keyObject.asymmetricKeyType !== 'ed25519') {
    throw new Error(`expected an Ed25519 public key, got ${keyObject.asymmetricKeyType ?? 'unknown'}`);
  }
  const jwk = keyObject.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new Error('Ed25519 key did not export as an OKP JWK');
  }
  const kid = thumbprint({ crv: 'Ed25519', kty: 'OKP', x: jwk.x });
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x, kid, alg: 'EdDSA', use: 'sig' };
}

/** The same for an RSA public key (of 2048 bits: what KMS RSA_2048 and our local key are), published for RS256. */
export async function rsaPublicJwk(key: KeyObject | Uint8Array): Promise<PublicJwk> {
  const keyObject = asKeyObject(key);
  if (keyObject.asymmetricKeyType !== 'rsa' || keyObject.asymmetricKeyDetails?.modulusLength !== 2048) {
    throw new Error(`expected a 2048-bit RSA public key, got ${keyObject.asymmetricKeyType ?? 'unknown'}`);
  }
  const jwk = keyObject.export({ format: 'jwk' });
  if (jwk.kty !== 'RSA' || typeof jwk.n !== 'string' || typeof jwk.e !== 'string') {
    throw new Error('RSA key did not export as an RSA JWK');
  }
  const kid = thumbprint({ e: jwk.e, kty: 'RSA', n: jwk.n });
  return { kty: 'RSA', n: jwk.n, e: jwk.e, kid, alg: 'RS256', use: 'sig' };
}

/** The public JWK of a key of `alg`. */
export const publicJwk = (alg: SigningAlg, key: KeyObject | Uint8Array) =>
  alg === 'RS256' ? rsaPublicJwk(key) : ed25519PublicJwk(key);
