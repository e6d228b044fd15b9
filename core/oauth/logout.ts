import type { Client } from '../kernel/model';
import { optionalParam, type Params } from '../kernel/params';
import type { SignedIn } from './authorization-flow';
import type { IdTokenHintVerifier } from './id-token-hint';

// OpenID Connect RP-Initiated Logout 1.0 at /logout (discovery's end_session_endpoint). A client
// sends the browser with id_token_hint, client_id, post_logout_redirect_uri and state (ui_locales is
// ignored). The browser goes back only to a post_logout_redirect_uri registered for the client the
// request identifies; the session ends at once only when a valid hint names its user.

export interface LogoutContext {
  getClient: (clientId: string) => Promise<Client | undefined>;
  verifyIdTokenHint: IdTokenHintVerifier;
}

/** Where the browser goes once signed out: the client's post_logout_redirect_uri with state, or our page. */
export interface LogoutDestination {
  client?: Client;
  /** The registered URI with `state`; absent: the "You are signed out" page. */
  location?: string;
}

/** A request that cannot be used: a page, never a redirect. */
export interface LogoutRefused {
  type: 'error_page';
  title: string;
  message: string;
}

export type LogoutOutcome =
  | LogoutRefused
  /** End the session (if any) and go to the destination. */
  | ({ type: 'sign_out' } & LogoutDestination)
  /** Ask first: no hint, or one for someone other than the signed-in person (stale). */
  | ({ type: 'confirm'; signedIn: SignedIn; postLogoutRedirectUri?: string; state?: string } & LogoutDestination);

const refused = (message: string): LogoutRefused => ({
  type: 'error_page',
  title: 'This sign-out link cannot be used',
  message,
});

/**
 * The destination of a logout request's `post_logout_redirect_uri` (exact match with one its client
 * registered) with its `state`; the client is `client_id`, or the hint's. A refusal for a URI without
 * a client, an unknown or disabled client, or a URI it did not register.
 */
export async function logoutDestination(
  ctx: LogoutContext,
  params: Params,
  clientId = optionalParam(params, 'client_id'),
): Promise<LogoutDestination | LogoutRefused> {
  const postLogoutRedirectUri = optionalParam(params, 'post_logout_redirect_uri');
  const state = optionalParam(params, 'state');
  if (clientId === undefined) {
    if (postLogoutRedirectUri === undefined) return {};
    return refused('It names a page to return to but not the application it belongs to.');
  }
  const client = await ctx.getClient(clientId);
  // A disabled client gets no redirect either (disabled means disabled).
  if (client?.kind !== 'login' || client.disabled) return refused('It names an application we do not know.');
  if (postLogoutRedirectUri === undefined) return { client };
  if (!(client.postLogoutRedirectUris ?? []).includes(postLogoutRedirectUri)) {
    return refused(`It would send you to a page that ${client.name} has not registered.`);
  }
  const url = new URL(postLogoutRedirectUri);
  if (state !== undefined) url.searchParams.append('state', state);
  return { client, location: url.toString() };
}

/** The RP's request (query or form) and the browser's session: what happens next. */
export async function requestLogout(
  ctx: LogoutContext,
  params: Params,
  signedIn: SignedIn | undefined,
): Promise<LogoutOutcome> {
  const hint = optionalParam(params, 'id_token_hint');
  const clientId = optionalParam(params, 'client_id');
  const hinted = hint === undefined ? undefined : await ctx.verifyIdTokenHint(hint, clientId);
  if (hint !== undefined && !hinted) return refused('Its ID token is not one we issued for this application.');
  const destination = await logoutDestination(ctx, params, clientId ?? hinted?.clientId);
  if ('type' in destination) return destination;
  // Nobody signed in: nothing to end or to ask.
  if (!signedIn || hinted?.subject === signedIn.user.svcnumId) return { type: 'sign_out', ...destination };
  const state = optionalParam(params, 'state');
  return {
    type: 'confirm',
    signedIn,
    ...destination,
    // The confirmation form carries the request on: only a URI that was checked, and the state.
    ...(destination.location !== undefined
      ? { postLogoutRedirectUri: optionalParam(params, 'post_logout_redirect_uri')! }
      : {}),
    ...(state !== undefined ? { state } : {}),
  };
}
