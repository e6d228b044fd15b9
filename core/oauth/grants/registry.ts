import type { GrantType } from '../../kernel/grant-type';

export type { GrantType, TokenResponse } from '../../kernel/grant-type';

// Grant types as plug-ins (RFC 6749 §4, §4.5 extension grants). The token endpoint authenticates
// the client, finds the grant here by its `grant_type`, checks the client may use it, and hands
// over; discovery lists `types` as `grant_types_supported`.

export interface GrantRegistry {
  /** The grant types in the order they were given (discovery's `grant_types_supported`). */
  readonly types: readonly string[];
  /** The plug-in for a `grant_type` value; a Map, so `__proto__` or `constructor` find nothing. */
  find(type: string): GrantType | undefined;
}

export function createGrantRegistry(grants: readonly GrantType[]): GrantRegistry {
  const byType = new Map(grants.map((grant) => [grant.type, grant] as const));
  if (byType.size !== grants.length) throw new Error('each grant type may be registered once');
  const types = Object.freeze(grants.map((grant) => grant.type));
  return { types, find: (type) => byType.get(type) };
}
