import { createAccountsModule, createRegistrationModule } from './accounts';
import type { ServiceConfig } from './kernel/config';
import { createDirectoryModule } from './directory';
import { createPageTokenCodec, type PageTokenCodec } from './kernel/page-token';
import { createMessagingModule } from './messaging';
import type { DerivedFailureReport } from './messaging/send';
import type { InboxWakeups } from './messaging/wakeups';
import type { HubPolling } from './messaging/stream';
import { createAuthorizationModule, createOAuthModule, createUserInfoModule } from './oauth';
import { oauthGrantTypes } from './oauth/grants/types';
import { createTokenEndpointModule } from './oauth/token-endpoint';
import type { Clock, KeyRing, MacKey, Random } from './kernel/ports';
import { defaultProvisioningConfig, type ProvisioningConfig } from './provisioning/config';
import type { FreeNumbersReport } from './provisioning/pool';
import { createProvisioningModule, createTokenExchangeModule } from './provisioning';
import { TOKEN_EXCHANGE } from './provisioning/token-exchange-grant';
import type { SignInLimits } from './oauth/sign-in-guard';
import type { Store } from './store';

// The typed registry: each domain module with the modules it needs, and the one way to build a
// set of them. Building builds each needed module once, and only those: the discovery Lambda,
// which needs oauth, never builds provisioning or the message hub.
//
// A process names the modules it wants by their definitions (not by a string), so that a Lambda
// bundle holds only the code its definitions reach: every definition below is a separate,
// side-effect-free constant that esbuild drops when nothing imports it.

/** What a process provides (its adapters and settings); modules never see more than they declare. */
export interface Infrastructure {
  store: Store;
  keys: KeyRing;
  /** Signs the sign-in form's CSRF token and device cookies. */
  macKey: MacKey;
  /** The page-token key is derived from it, and nothing else uses it (so holding it mints no sign-in token). */
  pageTokenKey: MacKey;
  clock: Clock;
  random: Random;
  config: ServiceConfig;
  /** Cool-off, leases and quotas of the provisioning API (defaults: 90-day cool-off, 10/10 agents). */
  provisioning?: ProvisioningConfig;
  /** Sign-in limits of this process (default: core/oauth/sign-in-guard.ts). */
  signIn?: SignInLimits;
  /** Logs and counts a failed derived message (auto-reply, forward): core/adapters/derived-failures.ts. */
  reportDerivedFailure?: DerivedFailureReport;
  /** Reports the free pool's size as each pool query sees it (the FreeNumbers gauge, core/adapters/metrics.ts). */
  reportFreeNumbers?: FreeNumbersReport;
  /** Wake-ups of open streams through a pub/sub engine; without, within this process only (core/messaging/wakeups.ts). */
  inboxWakeups?: InboxWakeups;
  /**
   * How the open streams' hub polls (core/messaging/stream.ts HubPolling): the store without an
   * engine (default 250 ms), with it ready (90 s) or lost (2 s); the engine's heads (3 s); the
   * owners' numbers (30 s). Each one not given is the default.
   */
  messagePolling?: Partial<HubPolling>;
}

/** The ports a module may declare: the infrastructure, settings resolved, and the one page-token codec. */
export interface ModulePorts extends Infrastructure {
  provisioning: ProvisioningConfig;
  /** Page tokens and resume cursors: one authenticated codec for every list (key derived lazily from its own key). */
  pageTokens: PageTokenCodec;
}

/**
 * A module: its name, the modules it needs, and its factory (given only the ports and needs it
 * declares). `Port`, read from the factory's `store` parameter, is the store methods it calls.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ModuleDefinition<Name extends string = string, Needs extends ModuleNeeds = ModuleNeeds, Built = unknown, Port = {}> {
  readonly name: Name;
  readonly needs: Needs;
  readonly create: (ports: ModulePorts & { store: Port }, needs: BuiltModules<Needs>) => Built;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyModuleDefinition = ModuleDefinition<string, any, unknown, any>;
type ModuleNeeds = { readonly [name: string]: AnyModuleDefinition };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type BuiltModule<D> = D extends { readonly create: (...args: any[]) => infer Built } ? Built : never;
type BuiltModules<Needs extends ModuleNeeds> = { -readonly [K in keyof Needs]: BuiltModule<Needs[K]> };
/** A list of definitions, built: name → module. */
export type ModulesOf<D extends readonly AnyModuleDefinition[]> = { [M in D[number] as M['name']]: BuiltModule<M> };

type Intersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;
/** The store methods a definition and everything it needs call. */
type PortOf<D> = D extends ModuleDefinition<string, infer Needs, unknown, infer Port>
  ? Port & Intersection<{ [K in keyof Needs]: PortOf<Needs[K]> }[keyof Needs]>
  : never;
/**
 * The store a process building `definitions` must provide: exactly the methods their ports name.
 * A Lambda gives only the adapter slices that serve it (lambdas/runtime.ts), so its bundle holds no other.
 */
export type StoreOf<D extends readonly AnyModuleDefinition[]> = Intersection<PortOf<D[number]>>;

