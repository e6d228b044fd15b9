import { createDynamoAccountsStore } from '../core/adapters/dynamo-accounts-store';
import { createDynamoOAuthStore } from '../core/adapters/dynamo-oauth-store';
import { dynamoStore } from '../core/adapters/dynamo-store';
import type { AuthorizeOutcome, SignInRefusal, SignInResult } from '../core/oauth/authorization';
import { limits } from '../core/kernel/config';
import { safeEqual } from '../core/kernel/secrets';
import { accountsModule, authorizationModule, type Modules } from '../core/registry';
import { passkeyRoutes, passkeyView, signedInAs } from './browser-passkeys';
import { edgeHandler, logger, type Route } from './edge';
import {
  cookieName,
  cookies,
  formParams,
  header,
  html,
  httpStatus,
  queryParams,
  redirect,
  setCookie,
  type HttpEvent,
  type HttpResult,
} from './http';
import { optionalParam, type Params } from '../core/kernel/params';
import {
  accountPage,
  consentPage,
  favicon,
  messagePage,
  revokePage,
  signInPage,
  signOutPage,
  stylesheet,
} from './pages';
import { passkeysScript } from './passkeys-script';
import { lambdaHandler } from './runtime';

// GET /oauth/authorize and the pages a person sees: sign-in, consent, account, sign-out (with RP-Initiated Logout).

/**
 * Whether a posted form comes from somewhere other than our own pages (CSRF). Browsers say where
 * a navigation comes from: `Sec-Fetch-Site` (every current engine), else `Origin`, which they
 * fill with our real origin because our pages use `Referrer-Policy: same-origin` (`Origin: null`
 * is what a cross-site, sandboxed or `data:` page may send, so it is refused). A client that sends
 * neither (curl, a very old browser) is judged by the CSRF token alone, which every form carries.
 */
export function postedFromElsewhere(event: HttpEvent, ourOrigin: string): boolean {
  const site = header(event, 'sec-fetch-site');
  if (site !== undefined) return site !== 'same-origin';
  const origin = header(event, 'origin');
  return origin !== undefined && origin !== ourOrigin;
}

/** RP-Initiated Logout 1.0 §2's parameters that we use (ui_locales is ignored). */
const RP_LOGOUT_PARAMETERS = ['id_token_hint', 'client_id', 'post_logout_redirect_uri', 'state'] as const;

/** A file that never changes between deploys of the same version: cacheable for an hour. */
const asset = (contentType: string, body: string): HttpResult => ({
  statusCode: 200,
  headers: {
    'Content-Type': contentType,
    'Cache-Control': 'public, max-age=3600',
    'X-Content-Type-Options': 'nosniff',
  },
  body,
});

/** What /account confirms after a passkey step (fixed texts: nothing from the URL is shown). */
const PASSKEY_NOTICES = new Map([
  ['added', 'Passkey added. You can sign in with it next time.'],
  ['renamed', 'Passkey renamed.'],
  ['removed', 'Passkey removed.'],
  ['ready', 'You can add a passkey now.'],
]);

/** The modules this group's routes use: the authorization flow, accounts for the clients' form targets. */
export const browserModules = [authorizationModule, accountsModule] as const;

