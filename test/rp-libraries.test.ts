import * as oauth from 'oauth4webapi';
import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECORD_CACHE_TTL } from '../core/accounts';
import type { Client } from '../core/kernel/model';
import { Browser } from './support/browser';
import { authorizeInBrowser, authorizePath, createUser, REDIRECT_URI, verifyWithJwks } from './support/flow';
import { startTestService, type TestService } from './support/service';

// Certified relying-party libraries against the real service on loopback: what they accept is
// what RPs built on them (Auth.js, …) accept. Our own tests build requests by hand and share our
// assumptions; these do not. The issuer is http://localhost:PORT, so each library's documented
// opt-in for plain http is on; everything else runs with the libraries' defaults.

let service: TestService;
let login: { email: string; password: string; user: { svcnumId: string } };
/** Registered with the spec's default: `"refresh_token": null` in refresh responses. */
let nullClient: Client;
/** Registered with `refreshResponse: 'omit'`. */
let omitClient: Client;
let api: { client: Client; clientSecret: string };
/** Signed in once; consent is remembered per client. */
let browser: Browser;

beforeAll(async () => {
  service = await startTestService();
  const register = async (refreshResponse: string) =>
    (
      await service.core.registration.createLoginClient({
        name: `RP (${refreshResponse})`,
        scope: 'openid profile email',
        redirectUris: [REDIRECT_URI],
        refreshResponse,
      })
    ).client;
  nullClient = await register('null');
  omitClient = await register('omit');
  api = (await service.core.registration.createApiClient({ name: 'Messaging partner', scope: 'messaging poll' })) as {
    client: Client;
    clientSecret: string;
  };
  login = await createUser(service);
  browser = new Browser(service.issuer);
});
afterAll(() => service?.close());

/**
 * Our sign-in and consent pages, driven by the HTTP browser helper, starting at the URL the
 * library built. Returns the callback URL the service redirected to.
 */
async function signIn(authorizationUrl: URL, rp: Client, using = browser): Promise<URL> {
  expect(`${authorizationUrl.origin}${authorizationUrl.pathname}`).toBe(`${service.issuer}/oauth/authorize`);
  const params = Object.fromEntries(authorizationUrl.searchParams);
  // authorizeInBrowser fills in defaults for missing parameters: the library must have left none missing.
  const sent = new URLSearchParams(authorizePath(rp, params).split('?')[1]);
  const built = new URLSearchParams(authorizationUrl.searchParams);
  sent.sort();
  built.sort();
  expect(sent.toString()).toBe(built.toString());
  const final = await authorizeInBrowser(using, rp, login, params);
  expect([302, 303]).toContain(final.status);
  return new URL(final.location!);
}

interface Checks {
  state: string;
  nonce: string;
  verifier: string;
}
interface Tokens {
  access_token: string;
  refresh_token?: string;
  id_token?: string;
  token_type: string;
  scope?: string;
  expires_in?: number;
}

/** One library's calls, so that both run through the same assertions below. */
interface RelyingParty {
  name: string;
  /** What the library throws on the spec's `"refresh_token": null` (kept exact: it documents issue 8). */
  refreshNullError: Record<string, unknown>;
  discover(): Promise<Record<string, unknown>>;
  authorizationUrl(rp: Client, checks: Checks): Promise<URL>;
  /**
   * Validates the callback (state, iss) and redeems the code; returns the tokens and the validated
   * ID token claims. `alter` changes the token response in transit.
   */
  redeem(
    rp: Client,
    callback: URL,
    checks: Checks,
    alter?: Alter,
  ): Promise<{ tokens: Tokens; claims: Record<string, unknown> }>;
  userInfo(rp: Client, accessToken: string, expectedSubject: string): Promise<Record<string, unknown>>;
  refresh(rp: Client, refreshToken: string): Promise<Tokens>;
  revoke(rp: Client, refreshToken: string): Promise<void>;
  clientCredentials(method: 'basic' | 'post', secret: string, scope: string): Promise<Tokens>;
}

