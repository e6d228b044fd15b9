import { OAuthError } from '../core/errors';
import type { Core } from '../core/service';
import { InvalidClientError, type PresentedCredentials } from '../core/token-service';
import { edgeHandler } from './edge';
import { formParams, header, json, oauthError, type HttpEvent } from './http';
import { lazyHandler } from './runtime';

// POST /oauth/token and POST /oauth/revoke: form-encoded in, JSON out, never cached.

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
    return { basic: { clientId: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')), clientSecret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')) } };
  } catch {
    return { malformedAuthorization: true };
  }
}

/** OAuth errors of the token and revocation endpoints: 400, or 401 for invalid_client (RFC 6749 §5.2). */
function tokenError(error: unknown) {
  if (error instanceof InvalidClientError) {
    return oauthError(error, 401, error.usedBasic ? { 'WWW-Authenticate': 'Basic realm="oauth", charset="UTF-8"' } : {});
  }
  if (error instanceof OAuthError) return oauthError(error);
  throw error;
}

export function createTokenHandler(core: Core) {
  return edgeHandler({
    '/oauth/token': {
      POST: async (event) => {
        try {
          return json(200, await core.tokens.token(formParams(event), presentedCredentials(event)));
        } catch (error) {
          return tokenError(error);
        }
      },
    },
    '/oauth/revoke': {
      POST: async (event) => {
        try {
          await core.tokens.revoke(formParams(event), presentedCredentials(event));
          return json(200, {});
        } catch (error) {
          return tokenError(error);
        }
      },
    },
  });
}

export const handler = lazyHandler(createTokenHandler);
