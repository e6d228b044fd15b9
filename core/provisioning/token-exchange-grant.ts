import { oauthError } from '../kernel/errors';
import { defineGrant } from '../kernel/grant-type';
import type { CallerRefusals, ProvisioningCallers } from './callers';
import type { TokenExchange } from './exchange';

// RFC 8693 token exchange at the token endpoint: the grant type the tokenExchange module adds to
// the token endpoint's table through its definition (core/registry.ts). The ExchangeToken RPC's
// rules (one function, core/provisioning/exchange.ts) for a provisioning client that proves its
// secret instead of presenting its Bearer token. It must be the caller the RPC admits: an enabled
// provisioning client of an active account holding prov:agents (core/provisioning/callers.ts).

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

/** The scope the ExchangeToken RPC needs, held here by the client's registration. */
const EXCHANGE_SCOPE = 'prov:agents';

/** A client the RPC would not admit may not use this grant (RFC 6749 §5.2 unauthorized_client). */
const TOKEN_ENDPOINT_REFUSALS: CallerRefusals = {
  client: () => oauthError('unauthorized_client', 'only a provisioning client may use token exchange'),
  scope: (needed) =>
    oauthError('unauthorized_client', `token exchange needs a client registered with the ${needed.join(' or ')} scope`),
  owner: () => oauthError('unauthorized_client', 'the account of this provisioning client is not active'),
};

/** What the grant needs: the tokenExchange module as built (core/provisioning/index.ts). */
export interface TokenExchangeGrantDeps {
  exchange: TokenExchange;
  provisioningCaller: ProvisioningCallers;
}

export const tokenExchangeGrant = /* @__PURE__ */ defineGrant({
  name: TOKEN_EXCHANGE,
  clients: ['provisioning'],
  // RFC 8693 §2.1 (and RFC 8707's resource); which are needed, and how they combine, is the
  // exchange's to say, in the same words over gRPC.
  parameters: {
    required: [],
    optional: [
      'subject_token',
      'subject_token_type',
      'actor_token',
      'actor_token_type',
      'requested_token_type',
      'scope',
      'audience',
      'resource',
    ],
  },
  async handler({ client, parameters, dpopJkt }, { exchange, provisioningCaller }: TokenExchangeGrantDeps) {
    const caller = await provisioningCaller(client, client.scopes, EXCHANGE_SCOPE, TOKEN_ENDPOINT_REFUSALS);
    const result = await exchange(caller, {
      subjectToken: parameters.subject_token,
      subjectTokenType: parameters.subject_token_type,
      actorToken: parameters.actor_token,
      actorTokenType: parameters.actor_token_type,
      requestedTokenType: parameters.requested_token_type,
      scope: parameters.scope,
      audience: parameters.audience,
      resource: parameters.resource,
      // RFC 9449 §5: a request with a DPoP proof gets a token bound to its key.
      ...(dpopJkt !== undefined ? { jkt: dpopJkt } : {}),
    });
    // RFC 8693 §2.2.1.
    return {
      access_token: result.accessToken,
      issued_token_type: result.issuedTokenType,
      token_type: result.tokenType,
      expires_in: result.expiresIn,
      scope: result.scope,
    };
  },
});
