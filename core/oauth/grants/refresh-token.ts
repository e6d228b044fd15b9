import { limits } from '../../kernel/config';
import { oauthError } from '../../kernel/errors';
import { defineGrant } from '../../kernel/grant-type';
import type { Clock } from '../../kernel/ports';
import { formatScope } from '../../kernel/scopes';
import type { OAuthPort as Store } from '../store';
import type { TokenIssuer } from '../tokens';
import { tokenType } from '../../kernel/access';
import { grantAccessToken, liveGrant } from '../user-grants';
import { requestedScope } from './requested-scope';

// RFC 6749 §6: a login client refreshes within its grant. The refresh token is not rotated.

interface RefreshTokenDeps {
  store: Pick<Store, 'getGrant' | 'touchGrant'>;
  clock: Clock;
  issuer: TokenIssuer;
}

export const refreshTokenGrant = /* @__PURE__ */ defineGrant({
  name: 'refresh_token',
  clients: ['login'],
  parameters: { required: ['refresh_token'], optional: ['scope'] },
  async handler({ client, parameters, dpopJkt }, { store, clock, issuer }: RefreshTokenDeps) {
    const now = clock.now();
    const grant = await liveGrant(store, parameters.refresh_token, now);
    if (!grant || grant.clientId !== client.clientId) {
      throw oauthError('invalid_grant', 'the refresh token is invalid, expired or revoked');
    }
    // RFC 9449 §5: a refresh token obtained with a DPoP key is used only with a proof of that key.
    if (grant.dpopJkt !== undefined && grant.dpopJkt !== dpopJkt) {
      throw dpopJkt === undefined
        ? oauthError('invalid_dpop_proof', 'this refresh token is bound to a DPoP key: send a DPoP proof of it')
        : oauthError('invalid_grant', 'the refresh token is bound to another DPoP key');
    }
    const scopes = requestedScope(parameters.scope, grant.scopes) ?? grant.scopes;
    // Slide the inactivity window, but write at most about once a day per grant.
    if (now - grant.lastUsedAt >= limits.refreshTouchInterval) {
      await store.touchGrant(grant.grantId, now, now + limits.refreshIdleTtl);
    }
    const access = await grantAccessToken(issuer, grant, scopes, dpopJkt);
    // The same refresh token stays valid: `null` says so per the spec, or the member is left out.
    return {
      access_token: access.token,
      token_type: tokenType(dpopJkt),
      expires_in: access.expiresIn,
      ...(client.refreshResponse === 'omit' ? {} : { refresh_token: null }),
      scope: formatScope(scopes),
    };
  },
});
