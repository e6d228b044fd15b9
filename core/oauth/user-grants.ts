import { limits } from '../kernel/config';
import type { Grant } from '../kernel/model';
import { safeEqual, sha256 } from '../kernel/secrets';
import type { OAuthPort as Store } from './store';
import type { TokenIssuer } from './tokens';

// A user's grant: one consent chain (a code redemption and every refresh after it). Read by the
// refresh_token grant, revocation and UserInfo; never cached, so a revoked grant fails at once.

/** `<grantId>.<secret>`: the grant's id, then the secret whose SHA-256 the grant keeps. */
export const REFRESH_TOKEN = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

/** A grant is in force until revoked or idle for the refresh token's inactivity lifetime (checked on every read). */
export const grantInForce = (grant: Grant, now: number): boolean =>
  grant.revokedAt === undefined && grant.lastUsedAt + limits.refreshIdleTtl > now;

/** The grant behind a refresh token, if the token is genuine and still alive. */
export async function liveGrant(store: Pick<Store, 'getGrant'>, refreshToken: string, now: number): Promise<Grant | undefined> {
  const match = REFRESH_TOKEN.exec(refreshToken);
  if (!match) return undefined;
  const grant = await store.getGrant(match[1]!);
  if (!grant || !grantInForce(grant, now) || !safeEqual(sha256(match[2]!), grant.secretHash)) return undefined;
  return grant;
}

/** Every access token of a grant names it, the first and each refreshed one: one grant = one consent chain. */
export const grantAccessToken = (issuer: TokenIssuer, grant: Pick<Grant, 'grantId' | 'svcnumId' | 'clientId' | 'authTime'>, scopes: string[]) =>
  issuer.accessToken({ subject: grant.svcnumId, clientId: grant.clientId, scopes, authTime: grant.authTime, grantId: grant.grantId });
