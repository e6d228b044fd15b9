import { createHmac } from 'node:crypto';
import { derivedKey } from '../kernel/derived-key';
import type { Clock, MacKey } from '../kernel/ports';

// RFC 9449 §8, §9: server nonces in DPoP proofs, when DPOP_NONCES is on. A nonce is derived, not
// stored: base64url(HMAC(key, window))[:16 bytes], where the window is the current five-minute
// slice of time and the key is derived once per process from the page-token MAC key under its own
// label (core/kernel/derived-key.ts). Every process and Lambda of an environment computes the same
// nonce with no store round trip; a proof carrying the current or the previous window's nonce
// passes, so a nonce is good for 5 to 10 minutes.

export const NONCE_WINDOW_MS = 5 * 60_000;
const NONCE_BYTES = 16;

export interface DpopNonces {
  /** The nonce to hand out now (DPoP-Nonce), or undefined when nonces are off. */
  current(): Promise<string | undefined>;
  /** Whether `nonce` is the current or the previous window's (always true when nonces are off). */
  accepts(nonce: unknown): Promise<boolean>;
}

export function createDpopNonces(enabled: boolean, macKey: MacKey, clock: Clock): DpopNonces {
  if (!enabled) return { current: async () => undefined, accepts: async () => true };
  const key = derivedKey(macKey, 'svcnum dpop-nonce key v1', clock, 'DPoP nonces');
  const nonceAt = async (window: number) =>
    createHmac('sha256', await key())
      .update(`dpop-nonce.${window}`)
      .digest()
      .subarray(0, NONCE_BYTES)
      .toString('base64url');
  const window = () => Math.floor(clock.now() / NONCE_WINDOW_MS);
  return {
    current: () => nonceAt(window()),
    // A nonce is public (every answer carries it): compared plainly.
    async accepts(nonce) {
      const now = window();
      return typeof nonce === 'string' && (nonce === (await nonceAt(now)) || nonce === (await nonceAt(now - 1)));
    },
  };
}
