import type { AccountFinder, ClientLookup, TokenStanding } from '../kernel/capabilities';
import { createAuthorization } from './authorization';
import { dpopRefusal, type AccessTokenVerifier } from '../kernel/access';
import { createBearerAuthentication, type ResourceProofCheck } from './bearer';
import { checkProof, type ProofCheck } from './dpop';
import type { ServiceConfig } from '../kernel/config';
import type { Clock, KeyRing, MacKey, Random } from '../kernel/ports';
import { decoyPasswordHash, type ScryptCost } from '../kernel/secrets';
import { createSignInGuard, defaultSignInLimits, type SignInLimits } from './sign-in-guard';
import { createIdTokenHintVerifier } from './id-token-hint';
import type { DpopProofStore, OAuthPort } from './store';
import { createAccessTokenVerifier, createTokenIssuer, type AccessTokenClaims } from './tokens';
import { userInfo, type UserInfoPort } from './userinfo';

/**
 * The OAuth/OIDC module: tokens (issuer, verifier) and what discovery publishes (the issuer, the
 * public keys); it reads no store. DPoP, the Bearer/DPoP path of resource edges, UserInfo, the
 * browser's authorization flow and the token endpoint are modules of their own (below,
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
  };
}

/**
 * DPoP (RFC 9449): proofs checked, one jti write each (the dpopProofs table). The token endpoint
 * takes it with its server nonces (./token-endpoint.ts); resource edges through `authentication`.
 */
export function createDpopModule(ports: { store: DpopProofStore; clock: Clock }) {
  const { store, clock } = ports;
  const check: ProofCheck = (proof, target, accessToken, refuse, nonces) =>
    checkProof({ store, clock, ...(nonces ? { nonces } : {}) }, proof, target, accessToken, refuse);
  return { checkProof: check };
}

/**
 * The one Bearer/DPoP path of every resource edge (UserInfo, the messages API, gRPC; ./bearer.ts):
 * what a request presents → verified claims, or the refusal.
 */
export function createAuthenticationModule(
  _ports: object,
  needs: { oauth: { verifyAccessToken: AccessTokenVerifier }; dpop: { checkProof: ProofCheck } },
) {
  // A resource request's proof for its token (`ath`), refused with a 401 DPoP challenge.
  const resourceProof: ResourceProofCheck = (proof, target, token) =>
    needs.dpop.checkProof(proof, target, token, dpopRefusal);
  return { authenticate: createBearerAuthentication(needs.oauth.verifyAccessToken, resourceProof) };
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
    passwordCost?: ScryptCost;
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
    decoyPasswordHash: decoyPasswordHash(ports.passwordCost),
  });
}
