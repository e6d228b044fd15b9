import type { AccountStatus } from '../kernel/capabilities';
import type { ServiceConfig } from '../kernel/config';
import type { User } from '../kernel/model';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock, Random } from '../kernel/ports';
import type { DirectoryPort } from './store';
import { createAliases } from './aliases';
import { createDiscovery, indexAgent } from './discover';
import { createRateLimiter, type RateLimitConfig } from '../kernel/rate-limit';
import { createResolver } from './resolve';

/** The public directory: aliases (gRPC, admin CLI), resolve and discover (public HTTP). */
export function createDirectory(deps: {
  store: DirectoryPort;
  clock: Clock;
  random: Random;
  coolOff: number;
  pageTokens: PageTokenCodec;
  accounts: Pick<AccountStatus, 'accountActiveCached'>;
}) {
  const { store, clock, random, coolOff, pageTokens, accounts } = deps;
  const aliases = createAliases({ store, clock, random });
  return {
    aliases,
    ...createResolver({ store, clock, coolOff, aliases }),
    ...createDiscovery({ store, pageTokens, accounts }),
  };
}

export type Directory = ReturnType<typeof createDirectory>;

/**
 * The directory module, as the registry builds it (the cool-off decides when a retired number
 * resolves no more; discover shows agents of active owners only).
 */
export function createDirectoryModule(
  ports: {
    store: DirectoryPort;
    clock: Clock;
    random: Random;
    pageTokens: PageTokenCodec;
    provisioning: { coolOff: number };
    config: ServiceConfig;
  },
  needs: { accounts: Pick<AccountStatus, 'accountActiveCached'> },
) {
  return {
    /** The service's settings (its edge reads whether the issuer is https). */
    config: ports.config,
    ...createDirectory({ ...ports, coolOff: ports.provisioning.coolOff, accounts: needs.accounts }),
    /** A per-client token bucket on this process's clock (the public endpoints' limit). */
    rateLimiter: (config: RateLimitConfig) => createRateLimiter(config, ports.clock),
    /** The discover index of an agent (provisioning calls it as the agent changes). */
    indexAgent: (agent: User, now: number) => indexAgent(ports.store, agent, now),
  };
}
