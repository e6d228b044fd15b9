import { DomainError, oauthError } from '../kernel/errors';
import type { AuthRequest, Session } from '../kernel/model';
import { optionalParam, type Params } from '../kernel/params';
import { safeEqual, sha256 } from '../kernel/secrets';
import {
  type AuthorizationContext,
  type AuthorizeOutcome,
  issueCode,
  parkedRequest,
  proceed,
  redirectError,
  sessionUser,
  setupRequired,
  type SignedIn,
} from './authorization-flow';
import { logoutDestination, requestLogout } from './logout';
import { parseAuthorizationRequest, type RedirectableError } from './authorization-request';
import { addPasskey, recentSignIn, registrationOptions, renamePasskey, signInOptions } from './passkeys';
import { isCredentialId } from './webauthn';
import { issueSignInCsrf, type SignInInput, signIn, validSignInCsrf } from './sign-in';
import { createUserGrants } from './user-grants';

// The browser side of the authorization code flow: /oauth/authorize, sign-in, consent and the
// account page. Everything here returns an outcome; the HTTP edge turns it into a page or a
// redirect. Its rooms: ./authorization-flow.ts (where a request goes next),
// ./authorization-request.ts (the request's parameters), ./sign-in.ts (the sign-in form).

export type { AuthorizationContext, AuthorizeOutcome } from './authorization-flow';
export type { LogoutOutcome } from './logout';
export type { SignInRefusal, SignInResult } from './sign-in';

const errorPage = (message: string): AuthorizeOutcome => ({
  type: 'error_page',
  title: 'This sign-in link is not valid',
  message,
});

/** GET /oauth/authorize. */
async function authorize(
  ctx: AuthorizationContext,
  params: Params,
  sessionToken: string | undefined,
): Promise<AuthorizeOutcome> {
  let clientId: string | undefined;
  let redirectUri: string | undefined;
  try {
    clientId = optionalParam(params, 'client_id');
    redirectUri = optionalParam(params, 'redirect_uri');
  } catch (error) {
    return errorPage(error instanceof DomainError ? error.message : 'the request is malformed');
  }
  if (clientId === undefined) return errorPage('The application did not say who it is (client_id is missing).');
  const client = await ctx.getClient(clientId);
  if (client?.kind !== 'login' || client.disabled) return errorPage('The application is not registered with us.');
  if (redirectUri === undefined) {
    return errorPage('The application did not say where to return (redirect_uri is missing).');
  }
  if (!client.redirectUris.includes(redirectUri)) {
    return errorPage('The return address does not match what the application registered.');
  }
  let request: AuthRequest;
  try {
    request = parseAuthorizationRequest(ctx, params, client, redirectUri);
  } catch (error) {
    if (error instanceof DomainError) {
      return redirectError(ctx, { redirectUri, state: (error as RedirectableError).state }, error);
    }
    throw error;
  }
  return proceed(ctx, request, await sessionUser(ctx, sessionToken), false);
}

/** POST of the consent form (Allow or Deny). CSRF has been checked by the edge. */
async function decideConsent(
  ctx: AuthorizationContext,
  requestId: string | undefined,
  sessionToken: string | undefined,
  allow: boolean,
): Promise<AuthorizeOutcome> {
  const { store, clock } = ctx;
  const parked = await parkedRequest(ctx, requestId);
  if (!parked) {
    const message = 'Go back to the application and start again.';
    return { type: 'error_page', title: 'This request has expired', message };
  }
  const signedIn = await sessionUser(ctx, sessionToken);
  if (!signedIn) return { type: 'sign_in', requestId: parked.request.requestId };
  const { request } = parked;
  await store.deleteAuthRequest(request.requestId);
  if (!allow) return redirectError(ctx, request, oauthError('access_denied', 'the user denied the request'));
  if (signedIn.user.status === 'setup_required') return redirectError(ctx, request, setupRequired());
  const existing = await store.getConsent(signedIn.user.svcnumId, request.clientId);
  await store.putConsent({
    svcnumId: signedIn.user.svcnumId,
    clientId: request.clientId,
    scopes: [...new Set([...(existing?.scopes ?? []), ...request.scopes])],
    grantedAt: clock.now(),
  });
  return issueCode(ctx, request, signedIn.user, signedIn.session.authTime);
}

