import type { Core } from '../core/service';
import { createBrowserHandler } from './browser';
import { createDiscoveryHandler } from './discovery';
import { routeGroupNames, routeManifest, type RouteGroup } from './manifest';
import { createMessagesHandler } from './messages';
import { createPublicHandler } from './public';
import { createTokenHandler } from './token';
import { createUserInfoHandler } from './userinfo';

export type { RouteGroup } from './manifest';

// The route groups of lambdas/manifest.ts with their handler factories: what the local runner
// serves. Routes and entries come from the manifest only; the CDK stack reads the manifest itself
// and never loads this module.

const handlerFactories = {
  browser: createBrowserHandler,
  token: createTokenHandler,
  userinfo: createUserInfoHandler,
  messages: createMessagesHandler,
  discovery: createDiscoveryHandler,
  public: createPublicHandler,
} as const satisfies Record<RouteGroup, (core: Core) => unknown>;

type RouteGroups = { readonly [G in RouteGroup]: (typeof routeManifest)[G] & { readonly create: (typeof handlerFactories)[G] } };

export const routeGroups = Object.fromEntries(
  routeGroupNames.map((group) => [group, { ...routeManifest[group], create: handlerFactories[group] }]),
) as RouteGroups;