type Alter = (body: Record<string, string>) => void;

/** The libraries' custom fetch: token responses pass through `alter`, everything else untouched. */
const alteringFetch =
  (alter: Alter | undefined) =>
  async (url: string, options: RequestInit): Promise<Response> => {
    const response = await fetch(url, options);
    if (!alter || new URL(url).pathname !== '/oauth/token') return response;
    const body = (await response.json()) as Record<string, string>;
    alter(body);
    return Response.json(body, { status: response.status });
  };

const issuerUrl = () => new URL(service.issuer);
const authorizationParams = (checks: Checks, challenge: string) => ({
  redirect_uri: REDIRECT_URI,
  scope: 'openid profile email',
  state: checks.state,
  nonce: checks.nonce,
  code_challenge: challenge,
  code_challenge_method: 'S256',
});

const openidClient: RelyingParty = (() => {
  // Non-repudiation checks: the ID token's EdDSA signature is verified against our JWKS too.
  const configure = (clientId: string, auth: oidc.ClientAuth = oidc.None(), alter?: Alter) =>
    oidc.discovery(issuerUrl(), clientId, undefined, auth, {
      execute: [oidc.allowInsecureRequests, oidc.enableNonRepudiationChecks],
      [oidc.customFetch]: alteringFetch(alter),
    });
  return {
    name: 'openid-client',
    // openid-client wraps oauth4webapi's error in its own ClientError.
    refreshNullError: {
      name: 'ClientError',
      code: 'OAUTH_INVALID_RESPONSE',
      message: 'invalid response encountered',
      cause: { name: 'OperationProcessingError', message: '"response" body "refresh_token" property must be a string' },
    },
    discover: async () => ({ ...(await configure('anyone')).serverMetadata() }),
    authorizationUrl: async (rp, checks) =>
      oidc.buildAuthorizationUrl(
        await configure(rp.clientId),
        authorizationParams(checks, await oidc.calculatePKCECodeChallenge(checks.verifier)),
      ),
    async redeem(rp, callback, checks, alter) {
      const tokens = await oidc.authorizationCodeGrant(await configure(rp.clientId, oidc.None(), alter), callback, {
        pkceCodeVerifier: checks.verifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true,
      });
      return { tokens, claims: { ...tokens.claims() } };
    },
    userInfo: async (rp, accessToken, subject) => ({
      ...(await oidc.fetchUserInfo(await configure(rp.clientId), accessToken, subject)),
    }),
    refresh: async (rp, refreshToken) => oidc.refreshTokenGrant(await configure(rp.clientId), refreshToken),
    revoke: async (rp, refreshToken) => oidc.tokenRevocation(await configure(rp.clientId), refreshToken),
    clientCredentials: async (method, secret, scope) =>
      oidc.clientCredentialsGrant(
        await configure(
          api.client.clientId,
          method === 'basic' ? oidc.ClientSecretBasic(secret) : oidc.ClientSecretPost(secret),
        ),
        { scope },
      ),
  };
})();

