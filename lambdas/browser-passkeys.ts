import type { SignInResult } from '../core/oauth/authorization';
import type { SignedIn } from '../core/oauth/authorization-flow';
import { DomainError } from '../core/kernel/errors';
import type { Passkey } from '../core/kernel/model';
import { optionalParam } from '../core/kernel/params';
import type { Modules } from '../core/registry';
import type { Route } from './edge';
import { cookies, formParams, type HttpEvent, type HttpResult, httpStatus, json, queryParams, redirect } from './http';
import { confirmPasswordPage, messagePage, type PasskeyView, removePasskeyPage, renamePasskeyPage } from './pages';

// The passkey routes of the browser group (lambdas/browser.ts mounts them): the WebAuthn options
// (JSON, for our script), adding one, the password step before it, rename and remove. A passkey
// sign-in is a POST of the sign-in form (lambdas/browser.ts), answered as a password's.

export interface PasskeyRouteDeps {
  authorization: Modules['authorization'];
  sessionCookieName: string;
  deviceCookieName: string;
  page: (status: number, body: string, extra?: { cookies?: string[]; script?: boolean }) => HttpResult;
  forbidden: () => HttpResult;
  fromOurPages: (route: Route) => Route;
  /** Whether the sign-in form's CSRF cookie and field match and verify. */
  signInCsrfValid: (event: HttpEvent, field: string | undefined) => Promise<boolean>;
  /** The answer to a successful sign-in: the new session's cookies, then `/account` or the request's next step. */
  signedIn: (event: HttpEvent, result: SignInResult, then?: string) => Promise<HttpResult>;
}

/** The account as the person named it at sign-in: their email or their number. */
export const signedInAs = ({ session, user }: SignedIn) =>
  session.signedInWith === 'email' && user.email ? user.email : user.svcnum;

export const passkeyView = (passkey: Passkey): PasskeyView => ({
  credentialId: passkey.credentialId,
  name: passkey.name,
  createdAt: passkey.createdAt,
  ...(passkey.lastUsedAt !== undefined ? { lastUsedAt: passkey.lastUsedAt } : {}),
  synced: passkey.backedUp,
});

/** WebAuthn options for our script as JSON, or the refusal (with `Retry-After` when throttled). */
async function jsonOptions(options: () => Promise<unknown>) {
  try {
    return json(200, await options());
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const retry: Record<string, string> =
      error.retryAfterSeconds !== undefined ? { 'Retry-After': String(error.retryAfterSeconds) } : {};
    return json(httpStatus(error), { error: error.kind, error_description: error.message }, retry);
  }
}

