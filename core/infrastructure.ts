import type { ServiceConfig } from './kernel/config';
import type { ScryptCost } from './kernel/secrets';
import type { PageTokenCodec } from './kernel/page-token';
import type { Clock, KeyRing, MacKey, Random } from './kernel/ports';
import type { DerivedFailureReport } from './messaging/send';
import type { HubPolling } from './messaging/hub-polling';
import type { InboxWakeups } from './messaging/wakeups';
import type { SignInLimits } from './oauth/sign-in-guard';
import type { ProvisioningConfig } from './provisioning/config';
import type { FreeNumbersReport } from './provisioning/pool';
import type { Store } from './store';

// What a process hands the registry (core/registry.ts): its adapters and settings. Modules never
// see more of it than their factories declare.

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
  /** DPOP_NONCES: DPoP proofs must carry a server nonce (core/oauth/dpop-nonces.ts); off by default. */
  dpopNonces?: boolean;
  /** Sign-in limits of this process (default: core/oauth/sign-in-guard.ts). */
  signIn?: SignInLimits;
  /** scrypt cost of new password hashes and of the decoy (default PASSWORD_COST, core/kernel/secrets.ts). */
  passwordCost?: ScryptCost;
  /** Logs and counts a failed derived message (auto-reply, forward): core/adapters/derived-failures.ts. */
  reportDerivedFailure?: DerivedFailureReport;
  /** Reports the free pool's size as each pool query sees it (the FreeNumbers gauge, core/adapters/metrics.ts). */
  reportFreeNumbers?: FreeNumbersReport;
  /**
   * Wake-ups of open streams through a pub/sub engine; without, within this process only
   * (core/messaging/wakeups.ts).
   */
  inboxWakeups?: InboxWakeups;
  /**
   * How the open streams' hub polls (core/messaging/hub-polling.ts HubPolling): the store without an
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
