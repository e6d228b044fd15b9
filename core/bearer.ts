import { DomainError } from './kernel/errors';
import type { AccessTokenClaims, AccessTokenVerifier } from './tokens';

// RFC 6750: the one way every edge (UserInfo, the messages API, gRPC) turns what a request sent
// in `Authorization` into verified claims. The same fault gets the same refusal everywhere:
//   no credential, or another scheme  → unauthenticated, no error code (RFC 6750 §3.1 bare challenge)
//   a Bearer credential that is not one → unauthenticated + invalid_request
//   a token we did not issue, or expired → unauthenticated + invalid_token
//   a token without the scope needed    → forbidden + insufficient_scope (requireScope)

/** One HTTP header value, or the values of gRPC's `authorization` metadata. */
export type AuthorizationValues = string | readonly (string | Buffer)[] | undefined;

const bearer = { challenge: 'Bearer' } as const;

/** A token that cannot be used (ours or not, expired, of a disabled client): RFC 6750 invalid_token. */
export const invalidToken = (message: string) => new DomainError('unauthenticated', message, { ...bearer, oauth: 'invalid_token' });

/** RFC 6750 §3.1: whether a value presents a Bearer credential at all; without one it gets a bare challenge, no error code. */
const presentsBearer = (authorization: string | Buffer): authorization is string =>
  typeof authorization === 'string' && /^Bearer(\s|$)/i.test(authorization.trim());

/** RFC 6750 §2.1: the b64token of an `Authorization: Bearer …` value, or undefined if it is not one. */
const bearerToken = (authorization: string): string | undefined =>
  /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(authorization.trim())?.[1];

/** RFC 6750 insufficient_scope: the token carries none of `needed`. */
export const insufficientScope = (needed: readonly string[]) =>
  new DomainError('forbidden', `this call needs a token with the ${needed.join(' or ')} scope`, {
    ...bearer, oauth: 'insufficient_scope', scope: needed.join(' '),
  });

/** The scopes the token carries, if it has at least one of `anyOf`; else insufficient_scope naming them. */
export function requireScope(claims: AccessTokenClaims, anyOf: string | readonly string[]): string[] {
  const needed = typeof anyOf === 'string' ? [anyOf] : anyOf;
  const granted = claims.scope.split(' ');
  if (!needed.some((scope) => granted.includes(scope))) throw insufficientScope(needed);
  return granted;
}

export function createBearerAuthentication(verify: AccessTokenVerifier) {
  /** The claims of the one Bearer access token the request presents, or the refusal. */
  return async function authenticateBearer(authorization: AuthorizationValues): Promise<AccessTokenClaims> {
    const values = authorization === undefined ? [] : typeof authorization === 'string' ? [authorization] : authorization;
    if (!values.some(presentsBearer)) {
      throw new DomainError('unauthenticated', 'send one "authorization: Bearer <access token>" header', bearer);
    }
    // RFC 6750 §3.1: more than one credential is a malformed request.
    if (values.length > 1) {
      throw new DomainError('unauthenticated', 'send one "authorization: Bearer <access token>" header, not several', { ...bearer, oauth: 'invalid_request' });
    }
    const token = bearerToken(values[0] as string);
    if (!token) throw new DomainError('unauthenticated', 'the authorization header must be: Bearer <access token>', { ...bearer, oauth: 'invalid_request' });
    return verify(token);
  };
}

export type BearerAuthentication = ReturnType<typeof createBearerAuthentication>;
