import { limits, type ServiceConfig } from '../kernel/config';
import { DomainError, oauthError } from '../kernel/errors';
import type { AuthRequest, Client, Session, User } from '../kernel/model';
import { optionalParam, type Params } from '../kernel/params';
import type { Clock, MacKey, Random } from '../kernel/ports';
import { isSubset, parseScope } from '../kernel/scopes';
import { decoyPasswordHash, openToken, randomSecret, safeEqual, sealToken, sha256, verifyPassword } from '../kernel/secrets';
import { deviceKey, identifierKey, type SignInGuard } from './sign-in-guard';
import type { OAuthPort } from './store';
import { createUserGrants } from './user-grants';
import type { AccountFinder } from '../kernel/capabilities';

// The browser side of the authorization code flow: /oauth/authorize, sign-in, consent and the
// account page. Everything here returns an outcome; the HTTP edge turns it into a page or a
// redirect.

export type AuthorizeOutcome =
  /** Unknown client or redirect URI: shown to the person, never redirected (RFC 6749 §4.1.2.1). */
  | { type: 'error_page'; title: string; message: string }
  /** Back to the client, with a code or an error. */
  | { type: 'redirect'; location: string }
  | { type: 'sign_in'; requestId: string }
  | { type: 'consent'; requestId: string };

const CODE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const SUPPORTED_PROMPTS = new Set(['none', 'login', 'consent']);
const MAX_STATE_LENGTH = 2048;
const MAX_NONCE_LENGTH = 512;

/**
 * A refused sign-in, shown on the sign-in page: its error's kind says what happened (a failed
 * attempt `invalid_argument`, throttled `exhausted`, busy `unavailable`, the last two with
 * retry-after); the edge's one mapping turns the kind into the page's status.
 */
export interface SignInRefusal { type: 'sign_in_error'; error: DomainError }

export interface SignInResult {
  outcome: AuthorizeOutcome | { type: 'account' } | SignInRefusal;
  /** Set on success: the new session's cookie value. */
  sessionToken?: string;
  /** Set on success: this browser's new device cookie (a signed account + device id). */
  deviceToken?: string;
}

// One message per kind of refusal, whatever the account: none of them tells whether it exists.
const SIGN_IN_FAILED = 'The number, email or password is not right.';
const SIGN_IN_THROTTLED = 'Too many attempts to sign in with this number or email. Wait a few minutes and try again, or sign in from a browser you used before.';
const ADDRESS_THROTTLED = 'Too many sign-in attempts from your network. Wait a few minutes and try again.';
const SIGN_IN_BUSY = 'We are busy right now. Try again in a moment.';
const BUSY_RETRY_AFTER_MS = 2_000;
/** Purposes of signed tokens (core/kernel/secrets.ts sealToken): one never passes for the other. */
const DEVICE_TOKEN = 'device';
const SIGN_IN_CSRF_TOKEN = 'sign-in-csrf';

const refused = (kind: 'invalid_argument' | 'exhausted' | 'unavailable', message: string, retryAfterMs?: number): SignInResult => ({
  outcome: {
    type: 'sign_in_error',
    error: new DomainError(kind, message, retryAfterMs !== undefined ? { retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) } : {}),
  },
});

