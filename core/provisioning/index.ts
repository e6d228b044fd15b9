import type { Accounts } from '../accounts';
import type { ServiceConfig } from '../config';
import type { Clock, Random } from '../ports';
import type { Store } from '../store';
import type { AccessTokenVerifier, TokenIssuer } from '../tokens';
import { createAgents } from './agents';
import type { ProvisioningConfig } from './config';
import { createTokenExchange } from './exchange';
import { createNumberLifecycle, leaseResolver } from './lifecycle';
import { createMasks } from './masks';
import { createNumberPool } from './pool';
import { createProgrammableNumbers } from './programmable';
import { createQuota } from './quota';
import { createRequestLog } from './requests';

/** The provisioning domain: programmable numbers, masks, agents, token exchange, the number lifecycle. */
export function createProvisioning(deps: {
  store: Store; clock: Clock; random: Random; accounts: Accounts; issuer: TokenIssuer;
  verifyAccessToken: AccessTokenVerifier; config: ServiceConfig; provisioning: ProvisioningConfig;
}) {
  const { store, clock, random, accounts, issuer, provisioning: config } = deps;
  const pool = createNumberPool(store, clock, config, leaseResolver(store, config));
  const once = createRequestLog(store, clock, config);
  // A quota slot's holder committed when its agent exists.
  const quota = createQuota(store, clock, config, async (holder) => (await store.getUser(holder))?.accountType === 'ai_agent');
  return {
    numbers: createProgrammableNumbers({ store, clock, random, pool, once }),
    masks: createMasks({ store, clock, random, pool, once, config }),
    agents: createAgents({ store, clock, random, pool, quota, once, accounts, issuer, config }),
    exchange: createTokenExchange({ store, clock, issuer, verify: deps.verifyAccessToken, config: deps.config }),
    lifecycle: createNumberLifecycle({ store, clock, config, pool }),
  };
}

export type Provisioning = ReturnType<typeof createProvisioning>;