const oauth4webapi: RelyingParty = (() => {
  const insecure = { [oauth.allowInsecureRequests]: true };
  const server = async () =>
    oauth.processDiscoveryResponse(issuerUrl(), await oauth.discoveryRequest(issuerUrl(), insecure));
  const client = (rp: Client): oauth.Client => ({ client_id: rp.clientId });
  return {
    name: 'oauth4webapi',
    refreshNullError: {
      name: 'OperationProcessingError',
      code: 'OAUTH_INVALID_RESPONSE',
      message: '"response" body "refresh_token" property must be a string',
    },
    discover: async () => ({ ...(await server()) }),
    async authorizationUrl(rp, checks) {
      // oauth4webapi has no URL builder: its documented way is the discovered endpoint plus parameters.
      const url = new URL((await server()).authorization_endpoint!);
      const params = {
        client_id: rp.clientId,
        response_type: 'code',
        ...authorizationParams(checks, await oauth.calculatePKCECodeChallenge(checks.verifier)),
      };
      for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
      return url;
    },
    async redeem(rp, callback, checks, alter) {
      const as = await server();
      const params = oauth.validateAuthResponse(as, client(rp), callback, checks.state);
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client(rp),
        oauth.None(),
        params,
        REDIRECT_URI,
        checks.verifier,
        {
          ...insecure,
          [oauth.customFetch]: alteringFetch(alter),
        },
      );
      const tokens = await oauth.processAuthorizationCodeResponse(as, client(rp), response, {
        expectedNonce: checks.nonce,
        requireIdToken: true,
      });
      // The claims are checked above; the EdDSA signature against our JWKS here.
      await oauth.validateApplicationLevelSignature(as, response, insecure);
      return { tokens, claims: { ...oauth.getValidatedIdTokenClaims(tokens) } };
    },
    async userInfo(rp, accessToken, subject) {
      const as = await server();
      return {
        ...(await oauth.processUserInfoResponse(
          as,
          client(rp),
          subject,
          await oauth.userInfoRequest(as, client(rp), accessToken, insecure),
        )),
      };
    },
    async refresh(rp, refreshToken) {
      const as = await server();
      return oauth.processRefreshTokenResponse(
        as,
        client(rp),
        await oauth.refreshTokenGrantRequest(as, client(rp), oauth.None(), refreshToken, insecure),
      );
    },
    async revoke(rp, refreshToken) {
      const as = await server();
      await oauth.processRevocationResponse(
        await oauth.revocationRequest(as, client(rp), oauth.None(), refreshToken, insecure),
      );
    },
    async clientCredentials(method, secret, scope) {
      const as = await server();
      const apiClient = client(api.client);
      const auth = method === 'basic' ? oauth.ClientSecretBasic(secret) : oauth.ClientSecretPost(secret);
      return oauth.processClientCredentialsResponse(
        as,
        apiClient,
        await oauth.clientCredentialsGrantRequest(as, apiClient, auth, { scope }, insecure),
      );
    },
  };
})();

/** A rejection's messages, outermost first, down to its root cause (openid-client wraps oauth4webapi's errors). */
async function rejection(promise: Promise<unknown>): Promise<string> {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(Error);
  const messages: string[] = [];
  for (let cause = error; cause instanceof Error; cause = cause.cause) messages.push(cause.message);
  return messages.join(' <- ');
}

const newChecks = (): Checks => ({
  state: oauth.generateRandomState(),
  nonce: oauth.generateRandomNonce(),
  verifier: oauth.generateRandomCodeVerifier(),
});

