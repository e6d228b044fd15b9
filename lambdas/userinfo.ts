import { createDynamoAccountsStore } from '../core/adapters/dynamo-accounts-store';
import { createDynamoOAuthStore } from '../core/adapters/dynamo-oauth-store';
import { dynamoStore } from '../core/adapters/dynamo-store';
import { httpsIssuer } from '../core/kernel/config';
import { oauthModule, userInfoModule, type Modules } from '../core/registry';
import { edgeHandler } from './edge';
import { headerValues, json, type HttpEvent, type HttpResult } from './http';
import { lambdaHandler } from './runtime';

// GET/POST /oauth/userinfo with a Bearer access token (OIDC Core §5.3, RFC 6750 errors).

/** The modules this group's routes use. */
export const userInfoModules = [oauthModule, userInfoModule] as const;

export function createUserInfoHandler({ oauth, userInfo }: Pick<Modules, 'oauth' | 'userInfo'>) {
  async function handle(event: HttpEvent): Promise<HttpResult> {
    // Every Authorization value: RFC 6750 §3.1, more than one is invalid_request.
    const claims = await oauth.authenticateBearer(headerValues(event, 'authorization'));
    return json(200, await userInfo.forClaims(claims));
  }
  return edgeHandler(
    { '/oauth/userinfo': { GET: handle, POST: handle } },
    { realm: 'userinfo', secure: httpsIssuer(oauth.config) },
  );
}

export const handler = lambdaHandler(userInfoModules, createUserInfoHandler, {
  store: dynamoStore(createDynamoAccountsStore, createDynamoOAuthStore),
});
