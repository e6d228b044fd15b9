// Ports: what the domain core needs from the outside world. Adapters live in core/adapters.

/** Milliseconds since the epoch. Injected so that expiry can be tested without sleeping. */
export interface Clock {
  now(): number;
}

/** Cryptographically secure random bytes. Injected so tests can make ids predictable if they need to. */
export interface Random {
  bytes(length: number): Uint8Array;
}

/**
 * The JWS algorithms of our keys: EdDSA (Ed25519) signs everything; RS256 (RSA 2048) only the ID
 * tokens of clients registered for it (libraries that know only OIDC Core's mandatory algorithm).
 */
export const SIGNING_ALGS = ['EdDSA', 'RS256'] as const;
export type SigningAlg = (typeof SIGNING_ALGS)[number];
export const isSigningAlg = (value: string): value is SigningAlg => (SIGNING_ALGS as readonly string[]).includes(value);

/** A public key in JWK form as published at /.well-known/jwks.json. */
export type PublicJwk =
  | { kty: 'OKP'; crv: 'Ed25519'; x: string; kid: string; alg: 'EdDSA'; use: 'sig' }
  | { kty: 'RSA'; n: string; e: string; kid: string; alg: 'RS256'; use: 'sig' };

/**
 * One signing key. `sign` returns the raw JWS signature of `message`: for EdDSA the 64-byte
 * RFC 8032 signature (pure EdDSA: the message itself is signed, not a pre-hash), for RS256 the
 * RSASSA-PKCS1-v1_5 SHA-256 signature.
 */
export interface Signer {
  readonly kid: string;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/**
 * The keys of the service: the active signer plus every public key that verifiers must accept
 * (the active one, a key being introduced before it becomes active, and a key being retired).
 * `activeSigner('RS256')` is the RSA ring's, where the process has one (core/kernel/key-rings.ts).
 */
export interface KeyRing {
  activeSigner(alg?: SigningAlg): Promise<Signer>;
  publicKeys(): Promise<PublicJwk[]>;
}

/** A keyed MAC (HMAC-SHA-256) under a service key that never leaves its keeper (KMS in AWS). */
export interface MacKey {
  mac(message: Uint8Array): Promise<Uint8Array>;
  verify(message: Uint8Array, mac: Uint8Array): Promise<boolean>;
}
