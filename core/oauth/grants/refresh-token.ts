import { limits } from '../../kernel/config';
import { oauthError } from '../../kernel/errors';
import { requiredParam } from '../../kernel/params';
import type { Clock } from '../../kernel/ports';
import { formatScope } from '../../kernel/scopes';
import type { OAuthPort as Store } from '../store';
import type { TokenIssuer } from '../tokens';
import { grantAccessToken, liveGrant } from '../user-grants';
import { requestedScope } from './requested-scope';
import type { GrantType } from './registry';
import { REFRESH_TOKEN } from './types';

// RFC 6749 §6: a login client refreshes within its grant. The refresh token is not rotated.

export function refreshTokenGrant(deps: { store: Pick<Store, 'getGrant' | 'touchGrant'>; clock: Clock; issuer: TokenIssuer }): GrantType {
  const { store, clock, issuer } = deps;
  return {
    type: REFRESH_TOKEN,
    clients: ['login'],
    async handle(params, client) {
      const token = requiredParam(params, 'refresh_token');
      const now = clock.now();
      const grant = await liveGrant(store, token, now);
      if (!grant || grant.clientId !== client.clientId) {
        throw oauthError('invalid_grant', 'the refresh token is invalid, expired or revoked');
      }
      const scopes = requestedScope(params, grant.scopes) ?? grant.scopes;
      // Slide the inactivity window, but write at most about once a day per grant.
      if (now - grant.lastUsedAt >= limits.refreshTouchInterval) {
        await store.touchGrant(grant.grantId, now, now + limits.refreshIdleTtl);
      }
      const access = await grantAccessToken(issuer, grant, scopes);
      // The same refresh token stays valid: `null` says so per the spec, or the member is left out.
      return {
        access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn,
        ...(client.refreshResponse === 'omit' ? {} : { refresh_token: null }), scope: formatScope(scopes),
      };
    },
  };
}
