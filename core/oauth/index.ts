import type { AccountFinder, ClientLookup } from '../kernel/capabilities';
import { createAuthorization } from './authorization';
import { createBearerAuthentication } from './bearer';
import type { ServiceConfig } from '../kernel/config';
import type { Clock, KeyRing, MacKey, Random } from '../kernel/ports';
import { createSignInGuard, defaultSignInLimits, type SignInLimits } from './sign-in-guard';
import type { OAuthPort } from './store';
import { createAccessTokenVerifier, createTokenIssuer, type AccessTokenClaims } from './tokens';
import { userInfo } from './userinfo';

/**
 * The OAuth/OIDC module: tokens (issuer, verifier, the one Bearer path), the authorization flow
 * and its pages' logic, the sign-in guard, UserInfo, and what discovery publishes (the issuer, the
 * public keys). The token endpoint is a module of its own (./token-endpoint.ts): its grant types
 * come from other modules too.
 */
export function createOAuthModule(
  ports: { store: OAuthPort; keys: KeyRing; macKey: MacKey; clock: Clock; random: Random; config: ServiceConfig; signIn?: SignInLimits },
  needs: { accounts: AccountFinder & ClientLookup },
) {
  const { store, keys, macKey, clock, random, config } = ports;
  const { getClient } = needs.accounts;
  const issuer = createTokenIssuer(config, keys, clock, random);
  const verifyAccessToken = createAccessTokenVerifier(config, keys, clock);
  return {
    /** The issuer URL and cookie security of this deployment. */
    config,
    /** The keys verifiers must accept, as published at /.well-known/jwks.json. */
    publicKeys: () => keys.publicKeys(),
    issuer,
    verifyAccessToken,
    /** The one Bearer path of every edge: Authorization value(s) → verified claims, or the refusal. */
    authenticateBearer: createBearerAuthentication(verifyAccessToken),
    authorization: createAuthorization({
      store, config, clock, random, accounts: needs.accounts, macKey, getClient,
      guard: createSignInGuard({ store, clock, limits: ports.signIn ?? defaultSignInLimits }),
    }),
    /** OIDC UserInfo for verified claims (the account, and the grant the token was issued under). */
    userInfo: (claims: AccessTokenClaims) => userInfo(store, claims, clock.now()),
  };
}
