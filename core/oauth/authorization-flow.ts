import { limits, type ServiceConfig } from '../kernel/config';
import { type DomainError, oauthError } from '../kernel/errors';
import type { AuthRequest, Client, Session, User } from '../kernel/model';
import type { Clock, MacKey, Random } from '../kernel/ports';
import { isSubset } from '../kernel/scopes';
import { randomSecret, sha256 } from '../kernel/secrets';
import type { SignInGuard } from './sign-in-guard';
import type { OAuthPort } from './store';
import type { AccountFinder } from '../kernel/capabilities';
import type { IdTokenHintVerifier } from './id-token-hint';

// Where an authorization request goes next (sign-in, consent, or back to the client with a code
// or an error), shared by /oauth/authorize, the sign-in form and the consent form.

export type AuthorizeOutcome =
  /** Unknown client or redirect URI: shown to the person, never redirected (RFC 6749 §4.1.2.1). */
  | { type: 'error_page'; title: string; message: string }
  /** Back to the client, with a code or an error. */
  | { type: 'redirect'; location: string }
  | { type: 'sign_in'; requestId: string }
  | { type: 'consent'; requestId: string };

/** What the browser side of the code flow works with: its ports and the modules it calls. */
export interface AuthorizationContext {
  store: OAuthPort;
  config: ServiceConfig;
  clock: Clock;
  random: Random;
  accounts: AccountFinder;
  macKey: MacKey;
  guard: SignInGuard;
  /** Checked when no account can sign in with a password: costs what a real check costs. */
  decoyPasswordHash: string;
  getClient: (clientId: string) => Promise<Client | undefined>;
  verifyIdTokenHint: IdTokenHintVerifier;
}

export interface SignedIn {
  session: Session;
  user: User;
}

export function redirectTo(
  ctx: AuthorizationContext,
  redirectUri: string,
  params: Record<string, string | undefined>,
): AuthorizeOutcome {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(name, value);
  // RFC 9207: the issuer travels with every authorization response.
  url.searchParams.append('iss', ctx.config.issuer);
  return { type: 'redirect', location: url.toString() };
}

export const redirectError = (
  ctx: AuthorizationContext,
  request: { redirectUri: string; state?: string },
  error: DomainError,
) =>
  redirectTo(ctx, request.redirectUri, {
    error: error.oauth ?? 'invalid_request',
    error_description: error.message,
    state: request.state,
  });

export const setupRequired = () =>
  oauthError('account_setup_required', 'the account has not finished registration; complete it and sign in again');

export async function issueCode(
  ctx: AuthorizationContext,
  request: AuthRequest,
  user: User,
  authTime: number,
): Promise<AuthorizeOutcome> {
  const { store, random, clock } = ctx;
  const code = randomSecret(random);
  await store.putCode({
    codeHash: sha256(code),
    clientId: request.clientId,
    redirectUri: request.redirectUri,
    codeChallenge: request.codeChallenge,
    scopes: request.scopes,
    ...(request.nonce !== undefined ? { nonce: request.nonce } : {}),
    ...(request.dpopJkt !== undefined ? { dpopJkt: request.dpopJkt } : {}),
    svcnumId: user.svcnumId,
    authTime,
    grantId: randomSecret(random, 16),
    expiresAt: clock.now() + limits.authorizationCodeTtl,
  });
  return redirectTo(ctx, request.redirectUri, { code, state: request.state });
}

/** A signed-in, usable session and its user, or nothing. */
export async function sessionUser(
  ctx: AuthorizationContext,
  sessionToken: string | undefined,
): Promise<SignedIn | undefined> {
  if (!sessionToken || sessionToken.length > 100) return undefined;
  const session = await ctx.store.getSession(sha256(sessionToken), ctx.clock.now());
  if (!session) return undefined;
  const user = await ctx.store.getUser(session.svcnumId);
  if (!user || user.status === 'disabled') return undefined;
  return { session, user };
}

/** Where an authorization request goes next, given who (if anyone) is signed in. */
export async function proceed(
  ctx: AuthorizationContext,
  request: AuthRequest,
  signedIn: SignedIn | undefined,
  stored: boolean,
): Promise<AuthorizeOutcome> {
  const { store, clock } = ctx;
  // A sign-in made for this very request satisfies prompt=login and max_age (else max_age=0
  // would send the person back to the sign-in page forever).
  const freshSignIn = request.signedInAt !== undefined;
  const needsLogin =
    !signedIn ||
    (!freshSignIn &&
      (request.forceLogin ||
        (request.maxAge !== undefined && clock.now() - signedIn.session.authTime > request.maxAge * 1000)));
  const interactive = !request.promptNone;
  if (needsLogin) {
    if (!interactive) return redirectError(ctx, request, oauthError('login_required', 'the user is not signed in'));
    if (!stored) await store.putAuthRequest(request);
    return { type: 'sign_in', requestId: request.requestId };
  }
  const { session, user } = signedIn!;
  if (user.status === 'setup_required') {
    await store.deleteAuthRequest(request.requestId);
    return redirectError(ctx, request, setupRequired());
  }
  const consent = await store.getConsent(user.svcnumId, request.clientId);
  if (!consent || !isSubset(request.scopes, consent.scopes) || request.forceConsent) {
    if (!interactive) {
      return redirectError(ctx, request, oauthError('consent_required', 'the user has not approved this application'));
    }
    if (!stored) await store.putAuthRequest(request);
    return { type: 'consent', requestId: request.requestId };
  }
  if (stored) await store.deleteAuthRequest(request.requestId);
  return issueCode(ctx, request, user, session.authTime);
}

/** Loads a parked request together with its client (which may have been disabled since). */
export async function parkedRequest(ctx: AuthorizationContext, requestId: string | undefined) {
  if (!requestId || requestId.length > 100) return undefined;
  const request = await ctx.store.getAuthRequest(requestId, ctx.clock.now());
  if (!request) return undefined;
  const client = await ctx.getClient(request.clientId);
  return client && !client.disabled ? { request, client } : undefined;
}

export type ParkedRequest = Awaited<ReturnType<typeof parkedRequest>>;
