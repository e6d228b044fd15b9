import type { JWTPayload } from 'jose';
import { DomainError } from './errors';

// Access tokens as every module sees them: their claims, the capabilities to issue and verify
// them (implemented by the oauth module, injected by the registry), and the RFC 6750 refusals.

export interface AccessTokenClaims extends JWTPayload {
  sub: string;
  client_id: string;
  scope: string;
  auth_time?: number;
  /** Present on tokens issued under a grant (authorization_code, refresh_token): UserInfo checks the grant is alive. */
  grant_id?: string;
  /** RFC 9449 §6.1: a DPoP-bound token's key thumbprint. */
  cnf?: { jkt?: string };
}

export interface AccessTokenInput {
  /** The user's svcnum_id, or the client id for client_credentials tokens. */
  subject: string;
  clientId: string;
  scopes: readonly string[];
  /** Time of the user's sign-in (user tokens only). */
  authTime?: number;
  /** The grant (consent chain) a user token comes from: its refresh token's public id, never a secret. */
  grantId?: string;
  /** RFC 8693 actor, for delegated tokens. */
  act?: Record<string, unknown>;
  /** RFC 9449 §6.1: the thumbprint of the DPoP key the token is bound to (`cnf.jkt`). */
  jkt?: string;
  /**
   * The latest expiry allowed, in epoch seconds (an exchanged token never outlives its actor token).
   * Absolute, not a lifetime: the issuer reads the clock later than its caller did.
   */
  expiresBy?: number;
}

/** Issues RFC 9068 access tokens: the token and its lifetime in seconds. */
export interface AccessTokenIssuer {
  accessToken(input: AccessTokenInput): Promise<{ token: string; expiresIn: number }>;
}

/** Verifies one of our access tokens (algorithm, issuer, audience, type, expiry pinned); a refusal is invalid_token. */
export type AccessTokenVerifier = (token: string) => Promise<AccessTokenClaims>;

const bearer = { challenge: 'Bearer' } as const;

/** RFC 9449 §5: `DPoP` for a token bound to the request's key, else `Bearer`. */
export const tokenType = (jkt: string | undefined): 'Bearer' | 'DPoP' => (jkt === undefined ? 'Bearer' : 'DPoP');

/**
 * The JWS algorithms a DPoP proof may use (RFC 9449 §5.1), as discovery's
 * `dpop_signing_alg_values_supported` and WWW-Authenticate's `algs` say: asymmetric only, never
 * `none` or HS*. `Ed25519` is RFC 9864's name for EdDSA over Ed25519 (what oauth4webapi 3 signs with).
 */
export const DPOP_ALGORITHMS = ['EdDSA', 'Ed25519', 'ES256'] as const;

/**
 * A resource server's refusal of a DPoP request (RFC 9449 §7.1): 401 with a DPoP challenge;
 * `code` invalid_dpop_proof, use_dpop_nonce (with the nonce to use) or invalid_token.
 */
export const dpopRefusal = (
  code: 'invalid_dpop_proof' | 'use_dpop_nonce' | 'invalid_token',
  message: string,
  dpopNonce?: string,
) =>
  new DomainError('unauthenticated', message, {
    challenge: 'DPoP',
    oauth: code,
    ...(dpopNonce !== undefined ? { dpopNonce } : {}),
  });

/** A token that cannot be used (ours or not, expired, of a disabled client): RFC 6750 invalid_token. */
export const invalidToken = (message: string) =>
  new DomainError('unauthenticated', message, { ...bearer, oauth: 'invalid_token' });

/** RFC 6750 insufficient_scope: the token carries none of `needed`. */
export const insufficientScope = (
  needed: readonly string[],
  message = `this call needs a token with the ${needed.join(' or ')} scope`,
) =>
  new DomainError('forbidden', message, {
    ...bearer,
    oauth: 'insufficient_scope',
    scope: needed.join(' '),
  });

/** The scopes the token carries, if it has at least one of `anyOf`; else insufficient_scope naming them. */
export function requireScope(claims: AccessTokenClaims, anyOf: string | readonly string[]): string[] {
  const needed = typeof anyOf === 'string' ? [anyOf] : anyOf;
  const granted = claims.scope.split(' ');
  if (!needed.some((scope) => granted.includes(scope))) throw insufficientScope(needed);
  return granted;
}
