import { createPublicKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint } from 'jose';
import type { PublicJwk } from './ports';

/**
 * Turns an Ed25519 public key (a KeyObject, or DER SubjectPublicKeyInfo as KMS GetPublicKey
 * returns it) into the JWK we publish. The `kid` is the RFC 7638 thumbprint, so it is stable
 * for a key wherever the key lives and needs no separate bookkeeping.
 */
export async function ed25519PublicJwk(key: KeyObject | Uint8Array): Promise<PublicJwk> {
  const keyObject =
    key instanceof Uint8Array ? createPublicKey({ key: Buffer.from(key), format: 'der', type: 'spki' }) : key;
  if (keyObject.asymmetricKeyType !== 'ed25519') {
    throw new Error(`expected an Ed25519 public key, got ${keyObject.asymmetricKeyType ?? 'unknown'}`);
  }
  const jwk = keyObject.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new Error('Ed25519 key did not export as an OKP JWK');
  }
  const kid = await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x: jwk.x }, 'sha256');
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x, kid, alg: 'EdDSA', use: 'sig' };
}
