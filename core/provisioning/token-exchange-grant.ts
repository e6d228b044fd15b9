import { oauthError } from '../kernel/errors';
import type { GrantType } from '../kernel/grant-type';
import { optionalParam } from '../kernel/params';
import type { CallerRefusals, ProvisioningCallers } from './callers';
import type { TokenExchange } from './exchange';

// RFC 8693 token exchange at the token endpoint, the grant type provisioning contributes to the
// token endpoint's registry (core/oauth/token-endpoint.ts): the ExchangeToken RPC's rules (one function,
// core/provisioning/exchange.ts) for a provisioning client that proves its secret instead of
// presenting its Bearer token. It must be the caller the RPC admits: an enabled provisioning
// client of an active account holding prov:agents (core/provisioning/callers.ts).

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

/** The scope the ExchangeToken RPC needs, held here by the client's registration. */
const EXCHANGE_SCOPE = 'prov:agents';

/** A client the RPC would not admit may not use this grant (RFC 6749 §5.2 unauthorized_client). */
const TOKEN_ENDPOINT_REFUSALS: CallerRefusals = {
  client: () => oauthError('unauthorized_client', 'only a provisioning client may use token exchange'),
  scope: (needed) => oauthError('unauthorized_client', `token exchange needs a client registered with the ${needed.join(' or ')} scope`),
  owner: () => oauthError('unauthorized_client', 'the account of this provisioning client is not active'),
};

export function tokenExchangeGrant(deps: { exchange: TokenExchange; provisioningCaller: ProvisioningCallers }): GrantType {
  const { exchange, provisioningCaller } = deps;
  return {
    type: TOKEN_EXCHANGE,
    clients: ['provisioning'],
    async handle(params, client) {
      const caller = await provisioningCaller(client, client.scopes, EXCHANGE_SCOPE, TOKEN_ENDPOINT_REFUSALS);
      // RFC 8693 §2.1; each parameter at most once (optionalParam refuses repeats).
      const input = {
        subjectToken: optionalParam(params, 'subject_token'),
        subjectTokenType: optionalParam(params, 'subject_token_type'),
        actorToken: optionalParam(params, 'actor_token'),
        actorTokenType: optionalParam(params, 'actor_token_type'),
        requestedTokenType: optionalParam(params, 'requested_token_type'),
        scope: optionalParam(params, 'scope'),
        audience: optionalParam(params, 'audience'),
        resource: optionalParam(params, 'resource'),
      };
      const result = await exchange(caller, input);
      // RFC 8693 §2.2.1.
      return {
        access_token: result.accessToken, issued_token_type: result.issuedTokenType, token_type: result.tokenType,
        expires_in: result.expiresIn, scope: result.scope,
      };
    },
  };
}
