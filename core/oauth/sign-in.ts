import { limits } from '../kernel/config';
import { DomainError } from '../kernel/errors';
import type { Session, User } from '../kernel/model';
import { ULID_PATTERN } from '../kernel/ids';
import { openToken, randomSecret, sealToken, sha256, verifyPassword } from '../kernel/secrets';
import {
  type AuthorizationContext,
  type AuthorizeOutcome,
  type ParkedRequest,
  parkedRequest,
  proceed,
} from './authorization-flow';
import { checkPasskey, passkeyAccount } from './passkeys';
import { type Admission, deviceKey, identifierKey } from './sign-in-guard';
import { parseCredential } from './webauthn';

// The sign-in form: its signed CSRF token, the device cookie of a browser that signed in before,
// and the attempt itself behind the guard (./sign-in-guard.ts), with a password or a passkey.

/**
 * A refused sign-in, shown on the sign-in page: its error's kind says what happened (a failed
 * attempt `invalid_argument`, throttled `exhausted`, busy `unavailable`, the last two with
 * retry-after); the edge's one mapping turns the kind into the page's status.
 */
export interface SignInRefusal {
  type: 'sign_in_error';
  error: DomainError;
  /** For the log only: why a passkey was refused (e.g. `counter_regression`). */
  alert?: string;
}

export interface SignInResult {
  outcome: AuthorizeOutcome | { type: 'account' } | SignInRefusal;
  /** Set on success: the new session's cookie value. */
  sessionToken?: string;
  /** Set on success: this browser's new device cookie (a signed account + device id). */
  deviceToken?: string;
}

export type SignInInput = {
  requestId?: string;
  clientAddress?: string;
  deviceToken?: string;
} & (PasswordInput | { passkey: string });
type PasswordInput = { identifier: string; password: string };

// One message per kind of refusal, whatever the account: none of them tells whether it exists.
const SIGN_IN_FAILED = 'The number, email or password is not right.';
const SIGN_IN_THROTTLED =
  'Too many attempts to sign in with this number or email. Wait a few minutes and try again, ' +
  'or sign in from a browser you used before.';
const ADDRESS_THROTTLED = 'Too many sign-in attempts from your network. Wait a few minutes and try again.';
const PASSKEY_FAILED = 'This passkey could not sign you in. Try again, or use your password.';
const SIGN_IN_BUSY = 'We are busy right now. Try again in a moment.';
const SIGN_IN_EXPIRED = 'This sign-in took too long. Go back to the application and start again.';
const BUSY_RETRY_AFTER_MS = 2_000;
/** Purposes of signed tokens (core/kernel/secrets.ts sealToken): one never passes for the other. */
const DEVICE_TOKEN = 'device';
const SIGN_IN_CSRF_TOKEN = 'sign-in-csrf';

const refused = (
  kind: 'invalid_argument' | 'exhausted' | 'unavailable',
  message: string,
  retryAfterMs?: number,
  alert?: string,
): SignInResult => ({
  outcome: {
    type: 'sign_in_error',
    error: new DomainError(
      kind,
      message,
      retryAfterMs !== undefined ? { retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) } : {},
    ),
    ...(alert ? { alert } : {}),
  },
});

/** A signed CSRF token for the sign-in form, where no session holds one yet. */
export const issueSignInCsrf = ({ macKey, random, clock }: AuthorizationContext) =>
  sealToken(macKey, SIGN_IN_CSRF_TOKEN, [randomSecret(random, 16)], clock.now() + limits.signInCsrfTtl);

export const validSignInCsrf = async ({ macKey, clock }: AuthorizationContext, token: string | undefined) =>
  (await openToken(macKey, SIGN_IN_CSRF_TOKEN, token, clock.now())) !== undefined;

/** A new session for a person who just signed in, and where they go next. */
async function startSession(
  ctx: AuthorizationContext,
  user: User,
  parked: ParkedRequest,
  now: number,
  identifier: string,
): Promise<SignInResult> {
  const { store, random } = ctx;
  // A new session id on every sign-in: no session fixation.
  const sessionToken = randomSecret(random);
  const session: Session = {
    sessionHash: sha256(sessionToken),
    svcnumId: user.svcnumId,
    authTime: now,
    csrfToken: randomSecret(random),
    expiresAt: now + limits.sessionTtl,
    signedInWith: identifier.includes('@') ? 'email' : 'number',
  };
  await store.putSession(session);
  if (!parked) return { outcome: { type: 'account' }, sessionToken };
  const request = { ...parked.request, signedInAt: now };
  await store.markAuthRequestSignedIn(request.requestId, now);
  return { outcome: await proceed(ctx, request, { session, user }, true), sessionToken };
}

/**
 * The account and device id of a device cookie that verifies, checked before any lookup (so
 * whatever identifier is typed, a cookie costs the same MAC check).
 */
