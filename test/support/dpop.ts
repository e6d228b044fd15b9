import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { createHash, randomUUID } from 'node:crypto';

// DPoP proofs made by hand (RFC 9449 §4), for the checks the RP libraries never get wrong: replays,
// stale iat, another key, another URL. `proof()` makes a valid proof unless told otherwise.

export interface ProofOptions {
  accessToken?: string;
  nonce?: string;
  /** Epoch seconds (default: now). */
  iat?: number;
  jti?: string;
  typ?: string;
  /** The header's jwk (default: the key's public JWK). */
  jwk?: JWK;
  /** Claims put over the defaults (`undefined` removes one). */
  claims?: Record<string, unknown>;
}

export interface DpopKey {
  alg: 'ES256' | 'EdDSA';
  publicJwk: JWK;
  /** RFC 7638 SHA-256 thumbprint: the token's cnf.jkt. */
  jkt: string;
  /** A DPoP proof for `htm` `htu`. */
  proof(htm: string, htu: string, options?: ProofOptions): Promise<string>;
}

export const ath = (accessToken: string) => createHash('sha256').update(accessToken).digest('base64url');

export async function dpopKey(alg: 'ES256' | 'EdDSA' = 'ES256'): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return {
    alg,
    publicJwk,
    jkt: await calculateJwkThumbprint(publicJwk, 'sha256'),
    async proof(htm, htu, options = {}) {
      const claims: Record<string, unknown> = {
        htm,
        htu,
        jti: options.jti ?? randomUUID(),
        iat: options.iat ?? Math.floor(Date.now() / 1000),
        ...(options.accessToken !== undefined ? { ath: ath(options.accessToken) } : {}),
        ...(options.nonce !== undefined ? { nonce: options.nonce } : {}),
        ...options.claims,
      };
      for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name];
      return new SignJWT(claims)
        .setProtectedHeader({ alg, typ: options.typ ?? 'dpop+jwt', jwk: options.jwk ?? publicJwk })
        .sign(privateKey);
    },
  };
}
