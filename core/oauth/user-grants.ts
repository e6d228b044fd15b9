import { limits } from '../kernel/config';
import type { Grant } from '../kernel/model';
import type { Clock } from '../kernel/ports';
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
export async function liveGrant(
  store: Pick<Store, 'getGrant'>,
  refreshToken: string,
  now: number,
): Promise<Grant | undefined> {
  const match = REFRESH_TOKEN.exec(refreshToken);
  if (!match) return undefined;
  const grant = await store.getGrant(match[1]!);
  if (!grant || !grantInForce(grant, now) || !safeEqual(sha256(match[2]!), grant.secretHash)) return undefined;
  return grant;
}

/** Every access token of a grant names it, the first and each refreshed one: one grant = one consent chain. */
export const grantAccessToken = (
  issuer: TokenIssuer,
  grant: Pick<Grant, 'grantId' | 'svcnumId' | 'clientId' | 'authTime'>,
  scopes: string[],
  /** The thumbprint of the request's DPoP key: the token is bound to it (RFC 9449 §6). */
  jkt?: string,
) =>
  issuer.accessToken({
    subject: grant.svcnumId,
    clientId: grant.clientId,
    scopes,
    authTime: grant.authTime,
    grantId: grant.grantId,
    ...(jkt !== undefined ? { jkt } : {}),
  });

/** The store methods an account's grants are read and revoked with (the account page, the admin CLI). */
export type UserGrantsPort = Pick<Store, 'deleteConsent' | 'getGrant' | 'listConsents' | 'listGrants' | 'revokeGrant'>;

/**
 * An account's grants, listed and revoked: the account page's "Revoke access" and the operators'
 * `grant revoke` are these calls. A revoked grant's refresh token fails with invalid_grant at once
 * (grants are read strongly consistent and never cached).
 */
export function createUserGrants(ports: { store: UserGrantsPort; clock: Clock }) {
  const { store, clock } = ports;
  /** Revokes the grants still in force (revoking is idempotent; a revoked one keeps its first time). */
  const revokeEach = async (grants: Grant[]) => {
    const now = clock.now();
    const live = grants.filter((grant) => grantInForce(grant, now));
    for (const grant of live) await store.revokeGrant(grant.grantId, now);
    return live.map((grant) => ({ ...grant, revokedAt: now }));
  };
  return {
    /** The account's grants in force, oldest first. */
    async inForce(svcnumId: string): Promise<Grant[]> {
      const now = clock.now();
      const grants = await store.listGrants(svcnumId);
      return grants.filter((grant) => grantInForce(grant, now)).sort((a, b) => a.createdAt - b.createdAt);
    },

    /**
     * One grant, as RFC 7009 revocation of its refresh token does (the consent stays: the person is
     * not asked again). `undefined` for an unknown id: no tombstone is left for a mistyped one.
     */
    async revoke(grantId: string): Promise<Grant | undefined> {
      const grant = await store.getGrant(grantId);
      if (!grant) return undefined;
      if (grant.revokedAt !== undefined) return grant;
      const now = clock.now();
      await store.revokeGrant(grantId, now);
      return { ...grant, revokedAt: now };
    },

    /** "Revoke access" to one application: forget the consent and revoke every grant it holds. */
    async revokeClient(svcnumId: string, clientId: string): Promise<Grant[]> {
      await store.deleteConsent(svcnumId, clientId);
      return revokeEach(await store.listGrants(svcnumId, clientId));
    },

    /** "Revoke access" to every application of the account; returns the grants it revoked. */
    async revokeAll(svcnumId: string): Promise<Grant[]> {
      for (const consent of await store.listConsents(svcnumId)) await store.deleteConsent(svcnumId, consent.clientId);
      return revokeEach(await store.listGrants(svcnumId));
    },
  };
}

export type UserGrants = ReturnType<typeof createUserGrants>;
