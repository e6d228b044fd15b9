import type { AccountStatus, ClientLookup, TokenStanding } from '../kernel/capabilities';
import type { GrantType } from '../kernel/grant-type';
import type { Clock, Random } from '../kernel/ports';
import { authorizationCodeGrant } from './grants/authorization-code';
import { clientCredentialsGrant } from './grants/client-credentials';
import { refreshTokenGrant } from './grants/refresh-token';
import { createGrantRegistry } from './grants/registry';
import type { OAuthPort } from './store';
import { createTokenService } from './token-service';
import type { TokenIssuer } from './tokens';

/**
 * The token endpoint (POST /oauth/token, /oauth/revoke) as the registry builds it: OAuth's own
 * grant types, then those other modules contribute (`needs.grants`: token exchange, from
 * provisioning), in the order discovery lists them.
 */
export function createTokenEndpointModule(
  ports: { store: OAuthPort; clock: Clock; random: Random },
  needs: { oauth: { issuer: TokenIssuer }; accounts: ClientLookup & AccountStatus & TokenStanding; grants: { grant: GrantType } },
) {
  const { store, clock, random } = ports;
  const { issuer } = needs.oauth;
  const grants = createGrantRegistry([
    authorizationCodeGrant({ store, clock, random, issuer }),
    refreshTokenGrant({ store, clock, issuer }),
    clientCredentialsGrant({ accounts: needs.accounts, issuer }),
    needs.grants.grant,
  ]);
  return createTokenService({ store, clock, grants, getClientRechecked: needs.accounts.getClientRechecked });
}
