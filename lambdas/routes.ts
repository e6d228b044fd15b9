import { pickModules, type AnyModuleDefinition, type Modules } from '../core/registry';
import { browserModules, createBrowserHandler } from './browser';
import { createDiscoveryHandler, discoveryModules } from './discovery';
import { routeGroupNames, routeManifest, type RouteGroup } from './manifest';
import { createMessagesHandler, messagesModules } from './messages';
import { createPublicHandler, publicModules } from './public';
import { createTokenHandler, tokenModules } from './token';
import { createUserInfoHandler, userInfoModules } from './userinfo';

export type { RouteGroup } from './manifest';

// The route groups of lambdas/manifest.ts with their handler factories and the modules each one's
// routes use (as its Lambda entry builds them): what the local runner serves. Routes and entries
// come from the manifest only; the CDK stack reads the manifest itself and never loads this module.

const handlerFactories = {
  browser: { create: createBrowserHandler, modules: browserModules },
  token: { create: createTokenHandler, modules: tokenModules },
  userinfo: { create: createUserInfoHandler, modules: userInfoModules },
  messages: { create: createMessagesHandler, modules: messagesModules },
  discovery: { create: createDiscoveryHandler, modules: discoveryModules },
  public: { create: createPublicHandler, modules: publicModules },
} as const satisfies Record<
  RouteGroup,
  { create: (modules: Modules) => unknown; modules: readonly AnyModuleDefinition[] }
>;

type RouteGroups = { readonly [G in RouteGroup]: (typeof routeManifest)[G] & (typeof handlerFactories)[G] };

export const routeGroups = Object.fromEntries(
  routeGroupNames.map((group) => [group, { ...routeManifest[group], ...handlerFactories[group] }]),
) as RouteGroups;

/** Just the modules a group's routes use, out of a process's full set: an edge gets no more. */
export function modulesOf<G extends RouteGroup>(group: G, modules: Modules): Modules {
  return pickModules(modules, routeGroups[group].modules) as Modules;
}
