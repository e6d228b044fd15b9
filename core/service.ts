import { createAccounts } from './accounts';
import { createAuthorization } from './authorization';
import type { ServiceConfig } from './config';
import { createDirectory } from './directory';
import { createMessaging, InboxNotifier } from './messaging/send';
import { createMessageHub } from './messaging/stream';
import type { Client } from './model';
import type { Clock, KeyRing, Random } from './ports';
import { defaultProvisioningConfig, type ProvisioningConfig } from './provisioning/config';
import { createProvisioning } from './provisioning';
import type { Store } from './store';
import { createTokenService } from './token-service';
import { createAccessTokenVerifier, createTokenIssuer } from './tokens';

export interface CoreDeps {
  store: Store;
  keys: KeyRing;
  clock: Clock;
  random: Random;
  config: ServiceConfig;
  /** Cool-off, leases and quotas of the provisioning API (defaults: 90-day cool-off, 10/10 agents). */
  provisioning?: ProvisioningConfig;
  /** How often this process polls the inboxes its open streams watch (default 250 ms). */
  messagePollIntervalMs?: number;
}

/** How long a client record is trusted from memory; a disabled client stops working within this. */
const CLIENT_CACHE_TTL = 30_000;

/**
 * Per-process client cache: client records are read on every request and change rarely. `fresh`
 * bypasses it (and refreshes it) where staleness is not acceptable: checking a client secret, so
 * that a rotated secret works, and the old one stops, at once.
 */
function cachedClients(store: Store) {
  const cache = new Map<string, { client: Client | undefined; at: number }>();
  async function fresh(clientId: string): Promise<Client | undefined> {
    const client = await store.getClient(clientId);
    if (cache.size > 10_000) cache.clear();
    // Unknown ids are cached too (briefly), so random ids cannot force a read per request.
    cache.set(clientId, { client, at: Date.now() });
    return client;
  }
  async function cached(clientId: string): Promise<Client | undefined> {
    const hit = cache.get(clientId);
    if (hit && Date.now() - hit.at < CLIENT_CACHE_TTL) return hit.client;
    return fresh(clientId);
  }
  return { cached, fresh };
}

/** The domain core, built once per process (Lambda container, gRPC task, local runner). */
export function createCore(deps: CoreDeps) {
  const { store, keys, clock, random, config } = deps;
  const clients = cachedClients(store);
  const getClient = clients.cached;
  const accounts = createAccounts(store, clock, random);
  const issuer = createTokenIssuer(config, keys, clock, random);
  const verifyAccessToken = createAccessTokenVerifier(config, keys, clock);
  // Wakes streams of this process at once when this process accepts a message.
  const notifier = new InboxNotifier();
  const provisioningConfig = deps.provisioning ?? defaultProvisioningConfig;
  return {
    ...deps,
    getClient,
    accounts,
    issuer,
    authorization: createAuthorization({ store, config, clock, random, accounts, getClient }),
    tokens: createTokenService({ store, clock, random, issuer, getClient, getClientFresh: clients.fresh }),
    verifyAccessToken,
    provisioning: createProvisioning({
      store, clock, random, accounts, issuer, verifyAccessToken, config, provisioning: provisioningConfig,
    }),
    messaging: createMessaging({ store, clock, random, notifier, getClient }),
    /** Open streams of this process and what they watch (created lazily by the first stream). */
    messageHub: createMessageHub(store, notifier, deps.messagePollIntervalMs),
    directory: createDirectory({ store, clock, random, coolOff: provisioningConfig.coolOff }),
  };
}

export type Core = ReturnType<typeof createCore>;
