import { createHash, createPublicKey, type JsonWebKey, type KeyObject, verify } from 'node:crypto';

// The WebAuthn Level 3 checks a relying party makes (§7.1 registration, §7.2 authentication), for
// passkeys: user verification required, attestation not verified (we ask for `none`: trust comes
// from the signed-in account that adds the passkey, not from the authenticator's maker), the
// exact origin, the RP ID's hash, signatures with node:crypto. What a
// check refuses is a WebAuthnError, whose message is a short code of the step (never a value).

export class WebAuthnError extends Error {
  override name = 'WebAuthnError';
}

/** The relying party: our issuer's host (the RP ID) and its exact origin. */
export interface RelyingParty {
  id: string;
  origin: string;
}

/** COSE algorithms we accept (IANA): EdDSA, ES256, RS256, in the order we prefer. */
export const COSE_ALGORITHMS = [-8, -7, -257] as const;

/** A credential as the browser sends it (`PublicKeyCredential.toJSON()`: base64url strings). */
export interface CredentialJson {
  id: string;
  type: string;
  response: Record<string, unknown>;
}

/**
 * A credential id or challenge as the browser sends it: base64url of 1-1023 bytes (WebAuthn §5.1's
 * bound on credential ids; a store key cannot be empty or longer). Anything else is refused before
 * it reaches the store.
 */
export const isCredentialId = (value: unknown): value is string =>
  typeof value === 'string' && /^[A-Za-z0-9_-]{2,1364}$/.test(value);

const bytes = (value: unknown, what: string): Buffer => {
  // The field's name is the refusal's code.
  if (typeof value !== 'string' || !/^[A-Za-z0-9_-]*$/.test(value)) throw new WebAuthnError(what);
  return Buffer.from(value, 'base64url');
};

type Cbor = number | string | boolean | null | Buffer | Cbor[] | Map<Cbor, Cbor>;

/**
 * One CBOR item (RFC 8949) at `at`, and where the next begins: the kinds WebAuthn's attestation
 * objects and COSE keys use (integers, byte and text strings, arrays, maps, false, true, null),
 * definite lengths only, nested at most 8 deep. Anything else, or data cut short, is refused.
 * (Our own decoder, about 0.6 KB minified: a CBOR package took 2.7 KB of a bundle at its ceiling.)
 */
function cborItem(data: Buffer, at: number, depth = 0): [Cbor, number] {
  const head = data[at];
  if (head === undefined || depth > 8) throw new WebAuthnError('cbor');
  const [major, info] = [head >> 5, head & 31];
  const width = info < 24 ? 0 : info < 28 ? 2 ** (info - 24) : -1;
  if (width < 0 || at + 1 + width > data.length) throw new WebAuthnError('cbor');
  // Up to 2^48: an 8-byte argument's top two bytes must be zero (no length or key needs more).
  if (width === 8 && data.readUInt16BE(at + 1) !== 0) throw new WebAuthnError('cbor');
  const argument = width === 0 ? info : data.readUIntBE(at + 1 + (width === 8 ? 2 : 0), Math.min(width, 6));
  let next = at + 1 + width;
  const item = (): Cbor => {
    const [value, after] = cborItem(data, next, depth + 1);
    next = after;
    return value;
  };
  if (major === 0) return [argument, next];
  if (major === 1) return [-1 - argument, next];
  if (major === 2 || major === 3) {
    const end = next + argument;
    if (end > data.length) throw new WebAuthnError('cbor');
    const slice = data.subarray(next, end);
    return [major === 2 ? slice : slice.toString('utf8'), end];
  }
  if (major === 4) return [Array.from({ length: Math.min(argument, data.length) }, item), next];
  if (major === 5) {
    const map = new Map<Cbor, Cbor>();
    for (let index = 0; index < argument; index++) map.set(item(), item());
    return [map, next];
  }
  const simple = new Map<number, Cbor>([
    [20, false],
    [21, true],
    [22, null],
  ]).get(argument);
  if (major === 7 && width === 0 && simple !== undefined) return [simple, next];
  throw new WebAuthnError('cbor');
}

