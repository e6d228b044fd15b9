import type { AccountStatus, ClientLookup, TokenStanding } from '../kernel/capabilities';
import { serveGrant, type ServedGrant } from '../kernel/grant-type';
import type { Clock, Random } from '../kernel/ports';
import { createGrantTable, oauthGrants } from './grants/table';
import type { OAuthPort } from './store';
import { createTokenService } from './token-service';
import type { TokenIssuer } from './tokens';

/**
 * The token endpoint (POST /oauth/token, /oauth/revoke) as the registry builds it: OAuth's own
 * grant types (./grants/table.ts `oauthGrants`), then `added`, those the modules it needs add
 * through their definitions' `grants` (core/registry.ts), in the order discovery lists them.
 */
export function createTokenEndpointModule(
  ports: { store: OAuthPort; clock: Clock; random: Random },
  needs: { oauth: { issuer: TokenIssuer }; accounts: ClientLookup & AccountStatus & TokenStanding },
  added: readonly ServedGrant[],
) {
  const { store, clock, random } = ports;
  const deps = { store, clock, random, issuer: needs.oauth.issuer, accounts: needs.accounts };
  const grants = createGrantTable([...oauthGrants.map((grant) => serveGrant(grant, deps)), ...added]);
  return createTokenService({ store, clock, grants, getClientRechecked: needs.accounts.getClientRechecked });
}
