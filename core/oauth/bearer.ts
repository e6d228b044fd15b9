import { type AccessTokenClaims, type AccessTokenVerifier, dpopRefusal } from '../kernel/access';
import { DomainError } from '../kernel/errors';
import type { ProofTarget } from './dpop';

// The RFC 6750 refusals live in the kernel (other modules refuse a missing scope alike).
export { insufficientScope, invalidToken, requireScope } from '../kernel/access';

// RFC 6750 and RFC 9449 §7: the one way every edge (UserInfo, the messages API, gRPC) turns what a
// request sent in `Authorization` (and `DPoP`) into verified claims. The same fault gets the same
// refusal everywhere:
//   no credential, or another scheme  → unauthenticated, no error code (RFC 6750 §3.1 bare challenge)
//   a Bearer credential that is not one → unauthenticated + invalid_request
//   a token we did not issue, or expired → unauthenticated + invalid_token
//   a DPoP-bound token sent as Bearer, or an unbound one as DPoP → unauthenticated + invalid_token (DPoP challenge)
//   a DPoP token without one valid proof of its key → unauthenticated + invalid_dpop_proof / use_dpop_nonce
//   a token without the scope needed    → forbidden + insufficient_scope (requireScope)

/** One HTTP header value, or the values of gRPC's `authorization` metadata. */
export type AuthorizationValues = string | readonly (string | Buffer)[] | undefined;

/** What a request presents to a resource server. */
export interface PresentedAccess {
  /** Every `Authorization` value (HTTP) or `authorization` metadata entry (gRPC). */
  authorization: AuthorizationValues;
  /** Every `DPoP` header value or `dpop` metadata entry. */
  dpop?: AuthorizationValues;
  /** The request as a DPoP proof must name it (htm, htu). */
  target: ProofTarget;
}

/** Checks a request's DPoP proof for an access token (`ath`); the proof key's thumbprint, or a DPoP refusal. */
export type ResourceProofCheck = (proof: string, target: ProofTarget, accessToken: string) => Promise<string>;

const bearer = { challenge: 'Bearer' } as const;

/** A header's values (or gRPC metadata entries) as a list, however the edge handed them over. */
export const valuesOf = (values: AuthorizationValues): readonly (string | Buffer)[] =>
  values === undefined ? [] : typeof values === 'string' ? [values] : values;

/**
 * RFC 6750 §3.1: whether a value presents a Bearer (or DPoP) credential at all; without one it gets
 * a bare challenge, no error code.
 */
const presentsToken = (authorization: string | Buffer): authorization is string =>
  typeof authorization === 'string' && /^(Bearer|DPoP)(\s|$)/i.test(authorization.trim());

/** RFC 6750 §2.1, RFC 9449 §7.1: the scheme and token68 of an `Authorization` value, if it is one. */
function credentialOf(authorization: string): { scheme: 'Bearer' | 'DPoP'; token: string } | undefined {
  const match = /^(Bearer|DPoP) ([A-Za-z0-9\-._~+/]+=*)$/i.exec(authorization.trim());
  if (!match) return undefined;
  return { scheme: match[1]!.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer', token: match[2]! };
}

/** The verifier's refusal of the token (invalid_token), said with the DPoP challenge (the request used that scheme). */
const asDpopRefusal = (error: unknown) =>
  error instanceof DomainError && error.oauth === 'invalid_token' ? dpopRefusal('invalid_token', error.message) : error;

export function createBearerAuthentication(verify: AccessTokenVerifier, checkProof: ResourceProofCheck) {
  /** A DPoP-scheme token: bound to a key, and the request carries one valid proof of that key. */
  async function dpopClaims(token: string, request: PresentedAccess, withProof: boolean) {
    const claims = await verify(token).catch((error: unknown) => Promise.reject(asDpopRefusal(error)));
    const jkt = claims.cnf?.jkt;
    if (typeof jkt !== 'string') throw dpopRefusal('invalid_token', 'the token is not DPoP-bound: use Bearer');
    if (!withProof) return claims;
    const proofs = valuesOf(request.dpop);
    if (proofs.length !== 1 || typeof proofs[0] !== 'string') {
      throw dpopRefusal('invalid_dpop_proof', 'send one DPoP proof header');
    }
    if ((await checkProof(proofs[0], request.target, token)) !== jkt) {
      throw dpopRefusal('invalid_dpop_proof', 'the DPoP proof is of another key than the token');
    }
    return claims;
  }

  /**
   * The claims of the one access token the request presents, or the refusal. `withProof: false`
   * skips the proof (a long call checking again the request that was admitted with it).
   */
  return async function authenticateBearer(request: PresentedAccess, withProof = true): Promise<AccessTokenClaims> {
    const values = valuesOf(request.authorization);
    if (!values.some(presentsToken)) {
      throw new DomainError('unauthenticated', 'send one "authorization: Bearer <access token>" header', bearer);
    }
    // RFC 6750 §3.1: more than one credential is a malformed request.
    if (values.length > 1) {
      throw new DomainError('unauthenticated', 'send one "authorization: Bearer <access token>" header, not several', {
        ...bearer,
        oauth: 'invalid_request',
      });
    }
    const credential = credentialOf(values[0] as string);
    if (!credential) {
      throw new DomainError('unauthenticated', 'the authorization header must be: Bearer <access token>', {
        ...bearer,
        oauth: 'invalid_request',
      });
    }
    if (credential.scheme === 'DPoP') return dpopClaims(credential.token, request, withProof);
    const claims = await verify(credential.token);
    // RFC 9449 §7.2: a bound token is never accepted as a bearer token.
    if (claims.cnf?.jkt !== undefined) {
      throw dpopRefusal('invalid_token', 'the token is DPoP-bound: use DPoP <token> and a proof');
    }
    return claims;
  };
}

export type BearerAuthentication = ReturnType<typeof createBearerAuthentication>;
