import { limits, type ServiceConfig } from './config';
import { OAuthError } from './errors';
import type { AuthRequest, Client, Session, User } from './model';
import { optionalParam, type Params } from './params';
import type { Clock, Random } from './ports';
import { isSubset, parseScope } from './scopes';
import { decoyPasswordHash, randomSecret, safeEqual, sha256, verifyPassword } from './secrets';
import type { Store } from './store';
import type { Accounts } from './accounts';

// The browser side of the authorization code flow: /oauth/authorize, sign-in, consent and the
// account page. Everything here returns an outcome; the HTTP edge turns it into a page or a
// redirect.

export type AuthorizeOutcome =
  /** Unknown client or redirect URI: shown to the person, never redirected (RFC 6749 §4.1.2.1). */
  | { type: 'error_page'; status: number; title: string; message: string }
  /** Back to the client, with a code or an error. */
  | { type: 'redirect'; location: string }
  | { type: 'sign_in'; requestId: string }
  | { type: 'consent'; requestId: string };

const CODE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const SUPPORTED_PROMPTS = new Set(['none', 'login', 'consent']);
const MAX_STATE_LENGTH = 2048;
const MAX_NONCE_LENGTH = 512;

export interface SignInResult {
  outcome: AuthorizeOutcome | { type: 'account' } | { type: 'sign_in_error'; message: string };
  /** Set on success: the new session's cookie value. */
  sessionToken?: string;
}

