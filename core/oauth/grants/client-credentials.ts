import { oauthError } from '../../kernel/errors';
import type { AccountStatus } from '../../kernel/capabilities';
import { formatScope } from '../../kernel/scopes';
import type { TokenIssuer } from '../tokens';
import { requestedScope } from './requested-scope';
import type { GrantType } from './registry';
import { CLIENT_CREDENTIALS } from './types';

// RFC 6749 §4.4: a confidential client gets a token for itself, within its registered scopes.

export function clientCredentialsGrant(deps: { accounts: AccountStatus; issuer: TokenIssuer }): GrantType {
  const { accounts, issuer } = deps;
  return {
    type: CLIENT_CREDENTIALS,
    clients: ['api', 'provisioning', 'agent'],
    async handle(params, client) {
      const scopes = requestedScope(params, client.scopes) ?? client.scopes;
      // An agent's client acts as the agent (its svcnum_id is the subject); others act as themselves.
      const subject = client.kind === 'agent' && client.subjectId ? client.subjectId : client.clientId;
      // Account status as the accounts module caches it (an active answer at most 30 s old), like the client record.
      if (client.kind === 'provisioning' && !(client.ownerId && (await accounts.accountActive(client.ownerId)))) {
        throw oauthError('invalid_grant', 'the account of this provisioning client is not active');
      }
      if (client.kind === 'agent' && !(await accounts.entityInService(subject))) {
        throw oauthError('invalid_grant', 'the agent behind this client is not active');
      }
      const access = await issuer.accessToken({ subject, clientId: client.clientId, scopes });
      return { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn, scope: formatScope(scopes) };
    },
  };
}
