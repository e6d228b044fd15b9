import { limits } from '../kernel/config';
import { DomainError } from '../kernel/errors';
import type { Passkey, Session, User } from '../kernel/model';
import { randomSecret } from '../kernel/secrets';
import type { AuthorizationContext } from './authorization-flow';
import {
  assertionClaims,
  COSE_ALGORITHMS,
  type CredentialJson,
  parseCredential,
  relyingParty,
  verifyAssertion,
  verifyRegistration,
  WebAuthnError,
} from './webauthn';

// Passkeys of an account: the options a browser's WebAuthn call needs (each with a challenge kept
// server-side, single use, 5 minutes), adding one after a recent sign-in, the assertion check a
// passkey sign-in makes (./sign-in.ts runs it behind the same guard as a password), and the list,
// rename and removal of /account. The checks themselves: ./webauthn.ts.

export const PASSKEY_NAME_MAX = 60;
const TIMEOUT_MS = limits.passkeyChallengeTtl;

/** Whether the session's sign-in is recent enough to add a passkey. */
export const recentSignIn = (ctx: AuthorizationContext, session: Session) =>
  ctx.clock.now() - session.authTime <= limits.passkeyRecentSignIn;

async function newChallenge(ctx: AuthorizationContext, purpose: 'register' | 'sign-in', svcnumId?: string) {
  const challenge = randomSecret(ctx.random);
  const expiresAt = ctx.clock.now() + limits.passkeyChallengeTtl;
  await ctx.store.putPasskeyChallenge({ challenge, purpose, ...(svcnumId ? { svcnumId } : {}), expiresAt });
  return challenge;
}

/**
 * The options of `navigator.credentials.get()` (JSON form): discoverable credentials, so no list.
 * Every sign-in page asks once (conditional UI), so it is not charged to the address's sign-in
 * bucket; in AWS the WAF's sign-in rule (paths with /login) bounds it per IP.
 */
export async function signInOptions(ctx: AuthorizationContext) {
  const rp = relyingParty(ctx.config.issuer);
  return {
    challenge: await newChallenge(ctx, 'sign-in'),
    rpId: rp.id,
    userVerification: 'required',
    timeout: TIMEOUT_MS,
  };
}

const stale = () =>
  new DomainError('failed_precondition', 'Sign in again to add a passkey: your last sign-in is over 5 minutes old.');

/** The options of `navigator.credentials.create()` for the signed-in account (JSON form). */
export async function registrationOptions(ctx: AuthorizationContext, signedIn: { session: Session; user: User }) {
  if (!recentSignIn(ctx, signedIn.session)) throw stale();
  const { user } = signedIn;
  const rp = relyingParty(ctx.config.issuer);
  const existing = await ctx.store.listPasskeys(user.svcnumId);
  return {
    challenge: await newChallenge(ctx, 'register', user.svcnumId),
    rp: { id: rp.id, name: rp.id },
    // The user handle is the svcnum_id (a ULID: no name, email or number in it).
    user: {
      id: Buffer.from(user.svcnumId).toString('base64url'),
      name: user.email ?? user.svcnum,
      displayName: user.svcnum,
    },
    pubKeyCredParams: COSE_ALGORITHMS.map((alg) => ({ type: 'public-key', alg })),
    authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
    excludeCredentials: existing.map((passkey) => ({ type: 'public-key', id: passkey.credentialId })),
    attestation: 'none',
    timeout: TIMEOUT_MS,
  };
}

const notAdded = (why: string) => new DomainError('invalid_argument', `The passkey was not added: ${why}.`);

/** Adds the passkey a browser created for the signed-in account's challenge. */
export async function addPasskey(
  ctx: AuthorizationContext,
  signedIn: { session: Session; user: User },
  json: string | undefined,
): Promise<Passkey> {
  if (!recentSignIn(ctx, signedIn.session)) throw stale();
  const { svcnumId } = signedIn.user;
  const credential = parseCredential(json);
  if (!credential) throw notAdded('it needs JavaScript and a browser that supports passkeys');
  let registration: ReturnType<typeof verifyRegistration>;
  try {
    registration = verifyRegistration(credential, relyingParty(ctx.config.issuer));
  } catch (error) {
    if (error instanceof WebAuthnError) throw notAdded('your browser sent an answer we cannot accept');
    throw error;
  }
  const challenge = await ctx.store.takePasskeyChallenge(registration.challenge, ctx.clock.now());
  if (challenge?.purpose !== 'register' || challenge.svcnumId !== svcnumId) throw notAdded('it took too long');
  const existing = await ctx.store.listPasskeys(svcnumId);
  if (existing.length >= limits.passkeysPerAccount) throw notAdded('the account has as many as it may hold');
  const { challenge: _challenge, ...stored } = registration;
  const passkey: Passkey = {
    svcnumId,
    ...stored,
    userHandle: Buffer.from(svcnumId).toString('base64url'),
    // Named in order; "Rename" on /account gives it the person's name for it.
    name: `Passkey ${existing.length + 1}`,
    createdAt: ctx.clock.now(),
  };
  if (!(await ctx.store.putPasskey(passkey))) throw notAdded('it is on your account already');
  return passkey;
}

/** Why a passkey sign-in was refused, for the log (never shown: the person sees one message). */
export type PasskeyRefusal = 'invalid' | 'challenge' | 'unknown' | 'signature' | 'counter_regression' | 'raced';

/** The account a passkey assertion names (its user handle), before anything is checked. */
export function passkeyAccount(ctx: AuthorizationContext, credential: CredentialJson) {
  try {
    return assertionClaims(credential, relyingParty(ctx.config.issuer));
  } catch (error) {
    if (error instanceof WebAuthnError) return undefined;
    throw error;
  }
}

/**
 * A passkey sign-in's proof for `user`: the challenge taken (once), the passkey of that account,
 * its signature, and a signature counter that moved forward (unless the authenticator keeps none),
 * recorded with a conditional update so that two uses of one counter value cannot both pass.
 */
export async function checkPasskey(
  ctx: AuthorizationContext,
  user: User,
  credential: CredentialJson,
  claims: { challenge: string; userHandle: string; credentialId: string },
  now: number,
): Promise<PasskeyRefusal | undefined> {
  const rp = relyingParty(ctx.config.issuer);
  const challenge = await ctx.store.takePasskeyChallenge(claims.challenge, now);
  if (challenge?.purpose !== 'sign-in') return 'challenge';
  const passkey = await ctx.store.getPasskey(user.svcnumId, claims.credentialId);
  if (!passkey || passkey.userHandle !== Buffer.from(claims.userHandle).toString('base64url')) return 'unknown';
  let signed: { counter: number; backedUp: boolean };
  try {
    signed = verifyAssertion(credential, rp, passkey.publicKey);
  } catch (error) {
    if (error instanceof WebAuthnError) return 'signature';
    throw error;
  }
  // §7.2 step 22: a counter that does not move forward may mean a cloned authenticator.
  if ((signed.counter !== 0 || passkey.counter !== 0) && signed.counter <= passkey.counter) return 'counter_regression';
  const use = { counter: signed.counter, backedUp: signed.backedUp, lastUsedAt: now };
  return (await ctx.store.recordPasskeyUse(passkey, passkey.counter, use)) ? undefined : 'raced';
}

/** Renames a passkey of the account: false if it has none by that id, or the name is blank. */
export async function renamePasskey(ctx: AuthorizationContext, svcnumId: string, credentialId: string, name: string) {
  const trimmed = name.trim().slice(0, PASSKEY_NAME_MAX);
  return trimmed !== '' && ctx.store.renamePasskey(svcnumId, credentialId, trimmed);
}