export function createAuthorization(deps: {
  store: OAuthPort;
  config: ServiceConfig;
  clock: Clock;
  random: Random;
  accounts: AccountFinder;
  macKey: MacKey;
  guard: SignInGuard;
  getClient: (clientId: string) => Promise<Client | undefined>;
}) {
  const { store, config, clock, random, accounts, macKey, guard, getClient } = deps;
  const userGrants = createUserGrants({ store, clock });

  function redirectTo(redirectUri: string, params: Record<string, string | undefined>): AuthorizeOutcome {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(name, value);
    // RFC 9207: the issuer travels with every authorization response.
    url.searchParams.append('iss', config.issuer);
    return { type: 'redirect', location: url.toString() };
  }

  const redirectError = (request: { redirectUri: string; state?: string }, error: DomainError) =>
    redirectTo(request.redirectUri, { error: error.oauth ?? 'invalid_request', error_description: error.message, state: request.state });

  const errorPage = (message: string): AuthorizeOutcome => ({ type: 'error_page', title: 'This sign-in link is not valid', message });

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
      if (!interactive) return redirectError(request, oauthError('login_required', 'the user is not signed in'));
      if (!stored) await store.putAuthRequest(request);
      return { type: 'sign_in', requestId: request.requestId };
    }
    const { session, user } = signedIn!;
    if (user.status === 'setup_required') {
      await store.deleteAuthRequest(request.requestId);
      return redirectError(request, oauthError('account_setup_required', 'the account has not finished registration; complete it and sign in again'));
    }
    const consent = await store.getConsent(user.svcnumId, request.clientId);
    if (!consent || !isSubset(request.scopes, consent.scopes) || request.forceConsent) {
      if (!interactive) return redirectError(request, oauthError('consent_required', 'the user has not approved this application'));
      if (!stored) await store.putAuthRequest(request);
      return { type: 'consent', requestId: request.requestId };
    }
    if (stored) await store.deleteAuthRequest(request.requestId);
    return issueCode(request, user, session.authTime);
  }

  /** Validates everything the client sent; throws a DomainError (with its OAuth code) for errors that may be redirected. */
  function parseRequest(params: Params, client: Client, redirectUri: string): AuthRequest {
    const state = optionalParam(params, 'state');
    const fail = (error: DomainError): never => {
      throw Object.assign(error, { state });
    };
    // Repeated or oversized parameters are refused too, and their errors must also carry state.
    const param = (name: string) => {
      try {
        return optionalParam(params, name);
      } catch (error) {
        if (error instanceof DomainError) fail(error);
        throw error;
      }
    };
    if (state !== undefined && state.length > MAX_STATE_LENGTH) fail(oauthError('invalid_request', `state is longer than ${MAX_STATE_LENGTH} characters`));
    if (params.has('request')) fail(oauthError('request_not_supported', 'request objects are not supported'));
    if (params.has('request_uri')) fail(oauthError('request_uri_not_supported', 'request_uri is not supported'));
    const responseType = param('response_type');
    if (responseType === undefined) fail(oauthError('invalid_request', 'response_type is required'));
    if (responseType !== 'code') fail(oauthError('unsupported_response_type', 'only response_type=code is supported'));
    const responseMode = param('response_mode');
    if (responseMode !== undefined && responseMode !== 'query') fail(oauthError('invalid_request', 'only response_mode=query is supported'));
    const scopeValue = param('scope');
    if (scopeValue === undefined) fail(oauthError('invalid_request', 'scope is required'));
    const scopes = parseScope(scopeValue!);
    if (!scopes) fail(oauthError('invalid_scope', 'scope is not a valid space-separated list'));
    // Descriptions never echo what was sent: clients show them to people (a phishing lure
    // otherwise), and RFC 6749 §4.1.2.1 limits their characters.
    if (scopes!.some((scope) => !client.scopes.includes(scope))) fail(oauthError('invalid_scope', `scope not allowed for this client (allowed: ${client.scopes.join(' ')})`));
    const codeChallenge = param('code_challenge');
    const method = param('code_challenge_method');
    if (codeChallenge === undefined) fail(oauthError('invalid_request', 'code_challenge is required (PKCE with S256)'));
    if (method === undefined) fail(oauthError('invalid_request', 'code_challenge_method is required and must be S256'));
    if (method !== 'S256') fail(oauthError('invalid_request', 'code_challenge_method must be S256; plain is not supported'));
    if (!CODE_CHALLENGE.test(codeChallenge!)) fail(oauthError('invalid_request', 'code_challenge must be the base64url SHA-256 of the code_verifier (43 characters)'));
    const nonce = param('nonce');
    if (nonce !== undefined && nonce.length > MAX_NONCE_LENGTH) fail(oauthError('invalid_request', `nonce is longer than ${MAX_NONCE_LENGTH} characters`));
    const prompts = (param('prompt') ?? '').split(' ').filter(Boolean);
    const unsupported = prompts.filter((prompt) => !SUPPORTED_PROMPTS.has(prompt));
    if (unsupported.length > 0) fail(oauthError('invalid_request', 'prompt value not supported (supported: none, login, consent)'));
    if (prompts.includes('none') && prompts.length > 1) fail(oauthError('invalid_request', 'prompt=none cannot be combined with other values'));
    const maxAgeValue = param('max_age');
    if (maxAgeValue !== undefined && !/^\d{1,9}$/.test(maxAgeValue)) fail(oauthError('invalid_request', 'max_age must be a non-negative integer'));
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

  /** A new session for a person who just signed in, and where they go next. */
  async function startSession(user: User, parked: Awaited<ReturnType<typeof parkedRequest>>, now: number): Promise<SignInResult> {
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
  }

  /**
   * The account and device id of a device cookie that verifies, checked before any lookup (so
   * whatever identifier is typed, a cookie costs the same MAC check).
   */
  async function knownDevice(deviceToken: string | undefined, now: number): Promise<{ svcnumId: string; deviceId: string } | undefined> {
    const fields = await openToken(macKey, DEVICE_TOKEN, deviceToken, now);
    return fields?.length === 2 ? { svcnumId: fields[0]!, deviceId: fields[1]! } : undefined;
  }

  return {
    /** The issuer URL and cookie security of this deployment (the pages' cookies and form targets). */
    config,
    sessionUser,
    parkedRequest,

    /** The sign-in form's CSRF token (no session exists yet to hold one): signed, so a planted cookie is worthless. */
    signInCsrf: {
      issue: () => sealToken(macKey, SIGN_IN_CSRF_TOKEN, [randomSecret(random, 16)], clock.now() + limits.signInCsrfTtl),
      valid: async (token: string | undefined) => (await openToken(macKey, SIGN_IN_CSRF_TOKEN, token, clock.now())) !== undefined,
    },

    /** GET /oauth/authorize. */
    async authorize(params: Params, sessionToken: string | undefined): Promise<AuthorizeOutcome> {
      let clientId: string | undefined;
      let redirectUri: string | undefined;
      try {
        clientId = optionalParam(params, 'client_id');
        redirectUri = optionalParam(params, 'redirect_uri');
      } catch (error) {
        return errorPage(error instanceof DomainError ? error.message : 'the request is malformed');
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
        if (error instanceof DomainError) return redirectError({ redirectUri, state: (error as DomainError & { state?: string }).state }, error);
        throw error;
      }
      return proceed(request, await sessionUser(sessionToken), false);
    },

    /**
     * POST of the sign-in form. CSRF has been checked by the edge. Every attempt that is not
     * refused before (network limit, busy, throttled) costs the same: the account lookup, a read
     * and a conditional put of a throttle count, and exactly one scrypt (a decoy when there is no
     * usable account), so neither answer nor work tells whether the account exists.
     */
    async signIn(input: { requestId?: string; identifier: string; password: string; clientAddress?: string; deviceToken?: string }): Promise<SignInResult> {
      const parked = input.requestId ? await parkedRequest(input.requestId) : undefined;
      if (input.requestId && !parked) return refused('invalid_argument', 'This sign-in took too long. Go back to the application and start again.');
      const address = guard.takeAddress(input.clientAddress);
      if (!address.allowed) return refused('exhausted', ADDRESS_THROTTLED, address.retryAfterSeconds * 1000);
      if (input.identifier.length > 254 || input.password.length > 256 || !input.identifier.trim() || !input.password) return refused('invalid_argument', SIGN_IN_FAILED);
      const knownBrowser = await knownDevice(input.deviceToken, clock.now());
      const admission = guard.gate.admit(knownBrowser !== undefined);
      if (!admission) {
        guard.giveBackAddress(input.clientAddress);
        return refused('unavailable', SIGN_IN_BUSY, BUSY_RETRY_AFTER_MS);
      }
      try {
        const now = clock.now();
        const user = await accounts.findUser(input.identifier);
        // A browser that signed in to this account before is judged by its own count while it
        // has fewer than the free failures; strangers' attempts on the identifier do not stop it.
        const device = user && knownBrowser?.svcnumId === user.svcnumId ? knownBrowser.deviceId : undefined;
        const byDevice = device ? await guard.count(deviceKey(device), now, limits.signInFreeFailures) : undefined;
        const key = byDevice?.counted ? deviceKey(device!) : identifierKey(input.identifier);
        const counted = byDevice?.counted ? byDevice : await guard.count(key, now);
        if (!counted.counted) return refused('exhausted', SIGN_IN_THROTTLED, counted.retryAfterMs);
        const usable = user?.passwordHash !== undefined && user.status !== 'disabled' ? user : undefined;
        const matches = await admission.check(() => verifyPassword(input.password, usable?.passwordHash ?? decoyPasswordHash));
        if (!usable || !matches) return refused('invalid_argument', SIGN_IN_FAILED);
        await guard.clear(key);
        guard.giveBackAddress(input.clientAddress);
        return { ...(await startSession(usable, parked, now)), deviceToken: await sealToken(macKey, DEVICE_TOKEN, [usable.svcnumId, randomSecret(random, 16)], now + limits.deviceCookieTtl) };
      } finally {
        admission.leave();
      }
    },

    /** POST of the consent form (Allow or Deny). CSRF has been checked by the edge. */
    async decideConsent(requestId: string | undefined, sessionToken: string | undefined, allow: boolean): Promise<AuthorizeOutcome> {
      const parked = await parkedRequest(requestId);
      if (!parked) return { type: 'error_page', title: 'This request has expired', message: 'Go back to the application and start again.' };
      const signedIn = await sessionUser(sessionToken);
      if (!signedIn) return { type: 'sign_in', requestId: parked.request.requestId };
      const { request } = parked;
      await store.deleteAuthRequest(request.requestId);
      if (!allow) return redirectError(request, oauthError('access_denied', 'the user denied the request'));
      if (signedIn.user.status === 'setup_required') {
        return redirectError(request, oauthError('account_setup_required', 'the account has not finished registration; complete it and sign in again'));
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
      await userGrants.revokeClient(svcnumId, clientId);
    },

    async signOut(sessionToken: string | undefined) {
      if (sessionToken && sessionToken.length <= 100) await store.deleteSession(sha256(sessionToken));
    },

    /** Password checks (scrypt) this process has started: for tests and metrics. */
    get passwordChecks() {
      return guard.gate.checks;
    },

    csrfMatches: (session: Session, token: string | undefined) => token !== undefined && safeEqual(session.csrfToken, token),
  };
}

export type Authorization = ReturnType<typeof createAuthorization>;
