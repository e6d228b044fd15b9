// Ports: what the domain core needs from the outside world. Adapters live in core/adapters.

/** Milliseconds since the epoch. Injected so that expiry can be tested without sleeping. */
export interface Clock {
  now(): number;
}

/** Cryptographically secure random bytes. Injected so tests can make ids predictable if they need to. */
export interface Random {
  bytes(length: number): Uint8Array;
}

/** A public key in JWK form as published at /.well-known/jwks.json. */
export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

/**
 * One Ed25519 signing key. `sign` returns the raw 64-byte RFC 8032 signature of `message`
 * (pure EdDSA: the message itself is signed, not a pre-hash).
 */
export interface Signer {
  readonly kid: string;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/**
 * The keys of the service: the active signer plus every public key that verifiers must accept
 * (the active one, a key being introduced before it becomes active, and a key being retired).
 */
export interface KeyRing {
  activeSigner(): Promise<Signer>;
  publicKeys(): Promise<PublicJwk[]>;
}

/** A keyed MAC (HMAC-SHA-256) under a service key that never leaves its keeper (KMS in AWS). */
export interface MacKey {
  mac(message: Uint8Array): Promise<Uint8Array>;
  verify(message: Uint8Array, mac: Uint8Array): Promise<boolean>;
}