/** A whole buffer as one CBOR item (nothing left over). */
export function decodeCbor(data: Buffer): Cbor {
  const [value, end] = cborItem(data, 0);
  if (end !== data.length) throw new WebAuthnError('cbor');
  return value;
}
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest();

/** The parts of the client data we check (§5.8.1). */
function clientData(json: Buffer, type: 'webauthn.create' | 'webauthn.get', rp: RelyingParty) {
  let data: { type?: unknown; challenge?: unknown; origin?: unknown; crossOrigin?: unknown };
  try {
    data = JSON.parse(json.toString('utf8'));
  } catch {
    throw new WebAuthnError('client-data');
  }
  if (data.type !== type) throw new WebAuthnError('type');
  if (data.origin !== rp.origin) throw new WebAuthnError('origin');
  if (data.crossOrigin === true) throw new WebAuthnError('cross-origin');
  if (!isCredentialId(data.challenge)) throw new WebAuthnError('challenge');
  return { challenge: data.challenge };
}

export interface AuthenticatorData {
  counter: number;
  backupEligible: boolean;
  backedUp: boolean;
  credentialId?: Buffer;
  /** The COSE public key's bytes (registration). */
  publicKey?: Buffer;
}

/** §6.1: RP ID hash, flags (UP and UV required), counter, and the attested credential if any. */
export function authenticatorData(data: Buffer, rp: RelyingParty): AuthenticatorData {
  if (data.length < 37) throw new WebAuthnError('auth-data');
  if (!data.subarray(0, 32).equals(sha256(Buffer.from(rp.id, 'utf8')))) throw new WebAuthnError('rp-id');
  const flags = data[32]!;
  if (!(flags & 0x01)) throw new WebAuthnError('up');
  if (!(flags & 0x04)) throw new WebAuthnError('uv');
  const parsed: AuthenticatorData = {
    counter: data.readUInt32BE(33),
    backupEligible: (flags & 0x08) !== 0,
    backedUp: (flags & 0x10) !== 0,
  };
  if (parsed.backedUp && !parsed.backupEligible) throw new WebAuthnError('flags');
  if (flags & 0x40) {
    if (data.length < 55) throw new WebAuthnError('auth-data');
    const idLength = data.readUInt16BE(53);
    const keyStart = 55 + idLength;
    if (idLength > 1023 || data.length <= keyStart) throw new WebAuthnError('credential-id');
    const [, keyEnd] = cborItem(data, keyStart);
    parsed.credentialId = data.subarray(55, keyStart);
    parsed.publicKey = data.subarray(keyStart, keyEnd);
  }
  return parsed;
}

const coseField = (key: Map<Cbor, Cbor>, label: number) => {
  const value = key.get(label);
  if (!Buffer.isBuffer(value)) throw new WebAuthnError('cose');
  return value.toString('base64url');
};

/** A COSE public key (RFC 9053) of one of COSE_ALGORITHMS, as a node:crypto key and its digest. */
export function coseKey(cose: Buffer): { key: KeyObject; digest: 'sha256' | null } {
  const key = decodeCbor(cose);
  if (!(key instanceof Map)) throw new WebAuthnError('cose');
  const [kty, alg, crv] = [key.get(1), key.get(3), key.get(-1)];
  let jwk: JsonWebKey;
  if (kty === 1 && alg === -8 && crv === 6) jwk = { kty: 'OKP', crv: 'Ed25519', x: coseField(key, -2) };
  else if (kty === 2 && alg === -7 && crv === 1) {
    jwk = { kty: 'EC', crv: 'P-256', x: coseField(key, -2), y: coseField(key, -3) };
  } else if (kty === 3 && alg === -257) jwk = { kty: 'RSA', n: coseField(key, -1), e: coseField(key, -2) };
  else throw new WebAuthnError('alg');
  try {
    return { key: createPublicKey({ key: jwk, format: 'jwk' }), digest: alg === -8 ? null : 'sha256' };
  } catch {
    throw new WebAuthnError('cose');
  }
}

