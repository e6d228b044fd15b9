import type { MessagingStore } from './messaging/store';
import type { DirectoryStore } from './directory/store';
import type { ProvisioningStore } from './provisioning/store';
import type {
  AuthorizationCode, AuthRequest, Client, Consent, Grant, NumberRecord, Session, SignInThrottle, User, UserStatus,
} from './kernel/model';

export type RedeemResult =
  | { outcome: 'redeemed'; code: AuthorizationCode }
  | { outcome: 'unknown' }
  | { outcome: 'expired' }
  /** The code was used before: the caller must revoke the grant it produced. */
  | { outcome: 'replayed'; grantId: string }
  /** client_id, redirect_uri or PKCE verifier do not match; the code stays unused. */
  | { outcome: 'mismatch' };

export interface CodeBinding {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
}

/**
 * The store port. Every method is a single-item operation or a read; multi-item operations are
 * composed by the core as idempotent steps with compensation (the store has no transactions).
 * Reads of time-bound items return `undefined` once the item's lifetime has passed at `now`,
 * whatever DynamoDB's TTL sweeper has or has not deleted yet.
 */
export interface AuthStore {
  // clients
  createClient(client: Client): Promise<void>;
  /** Replaces a confidential client's secret (by its hash); the old secret stops working. */
  setClientSecret(clientId: string, secretHash: string): Promise<boolean>;
  /** Removes a client (compensation of a create that did not complete). */
  deleteClient(clientId: string): Promise<void>;
  getClient(clientId: string): Promise<Client | undefined>;
  listClients(): Promise<Client[]>;
  setClientDisabled(clientId: string, disabled: boolean): Promise<Client | undefined>;

  // users and their unique identifiers
  claimEmail(email: string, svcnumId: string): Promise<boolean>;
  releaseEmail(email: string, svcnumId: string): Promise<void>;
  findSvcnumIdByEmail(email: string): Promise<string | undefined>;
  claimNumber(record: NumberRecord): Promise<boolean>;
  releaseNumber(svcnum: string, svcnumId: string): Promise<void>;
  getNumber(svcnum: string): Promise<NumberRecord | undefined>;
  createUser(user: User): Promise<void>;
  getUser(svcnumId: string): Promise<User | undefined>;
  listUsers(): Promise<User[]>;
  setUserStatus(svcnumId: string, status: UserStatus): Promise<User | undefined>;

  // sign-in throttle (strongly consistent: parallel guesses must see each other's counts)
  getSignInThrottle(key: string, now: number): Promise<SignInThrottle | undefined>;
  /**
   * Writes `next` only if the key still holds `seenFailures` failures (`undefined`: nothing live at
   * `now`): one conditional put. False when a parallel attempt counted first.
   */
  putSignInThrottle(next: SignInThrottle, seenFailures: number | undefined, now: number): Promise<boolean>;
  deleteSignInThrottle(key: string): Promise<void>;

  // authorization flow
  putAuthRequest(request: AuthRequest): Promise<void>;
  getAuthRequest(requestId: string, now: number): Promise<AuthRequest | undefined>;
  markAuthRequestSignedIn(requestId: string, at: number): Promise<void>;
  deleteAuthRequest(requestId: string): Promise<void>;
  putCode(code: AuthorizationCode): Promise<void>;
  /** Marks the code used if it exists, is unused, unexpired and bound to `binding`: one conditional update. */
  redeemCode(codeHash: string, binding: CodeBinding, now: number): Promise<RedeemResult>;

  // grants (refresh tokens)
  /** Fails (returns false) if the grant id exists already, including as a revocation tombstone. */
  createGrant(grant: Grant, expiresAt: number): Promise<boolean>;
  getGrant(grantId: string): Promise<Grant | undefined>;
  /**
   * The account and the grant a user token names, in one round trip (BatchGetItem), both strongly
   * consistent: UserInfo needs both. A revocation tombstone is no grant; the caller checks expiry.
   */
  getUserAndGrant(svcnumId: string, grantId: string): Promise<{ user?: User; grant?: Grant }>;
  touchGrant(grantId: string, now: number, expiresAt: number): Promise<void>;
  /** Revokes a grant; if it does not exist yet, leaves a tombstone so it cannot be created later. */
  revokeGrant(grantId: string, now: number): Promise<void>;
  listGrants(svcnumId: string, clientId?: string): Promise<Grant[]>;

  // consent
  getConsent(svcnumId: string, clientId: string): Promise<Consent | undefined>;
  putConsent(consent: Consent): Promise<void>;
  listConsents(svcnumId: string): Promise<Consent[]>;
  deleteConsent(svcnumId: string, clientId: string): Promise<void>;

  // browser sessions
  putSession(session: Session): Promise<void>;
  getSession(sessionHash: string, now: number): Promise<Session | undefined>;
  deleteSession(sessionHash: string): Promise<void>;
}

/** Everything the core keeps: the sign-in side and the provisioning side. */
export type Store = AuthStore & ProvisioningStore & MessagingStore & DirectoryStore;
