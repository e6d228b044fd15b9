import type { AccountLookupsPort, AccountsStore, RegistrationPort } from './accounts/store';
import type { DirectoryPort, DirectoryStore } from './directory/store';
import type { MessagingPort, MessagingStore } from './messaging/store';
import type { DpopProofStore, OAuthPort, OAuthStore } from './oauth/store';
import type { ProvisioningPort, ProvisioningStore } from './provisioning/store';
import type { SharedStore } from './kernel/store';

export type { CodeBinding, RedeemResult } from './oauth/store';

/**
 * The store port. Every method is a single-item operation or a read; multi-item operations are
 * composed by the core as idempotent steps with compensation (the store has no transactions).
 * Each module declares the part it calls (core/<module>/store.ts, its `…Port`); the DynamoDB
 * adapter implements it in slices, one per area (core/adapters/dynamo-store.ts).
 */
export type AuthStore = AccountsStore & OAuthStore & DpopProofStore;

/** Everything the core keeps: the sign-in side and the provisioning side. */
export type Store = AuthStore & ProvisioningStore & MessagingStore & DirectoryStore;

/** The whole store serves every module's port (a compile-time check). */
type Serves<Port> = Store extends Port ? true : never;
export const storeServesEveryPort: [
  Serves<SharedStore>,
  Serves<OAuthPort>,
  Serves<AccountLookupsPort>,
  Serves<RegistrationPort>,
  Serves<ProvisioningPort>,
  Serves<MessagingPort>,
  Serves<DirectoryPort>,
] = [true, true, true, true, true, true, true];
