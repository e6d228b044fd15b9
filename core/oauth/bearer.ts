import { DomainError } from '../kernel/errors';
import type { AccessTokenClaims, AccessTokenVerifier } from '../kernel/access';

// The RFC 6750 refusals live in the kernel (other modules refuse a missing scope alike).
export { insufficientScope, invalidToken, requireScope } from '../kernel/access';

// RFC 6750: the one way every edge (UserInfo, the messages API, gRPC) turns what a request sent
// in `Authorization` into verified claims. The same fault gets the same refusal everywhere:
//   no credential, or another scheme  → unauthenticated, no error code (RFC 6750 §3.1 bare challenge)
//   a Bearer credential that is not one → unauthenticated + invalid_request
//   a token we did not issue, or expired → unauthenticated + invalid_token
//   a token without the scope needed    → forbidden + insufficient_scope (requireScope)

/** One HTTP header value, or the values of gRPC's `authorization` metadata. */
export type AuthorizationValues = string | readonly (string | Buffer)[] | undefined;

const bearer = { challenge: 'Bearer' } as const;

/**
 * RFC 6750 §3.1: whether a value presents a Bearer credential at all; without one it gets a bare
 * challenge, no error code.
 */
const presentsBearer = (authorization: string | Buffer): authorization is string =>
  typeof authorization === 'string' && /^Bearer(\s|$)/i.test(authorization.trim());

/** RFC 6750 §2.1: the b64token of an `Authorization: Bearer …` value, or undefined if it is not one. */
const bearerToken = (authorization: string): string | undefined =>
  /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(authorization.trim())?.[1];

export function createBearerAuthentication(verify: AccessTokenVerifier) {
  /** The claims of the one Bearer access token the request presents, or the refusal. */
  return async function authenticateBearer(authorization: AuthorizationValues): Promise<AccessTokenClaims> {
    const values =
      authorization === undefined ? [] : typeof authorization === 'string' ? [authorization] : authorization;
    if (!values.some(presentsBearer)) {
      throw new DomainError('unauthenticated', 'send one "authorization: Bearer <access token>" header', bearer);
    }
    // RFC 6750 §3.1: more than one credential is a malformed request.
    if (values.length > 1) {
      throw new DomainError('unauthenticated', 'send one "authorization: Bearer <access token>" header, not several', {
        ...bearer,
        oauth: 'invalid_request',
      });
    }
    const token = bearerToken(values[0] as string);
    if (!token) {
      throw new DomainError('unauthenticated', 'the authorization header must be: Bearer <access token>', {
        ...bearer,
        oauth: 'invalid_request',
      });
    }
    return verify(token);
  };
}

export type BearerAuthentication = ReturnType<typeof createBearerAuthentication>;
