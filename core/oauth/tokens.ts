import { createLocalJWKSet, errors as joseErrors, jwtVerify } from 'jose';
import { invalidToken, type AccessTokenClaims, type AccessTokenInput } from '../kernel/access';

export type { AccessTokenClaims, AccessTokenInput } from '../kernel/access';
import { newUlid } from '../kernel/ids';
import { DomainError } from '../kernel/errors';
import { apiAudience, limits, type ServiceConfig } from '../kernel/config';
import type { Clock, KeyRing, Random } from '../kernel/ports';
import { sha256 } from '../kernel/secrets';

const encodeJson = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/**
 * A compact JWS (RFC 7515) signed through the Signer port. jose cannot sign with a key it does
 * not hold (KMS), so we assemble the three parts here and let jose do all the verifying.
 */
async function signJwt(keys: KeyRing, typ: string, payload: Record<string, unknown>): Promise<string> {
  const signer = await keys.activeSigner();
  const signingInput = `${encodeJson({ alg: 'EdDSA', typ, kid: signer.kid })}.${encodeJson(payload)}`;
  const signature = await signer.sign(Buffer.from(signingInput, 'ascii'));
  return `${signingInput}.${Buffer.from(signature).toString('base64url')}`;
}

export interface IdTokenInput {
  subject: string;
  clientId: string;
  authTime: number;
  nonce?: string;
}

const epochSeconds = (ms: number) => Math.floor(ms / 1000);

export function createTokenIssuer(config: ServiceConfig, keys: KeyRing, clock: Clock, random: Random) {
  return {
    /** RFC 9068 JWT access token. Returns the token and its lifetime in seconds. */
    async accessToken(input: AccessTokenInput): Promise<{ token: string; expiresIn: number }> {
      const iat = epochSeconds(clock.now());
      const expiresIn = Math.min(limits.accessTokenTtl / 1000, input.maxLifetime ?? Infinity);
      const token = await signJwt(keys, 'at+jwt', {
        iss: config.issuer,
        sub: input.subject,
        aud: apiAudience(config),
        client_id: input.clientId,
        iat,
        exp: iat + expiresIn,
        jti: newUlid(clock, random),
        scope: input.scopes.join(' '),
        ...(input.authTime !== undefined ? { auth_time: epochSeconds(input.authTime) } : {}),
        ...(input.grantId !== undefined ? { grant_id: input.grantId } : {}),
        ...(input.act ? { act: input.act } : {}),
      });
      return { token, expiresIn };
    },

    /** OIDC Core §2 ID token, audience the client. */
    async idToken(input: IdTokenInput): Promise<string> {
      const iat = epochSeconds(clock.now());
      return signJwt(keys, 'JWT', {
        iss: config.issuer,
        sub: input.subject,
        aud: input.clientId,
        azp: input.clientId,
        iat,
        exp: iat + limits.idTokenTtl / 1000,
        auth_time: epochSeconds(input.authTime),
        ...(input.nonce !== undefined ? { nonce: input.nonce } : {}),
      });
    },
  };
}

export type TokenIssuer = ReturnType<typeof createTokenIssuer>;

// Public keys are cached per process; a token with an unknown kid triggers one reload (a key
// added for rotation) at most this often.
const KEY_CACHE_TTL = 5 * 60 * 1000;
const KEY_RELOAD_MIN_INTERVAL = 30 * 1000;

/** Grant ids are random base64url (a usable store key whatever a token claims). */
const GRANT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Access tokens whose verification a process keeps (oldest dropped first); see verifyAccessToken. */
export const VERIFIED_TOKENS_MAX = 5_000;

/** Verifies our access tokens locally: algorithm, issuer, audience, type and expiry pinned; a refusal is invalid_token. */
export function createAccessTokenVerifier(config: ServiceConfig, keys: KeyRing, clock: Clock) {
  let cache: { jwks: ReturnType<typeof createLocalJWKSet>; kids: Set<string>; loadedAt: number } | undefined;

  async function keySet(kid: string | undefined) {
    const now = Date.now();
    const stale = !cache || now - cache.loadedAt > KEY_CACHE_TTL
      || (kid !== undefined && !cache.kids.has(kid) && now - cache.loadedAt > KEY_RELOAD_MIN_INTERVAL);
    if (stale) {
      const publicKeys = await keys.publicKeys();
      cache = { jwks: createLocalJWKSet({ keys: publicKeys }), kids: new Set(publicKeys.map((key) => key.kid)), loadedAt: now };
    }
    return cache!.jwks;
  }

  // A client sends the same access token on every call until it expires, so a token that verified
  // is kept (as Envoy's jwt_authn cache does) and its signature is checked once per process. Each
  // use still checks its expiry against the clock, and that its signing key is still in the key
  // ring (a retired key's tokens are refused from the next key reload on, as on a full check). The
  // key is the token's SHA-256, so a look-up's timing tells nothing about a token's bytes; only
  // tokens that verified are kept, so bad tokens cannot fill it.
  type Verified = { claims: AccessTokenClaims; kid: string; exp: number };
  const verified = new Map<string, Verified>();

  async function stillValid(entry: Verified): Promise<boolean> {
    // jose's rule: expired once exp <= now, in whole seconds.
    if (entry.exp <= Math.floor(clock.now() / 1000)) return false;
    await keySet(entry.kid);
    return cache!.kids.has(entry.kid);
  }

  function remember(cacheKey: string, claims: AccessTokenClaims, kid: unknown) {
    if (typeof kid !== 'string' || typeof claims.exp !== 'number') return;
    if (verified.size >= VERIFIED_TOKENS_MAX) verified.delete(verified.keys().next().value!);
    verified.set(cacheKey, { claims, kid, exp: claims.exp });
  }

  return async function verifyAccessToken(token: string): Promise<AccessTokenClaims> {
    const cacheKey = sha256(token);
    const known = verified.get(cacheKey);
    if (known) {
      if (await stillValid(known)) return known.claims;
      // Checked in full below, which refuses it with the right reason.
      verified.delete(cacheKey);
    }
    try {
      const { payload, protectedHeader } = await jwtVerify(token, (header, jws) => keySet(header.kid).then((jwks) => jwks(header, jws)), {
        algorithms: ['EdDSA'],
        issuer: config.issuer,
        audience: apiAudience(config),
        typ: 'at+jwt',
        currentDate: new Date(clock.now()),
        requiredClaims: ['sub', 'exp', 'iat', 'client_id', 'scope', 'jti'],
      });
      if (typeof payload.sub !== 'string' || typeof payload.client_id !== 'string' || typeof payload.scope !== 'string'
        || (payload.grant_id !== undefined && (typeof payload.grant_id !== 'string' || !GRANT_ID.test(payload.grant_id)))) {
        throw invalidToken('the access token has malformed claims');
      }
      // Shared by every later use of the token: nobody may change it.
      const claims = Object.freeze(payload) as AccessTokenClaims;
      remember(cacheKey, claims, protectedHeader.kid);
      return claims;
    } catch (error) {
      if (error instanceof DomainError) throw error;
      if (error instanceof joseErrors.JWTExpired) throw invalidToken('the access token expired');
      if (error instanceof joseErrors.JOSEError || error instanceof TypeError) throw invalidToken('the access token is invalid');
      throw error;
    }
  };
}

export type AccessTokenVerifier = ReturnType<typeof createAccessTokenVerifier>;
