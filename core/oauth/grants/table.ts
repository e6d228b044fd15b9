import type { AccountStatus, TokenStanding } from '../../kernel/capabilities';
import type { GrantType, ServedGrant } from '../../kernel/grant-type';
import type { Clock, Random } from '../../kernel/ports';
import type { OAuthPort } from '../store';
import type { TokenIssuer } from '../tokens';
import { authorizationCodeGrant } from './authorization-code';
import { clientCredentialsGrant } from './client-credentials';
import { refreshTokenGrant } from './refresh-token';

// The token endpoint's table (core/kernel/grant-type.ts): OAuth's own grant types, then those other
// modules add through their definitions (core/registry.ts), in the order discovery lists them.

/** What OAuth's own grants need, together: the token endpoint's ports and needs. */
export interface OAuthGrantDeps {
  store: OAuthPort;
  clock: Clock;
  random: Random;
  issuer: TokenIssuer;
  accounts: Pick<AccountStatus, 'entityInService'> & Pick<TokenStanding, 'tokenRefusal'>;
}

/** RFC 6749 §4.1, §6, §4.4: the grants the token endpoint serves itself. */
export const oauthGrants: readonly GrantType<OAuthGrantDeps>[] = [
  authorizationCodeGrant,
  refreshTokenGrant,
  clientCredentialsGrant,
];

/** The `grant_type` values of `grants`, in their order (discovery's `grant_types_supported`). */
export const grantNames = (grants: readonly Pick<GrantType, 'name'>[]): readonly string[] =>
  Object.freeze(grants.map((grant) => grant.name));

export interface GrantTable {
  /** The grant types in the order they were given (discovery's `grant_types_supported`). */
  readonly names: readonly string[];
  /** The grant for a `grant_type` value; a Map, so `__proto__` or `constructor` find nothing. */
  find(name: string): ServedGrant | undefined;
}

export function createGrantTable(grants: readonly ServedGrant[]): GrantTable {
  const byName = new Map(grants.map((grant) => [grant.name, grant] as const));
  if (byName.size !== grants.length) throw new Error('each grant type may be registered once');
  return { names: grantNames(grants), find: (name) => byName.get(name) };
}