type IsAny<T> = 0 extends 1 & T ? true : false;
/**
 * Fixes a definition's types; the factory's own parameter types are checked against the ports and
 * needs. A store port typed `any` is refused: it would let StoreOf accept any store slices.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
const defineModule = <Name extends string, Needs extends ModuleNeeds, Built, Port = {}>(
  definition: ModuleDefinition<Name, Needs, Built, Port> & (IsAny<Port> extends true ? { storePortMustBeNamed: never } : unknown),
): ModuleDefinition<Name, Needs, Built, Port> => definition;

export const accountsModule = /* @__PURE__ */ defineModule({ name: 'accounts', needs: {}, create: createAccountsModule });
/** Creating and changing accounts and clients (the admin CLI, agents' clients). */
export const registrationModule = /* @__PURE__ */ defineModule({ name: 'registration', needs: {}, create: createRegistrationModule });
export const oauthModule = /* @__PURE__ */ defineModule({ name: 'oauth', needs: {}, create: createOAuthModule });
export const userInfoModule = /* @__PURE__ */ defineModule({ name: 'userInfo', needs: { accounts: accountsModule }, create: createUserInfoModule });
/** The browser side of the code flow: authorize, sign-in, consent, the account page. */
export const authorizationModule = /* @__PURE__ */ defineModule({ name: 'authorization', needs: { accounts: accountsModule }, create: createAuthorizationModule });
export const directoryModule = /* @__PURE__ */ defineModule({ name: 'directory', needs: { accounts: accountsModule }, create: createDirectoryModule });
export const messagingModule = /* @__PURE__ */ defineModule({ name: 'messaging', needs: { accounts: accountsModule }, create: createMessagingModule });
/** Token exchange (provisioning's rules), and the grant type it adds to the token endpoint. */
export const tokenExchangeModule = /* @__PURE__ */ defineModule({
  name: 'tokenExchange', needs: { oauth: oauthModule, accounts: accountsModule }, create: createTokenExchangeModule,
});
/**
 * The grant types the token endpoint serves, in its order: OAuth's own, then token exchange.
 * Discovery publishes this list without building the endpoint; building it checks that its grant
 * registry serves exactly these.
 */
export const tokenEndpointGrantTypes = [...oauthGrantTypes, TOKEN_EXCHANGE] as const;

/** The token endpoint: OAuth's grant types and the ones other modules contribute. */
export const tokenEndpointModule = /* @__PURE__ */ defineModule({
  name: 'tokenEndpoint',
  needs: { oauth: oauthModule, accounts: accountsModule, grants: tokenExchangeModule },
  create: (ports: Parameters<typeof createTokenEndpointModule>[0], needs: Parameters<typeof createTokenEndpointModule>[1]) => {
    const endpoint = createTokenEndpointModule(ports, needs);
    if (endpoint.grantTypes.join(' ') !== tokenEndpointGrantTypes.join(' ')) throw new Error(`the token endpoint serves ${endpoint.grantTypes.join(', ')}, not the grant types discovery lists`);
    return endpoint;
  },
});
export const provisioningModule = /* @__PURE__ */ defineModule({
  name: 'provisioning',
  needs: { registration: registrationModule, accounts: accountsModule, oauth: oauthModule, directory: directoryModule, tokenExchange: tokenExchangeModule, messaging: messagingModule },
  create: createProvisioningModule,
});

/** Every module (the local runner and the gRPC task build them all). */
export const allModules = [
  accountsModule, registrationModule, oauthModule, userInfoModule, authorizationModule, directoryModule, messagingModule, tokenExchangeModule, tokenEndpointModule, provisioningModule,
] as const;

export type Modules = ModulesOf<typeof allModules>;

/** The ports every module of one process shares: settings resolved, one page-token codec. */
export function modulePorts(infrastructure: Infrastructure): ModulePorts {
  return {
    ...infrastructure,
    provisioning: infrastructure.provisioning ?? defaultProvisioningConfig,
    pageTokens: createPageTokenCodec(infrastructure.pageTokenKey, infrastructure.clock),
  };
}

/** Of a process's built modules, just those `definitions` name: what one edge gets. */
export function pickModules<const D extends readonly AnyModuleDefinition[]>(modules: Modules, definitions: D): ModulesOf<D> {
  return Object.fromEntries(definitions.map(({ name }) => [name, modules[name as keyof Modules]])) as ModulesOf<D>;
}

/** Builds `definitions` and what they need, each once, from one process's ports. */
export function buildModules<const D extends readonly AnyModuleDefinition[]>(ports: ModulePorts, definitions: D): ModulesOf<D> {
  const built = new Map<string, unknown>();
  const build = (definition: AnyModuleDefinition): unknown => {
    if (!built.has(definition.name)) {
      const needs = Object.fromEntries(Object.entries(definition.needs as ModuleNeeds).map(([name, need]) => [name, build(need)]));
      built.set(definition.name, definition.create(ports, needs));
    }
    return built.get(definition.name);
  };
  return Object.fromEntries(definitions.map((definition) => [definition.name, build(definition)])) as ModulesOf<D>;
}