/** The signed-in user's connected applications, for /account. */
async function connectedApps(ctx: AuthorizationContext, svcnumId: string) {
  const consents = await ctx.store.listConsents(svcnumId);
  const apps = await Promise.all(
    consents.map(async (consent) => ({ consent, client: await ctx.getClient(consent.clientId) })),
  );
  return apps.map(({ consent, client }) => ({
    clientId: consent.clientId,
    name: client?.name ?? 'Removed application',
    scopes: consent.scopes,
    grantedAt: consent.grantedAt,
  }));
}

export function createAuthorization(ctx: AuthorizationContext) {
  const { store, clock, guard } = ctx;
  const userGrants = createUserGrants({ store, clock });
  return {
    /** The issuer URL and cookie security of this deployment (the pages' cookies and form targets). */
    config: ctx.config,
    sessionUser: (sessionToken: string | undefined) => sessionUser(ctx, sessionToken),
    parkedRequest: (requestId: string | undefined) => parkedRequest(ctx, requestId),

    /**
     * The sign-in form's CSRF token (no session exists yet to hold one): signed, so a planted cookie
     * is worthless.
     */
    signInCsrf: {
      issue: () => issueSignInCsrf(ctx),
      valid: (token: string | undefined) => validSignInCsrf(ctx, token),
    },

    authorize: (params: Params, sessionToken: string | undefined) => authorize(ctx, params, sessionToken),
    signIn: (input: SignInInput) => signIn(ctx, input),
    decideConsent: (requestId: string | undefined, sessionToken: string | undefined, allow: boolean) =>
      decideConsent(ctx, requestId, sessionToken, allow),
    connectedApps: (svcnumId: string) => connectedApps(ctx, svcnumId),

    /** Revoke an application from /account: forget the consent and kill every refresh token. */
    async revokeApp(svcnumId: string, clientId: string) {
      await userGrants.revokeClient(svcnumId, clientId);
    },

    async signOut(sessionToken: string | undefined) {
      if (sessionToken && sessionToken.length <= 100) await store.deleteSession(sha256(sessionToken));
    },

    /** The account's passkeys (./passkeys.ts); a passkey sign-in is `signIn` with `passkey`. */
    passkeys: {
      signInOptions: () => signInOptions(ctx),
      /** Whether the session's sign-in is recent enough to add one. */
      recentSignIn: (session: Session) => recentSignIn(ctx, session),
      registrationOptions: (signedIn: SignedIn) => registrationOptions(ctx, signedIn),
      add: (signedIn: SignedIn, credential?: string) => addPasskey(ctx, signedIn, credential),
      list: (svcnumId: string) => store.listPasskeys(svcnumId),
      // An id that no passkey can have (a missing field, garbage) is not found, never a store error.
      get: async (svcnumId: string, credentialId: string) =>
        isCredentialId(credentialId) ? store.getPasskey(svcnumId, credentialId) : undefined,
      rename: async (svcnumId: string, credentialId: string, name: string) =>
        isCredentialId(credentialId) && renamePasskey(ctx, svcnumId, credentialId, name),
      remove: async (svcnumId: string, credentialId: string) =>
        isCredentialId(credentialId) ? store.deletePasskey(svcnumId, credentialId) : undefined,
    },

    /** Password checks (scrypt) this process has started: for tests and metrics. */
    get passwordChecks() {
      return guard.gate.checks;
    },

    /** RP-Initiated Logout: the client's request, given who is signed in (core/oauth/logout.ts). */
    requestLogout: (params: Params, signedIn: SignedIn | undefined) => requestLogout(ctx, params, signedIn),
    /** The confirmed sign-out's destination, checked again from the confirmation form's fields. */
    logoutDestination: (params: Params) => logoutDestination(ctx, params),

    csrfMatches: (session: Session, token: string | undefined) =>
      token !== undefined && safeEqual(session.csrfToken, token),
  };
}

export type Authorization = ReturnType<typeof createAuthorization>;
