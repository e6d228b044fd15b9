import { oauthError } from '../../kernel/errors';
import type { AccountStatus, TokenStanding } from '../../kernel/capabilities';
import { defineGrant } from '../../kernel/grant-type';
import { formatScope } from '../../kernel/scopes';
import type { TokenIssuer } from '../tokens';
import { tokenType } from '../../kernel/access';
import { requestedScope } from './requested-scope';

// RFC 6749 §4.4: a confidential client gets a token for itself, within its registered scopes.

interface ClientCredentialsDeps {
  accounts: Pick<AccountStatus, 'entityInService'> & Pick<TokenStanding, 'tokenRefusal'>;
  issuer: TokenIssuer;
}

export const clientCredentialsGrant = /* @__PURE__ */ defineGrant({
  name: 'client_credentials',
  clients: ['api', 'provisioning', 'agent'],
  parameters: { required: [], optional: ['scope'] },
  async handler({ client, parameters, dpopJkt }, { accounts, issuer }: ClientCredentialsDeps) {
    const scopes = requestedScope(parameters.scope, client.scopes) ?? client.scopes;
    // An agent's client acts as the agent (its svcnum_id is the subject); others act as themselves.
    const subject = client.kind === 'agent' && client.subjectId ? client.subjectId : client.clientId;
    if (client.kind === 'provisioning' && !client.ownerId) {
      throw oauthError('invalid_grant', 'this provisioning client has no owner account');
    }
    // Disabled means disabled: no token its first use would refuse (an owner account not active,
    // an agent's owner), judged as every path that accepts the token judges it (at most 30 s late).
    const refused = await accounts.tokenRefusal({ client_id: client.clientId, sub: subject });
    if (refused) throw oauthError('invalid_grant', `no token can be issued: ${refused}`);
    if (client.kind === 'agent' && !(await accounts.entityInService(subject))) {
      throw oauthError('invalid_grant', 'the agent behind this client is not active');
    }
    const bound = dpopJkt !== undefined ? { jkt: dpopJkt } : {};
    const access = await issuer.accessToken({ subject, clientId: client.clientId, scopes, ...bound });
    return {
      access_token: access.token,
      token_type: tokenType(dpopJkt),
      expires_in: access.expiresIn,
      scope: formatScope(scopes),
    };
  },
});
