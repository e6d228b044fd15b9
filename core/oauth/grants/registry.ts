import type { Client, ClientKind } from '../../model';
import type { Params } from '../../params';

// Grant types as plug-ins (RFC 6749 §4, §4.5 extension grants). The token endpoint authenticates
// the client, finds the grant here by its `grant_type`, checks the client may use it, and hands
// over; discovery lists `types` as `grant_types_supported`.

/** A successful token response (RFC 6749 §5.1; RFC 8693 §2.2.1 adds `issued_token_type`). */
export interface TokenResponse {
  access_token: string;
  issued_token_type?: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token?: string | null;
  id_token?: string;
  scope: string;
}

export interface GrantType {
  /** The `grant_type` value: an RFC 6749 name or an absolute URI. */
  readonly type: string;
  /** Kinds of client that may use it; any other authenticated client gets unauthorized_client. */
  readonly clients: readonly ClientKind[];
  /** Runs the grant for an authenticated client of one of those kinds. */
  handle(params: Params, client: Client): Promise<TokenResponse>;
}

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