export function passkeyRoutes(deps: PasskeyRouteDeps): Record<string, Partial<Record<'GET' | 'POST', Route>>> {
  const { authorization, page, forbidden, fromOurPages } = deps;
  const { passkeys } = authorization;
  const notFound = () =>
    page(
      404,
      messagePage('This passkey is not on your account', 'It may have been removed already.', [
        { href: '/account', text: 'Back to your account' },
      ]),
    );
  const session = (event: HttpEvent) => authorization.sessionUser(cookies(event).get(deps.sessionCookieName));
  /** A signed-in form post with the session's CSRF token, else the refusal to answer with. */
  async function signedInPost(event: HttpEvent) {
    const signedIn = await session(event);
    if (!signedIn) return { refusal: redirect('/login', 303) };
    const form = formParams(event);
    if (!authorization.csrfMatches(signedIn.session, optionalParam(form, 'csrf'))) return { refusal: forbidden() };
    return { signedIn, form };
  }
  /** The signed-in account's passkey named by `id`, for the rename and remove pages. */
  async function ownPasskey(event: HttpEvent) {
    const signedIn = await session(event);
    if (!signedIn) return { refusal: redirect('/login', 302) };
    const id = optionalParam(queryParams(event), 'id');
    const passkey = id ? await passkeys.get(signedIn.user.svcnumId, id) : undefined;
    return passkey ? { signedIn, passkey } : { refusal: notFound() };
  }

  return {
    '/login/passkey': {
      POST: fromOurPages(async (event) => {
        if (!(await deps.signInCsrfValid(event, optionalParam(formParams(event), 'csrf')))) {
          return json(403, { error: 'forbidden', error_description: 'Reload the sign-in page and try again.' });
        }
        return jsonOptions(() => passkeys.signInOptions());
      }),
    },
    '/account/passkeys/options': {
      POST: fromOurPages(async (event) => {
        const { signedIn, refusal } = await signedInPost(event);
        if (!signedIn) return refusal.statusCode === 403 ? refusal : json(401, { error: 'unauthenticated' });
        return jsonOptions(() => passkeys.registrationOptions(signedIn));
      }),
    },
    '/account/passkeys': {
      POST: fromOurPages(async (event) => {
        const { signedIn, form, refusal } = await signedInPost(event);
        if (!signedIn) return refusal;
        try {
          await passkeys.add(signedIn, optionalParam(form, 'credential'));
        } catch (error) {
          if (!(error instanceof DomainError)) throw error;
          const back = [{ href: '/account', text: 'Back to your account' }];
          return page(httpStatus(error), messagePage('The passkey was not added', error.message, back));
        }
        return redirect('/account?passkey=added', 303);
      }),
    },
    '/account/passkeys/confirm': {
      GET: async (event) => {
        const signedIn = await session(event);
        if (!signedIn) return redirect('/login', 302);
        return page(200, confirmPasswordPage({ csrf: signedIn.session.csrfToken }));
      },
      POST: fromOurPages(async (event) => {
        const { signedIn, form, refusal } = await signedInPost(event);
        if (!signedIn) return refusal;
        // The password path of sign-in as it is (guard, new session, device cookie), for this account.
        const result = await authorization.signIn({
          identifier: signedInAs(signedIn),
          password: optionalParam(form, 'password') ?? '',
          clientAddress: event.requestContext?.identity?.sourceIp,
          deviceToken: cookies(event).get(deps.deviceCookieName),
        });
        if (result.outcome.type === 'sign_in_error') {
          const { error } = result.outcome;
          return page(
            httpStatus(error),
            confirmPasswordPage({ csrf: signedIn.session.csrfToken, error: error.message }),
          );
        }
        return deps.signedIn(event, result, '/account?passkey=ready');
      }),
    },
    '/account/passkeys/rename': {
      GET: async (event) => {
        const { signedIn, passkey, refusal } = await ownPasskey(event);
        if (!signedIn) return refusal;
        return page(200, renamePasskeyPage({ csrf: signedIn.session.csrfToken, passkey: passkeyView(passkey) }));
      },
      POST: fromOurPages(async (event) => {
        const { signedIn, form, refusal } = await signedInPost(event);
        if (!signedIn) return refusal;
        const id = optionalParam(form, 'id') ?? '';
        if (!(await passkeys.get(signedIn.user.svcnumId, id))) return notFound();
        // A blank name (the field requires one) changes nothing.
        if (!(await passkeys.rename(signedIn.user.svcnumId, id, optionalParam(form, 'name') ?? ''))) {
          return redirect('/account', 303);
        }
        return redirect('/account?passkey=renamed', 303);
      }),
    },
    '/account/passkeys/remove': {
      GET: async (event) => {
        const { signedIn, passkey, refusal } = await ownPasskey(event);
        if (!signedIn) return refusal;
        return page(200, removePasskeyPage({ csrf: signedIn.session.csrfToken, passkey: passkeyView(passkey) }));
      },
      POST: fromOurPages(async (event) => {
        const { signedIn, form, refusal } = await signedInPost(event);
        if (!signedIn) return refusal;
        const removed = await passkeys.remove(signedIn.user.svcnumId, optionalParam(form, 'id') ?? '');
        return removed ? redirect('/account?passkey=removed', 303) : notFound();
      }),
    },
  };
}
