import type { KeyRing, SigningAlg } from './ports';

/**
 * The key ring of a process: the Ed25519 ring signs by default, the RSA ring (where the process has
 * one: the units that issue ID tokens or publish keys) signs RS256 ID tokens; both are published,
 * Ed25519 first. Without an RSA ring, asking for an RS256 signer fails rather than sign with Ed25519.
 */
export function combinedKeyRing(ed25519: KeyRing, rsa?: KeyRing): KeyRing {
  return {
    activeSigner(alg: SigningAlg = 'EdDSA') {
      if (alg === 'EdDSA') return ed25519.activeSigner();
      if (!rsa) return Promise.reject(new Error('this process has no RSA signing key (RS256)'));
      return rsa.activeSigner();
    },
    async publicKeys() {
      const [own, rsaKeys] = await Promise.all([ed25519.publicKeys(), rsa ? rsa.publicKeys() : []]);
      return [...own, ...rsaKeys];
    },
  };
}
