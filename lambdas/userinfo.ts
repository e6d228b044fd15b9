import type { Core } from '../core/service';
import { userInfo } from '../core/userinfo';
import { edgeHandler } from './edge';
import { headerValues, json, type HttpEvent, type HttpResult } from './http';
import { lazyHandler } from './runtime';

// GET/POST /oauth/userinfo with a Bearer access token (OIDC Core §5.3, RFC 6750 errors).

export function createUserInfoHandler(core: Core) {
  async function handle(event: HttpEvent): Promise<HttpResult> {
    // Every Authorization value: RFC 6750 §3.1, more than one is invalid_request.
    const claims = await core.authenticateBearer(headerValues(event, 'authorization'));
    return json(200, await userInfo(core.store, claims, core.clock.now()));
  }
  return edgeHandler({ '/oauth/userinfo': { GET: handle, POST: handle } }, { realm: 'userinfo' });
}

export const handler = lazyHandler(createUserInfoHandler);