export interface Registration {
  challenge: string;
  credentialId: string;
  publicKey: string;
  counter: number;
  backupEligible: boolean;
  backedUp: boolean;
  transports: string[];
}

const TRANSPORTS = new Set(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);

/** §7.1 for a `PublicKeyCredential.toJSON()` of `create()`; the caller checks the challenge is its own. */
export function verifyRegistration(credential: CredentialJson, rp: RelyingParty): Registration {
  if (credential.type !== 'public-key') throw new WebAuthnError('type');
  const { challenge } = clientData(bytes(credential.response.clientDataJSON, 'client data'), 'webauthn.create', rp);
  const attestation = decodeCbor(bytes(credential.response.attestationObject, 'attestation'));
  const authData = attestation instanceof Map ? attestation.get('authData') : undefined;
  if (!Buffer.isBuffer(authData)) throw new WebAuthnError('attestation');
  const parsed = authenticatorData(authData, rp);
  if (!parsed.credentialId || !parsed.publicKey) throw new WebAuthnError('attestation');
  coseKey(parsed.publicKey);
  const credentialId = parsed.credentialId.toString('base64url');
  if (credentialId !== credential.id) throw new WebAuthnError('credential-id');
  const transports = Array.isArray(credential.response.transports) ? credential.response.transports : [];
  return {
    challenge,
    credentialId,
    publicKey: parsed.publicKey.toString('base64url'),
    counter: parsed.counter,
    backupEligible: parsed.backupEligible,
    backedUp: parsed.backedUp,
    transports: transports.filter((transport): transport is string => TRANSPORTS.has(transport)),
  };
}

/** What an assertion says before its signature is checked: the challenge and the account's user handle. */
export function assertionClaims(credential: CredentialJson, rp: RelyingParty) {
  if (credential.type !== 'public-key') throw new WebAuthnError('type');
  const { challenge } = clientData(bytes(credential.response.clientDataJSON, 'client data'), 'webauthn.get', rp);
  const userHandle = bytes(credential.response.userHandle, 'user handle');
  if (userHandle.length === 0 || userHandle.length > 64) throw new WebAuthnError('user-handle');
  if (!isCredentialId(credential.id)) throw new WebAuthnError('credential-id');
  return { challenge, userHandle: userHandle.toString('utf8'), credentialId: credential.id };
}

/** §7.2 steps 20-21: the signature over authenticator data and the client data's hash, by `publicKey`. */
export function verifyAssertion(credential: CredentialJson, rp: RelyingParty, publicKey: string) {
  const authData = bytes(credential.response.authenticatorData, 'authenticator data');
  const parsed = authenticatorData(authData, rp);
  const signed = Buffer.concat([authData, sha256(bytes(credential.response.clientDataJSON, 'client data'))]);
  const { key, digest } = coseKey(Buffer.from(publicKey, 'base64url'));
  if (!verify(digest, signed, key, bytes(credential.response.signature, 'signature'))) {
    throw new WebAuthnError('signature');
  }
  return { counter: parsed.counter, backedUp: parsed.backedUp };
}

/** A credential posted as JSON text, if it has the shape of one (its fields are checked as they are read). */
export function parseCredential(text: string | undefined): CredentialJson | undefined {
  try {
    const parsed = text ? JSON.parse(text) : undefined;
    return typeof parsed?.response === 'object' && parsed.response !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The relying party of an issuer URL. */
export const relyingParty = (issuer: string): RelyingParty => {
  const url = new URL(issuer);
  return { id: url.hostname, origin: url.origin };
};