export function createAuthorization(deps: {
  store: Store;
  config: ServiceConfig;
  clock: Clock;
  random: Random;
  accounts: Accounts;
  getClient: (clientId: string) => Promise<Client | undefined>;
}) {
  const { store, config, clock, random, accounts, getClient } = deps;

  function redirectTo(redirectUri: string, params: Record<string, string | undefined>): AuthorizeOutcome {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(name, value);
    // RFC 9207: the issuer travels with every authorization response.
    url.searchParams.append('iss', config.issuer);
    return { type: 'redirect', location: url.toString() };
  }

  const redirectError = (request: { redirectUri: string; state?: string }, error: OAuthError) =>
    redirectTo(request.redirectUri, { error: error.error, error_description: error.description, state: request.state });

  const errorPage = (message: string): AuthorizeOutcome => ({ type: 'error_page', status: 400, title: 'This sign-in link is not valid', message });

  async function issueCode(request: AuthRequest, user: User, authTime: number): Promise<AuthorizeOutcome> {
    const code = randomSecret(random);
    await store.putCode({
      codeHash: sha256(code),
      clientId: request.clientId,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      scopes: request.scopes,
      ...(request.nonce !== undefined ? { nonce: request.nonce } : {}),
      svcnumId: user.svcnumId,
      authTime,
      grantId: randomSecret(random, 16),
      expiresAt: clock.now() + limits.authorizationCodeTtl,
    });
    return redirectTo(request.redirectUri, { code, state: request.state });
  }

  /** A signed-in, usable session and its user, or nothing. */
  async function sessionUser(sessionToken: string | undefined): Promise<{ session: Session; user: User } | undefined> {
    if (!sessionToken || sessionToken.length > 100) return undefined;
    const session = await store.getSession(sha256(sessionToken), clock.now());
    if (!session) return undefined;
    const user = await store.getUser(session.svcnumId);
    if (!user || user.status === 'disabled') return undefined;
    return { session, user };
  }

  /** Where an authorization request goes next, given who (if anyone) is signed in. */
  async function proceed(request: AuthRequest, signedIn: { session: Session; user: User } | undefined, stored: boolean): Promise<AuthorizeOutcome> {
    // A sign-in made for this very request satisfies prompt=login and max_age (else max_age=0
    // would send the person back to the sign-in page forever).
    const freshSignIn = request.signedInAt !== undefined;
    const needsLogin = !signedIn || (!freshSignIn && (request.forceLogin
      || (request.maxAge !== undefined && clock.now() - signedIn.session.authTime > request.maxAge * 1000)));
    const interactive = !request.promptNone;
    if (needsLogin) {
      if (!interactive) return redirectError(request, new OAuthError('login_required', 'the user is not signed in'));
      if (!stored) await store.putAuthRequest(request);
      return { type: 'sign_in', requestId: request.requestId };
    }
    const { session, user } = signedIn!;
    if (user.status === 'setup_required') {
      await store.deleteAuthRequest(request.requestId);
      return redirectError(request, new OAuthError('account_setup_required', 'the account has not finished registration; complete it and sign in again'));
    }
    const consent = await store.getConsent(user.svcnumId, request.clientId);
    if (!consent || !isSubset(request.scopes, consent.scopes) || request.forceConsent) {
      if (!interactive) return redirectError(request, new OAuthError('consent_required', 'the user has not approved this application'));
      if (!stored) await store.putAuthRequest(request);
      return { type: 'consent', requestId: request.requestId };
    }
    if (stored) await store.deleteAuthRequest(request.requestId);
    return issueCode(request, user, session.authTime);
  }

  /** Validates everything the client sent; throws OAuthError for errors that may be redirected. */
  function parseRequest(params: Params, client: Client, redirectUri: string): AuthRequest {
    const state = optionalParam(params, 'state');
    const fail = (error: OAuthError): never => {
      throw Object.assign(error, { state });
    };
    // Repeated or oversized parameters are refused too, and their errors must also carry state.
    const param = (name: string) => {
      try {
        return optionalParam(params, name);
      } catch (error) {
        if (error instanceof OAuthError) fail(error);
        throw error;
      }
    };
    if (state !== undefined && state.length > MAX_STATE_LENGTH) fail(new OAuthError('invalid_request', `state is longer than ${MAX_STATE_LENGTH} characters`));
    if (params.has('request')) fail(new OAuthError('request_not_supported', 'request objects are not supported'));
    if (params.has('request_uri')) fail(new OAuthError('request_uri_not_supported', 'request_uri is not supported'));
    const responseType = param('response_type');
    if (responseType === undefined) fail(new OAuthError('invalid_request', 'response_type is required'));
    if (responseType !== 'code') fail(new OAuthError('unsupported_response_type', 'only response_type=code is supported'));
    const responseMode = param('response_mode');
    if (responseMode !== undefined && responseMode !== 'query') fail(new OAuthError('invalid_request', 'only response_mode=query is supported'));
    const scopeValue = param('scope');
    if (scopeValue === undefined) fail(new OAuthError('invalid_request', 'scope is required'));
    const scopes = parseScope(scopeValue!);
    if (!scopes) fail(new OAuthError('invalid_scope', 'scope is not a valid space-separated list'));
    // Descriptions never echo what was sent: clients show them to people (a phishing lure
    // otherwise), and RFC 6749 §4.1.2.1 limits their characters.
    if (scopes!.some((scope) => !client.scopes.includes(scope))) fail(new OAuthError('invalid_scope', `scope not allowed for this client (allowed: ${client.scopes.join(' ')})`));
    const codeChallenge = param('code_challenge');
    const method = param('code_challenge_method');
    if (codeChallenge === undefined) fail(new OAuthError('invalid_request', 'code_challenge is required (PKCE with S256)'));
    if (method === undefined) fail(new OAuthError('invalid_request', 'code_challenge_method is required and must be S256'));
    if (method !== 'S256') fail(new OAuthError('invalid_request', 'code_challenge_method must be S256; plain is not supported'));
    if (!CODE_CHALLENGE.test(codeChallenge!)) fail(new OAuthError('invalid_request', 'code_challenge must be the base64url SHA-256 of the code_verifier (43 characters)'));
    const nonce = param('nonce');
    if (nonce !== undefined && nonce.length > MAX_NONCE_LENGTH) fail(new OAuthError('invalid_request', `nonce is longer than ${MAX_NONCE_LENGTH} characters`));
    const prompts = (param('prompt') ?? '').split(' ').filter(Boolean);
    const unsupported = prompts.filter((prompt) => !SUPPORTED_PROMPTS.has(prompt));
    if (unsupported.length > 0) fail(new OAuthError('invalid_request', 'prompt value not supported (supported: none, login, consent)'));
    if (prompts.includes('none') && prompts.length > 1) fail(new OAuthError('invalid_request', 'prompt=none cannot be combined with other values'));
    const maxAgeValue = param('max_age');
    if (maxAgeValue !== undefined && !/^\d{1,9}$/.test(maxAgeValue)) fail(new OAuthError('invalid_request', 'max_age must be a non-negative integer'));
    return {
      requestId: randomSecret(random),
      clientId: client.clientId,
      redirectUri,
      scopes: scopes!,
      ...(state !== undefined ? { state } : {}),
      ...(nonce !== undefined ? { nonce } : {}),
      codeChallenge: codeChallenge!,
      forceLogin: prompts.includes('login'),
      forceConsent: prompts.includes('consent'),
      promptNone: prompts.includes('none'),
      ...(maxAgeValue !== undefined ? { maxAge: Number(maxAgeValue) } : {}),
      expiresAt: clock.now() + limits.authRequestTtl,
    };
  }

  /** Loads a parked request together with its client (which may have been disabled since). */
  async function parkedRequest(requestId: string | undefined) {
    if (!requestId || requestId.length > 100) return undefined;
    const request = await store.getAuthRequest(requestId, clock.now());
    if (!request) return undefined;
    const client = await getClient(request.clientId);
    return client && !client.disabled ? { request, client } : undefined;
  }

  return {
    sessionUser,
    parkedRequest,

    /** GET /oauth/authorize. */
    async authorize(params: Params, sessionToken: string | undefined): Promise<AuthorizeOutcome> {
      let clientId: string | undefined;
      let redirectUri: string | undefined;
      try {
        clientId = optionalParam(params, 'client_id');
        redirectUri = optionalParam(params, 'redirect_uri');
      } catch (error) {
        return errorPage(error instanceof OAuthError ? error.description : 'the request is malformed');
      }
      if (clientId === undefined) return errorPage('The application did not say who it is (client_id is missing).');
      const client = await getClient(clientId);
      if (!client || client.kind !== 'login' || client.disabled) return errorPage('The application is not registered with us.');
      if (redirectUri === undefined) return errorPage('The application did not say where to return (redirect_uri is missing).');
      if (!client.redirectUris.includes(redirectUri)) return errorPage('The return address does not match what the application registered.');
      let request: AuthRequest;
      try {
        request = parseRequest(params, client, redirectUri);
      } catch (error) {
        if (error instanceof OAuthError) return redirectError({ redirectUri, state: (error as OAuthError & { state?: string }).state }, error);
        throw error;
      }
      return proceed(request, await sessionUser(sessionToken), false);
    },

    /** POST of the sign-in form. CSRF has been checked by the edge. */
    async signIn(input: { requestId?: string; identifier: string; password: string }): Promise<SignInResult> {
      const parked = input.requestId ? await parkedRequest(input.requestId) : undefined;
      if (input.requestId && !parked) {
        return { outcome: { type: 'sign_in_error', message: 'This sign-in took too long. Go back to the application and start again.' } };
      }
      const generic = { outcome: { type: 'sign_in_error' as const, message: 'The number, email or password is not right.' } };
      if (input.identifier.length > 254 || input.password.length > 256 || !input.identifier.trim() || !input.password) return generic;
      const user = await accounts.findUser(input.identifier);
      const now = clock.now();
      if (!user?.passwordHash || user.status === 'disabled') {
        await verifyPassword(input.password, decoyPasswordHash); // same cost as a real check
        return generic;
      }
      const locked = { outcome: { type: 'sign_in_error' as const, message: 'Too many failed attempts. Try again in a few minutes.' } };
      if (user.lockedUntil !== undefined && user.lockedUntil > now) return locked;
      // The attempt is counted before the (slow) password check: however many guesses arrive
      // at once, at most `signInFailureThreshold` of them are ever checked.
      const attempt = await store.beginSignInAttempt(user.svcnumId, now);
      if (attempt === undefined) return locked;
      if (attempt > limits.signInFailureThreshold) {
        // More guesses than allowed got counted (in parallel, or after a crash between counting
        // and locking): lock now, so that the count is reset when the lock ends.
        await store.lockAccount(user.svcnumId, now + limits.signInLockout);
        return locked;
      }
      if (!(await verifyPassword(input.password, user.passwordHash))) {
        if (attempt >= limits.signInFailureThreshold) await store.lockAccount(user.svcnumId, now + limits.signInLockout);
        return generic;
      }
      await store.clearFailedSignIns(user.svcnumId);
      // A new session id on every sign-in: no session fixation.
      const sessionToken = randomSecret(random);
      const session: Session = {
        sessionHash: sha256(sessionToken), svcnumId: user.svcnumId, authTime: now,
        csrfToken: randomSecret(random), expiresAt: now + limits.sessionTtl,
      };
      await store.putSession(session);
      if (!parked) return { outcome: { type: 'account' }, sessionToken };
      const request = { ...parked.request, signedInAt: now };
      await store.markAuthRequestSignedIn(request.requestId, now);
      return { outcome: await proceed(request, { session, user }, true), sessionToken };
    },

    /** POST of the consent form (Allow or Deny). CSRF has been checked by the edge. */
    async decideConsent(requestId: string | undefined, sessionToken: string | undefined, allow: boolean): Promise<AuthorizeOutcome> {
      const parked = await parkedRequest(requestId);
      if (!parked) return { type: 'error_page', status: 400, title: 'This request has expired', message: 'Go back to the application and start again.' };
      const signedIn = await sessionUser(sessionToken);
      if (!signedIn) return { type: 'sign_in', requestId: parked.request.requestId };
      const { request } = parked;
      await store.deleteAuthRequest(request.requestId);
      if (!allow) return redirectError(request, new OAuthError('access_denied', 'the user denied the request'));
      if (signedIn.user.status === 'setup_required') {
        return redirectError(request, new OAuthError('account_setup_required', 'the account has not finished registration; complete it and sign in again'));
      }
      const existing = await store.getConsent(signedIn.user.svcnumId, request.clientId);
      await store.putConsent({
        svcnumId: signedIn.user.svcnumId,
        clientId: request.clientId,
        scopes: [...new Set([...(existing?.scopes ?? []), ...request.scopes])],
        grantedAt: clock.now(),
      });
      return issueCode(request, signedIn.user, signedIn.session.authTime);
    },

    /** The signed-in user's connected applications, for /account. */
    async connectedApps(svcnumId: string) {
      const consents = await store.listConsents(svcnumId);
      const apps = await Promise.all(consents.map(async (consent) => ({ consent, client: await getClient(consent.clientId) })));
      return apps.map(({ consent, client }) => ({
        clientId: consent.clientId, name: client?.name ?? 'Removed application', scopes: consent.scopes, grantedAt: consent.grantedAt,
      }));
    },

    /** Revoke an application from /account: forget the consent and kill every refresh token. */
    async revokeApp(svcnumId: string, clientId: string) {
      await store.deleteConsent(svcnumId, clientId);
      for (const grant of await store.listGrants(svcnumId, clientId)) await store.revokeGrant(grant.grantId, clock.now());
    },

    async signOut(sessionToken: string | undefined) {
      if (sessionToken && sessionToken.length <= 100) await store.deleteSession(sha256(sessionToken));
    },

    csrfMatches: (session: Session, token: string | undefined) => token !== undefined && safeEqual(session.csrfToken, token),
  };
}

export type Authorization = ReturnType<typeof createAuthorization>;
