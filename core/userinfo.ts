import type { User } from './model';
import type { Store } from './store';
import type { AccessTokenClaims } from './tokens';

/** Why UserInfo refuses: RFC 6750 §3.1 codes. */
export class UserInfoError extends Error {
  constructor(readonly error: 'invalid_token' | 'insufficient_scope', description: string) {
    super(description);
  }
}

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

export async function userInfo(store: Store, claims: AccessTokenClaims): Promise<UserInfoResponse> {
  const scopes = claims.scope.split(' ');
  if (!scopes.includes('openid')) throw new UserInfoError('insufficient_scope', 'UserInfo needs a token with the openid scope');
  const user = await store.getUser(claims.sub);
  if (!user || user.status === 'disabled') throw new UserInfoError('invalid_token', 'the account behind this token no longer exists');
  if ((user.numberState ?? 'active') !== 'active') throw new UserInfoError('invalid_token', `the account behind this token is ${user.numberState}`);
  return userInfoClaims(user, scopes);
}
