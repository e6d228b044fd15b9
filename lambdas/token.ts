import { createDynamoAccountsStore } from '../core/adapters/dynamo-accounts-store';
import { createDynamoDpopStore } from '../core/adapters/dynamo-dpop-store';
import { createDynamoOAuthStore } from '../core/adapters/dynamo-oauth-store';
import { dynamoStore } from '../core/adapters/dynamo-store';
import { httpsIssuer } from '../core/kernel/config';
import { oauthModule, tokenEndpointModule, type Modules } from '../core/registry';
import type { PresentedCredentials } from '../core/oauth/token-service';
import { edgeHandler } from './edge';
import { formParams, header, headerValues, json, type HttpEvent } from './http';
import { lambdaHandler } from './runtime';

// POST /oauth/token and POST /oauth/revoke: form-encoded in, JSON out, never cached. Refusals
// are RFC 6749 §5.2 answers made by the edge (400; invalid_client 401, with a Basic challenge
// when the client tried Basic).

/** RFC 6749 §2.3.1: Basic credentials are form-urlencoded before base64. */
function presentedCredentials(event: HttpEvent): PresentedCredentials {
  const authorization = header(event, 'authorization');
  if (authorization === undefined) return {};
  const match = /^Basic ([A-Za-z0-9+/]+={0,2})$/i.exec(authorization.trim());
  if (!match) return { malformedAuthorization: true };
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return { malformedAuthorization: true };
  try {
    return {
      basic: {
        clientId: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
        clientSecret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
      },
    };
  } catch {
    return { malformedAuthorization: true };
  }
}

/** The modules this group's routes use. */
export const tokenModules = [tokenEndpointModule, oauthModule] as const;

export function createTokenHandler({ tokenEndpoint, oauth }: Pick<Modules, 'tokenEndpoint' | 'oauth'>) {
  // RFC 9449 §4.3: a proof names the endpoint as discovery publishes it (the issuer's URL).
  const target = { method: 'POST', url: `${oauth.config.issuer}/oauth/token` };
  return edgeHandler(
    {
      '/oauth/token': {
        POST: async (event) => {
          const proof = { dpop: headerValues(event, 'dpop'), target };
          const tokens = await tokenEndpoint.token(formParams(event), presentedCredentials(event), proof);
          return json(200, tokens, await tokenEndpoint.nonceHeaders());
        },
      },
      '/oauth/revoke': {
        POST: async (event) => {
          await tokenEndpoint.revoke(formParams(event), presentedCredentials(event));
          return json(200, {});
        },
      },
    },
    { realm: 'oauth', secure: httpsIssuer(oauth.config) },
  );
}

export const handler = lambdaHandler(tokenModules, createTokenHandler, {
  store: dynamoStore(createDynamoAccountsStore, createDynamoOAuthStore, createDynamoDpopStore),
});
