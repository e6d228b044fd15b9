// Records the core keeps. Times are epoch milliseconds unless a name says otherwise.

import type { SigningAlg } from './ports';

export type ClientKind = 'login' | 'api' | 'provisioning' | 'agent';

/**
 * How a refresh response carries `refresh_token`: `null` (the specification's contract) or
 * `omit` (no member, RFC 6749 §5.1) for RP libraries that refuse `null`.
 */
export const REFRESH_RESPONSES = ['null', 'omit'] as const;
export type RefreshResponse = (typeof REFRESH_RESPONSES)[number];
export const isRefreshResponse = (value: string): value is RefreshResponse =>
  (REFRESH_RESPONSES as readonly string[]).includes(value);

/**
 * Sender-constrained tokens (RFC 9449 DPoP) per client: `optional` (default) binds tokens to a key
 * when a proof comes with the request; `required` refuses a token request without a proof.
 */
export const DPOP_MODES = ['optional', 'required'] as const;
export type DpopMode = (typeof DPOP_MODES)[number];
export const isDpopMode = (value: string): value is DpopMode => (DPOP_MODES as readonly string[]).includes(value);

export interface Client {
  clientId: string;
  kind: ClientKind;
  name: string;
  /** Exact-match callback URLs (login clients only). */
  redirectUris: string[];
  /** Scopes the client may request or be granted. */
  scopes: string[];
  /** SHA-256 of the client secret (API and provisioning clients only). */
  secretHash?: string;
  /** Owner account of a provisioning client. */
  ownerId?: string;
  /** The entity an agent client acts as: tokens from client_credentials carry it as `sub`. */
  subjectId?: string;
  /** Login clients only; records from before the option have none and mean `null`. */
  refreshResponse?: RefreshResponse;
  /** The ID tokens' algorithm (login clients; OIDC `id_token_signed_response_alg`); none means EdDSA. */
  idTokenAlg?: SigningAlg;
  /** Exact-match RP-Initiated Logout destinations (login clients only). */
  postLogoutRedirectUris?: string[];
  /** DPoP (RFC 9449); records from before the option have none and mean `optional`. */
  dpop?: DpopMode;
  disabled: boolean;
  createdAt: number;
}

export type AccountType = 'person' | 'business' | 'programmable' | 'ai_agent';
export type AgentKind = 'independent' | 'dependent';
export type UserStatus = 'active' | 'setup_required' | 'disabled';

export interface User {
  svcnumId: string;
  svcnum: string;
  email?: string;
  passwordHash?: string;
  status: UserStatus;
  accountType: AccountType;
  createdAt: number;

  // Provisioned entities (programmable numbers, AI agents)
  /** The account (person or business) that provisioned this entity, directly or through an agent. */
  ownerId?: string;
  /** A dependent agent's direct owner: the owner account itself or one of its independent agents. */
  parentId?: string;
  /** `accountType#svcnumId`: lists an owner's entities of one type, oldest first. */
  ownerSort?: string;
  displayName?: string;
  /** Mirrors the state of the entity's current number (numbers table), for listing without extra reads. */
  numberState?: NumberState;
  updatedAt?: number;
  autoReply?: string;
  forwardToSvcnumId?: string;
  agentKind?: AgentKind;
  capabilities?: string[];
  discoverable?: boolean;
  /** Scopes the agent may hold. */
  scopes?: string[];
  /** An independent agent's own client (client_credentials). */
  clientId?: string;
  /** The pre-reserved number RotateAgentSvcnum switches to. */
  fallbackSvcnum?: string;
  /** An agent's number rotation in progress holds the agent until then (epoch ms): one rotation at a time. */
  rotationUntil?: number;
  /**
   * The quota slot the agent or programmable number counts against: only that slot is its (a
   * crashed attempt of the same request may have left another slot under the same id). Agents and
   * numbers from before it have none.
   */
  quotaSlot?: string;

  // Per-owner quota overrides (people and businesses)
  independentAgentQuota?: number;
  dependentAgentQuota?: number;
  /** Live masks at once. */
  maskQuota?: number;
  /** Programmable numbers not deactivated. */
  numberQuota?: number;
}

/** A validated /oauth/authorize request, parked while the user signs in and consents. */
export interface AuthRequest {
  requestId: string;
  clientId: string;
  redirectUri: string;
  scopes: string[];
  state?: string;
  nonce?: string;
  codeChallenge: string;
  /** RFC 9449 §10 `dpop_jkt`: the code may be redeemed only with a proof of this key. */
  dpopJkt?: string;
  /** OIDC `prompt=login` / `prompt=consent` asked for a fresh sign-in or consent screen. */
  forceLogin: boolean;
  forceConsent: boolean;
  /** `prompt=none`: answer without any page, or fail with login_required / consent_required. */
  promptNone: boolean;
  /** OIDC `max_age` in seconds: an older sign-in must be repeated. */
  maxAge?: number;
  /** Set once the user signed in for this request (so prompt=login is satisfied once). */
  signedInAt?: number;
  expiresAt: number;
}

