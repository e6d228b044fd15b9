import { invalidToken, requireScope } from './bearer';
import type { User } from '../kernel/model';
import type { TokenStanding } from '../kernel/capabilities';
import type { OAuthPort } from './store';
import { grantInForce } from './user-grants';
import type { AccessTokenClaims } from './tokens';

export interface UserInfoResponse {
  sub: string;
  svcnum: string;
  email?: string;
  email_verified?: true;
  created_at: string;
  account_type?: string;
}

/** Accounts that no person operates: UserInfo names their type (spec 2.5). */
const NON_HUMAN: ReadonlySet<User['accountType']> = new Set(['ai_agent', 'programmable']);

/** Spec 2.5: exactly these fields; email only with `email`; account_type only for non-human accounts. */
export function userInfoClaims(user: User, scopes: readonly string[]): UserInfoResponse {
  return {
    sub: user.svcnumId,
    svcnum: user.svcnum,
    ...(scopes.includes('email') && user.email ? { email: user.email, email_verified: true as const } : {}),
    created_at: new Date(user.createdAt).toISOString(),
    ...(NON_HUMAN.has(user.accountType) ? { account_type: user.accountType } : {}),
  };
}

/** The store methods UserInfo calls. */
export type UserInfoPort = Pick<OAuthPort, 'getUser' | 'getUserAndGrant'>;

/**
 * One store round trip: the account, and for a token issued under a grant (`grant_id`) the grant
 * too, so that tokens of a revoked grant (code replay, /oauth/revoke, "Revoke access") stop here
 * at once rather than when they expire (RFC 6749 §4.1.2). Tokens of no grant (client_credentials,
 * agents, token exchange) are judged by the account alone. The token's other parties (its client,
 * actors, owner) come from the accounts caches: no round trip in steady state.
 */
export async function userInfo(
  store: UserInfoPort,
  standing: Pick<TokenStanding, 'tokenInForce'>,
  claims: AccessTokenClaims,
  now: number,
): Promise<UserInfoResponse> {
  const scopes = requireScope(claims, 'openid');
  const { user, grant } =
    claims.grant_id === undefined
      ? { user: await store.getUser(claims.sub), grant: undefined }
      : await store.getUserAndGrant(claims.sub, claims.grant_id);
  if (
    claims.grant_id !== undefined &&
    !(grant && grantInForce(grant, now) && grant.svcnumId === claims.sub && grant.clientId === claims.client_id)
  ) {
    throw invalidToken('the access was revoked or has expired');
  }
  if (!user) throw invalidToken('the account behind this token no longer exists');
  // Disabled means disabled: the account (as read just now), its client, its actors and owner.
  await standing.tokenInForce(claims, user);
  if ((user.numberState ?? 'active') !== 'active') {
    throw invalidToken(`the account behind this token is ${user.numberState}`);
  }
  return userInfoClaims(user, scopes);
}
