import type { AccountFinder, ClientLookup, TokenStanding } from '../kernel/capabilities';
import { createAuthorization } from './authorization';
import { createBearerAuthentication } from './bearer';
import type { ServiceConfig } from '../kernel/config';
import type { Clock, KeyRing, MacKey, Random } from '../kernel/ports';
import { createSignInGuard, defaultSignInLimits, type SignInLimits } from './sign-in-guard';
import type { OAuthPort } from './store';
import { createIdTokenHintVerifier } from './id-token-hint';
import { createAccessTokenVerifier, createTokenIssuer, type AccessTokenClaims } from './tokens';
import { userInfo, type UserInfoPort } from './userinfo';

/**
 * The OAuth/OIDC module: tokens (issuer, verifier, the one Bearer path) and what discovery
 * publishes (the issuer, the public keys); it reads no store. UserInfo, the browser's
 * authorization flow and the token endpoint are modules of their own (below,
 * ./token-endpoint.ts), so that each Lambda carries only the part its routes use.
 */
export function createOAuthModule(ports: { keys: KeyRing; clock: Clock; random: Random; config: ServiceConfig }) {
  const { keys, clock, random, config } = ports;
  const verifyAccessToken = createAccessTokenVerifier(config, keys, clock);
  return {
    /** The issuer URL and cookie security of this deployment. */
    config,
    /** The keys verifiers must accept, as published at /.well-known/jwks.json. */
    publicKeys: () => keys.publicKeys(),
    issuer: createTokenIssuer(config, keys, clock, random),
    verifyAccessToken,
    /** The one Bearer path of every edge: Authorization value(s) → verified claims, or the refusal. */
    authenticateBearer: createBearerAuthentication(verifyAccessToken),
  };
}

/**
 * The UserInfo module: OIDC UserInfo for verified claims of a token in force (every party it names
 * enabled), of the account and the grant the token was issued under.
 */
export function createUserInfoModule(
  ports: { store: UserInfoPort; clock: Clock },
  needs: { accounts: Pick<TokenStanding, 'tokenInForce'> },
) {
  const { store, clock } = ports;
  return {
    forClaims: (claims: AccessTokenClaims) => userInfo(store, needs.accounts, claims, clock.now()),
  };
}

/**
 * The authorization module: the browser side of the code flow (/oauth/authorize, sign-in with
 * its guard, consent, the account page).
 */
export function createAuthorizationModule(
  ports: {
    store: OAuthPort;
    keys: KeyRing;
    macKey: MacKey;
    clock: Clock;
    random: Random;
    config: ServiceConfig;
    signIn?: SignInLimits;
  },
  needs: { accounts: AccountFinder & ClientLookup },
) {
  const { store, clock } = ports;
  // A client enabled again is served at once: a cached disabled record is read again first (an
  // unknown id is not, so that anonymous requests cannot force a read each).
  const getClient = (clientId: string) => needs.accounts.getClientRechecked(clientId, (client) => !client?.disabled);
  return createAuthorization({
    ...ports,
    accounts: needs.accounts,
    getClient,
    // RP-Initiated Logout's id_token_hint: verified with the published keys (no signing here).
    verifyIdTokenHint: createIdTokenHintVerifier(ports.config, ports.keys),
    guard: createSignInGuard({ store, clock, limits: ports.signIn ?? defaultSignInLimits }),
  });
}
