import { createAccounts } from './accounts';
import { createBearerAuthentication } from './bearer';
import { createAuthorization } from './authorization';
import { ttlCache } from './cache';
import type { ServiceConfig } from './config';
import { createDirectory } from './directory';
import { createPageTokenCodec } from './kernel/page-token';
import { createMessaging, InboxNotifier } from './messaging/send';
import { createMessageHub } from './messaging/stream';
import type { Clock, KeyRing, MacKey, Random } from './ports';
import { authorizationCodeGrant } from './oauth/grants/authorization-code';
import { clientCredentialsGrant } from './oauth/grants/client-credentials';
import { refreshTokenGrant } from './oauth/grants/refresh-token';
import { createGrantRegistry } from './oauth/grants/registry';
import { tokenExchangeGrant } from './oauth/grants/token-exchange';
import { createProvisioningCallers } from './provisioning/callers';
import { defaultProvisioningConfig, type ProvisioningConfig } from './provisioning/config';
import { createProvisioning } from './provisioning';
import { createSignInGuard, defaultSignInLimits, type SignInLimits } from './sign-in-guard';
import type { Store } from './store';
import { createTokenService } from './token-service';
import { createAccessTokenVerifier, createTokenIssuer } from './tokens';

export interface CoreDeps {
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
  /** Sign-in limits of this process (default: core/sign-in-guard.ts). */
  signIn?: SignInLimits;
  /** How often this process polls the inboxes its open streams watch (default 250 ms). */
  messagePollIntervalMs?: number;
}

/**
 * How long client records and account status are trusted from memory: a disabled client or
 * account stops working within this. Unknown ids are cached too (briefly), so random ids cannot
 * force a read per request.
 */
const RECORD_CACHE_TTL = 30_000;

/** The domain core, built once per process (Lambda container, gRPC task, local runner). */
export function createCore(deps: CoreDeps) {
  const { store, keys, macKey, clock, random, config } = deps;
  // Secret checks read the client fresh, so that a rotated secret works (and the old one stops) at once.
  const clients = ttlCache((clientId) => store.getClient(clientId), RECORD_CACHE_TTL);
  const getClient = clients.get;
  /** Whether an account (the owner of a client or an entity) is active; each edge keeps its own cache. */
  const accountStatus = () => ttlCache(async (svcnumId) => (await store.getUser(svcnumId))?.status === 'active', RECORD_CACHE_TTL).get;
  const accountActive = accountStatus();
  const accounts = createAccounts(store, clock, random);
  const issuer = createTokenIssuer(config, keys, clock, random);
  const verifyAccessToken = createAccessTokenVerifier(config, keys, clock);
  // Wakes streams of this process at once when this process accepts a message.
  const notifier = new InboxNotifier();
  const provisioningConfig = deps.provisioning ?? defaultProvisioningConfig;
  // Page tokens and resume cursors: one authenticated codec for every list (key derived lazily from its own key).
  const pageTokens = createPageTokenCodec(deps.pageTokenKey, clock);
  const provisioning = createProvisioning({
    store, clock, random, accounts, issuer, verifyAccessToken, config, provisioning: provisioningConfig, pageTokens,
  });
  /** Who may call the provisioning API (gRPC, and token exchange at the token endpoint). */
  const provisioningCaller = createProvisioningCallers(accountActive);
  // The token endpoint's grant types, in the order discovery lists them.
  const grants = createGrantRegistry([
    authorizationCodeGrant({ store, clock, random, issuer }),
    refreshTokenGrant({ store, clock, issuer }),
    clientCredentialsGrant({ store, issuer }),
    tokenExchangeGrant({ exchange: provisioning.exchange, provisioningCaller }),
  ]);
  return {
    ...deps,
    getClient,
    accounts,
    issuer,
    authorization: createAuthorization({
      store, config, clock, random, accounts, macKey, getClient,
      guard: createSignInGuard({ store, clock, limits: deps.signIn ?? defaultSignInLimits }),
    }),
    tokens: createTokenService({ store, clock, grants, getClient, getClientFresh: clients.fresh }),
    verifyAccessToken,
    /** The one Bearer path of every edge: Authorization value(s) → verified claims, or the refusal. */
    authenticateBearer: createBearerAuthentication(verifyAccessToken),
    provisioning,
    provisioningCaller,
    messaging: createMessaging({ store, clock, random, notifier, getClient, accountActive: accountStatus() }),
    /** Open streams of this process and what they watch (created lazily by the first stream). */
    messageHub: createMessageHub(store, notifier, pageTokens, deps.messagePollIntervalMs),
    directory: createDirectory({ store, clock, random, coolOff: provisioningConfig.coolOff, pageTokens }),
  };
}

export type Core = ReturnType<typeof createCore>;
