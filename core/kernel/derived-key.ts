import { createSecretKey, type KeyObject } from 'node:crypto';
import { DomainError } from './errors';
import type { Clock, MacKey } from './ports';

// A local HMAC key derived once per process from a service MAC key (a KMS HMAC key in AWS) as
// MAC(label), so that every process of an environment agrees without holding key material, and
// each later use costs a local HMAC: page tokens (./page-token.ts) and DPoP nonces
// (core/oauth/dpop-nonces.ts), each under its own label.

/** After a failed derivation the key is not asked for again for this long (per process). */
const DERIVATION_RETRY_MS = 5_000;

/**
 * The derived key, lazily and single flight: one MAC-key call per process. A failure reaches the
 * calls waiting for it, then is remembered for DERIVATION_RETRY_MS: meanwhile every use is answered
 * `unavailable` at once (`what` names it), so unauthenticated requests cannot turn a KMS outage or
 * throttling into a flood of KMS calls; after it, the next use tries again.
 */
export function derivedKey(macKey: MacKey, label: string, clock: Clock, what: string): () => Promise<KeyObject> {
  const message = new TextEncoder().encode(label);
  let derived: Promise<KeyObject> | undefined;
  let failedAt: number | undefined;
  return () => {
    const waitMs = failedAt === undefined ? 0 : failedAt + DERIVATION_RETRY_MS - clock.now();
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      const refusal = `${what} are unavailable for a moment; retry in ${seconds} s`;
      return Promise.reject(new DomainError('unavailable', refusal, { retryAfterSeconds: seconds }));
    }
    derived ??= macKey.mac(message).then(
      (bytes) => createSecretKey(Buffer.from(bytes)),
      (error: unknown) => {
        derived = undefined;
        failedAt = clock.now();
        throw error;
      },
    );
    return derived;
  };
}
