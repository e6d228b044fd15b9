import { oauthError } from '../../kernel/errors';
import type { AccountStatus, TokenStanding } from '../../kernel/capabilities';
import { formatScope } from '../../kernel/scopes';
import type { TokenIssuer } from '../tokens';
import { requestedScope } from './requested-scope';
import type { GrantType } from './registry';
import { CLIENT_CREDENTIALS } from './types';

// RFC 6749 §4.4: a confidential client gets a token for itself, within its registered scopes.

export function clientCredentialsGrant(deps: { accounts: Pick<AccountStatus, 'entityInService'> & Pick<TokenStanding, 'tokenRefusal'>; issuer: TokenIssuer }): GrantType {
  const { accounts, issuer } = deps;
  return {
    type: CLIENT_CREDENTIALS,
    clients: ['api', 'provisioning', 'agent'],
    async handle(params, client) {
      const scopes = requestedScope(params, client.scopes) ?? client.scopes;
      // An agent's client acts as the agent (its svcnum_id is the subject); others act as themselves.
      const subject = client.kind === 'agent' && client.subjectId ? client.subjectId : client.clientId;
      if (client.kind === 'provisioning' && !client.ownerId) throw oauthError('invalid_grant', 'this provisioning client has no owner account');
      // Disabled means disabled: no token its first use would refuse (an owner account not active,
      // an agent's owner), judged as every path that accepts the token judges it (at most 30 s late).
      const refused = await accounts.tokenRefusal({ client_id: client.clientId, sub: subject });
      if (refused) throw oauthError('invalid_grant', `no token can be issued: ${refused}`);
      if (client.kind === 'agent' && !(await accounts.entityInService(subject))) {
        throw oauthError('invalid_grant', 'the agent behind this client is not active');
      }
      const access = await issuer.accessToken({ subject, clientId: client.clientId, scopes });
      return { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn, scope: formatScope(scopes) };
    },
  };
}
