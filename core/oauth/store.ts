import type {
  AuthorizationCode,
  AuthRequest,
  Consent,
  Grant,
  Passkey,
  PasskeyChallenge,
  Session,
  SignInThrottle,
  User,
} from '../kernel/model';
import type { SharedStore } from '../kernel/store';

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
 * The OAuth side of the store: sign-in throttle, the authorization flow, codes, grants, consent and
 * browser sessions. Reads of time-bound items return `undefined` once the item's lifetime has passed
 * at `now`, whatever DynamoDB's TTL sweeper has or has not deleted yet.
 */
export interface OAuthStore {
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

  // passkeys (strongly consistent reads: a removed passkey is refused at once)
  /** Adds a passkey unless the account already has this credential id: one conditional put. */
  putPasskey(passkey: Passkey): Promise<boolean>;
  getPasskey(svcnumId: string, credentialId: string): Promise<Passkey | undefined>;
  listPasskeys(svcnumId: string): Promise<Passkey[]>;
  /** Records a sign-in only if the counter is still `seenCounter` (a parallel use of the same one fails). */
  recordPasskeyUse(
    key: Pick<Passkey, 'svcnumId' | 'credentialId'>,
    seenCounter: number,
    use: Pick<Passkey, 'counter' | 'backedUp' | 'lastUsedAt'>,
  ): Promise<boolean>;
  renamePasskey(svcnumId: string, credentialId: string, name: string): Promise<boolean>;
  /** The removed passkey, or `undefined` if the account had none by that id. */
  deletePasskey(svcnumId: string, credentialId: string): Promise<Passkey | undefined>;
  putPasskeyChallenge(challenge: PasskeyChallenge): Promise<void>;
  /** Deletes the challenge and returns it if it was there and unexpired at `now`: each one is taken once. */
  takePasskeyChallenge(challenge: string, now: number): Promise<PasskeyChallenge | undefined>;
}

/**
 * The store methods of OAuth's modules that keep state (authorization, the token endpoint; UserInfo
 * picks its two): the OAuth and accounts slices of the DynamoDB adapter serve them.
 */
export type OAuthPort = Pick<
  OAuthStore & SharedStore,
  | 'createGrant'
  | 'deletePasskey'
  | 'deleteAuthRequest'
  | 'deleteConsent'
  | 'deleteSession'
  | 'deleteSignInThrottle'
  | 'getAuthRequest'
  | 'getConsent'
  | 'getGrant'
  | 'getPasskey'
  | 'getSession'
  | 'getSignInThrottle'
  | 'getUser'
  | 'getUserAndGrant'
  | 'listConsents'
  | 'listGrants'
  | 'listPasskeys'
  | 'markAuthRequestSignedIn'
  | 'putAuthRequest'
  | 'putCode'
  | 'putConsent'
  | 'putPasskey'
  | 'putPasskeyChallenge'
  | 'putSession'
  | 'putSignInThrottle'
  | 'recordPasskeyUse'
  | 'redeemCode'
  | 'renamePasskey'
  | 'revokeGrant'
  | 'takePasskeyChallenge'
  | 'touchGrant'
>;

/**
 * DPoP proofs seen (RFC 9449 §11.1), across processes: the token endpoint and every resource
 * server record each proof they accept.
 */
export interface DpopProofStore {
  /**
   * Records a proof (`proofKey`: the SHA-256 of its key's thumbprint and its jti) until `expiresAt`:
   * one conditional put, false when a record of it live at `now` exists (a replay).
   */
  claimDpopProof(proofKey: string, expiresAt: number, now: number): Promise<boolean>;
}