describe.each([openidClient, oauth4webapi])('$name as a relying party', (library) => {
  /** The whole code flow through the library: URL, our pages, callback, code redemption. */
  async function signedIn(rp: Client) {
    const checks = newChecks();
    const callback = await signIn(await library.authorizationUrl(rp, checks), rp);
    return library.redeem(rp, callback, checks);
  }

  it('discovers the issuer and its endpoints', async () => {
    expect(await library.discover()).toMatchObject({
      issuer: service.issuer,
      authorization_endpoint: `${service.issuer}/oauth/authorize`,
      token_endpoint: `${service.issuer}/oauth/token`,
      userinfo_endpoint: `${service.issuer}/oauth/userinfo`,
      revocation_endpoint: `${service.issuer}/oauth/revoke`,
      jwks_uri: `${service.issuer}/.well-known/jwks.json`,
      id_token_signing_alg_values_supported: ['EdDSA', 'RS256'],
      authorization_response_iss_parameter_supported: true,
    });
  });

  it('signs in with code + PKCE S256 + state + nonce + iss, validates the EdDSA ID token, and reads UserInfo', async () => {
    const checks = newChecks();
    const url = await library.authorizationUrl(nullClient, checks);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    const callback = await signIn(url, nullClient);
    expect(callback.searchParams.get('iss')).toBe(service.issuer);

    // The library itself refuses a callback with a wrong state, a foreign or missing iss (RFC 9207);
    // none of these reaches the token endpoint, so the code stays good.
    const tampered = (change: (params: URLSearchParams) => void) => {
      const copy = new URL(callback);
      change(copy.searchParams);
      return copy;
    };
    expect(
      await rejection(library.redeem(nullClient, callback, { ...checks, state: oauth.generateRandomState() })),
    ).toMatch(/"state"/);
    expect(
      await rejection(
        library.redeem(
          nullClient,
          tampered((p) => p.set('iss', 'https://evil.example')),
          checks,
        ),
      ),
    ).toMatch(/"iss"/);
    expect(
      await rejection(
        library.redeem(
          nullClient,
          tampered((p) => p.delete('iss')),
          checks,
        ),
      ),
    ).toMatch(/"iss"/);

    const { tokens, claims } = await library.redeem(nullClient, callback, checks);
    expect(tokens).toMatchObject({ token_type: 'bearer', scope: 'openid profile email', expires_in: 3600 });
    expect(claims).toMatchObject({
      iss: service.issuer,
      sub: login.user.svcnumId,
      aud: nullClient.clientId,
      nonce: checks.nonce,
    });
    expect(JSON.parse(Buffer.from(tokens.id_token!.split('.')[0]!, 'base64url').toString())).toMatchObject({
      alg: 'EdDSA',
    });

    const info = await library.userInfo(nullClient, tokens.access_token, login.user.svcnumId);
    expect(info).toMatchObject({ sub: login.user.svcnumId, email: login.email, email_verified: true });
    expect(await rejection(library.userInfo(nullClient, tokens.access_token, 'someone-else'))).toMatch(/"sub"/);
  });

  it("reports an error redirect as the server's error, with its iss checked too (prompt=none without a session)", async () => {
    const checks = newChecks();
    const url = await library.authorizationUrl(nullClient, checks);
    url.searchParams.set('prompt', 'none');
    const callback = await signIn(url, nullClient, new Browser(service.issuer));
    expect(callback.searchParams.get('error')).toBe('login_required');
    await expect(library.redeem(nullClient, callback, checks)).rejects.toMatchObject({
      name: 'AuthorizationResponseError',
      error: 'login_required',
    });
    callback.searchParams.delete('iss');
    expect(await rejection(library.redeem(nullClient, callback, checks))).toMatch(/"iss"/);
  });

  it('refuses an ID token whose EdDSA signature does not match (the library verifies it against our JWKS)', async () => {
    const checks = newChecks();
    const callback = await signIn(await library.authorizationUrl(nullClient, checks), nullClient);
    // A well-formed signature by our own key, but over another token (the access token).
    const forge = (body: Record<string, string>) => {
      body.id_token = `${body.id_token!.split('.').slice(0, 2).join('.')}.${body.access_token!.split('.')[2]}`;
    };
    expect(await rejection(library.redeem(nullClient, callback, checks, forge))).toMatch(/signature/i);
  });

  it('finds the access tokens of a revoked grant refused at UserInfo: after a code replay, /oauth/revoke, and Revoke access on the account page', async () => {
    // A client of its own, so that revoking it on the account page leaves the other tests' clients alone.
    const rp = (
      await service.core.registration.createLoginClient({
        name: `RP revoked (${library.name})`,
        scope: 'openid profile email',
        redirectUris: [REDIRECT_URI],
        refreshResponse: 'omit',
      })
    ).client;
    /** A fresh grant: the first access token and a refreshed one (same grant), both working at UserInfo. */
    async function grant() {
      const checks = newChecks();
      const callback = await signIn(await library.authorizationUrl(rp, checks), rp);
      const { tokens } = await library.redeem(rp, callback, checks);
      const refreshed = await library.refresh(rp, tokens.refresh_token!);
      const accessTokens = [tokens.access_token, refreshed.access_token];
      for (const token of accessTokens)
        expect(await library.userInfo(rp, token, login.user.svcnumId)).toMatchObject({ sub: login.user.svcnumId });
      return { callback, checks, refreshToken: tokens.refresh_token!, accessTokens };
    }
    const refused = async (accessTokens: string[]) => {
      for (const token of accessTokens) {
        // Both libraries parse the RFC 6750 challenge the same way.
        await expect(library.userInfo(rp, token, login.user.svcnumId)).rejects.toMatchObject({
          name: 'WWWAuthenticateChallengeError',
          status: 401,
          cause: [{ scheme: 'bearer', parameters: { realm: 'userinfo', error: 'invalid_token' } }],
        });
      }
    };

    const replayed = await grant();
    const revoked = await grant();
    const untouched = await grant();
    // 1. The code used a second time: invalid_grant, and the grant it produced is revoked.
    await expect(library.redeem(rp, replayed.callback, replayed.checks)).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    await refused(replayed.accessTokens);
    // 2. RFC 7009 revocation of the refresh token.
    await library.revoke(rp, revoked.refreshToken);
    await refused(revoked.accessTokens);
    // Each revocation ended its own grant only.
    for (const token of untouched.accessTokens)
      expect(await library.userInfo(rp, token, login.user.svcnumId)).toMatchObject({ sub: login.user.svcnumId });
    // 3. "Revoke access" on the account page ends every grant of the app.
    const account = await browser.request('/account');
    const revokedOnPage = await browser.request('/account/revoke', {
      form: { csrf: Browser.field(account.body, 'csrf'), client_id: rp.clientId },
    });
    expect(revokedOnPage.status).toBe(303);
    await refused(untouched.accessTokens);
  });

  it("finds a disabled login client's tokens refused at UserInfo and at refresh (at most 30 s late), and served again at once when it is enabled", async () => {
    const rp = (
      await service.core.registration.createLoginClient({
        name: `RP disabled (${library.name})`,
        scope: 'openid profile email',
        redirectUris: [REDIRECT_URI],
        refreshResponse: 'omit',
      })
    ).client;
    const checks = newChecks();
    const { tokens } = await library.redeem(rp, await signIn(await library.authorizationUrl(rp, checks), rp), checks);
    expect(await library.userInfo(rp, tokens.access_token, login.user.svcnumId)).toMatchObject({
      sub: login.user.svcnumId,
    });
    // What `admin client disable` changes; the record cached by this process is judged again past RECORD_CACHE_TTL.
    await service.core.store.setClientDisabled(rp.clientId, true);
    service.clock.advance(RECORD_CACHE_TTL);
    await expect(library.userInfo(rp, tokens.access_token, login.user.svcnumId)).rejects.toMatchObject({
      name: 'WWWAuthenticateChallengeError',
      status: 401,
      cause: [{ scheme: 'bearer', parameters: { realm: 'userinfo', error: 'invalid_token' } }],
    });
    await expect(library.refresh(rp, tokens.refresh_token!)).rejects.toMatchObject({
      status: 401,
      error: 'invalid_client',
    });
    // `admin client enable`: at once, no clock move.
    await service.core.store.setClientDisabled(rp.clientId, false);
    expect(await library.userInfo(rp, tokens.access_token, login.user.svcnumId)).toMatchObject({
      sub: login.user.svcnumId,
    });
    expect(await library.refresh(rp, tokens.refresh_token!)).toMatchObject({ token_type: 'bearer' });
  });

  it('fails to refresh for a default client: the spec\'s "refresh_token": null is not a string to the library', async () => {
    const { tokens } = await signedIn(nullClient);
    // The documented incompatibility (issue 8): such clients need --refresh-response omit.
    await expect(library.refresh(nullClient, tokens.refresh_token!)).rejects.toMatchObject(library.refreshNullError);
  });

  it('refreshes for an omit client, the old refresh token keeps working, and revocation ends it with invalid_grant', async () => {
    const { tokens } = await signedIn(omitClient);
    const refreshToken = tokens.refresh_token!;
    for (let use = 0; use < 2; use++) {
      const refreshed = await library.refresh(omitClient, refreshToken);
      expect(refreshed.refresh_token).toBeUndefined();
      expect(refreshed).toMatchObject({ token_type: 'bearer', scope: 'openid profile email' });
      expect(await library.userInfo(omitClient, refreshed.access_token, login.user.svcnumId)).toMatchObject({
        sub: login.user.svcnumId,
      });
    }
    await library.revoke(omitClient, refreshToken);
    await expect(library.refresh(omitClient, refreshToken)).rejects.toMatchObject({
      error: 'invalid_grant',
      status: 400,
    });
  });

  it('signs in with "openid offline_access" (OIDC Core §11) and refreshes as for any scope; discovery lists it, a client that did not register it gets invalid_scope', async () => {
    expect((await library.discover()).scopes_supported).toContain('offline_access');
    const rp = (
      await service.core.registration.createLoginClient({
        name: `RP offline (${library.name})`,
        scope: 'openid offline_access',
        redirectUris: [REDIRECT_URI],
        refreshResponse: 'omit',
      })
    ).client;
    const offline = async (client: Client) => {
      const checks = newChecks();
      const url = await library.authorizationUrl(client, checks);
      url.searchParams.set('scope', 'openid offline_access');
      return { checks, callback: await signIn(url, client) };
    };
    const { checks, callback } = await offline(rp);
    const { tokens, claims } = await library.redeem(rp, callback, checks);
    expect(tokens).toMatchObject({ token_type: 'bearer', scope: 'openid offline_access' });
    expect(typeof tokens.refresh_token).toBe('string');
    expect(claims).toMatchObject({ sub: login.user.svcnumId, aud: rp.clientId });
    const refreshed = await library.refresh(rp, tokens.refresh_token!);
    expect(refreshed).toMatchObject({ token_type: 'bearer', scope: 'openid offline_access' });

    const refused = await offline(omitClient);
    await expect(library.redeem(omitClient, refused.callback, refused.checks)).rejects.toMatchObject({
      name: 'AuthorizationResponseError',
      error: 'invalid_scope',
    });
  });

  it.each(['basic', 'post'] as const)('gets a client_credentials token with client_secret_%s', async (method) => {
    const tokens = await library.clientCredentials(method, api.clientSecret, 'messaging');
    expect(tokens).toMatchObject({ token_type: 'bearer', scope: 'messaging', expires_in: 3600 });
    const { payload } = await verifyWithJwks(service, tokens.access_token, { audience: service.issuer, typ: 'at+jwt' });
    expect(payload).toMatchObject({ sub: api.client.clientId, client_id: api.client.clientId, scope: 'messaging' });
    // A wrong secret: 401 invalid_client; after Basic, with the Basic challenge RFC 6749 §5.2 asks
    // for, which the libraries report ahead of the body.
    await expect(library.clientCredentials(method, `${api.clientSecret}x`, 'messaging')).rejects.toMatchObject(
      method === 'basic' ? { status: 401, cause: [{ scheme: 'basic' }] } : { status: 401, error: 'invalid_client' },
    );
  });

  it('takes a rotated client secret at once; the replaced one is refused once the record is read again (at most 30 s)', async () => {
    const replaced = api.clientSecret;
    // The record is in the process's cache now, with the secret about to be replaced.
    await library.clientCredentials('basic', replaced, 'messaging');
    api = { ...api, clientSecret: await service.core.registration.rotateClientSecret(api.client.clientId) };
    expect(await library.clientCredentials('basic', api.clientSecret, 'messaging')).toMatchObject({
      token_type: 'bearer',
      scope: 'messaging',
    });
    service.clock.advance(RECORD_CACHE_TTL);
    await expect(library.clientCredentials('basic', replaced, 'messaging')).rejects.toMatchObject({ status: 401 });
  });
});
