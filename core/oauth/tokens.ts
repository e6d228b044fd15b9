import { createLocalJWKSet, errors as joseErrors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { invalidToken, type AccessTokenClaims, type AccessTokenInput } from '../kernel/access';

export type { AccessTokenClaims, AccessTokenInput } from '../kernel/access';
import { newUlid } from '../kernel/ids';
import { DomainError } from '../kernel/errors';
import { apiAudience, limits, type ServiceConfig } from '../kernel/config';
import type { Clock, KeyRing, Random, SigningAlg } from '../kernel/ports';
import { sha256 } from '../kernel/secrets';
import { sharedReads } from '../kernel/cache';

const encodeJson = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/**
 * A compact JWS (RFC 7515) signed through the Signer port. jose cannot sign with a key it does
 * not hold (KMS), so we assemble the three parts here and let jose do all the verifying.
 */
async function signJwt(
  keys: KeyRing,
  typ: string,
  payload: Record<string, unknown>,
  alg: SigningAlg = 'EdDSA',
): Promise<string> {
  const signer = await keys.activeSigner(alg);
  const signingInput = `${encodeJson({ alg, typ, kid: signer.kid })}.${encodeJson(payload)}`;
  const signature = await signer.sign(Buffer.from(signingInput, 'ascii'));
  return `${signingInput}.${Buffer.from(signature).toString('base64url')}`;
}

export interface IdTokenInput {
  subject: string;
  clientId: string;
  authTime: number;
  nonce?: string;
  /** The client's ID token algorithm (its record's idTokenAlg); EdDSA by default. */
  alg?: SigningAlg;
}

const epochSeconds = (ms: number) => Math.floor(ms / 1000);

export function createTokenIssuer(config: ServiceConfig, keys: KeyRing, clock: Clock, random: Random) {
  return {
    /** RFC 9068 JWT access token. Returns the token and its lifetime in seconds. */
    async accessToken(input: AccessTokenInput): Promise<{ token: string; expiresIn: number }> {
      const iat = epochSeconds(clock.now());
      const expiresIn = Math.min(limits.accessTokenTtl / 1000, (input.expiresBy ?? Infinity) - iat);
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
        ...(input.jkt !== undefined ? { cnf: { jkt: input.jkt } } : {}),
      });
      return { token, expiresIn };
    },

    /** OIDC Core §2 ID token, audience the client. */
    async idToken(input: IdTokenInput): Promise<string> {
      const iat = epochSeconds(clock.now());
      return signJwt(
        keys,
        'JWT',
        {
          iss: config.issuer,
          sub: input.subject,
          aud: input.clientId,
          azp: input.clientId,
          iat,
          exp: iat + limits.idTokenTtl / 1000,
          auth_time: epochSeconds(input.authTime),
          ...(input.nonce !== undefined ? { nonce: input.nonce } : {}),
        },
        input.alg,
      );
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
/**
 * Longer tokens (delegation chains nested deep) are checked in full on every use, so what the
 * kept tokens take stays bounded whatever a token holds.
 */
export const VERIFIED_TOKEN_MAX_LENGTH = 2_048;

/** Freezes an object and every object in it (an `act` chain): kept claims are shared by every later use. */
function deepFrozen<T extends object>(value: T): T {
  for (const member of Object.values(value)) {
    if (member !== null && typeof member === 'object') deepFrozen(member as object);
  }
  return Object.freeze(value);
}

/** Whether verified claims lack the shape this service's tokens always have. */
const malformedClaims = (payload: JWTPayload) =>
  typeof payload.sub !== 'string' ||
  typeof payload.client_id !== 'string' ||
  typeof payload.scope !== 'string' ||
  (payload.grant_id !== undefined && (typeof payload.grant_id !== 'string' || !GRANT_ID.test(payload.grant_id)));

/**
 * Verifies our access tokens locally: algorithm, issuer, audience, type and expiry pinned; a
 * refusal is invalid_token.
 */
export function createAccessTokenVerifier(config: ServiceConfig, keys: KeyRing, clock: Clock) {
  let cache: { jwks: ReturnType<typeof createLocalJWKSet>; kids: Set<string>; loadedAt: number } | undefined;

  async function keySet(kid: string | undefined) {
    const now = Date.now();
    const stale =
      !cache ||
      now - cache.loadedAt > KEY_CACHE_TTL ||
      (kid !== undefined && !cache.kids.has(kid) && now - cache.loadedAt > KEY_RELOAD_MIN_INTERVAL);
    if (stale) {
      const publicKeys = await keys.publicKeys();
      const kids = new Set(publicKeys.map((key) => key.kid));
      cache = { jwks: createLocalJWKSet({ keys: publicKeys }), kids, loadedAt: now };
    }
    return cache!.jwks;
  }

  // A client sends the same access token on every call until it expires, so a token that verified
  // is kept (as Envoy's jwt_authn cache does) and its signature is checked once per process. Each
  // use still checks its expiry against the clock, and that its signing key is still in the key
  // ring (a retired key's tokens are refused from the next key reload on, as on a full check). The
  // key is the token's SHA-256, so a look-up's timing tells nothing about a token's bytes; only
  // tokens that verified are kept, so bad tokens cannot fill it.
  const verified = new Map<string, { claims: AccessTokenClaims; kid: string }>();

  async function verifyInFull(token: string, cacheKey: string): Promise<AccessTokenClaims> {
    try {
      const keyFor: JWTVerifyGetKey = (header, jws) => keySet(header.kid).then((jwks) => jwks(header, jws));
      const { payload, protectedHeader } = await jwtVerify(token, keyFor, {
        algorithms: ['EdDSA'],
        issuer: config.issuer,
        audience: apiAudience(config),
        typ: 'at+jwt',
        currentDate: new Date(clock.now()),
        requiredClaims: ['sub', 'exp', 'iat', 'client_id', 'scope', 'jti'],
      });
      if (malformedClaims(payload)) throw invalidToken('the access token has malformed claims');
      const claims = deepFrozen(payload) as AccessTokenClaims;
      if (typeof protectedHeader.kid === 'string' && token.length <= VERIFIED_TOKEN_MAX_LENGTH) {
        if (verified.size >= VERIFIED_TOKENS_MAX) verified.delete(verified.keys().next().value!);
        verified.set(cacheKey, { claims, kid: protectedHeader.kid });
      }
      return claims;
    } catch (error) {
      if (error instanceof DomainError) throw error;
      if (error instanceof joseErrors.JWTExpired) throw invalidToken('the access token expired');
      if (error instanceof joseErrors.JOSEError || error instanceof TypeError) {
        throw invalidToken('the access token is invalid');
      }
      throw error;
    }
  }
  // The first uses of a token that arrive together (a client's parallel calls) share one check.
  const firstUse = sharedReads(verifyInFull, (_token, cacheKey) => cacheKey);

  return async function verifyAccessToken(token: string): Promise<AccessTokenClaims> {
    const cacheKey = sha256(token);
    const known = verified.get(cacheKey);
    if (known) {
      // jose's rule, as in the full check: expired once exp <= now, in whole seconds (exp is required there).
      if (known.claims.exp! <= epochSeconds(clock.now())) {
        verified.delete(cacheKey);
        throw invalidToken('the access token expired');
      }
      await keySet(known.kid);
      if (cache!.kids.has(known.kid)) return known.claims;
      // Its key was retired: the full check refuses it, with the reason.
      verified.delete(cacheKey);
    }
    return firstUse(token, cacheKey);
  };
}

export type AccessTokenVerifier = ReturnType<typeof createAccessTokenVerifier>;