async function knownDevice(
  ctx: AuthorizationContext,
  deviceToken: string | undefined,
  now: number,
): Promise<{ svcnumId: string; deviceId: string } | undefined> {
  const fields = await openToken(ctx.macKey, DEVICE_TOKEN, deviceToken, now);
  return fields?.length === 2 ? { svcnumId: fields[0]!, deviceId: fields[1]! } : undefined;
}

/**
 * What a sign-in offers: the identifier naming the account (typed, or a passkey's user handle, the
 * svcnum_id) and its check of the account found (undefined: none usable). A password check runs
 * in the gate's turn (scrypt); a passkey's costs a few store calls and one signature check.
 */
interface Proof {
  identifier: string;
  failure: string;
  verify(user: User | undefined, admission: Admission, now: number): Promise<{ user?: User; alert?: string }>;
}

function passwordProof(ctx: AuthorizationContext, input: PasswordInput): Proof | undefined {
  const { identifier, password } = input;
  if (identifier.length > 254 || password.length > 256 || !identifier.trim() || !password) return undefined;
  return {
    identifier,
    failure: SIGN_IN_FAILED,
    async verify(user, admission) {
      const usable = user?.passwordHash !== undefined && user.status !== 'disabled' ? user : undefined;
      const matches = await admission.check(() =>
        verifyPassword(password, usable?.passwordHash ?? ctx.decoyPasswordHash),
      );
      return usable && matches ? { user: usable } : {};
    },
  };
}

function passkeyProof(ctx: AuthorizationContext, json: string): Proof | undefined {
  const credential = parseCredential(json);
  if (!credential) return undefined;
  const claims = passkeyAccount(ctx, credential);
  if (!claims || !ULID_PATTERN.test(claims.userHandle)) return undefined;
  return {
    identifier: claims.userHandle,
    failure: PASSKEY_FAILED,
    async verify(user, _admission, now) {
      if (!user || user.status === 'disabled') return {};
      const refusal = await checkPasskey(ctx, user, credential, claims, now);
      return refusal ? { alert: refusal } : { user };
    },
  };
}

/**
 * POST of the sign-in form, with a password or a passkey's assertion. CSRF has been checked by
 * the edge. Both go through the same guard (network limit, busy, throttled per identifier or
 * device), the same session, device cookie and next step. Every password attempt that is not
 * refused before costs the same: the account lookup, a read and a conditional put of a throttle
 * count, and exactly one scrypt (a decoy when there is no usable account), so neither answer nor
 * work tells whether the account exists.
 */
export async function signIn(ctx: AuthorizationContext, input: SignInInput): Promise<SignInResult> {
  const { clock, guard } = ctx;
  const parked = input.requestId ? await parkedRequest(ctx, input.requestId) : undefined;
  if (input.requestId && !parked) return refused('invalid_argument', SIGN_IN_EXPIRED);
  const address = guard.takeAddress(input.clientAddress);
  if (!address.allowed) return refused('exhausted', ADDRESS_THROTTLED, address.retryAfterSeconds * 1000);
  const proof = 'passkey' in input ? passkeyProof(ctx, input.passkey) : passwordProof(ctx, input);
  if (!proof) return refused('invalid_argument', 'passkey' in input ? PASSKEY_FAILED : SIGN_IN_FAILED);
  const knownBrowser = await knownDevice(ctx, input.deviceToken, clock.now());
  const admission = guard.gate.admit(knownBrowser !== undefined);
  if (!admission) {
    guard.giveBackAddress(input.clientAddress);
    return refused('unavailable', SIGN_IN_BUSY, BUSY_RETRY_AFTER_MS);
  }
  try {
    const now = clock.now();
    const user = await ctx.accounts.findUser(proof.identifier);
    // A browser that signed in to this account before is judged by its own count while it
    // has fewer than the free failures; strangers' attempts on the identifier do not stop it.
    const device = user && knownBrowser?.svcnumId === user.svcnumId ? knownBrowser.deviceId : undefined;
    const byDevice = device ? await guard.count(deviceKey(device), now, limits.signInFreeFailures) : undefined;
    const key = byDevice?.counted ? deviceKey(device!) : identifierKey(proof.identifier);
    const counted = byDevice?.counted ? byDevice : await guard.count(key, now);
    if (!counted.counted) return refused('exhausted', SIGN_IN_THROTTLED, counted.retryAfterMs);
    const verified = await proof.verify(user, admission, now);
    if (!verified.user) return refused('invalid_argument', proof.failure, undefined, verified.alert);
    await guard.clear(key);
    guard.giveBackAddress(input.clientAddress);
    const started = await startSession(ctx, verified.user, parked, now, proof.identifier);
    const deviceFields = [verified.user.svcnumId, randomSecret(ctx.random, 16)];
    const deviceToken = await sealToken(ctx.macKey, DEVICE_TOKEN, deviceFields, now + limits.deviceCookieTtl);
    return { ...started, deviceToken };
  } finally {
    admission.leave();
  }
}
