import type { AccessTokenIssuer, AccessTokenVerifier } from '../kernel/access';
import type { AccountStatus, AgentClients, DiscoverIndex, NumberStreams, TokenStanding } from '../kernel/capabilities';
import type { ServiceConfig } from '../kernel/config';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock, Random } from '../kernel/ports';
import type { ProvisioningPort } from './store';
import { createAgents } from './agents';
import type { ProvisioningConfig } from './config';
import { createTokenExchange, type TokenExchange, type TokenExchangePort } from './exchange';
import { createNumberLifecycle, leaseResolver } from './lifecycle';
import { createMasks } from './masks';
import { createNumberPool, type FreeNumbersReport } from './pool';
import { createProgrammableNumbers } from './programmable';
import { createQuota, type QuotaKind, type SlotHolder } from './quota';
import { createRequestLog } from './requests';
import { createProvisioningCallers } from './callers';

/**
 * Whether a lapsed slot's holder committed with it: the agent, programmable number or mask exists
 * and names the slot (agents from before slots were named: the agent exists). A deactivated number
 * holds no slot; a mask holds its slot until it expires.
 */
function slotHolder(store: ProvisioningPort): SlotHolder {
  return async (slot) => {
    const kind = slot.slotKey.split('#')[1] as QuotaKind;
    if (kind === 'masks') {
      const mask = await store.getMask(slot.holder);
      return mask?.quotaSlot === slot.slotKey ? { heldUntil: mask.expiresAt } : undefined;
    }
    const entity = await store.getUser(slot.holder);
    if (kind === 'numbers') {
      const retired = entity?.numberState === 'deactivated' || entity?.numberState === 'quarantined';
      return entity?.accountType === 'programmable' && entity.quotaSlot === slot.slotKey && !retired ? {} : undefined;
    }
    return entity?.accountType === 'ai_agent' && (entity.quotaSlot ?? slot.slotKey) === slot.slotKey ? {} : undefined;
  };
}

/** The provisioning domain: programmable numbers, masks, agents, token exchange, the number lifecycle. */
export function createProvisioning(deps: {
  store: ProvisioningPort;
  clock: Clock;
  random: Random;
  accounts: AgentClients;
  issuer: AccessTokenIssuer;
  discoverIndex: DiscoverIndex;
  exchange: TokenExchange;
  config: ServiceConfig;
  provisioning: ProvisioningConfig;
  pageTokens: PageTokenCodec;
  numberStreams: NumberStreams;
  status: Pick<AccountStatus, 'entityInService'> & Pick<TokenStanding, 'tokenRefusal'>;
  reportFreeNumbers?: FreeNumbersReport;
}) {
  const {
    store,
    clock,
    random,
    accounts,
    issuer,
    provisioning: config,
    pageTokens,
    discoverIndex,
    numberStreams,
    status,
  } = deps;
  const pool = createNumberPool(store, clock, config, leaseResolver(store, config), deps.reportFreeNumbers);
  const once = createRequestLog(store, clock, random, config);
  const quota = createQuota(store, clock, config, slotHolder(store));
  return {
    numbers: createProgrammableNumbers({ store, clock, pool, quota, once, config, pageTokens, streams: numberStreams }),
    masks: createMasks({ store, clock, pool, quota, once, config, pageTokens, status }),
    agents: createAgents({
      store,
      clock,
      pool,
      quota,
      once,
      accounts,
      issuer,
      config,
      pageTokens,
      discoverIndex,
      standing: status,
    }),
    /**
     * The ExchangeToken RPC: the tokenExchange module's function, the one the token endpoint's
     * grant uses too.
     */
    exchange: deps.exchange,
    lifecycle: createNumberLifecycle({ store, clock, config, pool, quota }),
  };
}

export type Provisioning = ReturnType<typeof createProvisioning>;

/** The provisioning module, as the registry builds it. */
export function createProvisioningModule(
  ports: {
    store: ProvisioningPort;
    clock: Clock;
    random: Random;
    config: ServiceConfig;
    provisioning: ProvisioningConfig;
    pageTokens: PageTokenCodec;
    reportFreeNumbers?: FreeNumbersReport;
  },
  needs: {
    registration: AgentClients;
    accounts: Pick<AccountStatus, 'entityInService'> & Pick<TokenStanding, 'tokenRefusal'>;
    oauth: { issuer: AccessTokenIssuer };
    directory: DiscoverIndex;
    tokenExchange: { exchange: TokenExchange };
    messaging: { numberStreams: NumberStreams };
  },
) {
  return createProvisioning({
    ...ports,
    accounts: needs.registration,
    status: needs.accounts,
    issuer: needs.oauth.issuer,
    discoverIndex: needs.directory,
    exchange: needs.tokenExchange.exchange,
    numberStreams: needs.messaging.numberStreams,
  });
}

/**
 * Token exchange as the registry builds it for the token endpoint and the gRPC edge: the exchange
 * (the ExchangeToken RPC's rules) and who may call the provisioning API: what the grant type it
 * adds to the token endpoint runs on (./token-exchange-grant.ts). Small on purpose: the token
 * Lambda needs nothing else of provisioning.
 */
export function createTokenExchangeModule(
  ports: { store: TokenExchangePort; clock: Clock; config: ServiceConfig },
  needs: {
    oauth: { issuer: AccessTokenIssuer; verifyAccessToken: AccessTokenVerifier };
    accounts: Pick<AccountStatus, 'accountActive'> & Pick<TokenStanding, 'tokenRefusal'>;
  },
) {
  const exchange = createTokenExchange({
    store: ports.store,
    clock: ports.clock,
    issuer: needs.oauth.issuer,
    verify: needs.oauth.verifyAccessToken,
    config: ports.config,
    standing: needs.accounts,
  });
  // Who may call the provisioning API: over gRPC (a Bearer token) and at the token endpoint (a
  // client secret) alike, the owner's status from the accounts cache (at most 30 s old), as
  // client_credentials reads it.
  const provisioningCaller = createProvisioningCallers(needs.accounts.accountActive);
  return { exchange, provisioningCaller };
}
