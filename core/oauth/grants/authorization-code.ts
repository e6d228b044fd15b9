import { limits } from '../../kernel/config';
import { oauthError } from '../../kernel/errors';
import { defineGrant } from '../../kernel/grant-type';
import type { Grant } from '../../kernel/model';
import type { Clock, Random } from '../../kernel/ports';
import { formatScope } from '../../kernel/scopes';
import { OPAQUE_SECRET, pkceChallenge, randomSecret, sha256 } from '../../kernel/secrets';
import type { OAuthPort as Store } from '../store';
import type { TokenIssuer } from '../tokens';
import { tokenType } from '../../kernel/access';
import { grantAccessToken } from '../user-grants';

// RFC 6749 §4.1.3 with RFC 7636 PKCE (S256): a login client redeems its code once.

const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const INVALID_CODE = 'the authorization code is invalid or expired';
const MISMATCHED_CODE = 'the authorization code was issued for another client, redirect_uri or code_verifier';
const REPLAYED_CODE = 'the authorization code was already used; tokens issued from it are revoked';

interface AuthorizationCodeDeps {
  store: Pick<Store, 'redeemCode' | 'revokeGrant' | 'createGrant' | 'getUser'>;
  clock: Clock;
  random: Random;
  issuer: TokenIssuer;
}

/** The code's grant, once redeemed: invalid_grant for a code unknown, expired, mismatched or replayed. */
async function redeem(
  { store, clock }: AuthorizationCodeDeps,
  code: string,
  bound: { clientId: string; redirectUri: string; verifier: string },
) {
  if (!OPAQUE_SECRET.test(code)) throw oauthError('invalid_grant', INVALID_CODE);
  const now = clock.now();
  const { clientId, redirectUri, verifier } = bound;
  const codeChallenge = pkceChallenge(verifier);
  const result = await store.redeemCode(sha256(code), { clientId, redirectUri, codeChallenge }, now);
  switch (result.outcome) {
    case 'unknown':
    case 'expired':
      throw oauthError('invalid_grant', INVALID_CODE);
    case 'mismatch':
      throw oauthError('invalid_grant', MISMATCHED_CODE);
    case 'replayed':
      // RFC 6749 §4.1.2: a code used twice revokes what it produced.
      await store.revokeGrant(result.grantId, now);
      throw oauthError('invalid_grant', REPLAYED_CODE);
    case 'redeemed':
      return { redeemed: result.code, now };
  }
}

export const authorizationCodeGrant = /* @__PURE__ */ defineGrant({
  name: 'authorization_code',
  clients: ['login'],
  parameters: { required: ['code', 'redirect_uri', 'code_verifier'], optional: [] },
  async handler({ client, parameters, dpopJkt }, deps: AuthorizationCodeDeps) {
    const { store, random, issuer } = deps;
    const { code, redirect_uri: redirectUri, code_verifier: verifier } = parameters;
    if (!CODE_VERIFIER.test(verifier)) {
      const { codeVerifierMin: min, codeVerifierMax: max } = limits;
      throw oauthError('invalid_request', `code_verifier must be ${min} to ${max} characters of [A-Za-z0-9-._~]`);
    }
    const { redeemed, now } = await redeem(deps, code, { clientId: client.clientId, redirectUri, verifier });
    // RFC 9449 §10: a code asked for with dpop_jkt is redeemed only with a proof of that key.
    if (redeemed.dpopJkt !== undefined && redeemed.dpopJkt !== dpopJkt) {
      throw oauthError('invalid_grant', 'the authorization code was requested for another DPoP key (dpop_jkt)');
    }
    const secret = randomSecret(random);
    const grant: Grant = {
      grantId: redeemed.grantId,
      secretHash: sha256(secret),
      clientId: redeemed.clientId,
      svcnumId: redeemed.svcnumId,
      scopes: redeemed.scopes,
      authTime: redeemed.authTime,
      createdAt: now,
      lastUsedAt: now,
      // RFC 9449 §5: the refresh token is bound to the key the code was redeemed with.
      ...(dpopJkt !== undefined ? { dpopJkt } : {}),
    };
    // Fails only if a replay revoked this grant before it existed (the tombstone wins).
    if (!(await store.createGrant(grant, now + limits.refreshIdleTtl))) {
      throw oauthError('invalid_grant', REPLAYED_CODE);
    }
    // The account may have been disabled while the code was outstanding. Disabling revokes the
    // grants that exist when it lists them; reading the user only after ours exists means one of
    // the two always sees the other. The read runs alongside the signing, so it costs no latency.
    const [user, access, idToken] = await Promise.all([
      store.getUser(grant.svcnumId),
      grantAccessToken(issuer, grant, grant.scopes, dpopJkt),
      grant.scopes.includes('openid')
        ? issuer.idToken({
            subject: grant.svcnumId,
            clientId: grant.clientId,
            authTime: grant.authTime,
            ...(client.idTokenAlg ? { alg: client.idTokenAlg } : {}),
            ...(redeemed.nonce !== undefined ? { nonce: redeemed.nonce } : {}),
          })
        : undefined,
    ]);
    if (user?.status !== 'active') {
      await store.revokeGrant(grant.grantId, now);
      throw oauthError('invalid_grant', 'the account behind this authorization code is no longer active');
    }
    return {
      access_token: access.token,
      token_type: tokenType(dpopJkt),
      expires_in: access.expiresIn,
      refresh_token: `${grant.grantId}.${secret}`,
      ...(idToken ? { id_token: idToken } : {}),
      scope: formatScope(grant.scopes),
    };
  },
});
