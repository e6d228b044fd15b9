// Records the core keeps. Times are epoch milliseconds unless a name says otherwise.

export type ClientKind = 'login' | 'api' | 'provisioning';

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
  disabled: boolean;
  createdAt: number;
}

export type AccountType = 'person' | 'business' | 'ai_agent';
export type UserStatus = 'active' | 'setup_required' | 'disabled';

export interface User {
  svcnumId: string;
  svcnum: string;
  email?: string;
  passwordHash?: string;
  status: UserStatus;
  accountType: AccountType;
  createdAt: number;
  /** Consecutive failed sign-ins since the last success or lock. */
  failedSignIns?: number;
  lockedUntil?: number;
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
  revokedAt?: number;
}

export interface Consent {
  svcnumId: string;
  clientId: string;
  scopes: string[];
  grantedAt: number;
}

export interface Session {
  sessionHash: string;
  svcnumId: string;
  authTime: number;
  csrfToken: string;
  expiresAt: number;
}

export interface NumberRecord {
  svcnum: string;
  svcnumId: string;
  entityType: 'person' | 'business' | 'programmable' | 'mask' | 'ai_agent';
  state: 'active' | 'suspended' | 'deactivated' | 'quarantined';
  updatedAt: number;
}
