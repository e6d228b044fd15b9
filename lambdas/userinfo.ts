import { createDynamoAccountsStore } from '../core/adapters/dynamo-accounts-store';
import { createDynamoDpopStore } from '../core/adapters/dynamo-dpop-store';
import { createDynamoOAuthStore } from '../core/adapters/dynamo-oauth-store';
import { dynamoStore } from '../core/adapters/dynamo-store';
import { httpsIssuer } from '../core/kernel/config';
import { authenticationModule, oauthModule, userInfoModule, type Modules } from '../core/registry';
import { edgeHandler } from './edge';
import { json, presentedAccess, type HttpEvent, type HttpResult } from './http';
import { lambdaHandler } from './runtime';

// GET/POST /oauth/userinfo with a Bearer or DPoP access token (OIDC Core §5.3, RFC 6750 and RFC 9449 errors).

/** The modules this group's routes use. */
export const userInfoModules = [oauthModule, authenticationModule, userInfoModule] as const;

export function createUserInfoHandler({
  oauth,
  authentication,
  userInfo,
}: Pick<Modules, 'oauth' | 'authentication' | 'userInfo'>) {
  async function handle(event: HttpEvent): Promise<HttpResult> {
    // Every Authorization value: RFC 6750 §3.1, more than one is invalid_request.
    const claims = await authentication.authenticate(presentedAccess(event, oauth.config.issuer));
    return json(200, await userInfo.forClaims(claims));
  }
  return edgeHandler(
    { '/oauth/userinfo': { GET: handle, POST: handle } },
    { realm: 'userinfo', secure: httpsIssuer(oauth.config) },
  );
}

export const handler = lambdaHandler(userInfoModules, createUserInfoHandler, {
  store: dynamoStore(createDynamoAccountsStore, createDynamoOAuthStore, createDynamoDpopStore),
});
