import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { ServiceConfig } from '../kernel/config';
import type { KeyRing, PublicJwk } from '../kernel/ports';

// RP-Initiated Logout's id_token_hint, checked with node:crypto rather than jose's JWT verifier: the
// pages' bundle (the only one that checks hints) stays within its size, and a hint needs only a
// signature by one of our keys and three claims.

/** What an id_token_hint tells (RP-Initiated Logout 1.0 §2): whose session, and for which client. */
export interface IdTokenHint {
  subject: string;
  clientId: string;
}

const decoded = (part: string | undefined): Record<string, unknown> | undefined => {
  if (part === undefined || !/^[A-Za-z0-9_-]+$/.test(part)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
};

/** Whether `claims` are of our ID token for a client (`clientId` when given): its client, or undefined. */
function hintedClient(claims: Record<string, unknown>, issuer: string, clientId: string | undefined) {
  const audiences = typeof claims.aud === 'string' ? [claims.aud] : Array.isArray(claims.aud) ? claims.aud : [];
  const client = clientId ?? (typeof claims.azp === 'string' ? claims.azp : audiences[0]);
  if (claims.iss !== issuer || typeof claims.sub !== 'string' || typeof client !== 'string') return undefined;
  return audiences.includes(client) ? client : undefined;
}

/**
 * Verifies an id_token_hint: one of our ID tokens (compact JWS, EdDSA or RS256 by a published key of
 * that algorithm, `typ` JWT, no `crit`), of our issuer, whose audience is `clientId` when given. Its
 * expiry is not checked, as the specification allows: an RP often signs a person out after the ID
 * token expired. undefined for anything else.
 */
export function createIdTokenHintVerifier(config: ServiceConfig, keys: KeyRing) {
  const keyObjects = new Map<string, KeyObject>();
  const keyObject = (jwk: PublicJwk) => {
    const found = keyObjects.get(jwk.kid) ?? createPublicKey({ key: { ...jwk }, format: 'jwk' });
    keyObjects.set(jwk.kid, found);
    return found;
  };
  return async function verifyIdTokenHint(hint: string, clientId?: string): Promise<IdTokenHint | undefined> {
    const parts = hint.split('.');
    const [header, claims] = [decoded(parts[0]), decoded(parts[1])];
    if (parts.length !== 3 || !header || !claims || header.typ !== 'JWT' || header.crit !== undefined) return;
    const jwk = (await keys.publicKeys()).find((key) => key.kid === header.kid && key.alg === header.alg);
    if (!jwk || !/^[A-Za-z0-9_-]+$/.test(parts[2]!)) return undefined;
    const signed = Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii');
    const signature = Buffer.from(parts[2]!, 'base64url');
    if (!verify(jwk.alg === 'RS256' ? 'sha256' : null, signed, keyObject(jwk), signature)) return undefined;
    const client = hintedClient(claims, config.issuer, clientId);
    return client === undefined ? undefined : { subject: claims.sub as string, clientId: client };
  };
}

export type IdTokenHintVerifier = ReturnType<typeof createIdTokenHintVerifier>;
