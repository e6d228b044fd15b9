import type { Core } from '../core/service';
import { createBrowserHandler } from './browser';
import { createDiscoveryHandler } from './discovery';
import { createMessagesHandler } from './messages';
import { createPublicHandler } from './public';
import { createTokenHandler } from './token';
import { createUserInfoHandler } from './userinfo';

// Every HTTP route and the Lambda (route group) that serves it. The local runner serves these
// through the same handlers; the CDK stack creates one function per group and these routes.

export const routeGroups = {
  browser: {
    entry: 'lambdas/browser.ts',
    create: createBrowserHandler,
    routes: {
      '/oauth/authorize': ['GET'],
      '/login': ['GET', 'POST'],
      '/consent': ['GET', 'POST'],
      '/account': ['GET'],
      '/account/revoke': ['GET', 'POST'],
      '/logout': ['POST'],
      '/assets/style.css': ['GET'],
      '/assets/favicon.svg': ['GET'],
    },
  },
  token: {
    entry: 'lambdas/token.ts',
    create: createTokenHandler,
    routes: { '/oauth/token': ['POST'], '/oauth/revoke': ['POST'] },
  },
  userinfo: {
    entry: 'lambdas/userinfo.ts',
    create: createUserInfoHandler,
    routes: { '/oauth/userinfo': ['GET', 'POST'] },
  },
  messages: {
    entry: 'lambdas/messages.ts',
    create: createMessagesHandler,
    routes: { '/api/messages': ['POST'] },
  },
  discovery: {
    entry: 'lambdas/discovery.ts',
    create: createDiscoveryHandler,
    routes: { '/.well-known/openid-configuration': ['GET'], '/.well-known/jwks.json': ['GET'] },
  },
  public: {
    entry: 'lambdas/public.ts',
    create: createPublicHandler,
    routes: { '/api/resolve': ['GET'], '/api/discover': ['GET'] },
  },
} as const satisfies Record<string, { entry: string; create: (core: Core) => unknown; routes: Record<string, readonly ('GET' | 'POST')[]> }>;

export type RouteGroup = keyof typeof routeGroups;
