import type { Core } from '../core/service';
import { bearerToken, InvalidTokenError, presentsBearer } from '../core/tokens';
import { userInfo, UserInfoError } from '../core/userinfo';
import { edgeHandler } from './edge';
import { bearerChallengeOnly, header, json, type HttpEvent, type HttpResult } from './http';
import { lazyHandler } from './runtime';

// GET/POST /oauth/userinfo with a Bearer access token (OIDC Core §5.3, RFC 6750 errors).

const challenge = (error: string, description: string) => `Bearer realm="userinfo", error="${error}", error_description="${description}"`;

function refusal(status: 400 | 401 | 403, error: 'invalid_request' | 'invalid_token' | 'insufficient_scope', description: string): HttpResult {
  return json(status, { error, error_description: description }, { 'WWW-Authenticate': challenge(error, description) });
}

export function createUserInfoHandler(core: Core) {
  async function handle(event: HttpEvent): Promise<HttpResult> {
    const authorization = header(event, 'authorization');
    if (!presentsBearer(authorization)) return bearerChallengeOnly('userinfo');
    const token = bearerToken(authorization);
    if (!token) return refusal(400, 'invalid_request', 'the Authorization header must be: Bearer <access token>');
    try {
      const claims = await core.verifyAccessToken(token);
      return json(200, await userInfo(core.store, claims, core.clock.now()));
    } catch (error) {
      if (error instanceof InvalidTokenError) return refusal(401, 'invalid_token', error.message);
      if (error instanceof UserInfoError) return refusal(error.error === 'insufficient_scope' ? 403 : 401, error.error, error.message);
      throw error;
    }
  }
  return edgeHandler({ '/oauth/userinfo': { GET: handle, POST: handle } });
}

export const handler = lazyHandler(createUserInfoHandler);