export function createBrowserHandler({ authorization, accounts }: Pick<Modules, 'authorization' | 'accounts'>) {
  const { config } = authorization;
  const secure = config.secureCookies;
  const SESSION = cookieName('session', secure);
  const CSRF = cookieName('csrf', secure);
  const DEVICE = cookieName('device', secure);
  const issuerOrigin = new URL(config.issuer).origin;

  const page = (
    status: number,
    body: string,
    extra: { cookies?: string[]; formTargets?: string[]; script?: boolean } = {},
  ) => html(status, body, extra);
  const sessionCookie = (token: string) =>
    setCookie(SESSION, token, { secure, maxAgeSeconds: limits.sessionTtl / 1000 });
  const clearedSession = setCookie(SESSION, '', { secure, maxAgeSeconds: 0 });

  const forbidden = () =>
    page(403, messagePage('Request refused', 'This form was not sent from our sign-in pages. Go back and try again.'));
  /**
   * Every form post is first refused if the browser says it comes from elsewhere, signed in or
   * not (a cross-site post carries no Lax cookie, yet could still clear one); each route then checks its CSRF token.
   */
  const fromOurPages =
    (route: Route): Route =>
    async (event) =>
      postedFromElsewhere(event, issuerOrigin) ? forbidden() : route(event);

  async function formTargets(clientId: string): Promise<string[]> {
    const client = await accounts.getClient(clientId);
    return [...new Set((client?.redirectUris ?? []).map((uri) => new URL(uri).origin))];
  }

  /** Turns a core outcome into an HTTP answer. POST results use 303 so the browser follows with GET. */
  function answer(outcome: AuthorizeOutcome, status: 302 | 303, setCookies: string[] = []): HttpResult {
    switch (outcome.type) {
      // A link or request that cannot be used: a bad request, never a redirect (RFC 6749 §4.1.2.1).
      case 'error_page':
        return page(
          400,
          messagePage(
            outcome.title,
            outcome.message,
            [{ href: '/account', text: 'Go to your account' }],
            'Go back to the application and try again. If this keeps happening, tell the people who run it.',
          ),
        );
      case 'redirect':
        return redirect(outcome.location, status, setCookies);
      case 'sign_in':
        return redirect(`/login?request=${encodeURIComponent(outcome.requestId)}`, status, setCookies);
      case 'consent':
        return redirect(`/consent?request=${encodeURIComponent(outcome.requestId)}`, status, setCookies);
    }
  }

  /**
   * The sign-in form's CSRF field must match its cookie and the token must carry our MAC: a made-up
   * token planted by someone else cannot pass (docs/security.md says what a genuine one can do).
   */
  async function signInCsrfValid(event: HttpEvent, field: string | undefined) {
    const csrfCookie = cookies(event).get(CSRF);
    return (
      csrfCookie !== undefined &&
      field !== undefined &&
      safeEqual(csrfCookie, field) &&
      (await authorization.signInCsrf.valid(csrfCookie))
    );
  }

  /** A successful sign-in (password or passkey): the new session's cookies, then where it goes next. */
  async function signedIn(event: HttpEvent, result: SignInResult, then = '/account') {
    // The session this browser had (if any) is replaced: end it rather than leave it usable.
    await authorization.signOut(cookies(event).get(SESSION));
    const setCookies = [
      sessionCookie(result.sessionToken!),
      setCookie(CSRF, '', { secure, maxAgeSeconds: 0 }),
      setCookie(DEVICE, result.deviceToken!, { secure, maxAgeSeconds: limits.deviceCookieTtl / 1000 }),
    ];
    const { outcome } = result;
    if (outcome.type === 'sign_in_error') throw new Error('not signed in');
    if (outcome.type === 'account') return redirect(then, 303, setCookies);
    return answer(outcome, 303, setCookies);
  }

  /**
   * The sign-in page. `validCsrf` is the browser's CSRF cookie once verified: kept, so that every
   * open sign-in tab stays usable; otherwise a new signed token is issued.
   */
  async function renderSignIn(
    requestId: string | undefined,
    validCsrf?: string,
    refusal?: SignInRefusal,
    identifier?: string,
  ) {
    const parked = requestId ? await authorization.parkedRequest(requestId) : undefined;
    if (requestId && !parked)
      return page(400, messagePage('This sign-in has expired', 'Go back to the application and start again.'));
    const csrf = validCsrf ?? (await authorization.signInCsrf.issue());
    const error = refusal?.error.message;
    const rendered = page(
      refusal ? httpStatus(refusal.error) : 200,
      signInPage({
        ...(requestId ? { requestId } : {}),
        csrf,
        ...(error ? { error } : {}),
        ...(identifier ? { identifier } : {}),
        ...(parked ? { clientName: parked.client.name } : {}),
      }),
      {
        // A browser-session cookie: a form left open for long gets the honest "expired" answer
        // from the parked request, not a CSRF refusal.
        cookies: validCsrf ? [] : [setCookie(CSRF, csrf, { secure })],
        formTargets: parked ? await formTargets(parked.client.clientId) : [],
        script: true,
      },
    );
    if (refusal?.error.retryAfterSeconds !== undefined)
      rendered.headers = { ...rendered.headers, 'Retry-After': String(refusal.error.retryAfterSeconds) };
    return rendered;
  }

  /**
   * Ends the session (if any): back to the client's post_logout_redirect_uri, or "You are signed out".
   * The cookie is cleared only where one came.
   */
  async function signedOut(sessionToken: string | undefined, destination: { location?: string }, status: 302 | 303) {
    await authorization.signOut(sessionToken);
    const cleared = sessionToken === undefined ? [] : [clearedSession];
    if (destination.location !== undefined) return redirect(destination.location, status, cleared);
    const signedOutPage = messagePage('Signed out', 'You are signed out.', [{ href: '/login', text: 'Sign in again' }]);
    return page(200, signedOutPage, { cookies: cleared });
  }

  /** RP-Initiated Logout (core/oauth/logout.ts): sign out at once, ask first, or refuse with a page. */
  async function rpLogout(params: Params, sessionToken: string | undefined, status: 302 | 303) {
    const outcome = await authorization.requestLogout(params, await authorization.sessionUser(sessionToken));
    switch (outcome.type) {
      case 'error_page':
        return answer(outcome, status);
      case 'sign_out':
        return signedOut(sessionToken, outcome, status);
      case 'confirm':
        return page(
          200,
          signOutPage({
            csrf: outcome.signedIn.session.csrfToken,
            signedInAs: signedInAs(outcome.signedIn),
            ...(outcome.client ? { clientName: outcome.client.name, clientId: outcome.client.clientId } : {}),
            ...(outcome.postLogoutRedirectUri !== undefined
              ? { postLogoutRedirectUri: outcome.postLogoutRedirectUri }
              : {}),
            ...(outcome.state !== undefined ? { state: outcome.state } : {}),
          }),
          // The form's redirect goes to the client: the page's form-action must allow its origin.
          { formTargets: outcome.location !== undefined ? [new URL(outcome.location).origin] : [] },
        );
    }
  }

  return edgeHandler(
    {
      '/oauth/authorize': {
        GET: async (event) =>
          answer(await authorization.authorize(queryParams(event), cookies(event).get(SESSION)), 302),
      },
      '/login': {
        GET: async (event) => {
          const csrfCookie = cookies(event).get(CSRF);
          return renderSignIn(
            optionalParam(queryParams(event), 'request'),
            (await authorization.signInCsrf.valid(csrfCookie)) ? csrfCookie : undefined,
          );
        },
        POST: fromOurPages(async (event) => {
          const form = formParams(event);
          const jar = cookies(event);
          const csrfCookie = jar.get(CSRF);
          if (!(await signInCsrfValid(event, optionalParam(form, 'csrf')))) return forbidden();
          const requestId = optionalParam(form, 'request');
          const identifier = optionalParam(form, 'identifier') ?? '';
          const passkey = optionalParam(form, 'passkey');
          const base = {
            ...(requestId ? { requestId } : {}),
            clientAddress: event.requestContext?.identity?.sourceIp,
            deviceToken: jar.get(DEVICE),
          };
          const result = await authorization.signIn(
            passkey ? { ...base, passkey } : { ...base, identifier, password: optionalParam(form, 'password') ?? '' },
          );
          const { outcome } = result;
          // 400, not 401: a form sign-in has no WWW-Authenticate challenge (RFC 9110 §15.5.2 requires one on 401).
          if (outcome.type === 'sign_in_error') {
            // A counter that went back may be a cloned authenticator: the operator should know.
            if (outcome.alert === 'counter_regression') logger.warn('passkey signature counter went back', {});
            return renderSignIn(requestId, csrfCookie, outcome, identifier.slice(0, 254));
          }
          return signedIn(event, result);
        }),
      },
      '/consent': {
        GET: async (event) => {
          const requestId = optionalParam(queryParams(event), 'request');
          const parked = await authorization.parkedRequest(requestId);
          if (!parked)
            return page(400, messagePage('This request has expired', 'Go back to the application and start again.'));
          const signedIn = await authorization.sessionUser(cookies(event).get(SESSION));
          if (!signedIn) return answer({ type: 'sign_in', requestId: parked.request.requestId }, 302);
          return page(
            200,
            consentPage({
              requestId: parked.request.requestId,
              csrf: signedIn.session.csrfToken,
              clientName: parked.client.name,
              scopes: parked.request.scopes,
              signedInAs: signedInAs(signedIn),
            }),
            { formTargets: await formTargets(parked.client.clientId) },
          );
        },
        POST: fromOurPages(async (event) => {
          const form = formParams(event);
          const sessionToken = cookies(event).get(SESSION);
          const signedIn = await authorization.sessionUser(sessionToken);
          if (signedIn && !authorization.csrfMatches(signedIn.session, optionalParam(form, 'csrf'))) return forbidden();
          const decision = optionalParam(form, 'decision');
          if (decision !== 'allow' && decision !== 'deny')
            return page(400, messagePage('Choose Allow or Deny', 'Go back and choose one of the buttons.'));
          return answer(
            await authorization.decideConsent(optionalParam(form, 'request'), sessionToken, decision === 'allow'),
            303,
          );
        }),
      },
      '/account': {
        GET: async (event) => {
          const signedIn = await authorization.sessionUser(cookies(event).get(SESSION));
          if (!signedIn) return redirect('/login', 302);
          const apps = await authorization.connectedApps(signedIn.user.svcnumId);
          // After "Revoke access": the name comes from our own client record, never from the URL,
          // and only while the application is indeed no longer connected.
          const revokedId = optionalParam(queryParams(event), 'revoked');
          const revoked =
            revokedId && !apps.some((app) => app.clientId === revokedId)
              ? await accounts.getClient(revokedId)
              : undefined;
          const canAddPasskey = authorization.passkeys.recentSignIn(signedIn.session);
          const notice = PASSKEY_NOTICES.get(optionalParam(queryParams(event), 'passkey') ?? '');
          return page(
            200,
            accountPage({
              svcnum: signedIn.user.svcnum,
              ...(signedIn.user.email ? { email: signedIn.user.email } : {}),
              csrf: signedIn.session.csrfToken,
              apps,
              ...(revoked ? { removed: revoked.name } : {}),
              passkeys: (await authorization.passkeys.list(signedIn.user.svcnumId)).map(passkeyView),
              canAddPasskey,
              ...(notice ? { notice } : {}),
            }),
            { script: canAddPasskey },
          );
        },
      },
      '/account/revoke': {
        // The confirmation step: "Revoke access" on /account is a link here, the form posts below.
        GET: async (event) => {
          const signedIn = await authorization.sessionUser(cookies(event).get(SESSION));
          if (!signedIn) return redirect('/login', 302);
          const clientId = optionalParam(queryParams(event), 'client_id');
          const app = (await authorization.connectedApps(signedIn.user.svcnumId)).find(
            (connected) => connected.clientId === clientId,
          );
          if (!app)
            return page(
              404,
              messagePage('This application is not connected', 'It may have been revoked already.', [
                { href: '/account', text: 'Back to your account' },
              ]),
            );
          return page(200, revokePage({ csrf: signedIn.session.csrfToken, app }));
        },
        POST: fromOurPages(async (event) => {
          const form = formParams(event);
          const signedIn = await authorization.sessionUser(cookies(event).get(SESSION));
          if (!signedIn) return redirect('/login', 303);
          if (!authorization.csrfMatches(signedIn.session, optionalParam(form, 'csrf'))) return forbidden();
          const clientId = optionalParam(form, 'client_id');
          if (!clientId) return redirect('/account', 303);
          await authorization.revokeApp(signedIn.user.svcnumId, clientId);
          return redirect(`/account?revoked=${encodeURIComponent(clientId)}`, 303);
        }),
      },
      '/logout': {
        GET: async (event) => rpLogout(queryParams(event), cookies(event).get(SESSION), 302),
        POST: async (event) => {
          const form = formParams(event);
          const sessionToken = cookies(event).get(SESSION);
          // No CSRF field: a client's form post (RP-Initiated Logout), most often cross-site, which
          // carries no Lax cookie: answered as the same request by GET, whose top-level navigation
          // does. Our own forms (the question, /account) carry a CSRF field.
          if (optionalParam(form, 'csrf') === undefined) {
            const query = new URLSearchParams();
            for (const name of RP_LOGOUT_PARAMETERS) {
              const value = optionalParam(form, name);
              if (value !== undefined) query.append(name, value);
            }
            // Nothing asked: a post from elsewhere is refused as before (it must not clear a cookie).
            if (query.size === 0 && postedFromElsewhere(event, issuerOrigin)) return forbidden();
            return redirect(`/logout${query.size > 0 ? `?${query}` : ''}`, 303);
          }
          if (postedFromElsewhere(event, issuerOrigin)) return forbidden();
          const signedIn = await authorization.sessionUser(sessionToken);
          if (signedIn && !authorization.csrfMatches(signedIn.session, optionalParam(form, 'csrf'))) return forbidden();
          // The question's fields (client_id, post_logout_redirect_uri, state), checked again.
          const destination = await authorization.logoutDestination(form);
          if ('type' in destination) return answer(destination, 303);
          return signedOut(sessionToken, destination, 303);
        },
      },
      ...passkeyRoutes({
        authorization,
        sessionCookieName: SESSION,
        deviceCookieName: DEVICE,
        page,
        forbidden,
        fromOurPages,
        signInCsrfValid,
        signedIn,
      }),
      '/assets/style.css': { GET: async () => asset('text/css; charset=utf-8', stylesheet) },
      '/assets/passkeys.js': { GET: async () => asset('text/javascript; charset=utf-8', passkeysScript) },
      '/assets/favicon.svg': { GET: async () => asset('image/svg+xml', favicon) },
    },
    {
      secure,
      serverError: () => page(500, messagePage('Something went wrong', 'Please try again in a moment.')),
      // People see these routes: a malformed form or query gets a page, not JSON.
      errorPage: (error, status) => page(status, messagePage('This request is not valid', error.message)),
    },
  );
}

export const handler = lambdaHandler(browserModules, createBrowserHandler, {
  store: dynamoStore(createDynamoAccountsStore, createDynamoOAuthStore),
});