export interface AuthorizationCode {
  codeHash: string;
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  scopes: string[];
  nonce?: string;
  /** The authorize request's `dpop_jkt` (RFC 9449 §10). */
  dpopJkt?: string;
  svcnumId: string;
  authTime: number;
  /** The grant this code turns into; known up front so a replay can revoke it. */
  grantId: string;
  expiresAt: number;
  redeemedAt?: number;
}

export interface Grant {
  grantId: string;
  /** SHA-256 of the refresh token's secret part. */
  secretHash: string;
  clientId: string;
  svcnumId: string;
  scopes: string[];
  authTime: number;
  createdAt: number;
  /** Start of the sliding inactivity window; refreshed at most about once a day. */
  lastUsedAt: number;
  /** RFC 9449: the thumbprint of the DPoP key the refresh token is bound to (obtained with a proof). */
  dpopJkt?: string;
  revokedAt?: number;
}

export interface Consent {
  svcnumId: string;
  clientId: string;
  scopes: string[];
  grantedAt: number;
}

/**
 * Sign-in attempts counted against one key: a hashed identifier (`id#…`) or a device (`device#…`).
 * Each attempt is counted before its password is checked and the count is cleared by a success,
 * so `failures` is the run of attempts that did not succeed.
 */
export interface SignInThrottle {
  key: string;
  failures: number;
  /** No password is checked for this key before this instant. */
  blockedUntil: number;
  /** The count is forgotten from this instant on (checked on read). */
  expiresAt: number;
}

export interface Session {
  sessionHash: string;
  svcnumId: string;
  authTime: number;
  csrfToken: string;
  expiresAt: number;
  /**
   * What the person typed to sign in, so consent can say "signed in as" in their own terms; absent
   * on sessions from before it was kept (then the number is shown).
   */
  signedInWith?: 'email' | 'number';
}

/** A passkey (WebAuthn credential) of an account: discoverable, user-verified, attestation not kept. */
export interface Passkey {
  svcnumId: string;
  /** base64url of the credential id the authenticator chose. */
  credentialId: string;
  /** base64url of the WebAuthn user handle given at registration (the svcnum_id's UTF-8 bytes). */
  userHandle: string;
  /** base64url of the COSE public key. */
  publicKey: string;
  /** The signature counter last seen (0 for authenticators that keep none, as synced passkeys). */
  counter: number;
  transports: string[];
  /** Backup eligible (BE) and backed up (BS): a synced passkey has both. */
  backupEligible: boolean;
  backedUp: boolean;
  name: string;
  createdAt: number;
  lastUsedAt?: number;
}

/** A WebAuthn challenge handed to a browser: kept server-side, single use, 5 minutes. */
export interface PasskeyChallenge {
  /** base64url of 32 random bytes: the challenge itself. */
  challenge: string;
  purpose: 'register' | 'sign-in';
  /** Registration: the account it was issued to. */
  svcnumId?: string;
  expiresAt: number;
}

/** Public lifecycle states (spec 3.1); `expired` applies to masks only. */
export type NumberState = 'active' | 'suspended' | 'deactivated' | 'quarantined' | 'expired';

/**
 * A service number. Internally a number may also be `available` (seeded into the pool),
 * `leased` (claimed by an operation that has not committed yet) or `reserved` (an agent's
 * fallback number).
 */
export interface NumberRecord {
  svcnum: string;
  /** The holder: an entity's svcnum_id or a mask id. */
  svcnumId?: string;
  entityType?: 'person' | 'business' | 'programmable' | 'mask' | 'ai_agent';
  state: NumberState | 'available' | 'leased' | 'reserved';
  /** Present while the number is in (or will return to) the free pool. */
  poolKey?: 'free';
  /** Padded epoch ms from which a pooled number may be allocated. */
  availableAt?: string;
  /** End of an uncommitted claim. */
  leaseUntil?: number;
  /** The holder before quarantine (for audit). */
  previousSvcnumId?: string;
  /** End of the cool-off of a quarantined number (or of a mask number after its mask expires). */
  quarantinedUntil?: number;
  updatedAt: number;
}

export interface Mask {
  maskId: string;
  ownerId: string;
  svcnum: string;
  participantA: string;
  participantB: string;
  scope: string;
  createdAt: number;
  /** The mask is expired from this instant on (TTL elapsed or closed early). */
  expiresAt: number;
  /** The owner's live-mask quota slot it holds until it expires (masks from before it have none). */
  quotaSlot?: string;
}

export interface QuotaSlot {
  slotKey: string;
  holder: string;
  /** Present until the operation that claimed the slot commits. */
  leaseUntil?: number;
  /** A confirmed slot that ends by itself (a mask's): free from this instant on (epoch ms). */
  heldUntil?: number;
}

export interface IdempotencyRecord {
  requestKey: string;
  fingerprint: string;
  state: 'pending' | 'done';
  /**
   * The id the resource is created under, chosen when the record is first written, so that
   * every attempt of the request builds the same resource. Records from before it may lack it
   * while pending.
   */
  resourceId?: string;
  /** End of the current attempt's claim; a pending record past it may be taken over. */
  leaseUntil: number;
  expiresAt: number;
}

/** An entity that may act and be reached: its account active and its number (if any) active. */
export const inService = (entity: User | undefined): boolean =>
  entity !== undefined && entity.status === 'active' && (entity.numberState ?? 'active') === 'active';
