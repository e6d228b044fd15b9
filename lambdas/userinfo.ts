import type { Core } from '../core/service';
import { userInfo } from '../core/userinfo';
import { edgeHandler } from './edge';
import { header, json, type HttpEvent, type HttpResult } from './http';
import { lazyHandler } from './runtime';

// GET/POST /oauth/userinfo with a Bearer access token (OIDC Core §5.3, RFC 6750 errors).

export function createUserInfoHandler(core: Core) {
  async function handle(event: HttpEvent): Promise<HttpResult> {
    const claims = await core.authenticateBearer(header(event, 'authorization'));
    return json(200, await userInfo(core.store, claims, core.clock.now()));
  }
  return edgeHandler({ '/oauth/userinfo': { GET: handle, POST: handle } }, { realm: 'userinfo' });
}

export const handler = lazyHandler(createUserInfoHandler);
