import { createAccountsModule, createRegistrationModule } from './accounts';
import { createDirectoryModule } from './directory';
import type { Infrastructure, ModulePorts } from './infrastructure';
import { createPageTokenCodec } from './kernel/page-token';
import { createMessagingModule } from './messaging';
import {
  createAuthenticationModule,
  createAuthorizationModule,
  createDpopModule,
  createOAuthModule,
  createUserInfoModule,
} from './oauth';
import { grantNames, oauthGrants } from './oauth/grants/table';
import { createTokenEndpointModule } from './oauth/token-endpoint';
import { createProvisioningModule, createTokenExchangeModule } from './provisioning';
import { defaultProvisioningConfig } from './provisioning/config';
import { tokenExchangeGrant } from './provisioning/token-exchange-grant';
import {
  type AnyModuleDefinition,
  defineModule,
  grantsOf,
  type ModuleNeeds,
  type ModulesOf,
  servedGrantsOf,
} from './registry-types';

export type { Infrastructure, ModulePorts } from './infrastructure';
export type { AnyModuleDefinition, ModuleDefinition, ModulesOf, StoreOf } from './registry-types';

// The registry, as fosite's compose: each domain module with the modules it needs, and the one way
// to build a set of them. Building builds each needed module once, and only those: the discovery
// Lambda, which needs oauth, never builds provisioning or the message hub. The type machinery is in
// ./registry-types.ts; what a process provides is ./infrastructure.ts.
//
// A process names the modules it wants by their definitions (not by a string), so that a Lambda
// bundle holds only the code its definitions reach: every definition below is a separate,
// side-effect-free constant that esbuild drops when nothing imports it.
//
// Adding a module: write its factory `(ports, needs) => built` in its own folder, define it here
// with the modules it needs, and add it to `allModules`. A module that adds grant types to the
// token endpoint lists them in its definition's `grants` and goes into `tokenEndpointNeeds`.

export const accountsModule = /* @__PURE__ */ defineModule({
  name: 'accounts',
  needs: {},
  create: createAccountsModule,
});
/** Creating and changing accounts and clients (the admin CLI, agents' clients). */
export const registrationModule = /* @__PURE__ */ defineModule({
  name: 'registration',
  needs: {},
  create: createRegistrationModule,
});
export const oauthModule = /* @__PURE__ */ defineModule({ name: 'oauth', needs: {}, create: createOAuthModule });
/** DPoP (RFC 9449): proofs and nonces. */
export const dpopModule = /* @__PURE__ */ defineModule({ name: 'dpop', needs: {}, create: createDpopModule });
/** The one Bearer/DPoP path of every resource edge (UserInfo, messages, gRPC). */
export const authenticationModule = /* @__PURE__ */ defineModule({
  name: 'authentication',
  needs: { oauth: oauthModule, dpop: dpopModule },
  create: createAuthenticationModule,
});
export const userInfoModule = /* @__PURE__ */ defineModule({
  name: 'userInfo',
  needs: { accounts: accountsModule },
  create: createUserInfoModule,
});
/** The browser side of the code flow: authorize, sign-in, consent, the account page. */
export const authorizationModule = /* @__PURE__ */ defineModule({
  name: 'authorization',
  needs: { accounts: accountsModule },
  create: createAuthorizationModule,
});
export const directoryModule = /* @__PURE__ */ defineModule({
  name: 'directory',
  needs: { accounts: accountsModule },
  create: createDirectoryModule,
});
export const messagingModule = /* @__PURE__ */ defineModule({
  name: 'messaging',
  needs: { accounts: accountsModule },
  create: createMessagingModule,
});
/** Token exchange (provisioning's rules), and the grant type it adds to the token endpoint. */
export const tokenExchangeModule = /* @__PURE__ */ defineModule({
  name: 'tokenExchange',
  needs: { oauth: oauthModule, accounts: accountsModule },
  create: createTokenExchangeModule,
  grants: [tokenExchangeGrant],
});

/**
 * What the token endpoint needs: OAuth's issuer, the accounts, and each module that adds grant
 * types to it (its definition's `grants`), in the order discovery lists them after OAuth's own.
 */
const tokenEndpointNeeds = {
  oauth: oauthModule,
  accounts: accountsModule,
  dpop: dpopModule,
  tokenExchange: tokenExchangeModule,
};

/** The token endpoint: OAuth's grant types, then those its needs add. */
export const tokenEndpointModule = /* @__PURE__ */ defineModule({
  name: 'tokenEndpoint',
  needs: tokenEndpointNeeds,
  create: createTokenEndpointModule,
});

/** The `grant_type` values of a token endpoint with these needs: OAuth's, then those they add. */
export const grantTypesOf = (needs: ModuleNeeds): readonly string[] => grantNames([...oauthGrants, ...grantsOf(needs)]);

/** What discovery lists as grant_types_supported: the token endpoint's table, by name and in its order. */
export const grantTypesSupported = /* @__PURE__ */ grantTypesOf(tokenEndpointNeeds);

export const provisioningModule = /* @__PURE__ */ defineModule({
  name: 'provisioning',
  needs: {
    registration: registrationModule,
    accounts: accountsModule,
    oauth: oauthModule,
    directory: directoryModule,
    tokenExchange: tokenExchangeModule,
    messaging: messagingModule,
  },
  create: createProvisioningModule,
});

/** Every module (the local runner and the gRPC task build them all). */
export const allModules = [
  accountsModule,
  registrationModule,
  oauthModule,
  dpopModule,
  authenticationModule,
  userInfoModule,
  authorizationModule,
  directoryModule,
  messagingModule,
  tokenExchangeModule,
  tokenEndpointModule,
  provisioningModule,
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
export function pickModules<const D extends readonly AnyModuleDefinition[]>(
  modules: Modules,
  definitions: D,
): ModulesOf<D> {
  return Object.fromEntries(definitions.map(({ name }) => [name, modules[name as keyof Modules]])) as ModulesOf<D>;
}

/** Builds `definitions` and what they need, each once, from one process's ports. */
export function buildModules<const D extends readonly AnyModuleDefinition[]>(
  ports: ModulePorts,
  definitions: D,
): ModulesOf<D> {
  const built = new Map<string, unknown>();
  const build = (definition: AnyModuleDefinition): unknown => {
    if (!built.has(definition.name)) {
      const needs = Object.fromEntries(Object.entries(definition.needs).map(([name, need]) => [name, build(need)]));
      // The grant types its needs add (their definitions' `grants`), each served with that module.
      built.set(definition.name, definition.create(ports, needs, servedGrantsOf(definition.needs, needs)));
    }
    return built.get(definition.name);
  };
  return Object.fromEntries(definitions.map((definition) => [definition.name, build(definition)])) as ModulesOf<D>;
}
