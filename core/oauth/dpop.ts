import { calculateJwkThumbprint, EmbeddedJWK, errors as joseErrors, type JWK, type JWTPayload, jwtVerify } from 'jose';
import { DPOP_ALGORITHMS } from '../kernel/access';
import type { DomainError } from '../kernel/errors';
import type { Clock } from '../kernel/ports';
import { sha256 } from '../kernel/secrets';
import type { DpopNonces } from './dpop-nonces';
import type { DpopProofStore } from './store';

// RFC 9449 §4.3: checking one DPoP proof, at the token endpoint and at every resource server. A
// proof is a JWT with `typ: dpop+jwt`, an asymmetric `alg` of DPOP_ALGORITHMS, a public `jwk` in
// its header that verifies its signature, and the claims `jti`, `htm` (the request's method), `htu`
// (its URL without query and fragment), `iat` (within PROOF_WINDOW_SECONDS of our clock either
// way, as node-oidc-provider), `ath` (base64url SHA-256 of the access token, at resource servers)
// and, at the token endpoint when nonces are on, `nonce`. A `jti` is accepted once per key across every process: one
// conditional write to the dpopProofs table, kept until the proof's iat window has passed.

export const PROOF_WINDOW_SECONDS = 300;
/** A proof of an EdDSA or P-256 key with every claim fits well within this. */
const MAX_PROOF_LENGTH = 4096;
const MAX_JTI_LENGTH = 256;

/** What the request was, as the proof must name it: its method and its absolute URL. */
export interface ProofTarget {
  readonly method: string;
  readonly url: string;
}

export type ProofRefusalCode = 'invalid_dpop_proof' | 'use_dpop_nonce';
/** How the caller's edge refuses (the token endpoint's 400, a resource server's 401 with a DPoP challenge). */
export type ProofRefusal = (code: ProofRefusalCode, message: string, dpopNonce?: string) => DomainError;

/** A proof checked for a request (with its access token at a resource server): the key's thumbprint. */
export type ProofCheck = (
  proof: string,
  target: ProofTarget,
  accessToken: string | undefined,
  refuse: ProofRefusal,
  /** Server nonces (the token endpoint's, when DPOP_NONCES is on): the proof must carry one. */
  nonces?: DpopNonces,
) => Promise<string>;

export interface ProofContext {
  store: DpopProofStore;
  clock: Clock;
  nonces?: DpopNonces;
}

/** RFC 9449 §4.3 with RFC 3986 §6 normalisation: scheme and host lower-cased, no default port, query or fragment. */
export function normalisedHtu(value: unknown): string | undefined {
  if (typeof value !== 'string' || !URL.canParse(value)) return undefined;
  const url = new URL(value);
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** The verified header and claims, or the refusal naming what failed (never jose's own words). */
async function verifiedProof(proof: string, now: number, refuse: ProofRefusal) {
  if (proof.length > MAX_PROOF_LENGTH) {
    throw refuse('invalid_dpop_proof', 'the DPoP proof is too long');
  }
  try {
    return await jwtVerify(proof, EmbeddedJWK, {
      typ: 'dpop+jwt',
      algorithms: [...DPOP_ALGORITHMS],
      currentDate: new Date(now),
    });
  } catch (error) {
    if (error instanceof joseErrors.JOSEAlgNotAllowed) {
      throw refuse('invalid_dpop_proof', `the DPoP proof's alg must be one of ${DPOP_ALGORITHMS.join(', ')}`);
    }
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) {
      throw refuse('invalid_dpop_proof', "the DPoP proof's signature does not verify with its jwk");
    }
    if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'typ') {
      throw refuse('invalid_dpop_proof', 'the DPoP proof must have typ dpop+jwt');
    }
    // WebCrypto refuses a malformed jwk with a DOMException (DataError): the proof's fault too.
    const malformed = [joseErrors.JOSEError, TypeError, SyntaxError, DOMException];
    if (malformed.some((kind) => error instanceof kind)) {
      throw refuse('invalid_dpop_proof', 'the DPoP proof or its jwk is malformed');
    }
    throw error;
  }
}

/** The claims' checks against the request; what the first that fails says of the proof. */
function claimsRefusal(payload: JWTPayload, target: ProofTarget, accessToken: string | undefined, now: number) {
  const { jti, htm, htu, iat, ath } = payload as JWTPayload & Record<'htm' | 'htu' | 'ath', unknown>;
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) {
    return `jti must be 1 to ${MAX_JTI_LENGTH} characters`;
  }
  if (htm !== target.method) return `htm must be ${target.method}`;
  const expected = normalisedHtu(target.url);
  if (expected === undefined || normalisedHtu(htu) !== expected) return `htu must be ${expected}`;
  if (typeof iat !== 'number' || !Number.isFinite(iat)) return 'iat must be a number';
  if (Math.abs(now / 1000 - iat) > PROOF_WINDOW_SECONDS) return `iat is more than ${PROOF_WINDOW_SECONDS} s from ours`;
  // Not a secret: the caller holds both the token and the proof.
  if (accessToken !== undefined && ath !== sha256(accessToken)) {
    return 'ath must be the base64url SHA-256 of the access token';
  }
  return undefined;
}

/**
 * Checks `proof` for a request to `target` (with `accessToken` at a resource server, which binds
 * `ath`) and returns the JWK thumbprint (RFC 7638) of its key; else the refusal `refuse` makes.
 */
export async function checkProof(
  ctx: ProofContext,
  proof: string,
  target: ProofTarget,
  accessToken: string | undefined,
  refuse: ProofRefusal,
): Promise<string> {
  const now = ctx.clock.now();
  const { payload, protectedHeader } = await verifiedProof(proof, now, refuse);
  const refusal = claimsRefusal(payload, target, accessToken, now);
  if (refusal) throw refuse('invalid_dpop_proof', `the DPoP proof's ${refusal}`);
  if (ctx.nonces && !(await ctx.nonces.accepts(payload.nonce))) {
    const message = payload.nonce === undefined ? 'DPoP proofs must carry the server nonce' : 'the DPoP nonce is stale';
    throw refuse('use_dpop_nonce', message, await ctx.nonces.current());
  }
  const jkt = await calculateJwkThumbprint(protectedHeader.jwk as JWK, 'sha256');
  // Kept until no clock could take its iat any more; a key's jti is accepted once (RFC 9449 §11.1).
  const expiresAt = ((payload.iat as number) + PROOF_WINDOW_SECONDS) * 1000 + 1000;
  if (!(await ctx.store.claimDpopProof(sha256(`${jkt}.${payload.jti}`), expiresAt, now))) {
    throw refuse('invalid_dpop_proof', 'the DPoP proof was used before (its jti is replayed)');
  }
  return jkt;
}
