import type { Client, ClientKind } from './model';
import { optionalParam, requiredParam, type Params } from './params';

// The token endpoint's table of grant types (RFC 6749 §4, §4.5 extension grants), kept as
// node-oidc-provider keeps it: each grant declares in one place its `grant_type` name, the form
// parameters it reads and its handler. The token endpoint finds a grant by name, reads the declared
// parameters (each at most once, the required ones present) and hands the handler a context;
// discovery lists the names. OAuth declares its own grants (core/oauth/grants/table.ts); another
// module adds one through its module definition's `grants` (core/registry.ts), so neither imports
// the other.

/** A successful token response (RFC 6749 §5.1; RFC 8693 §2.2.1 adds `issued_token_type`). */
export interface TokenResponse {
  access_token: string;
  issued_token_type?: string;
  /** `DPoP` when the access token is bound to the proof's key (RFC 9449 §5). */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  refresh_token?: string | null;
  id_token?: string;
  scope: string;
}

/**
 * The form parameters a grant reads, checked in this order: each at most once (RFC 6749 §3.2), a
 * required one present and not empty. Parameters it does not declare are ignored.
 */
export interface GrantParameters<Required extends string = string, Optional extends string = string> {
  readonly required: readonly Required[];
  readonly optional: readonly Optional[];
}

/** The declared parameters' values as sent (an empty value counts as not sent). */
export type ParameterValues<Required extends string = string, Optional extends string = string> = {
  readonly [Name in Required]: string;
} & { readonly [Name in Optional]?: string };

/**
 * What a handler is given for one request. An object, so that the token endpoint's cross-cutting
 * checks (sender-constrained tokens, say) can hand a grant what they established.
 */
export interface GrantContext<Required extends string = string, Optional extends string = string> {
  /** The authenticated client, of a kind the grant serves. */
  readonly client: Client;
  readonly parameters: ParameterValues<Required, Optional>;
  /** The JWK thumbprint (RFC 7638) of the request's valid DPoP proof, if it sent one (RFC 9449 §5). */
  readonly dpopJkt?: string;
}

/** One grant type: its row in the table. `Deps` is what its handler needs from the module adding it. */
export interface GrantType<Deps = never, Required extends string = string, Optional extends string = string> {
  /** The `grant_type` value: an RFC 6749 name or an absolute URI. */
  readonly name: string;
  /** Kinds of client that may use it; any other authenticated client gets unauthorized_client. */
  readonly clients: readonly ClientKind[];
  readonly parameters: GrantParameters<Required, Optional>;
  /** Runs the grant for an authenticated client of one of those kinds, with its parameters read. */
  handler(context: GrantContext<Required, Optional>, deps: Deps): Promise<TokenResponse>;
}

/** Fixes a grant's types: its parameter names become the context's typed `parameters`. */
export const defineGrant = <Deps, const Required extends string = never, const Optional extends string = never>(
  grant: GrantType<Deps, Required, Optional>,
): GrantType<Deps, Required, Optional> => grant;

/** A grant with what its handler needs: the token endpoint's table holds these. */
export interface ServedGrant {
  readonly name: string;
  readonly clients: readonly ClientKind[];
  readonly parameters: GrantParameters;
  handle(context: GrantContext): Promise<TokenResponse>;
}

export function serveGrant<Deps, Required extends string, Optional extends string>(
  grant: GrantType<Deps, Required, Optional>,
  deps: Deps,
): ServedGrant {
  const { name, clients, parameters } = grant;
  // The context's parameters were read from this grant's own declaration (readGrantParameters).
  return {
    name,
    clients,
    parameters,
    handle: (context) => grant.handler(context as GrantContext<Required, Optional>, deps),
  };
}

/** The parameters `declared` names, read from the request; invalid_request as RFC 6749 §5.2 says. */
export function readGrantParameters(params: Params, declared: GrantParameters): ParameterValues {
  const values: Record<string, string | undefined> = {};
  for (const name of declared.required) values[name] = requiredParam(params, name);
  for (const name of declared.optional) values[name] = optionalParam(params, name);
  return values as ParameterValues;
}
