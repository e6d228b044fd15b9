import type { Client, ClientKind } from './model';
import type { Params } from './params';

// The token endpoint's extension point (RFC 6749 §4.5): a grant type is a plug-in. The token
// endpoint module keeps the registry (core/oauth/token-endpoint.ts, core/oauth/grants/registry.ts);
// another module may contribute a grant (token exchange comes from provisioning) without either
// importing the other.

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

