import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser, pkcePair } from './support/browser';
import {
  authorizeInBrowser,
  authorizePath,
  createLoginClient,
  createUser,
  exchange,
  obtainCode,
  postForm,
  REDIRECT_URI,
  verifyWithJwks,
} from './support/flow';
import { startTestService, type TestService } from './support/service';

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service?.close());

describe('authorization code flow with PKCE, end to end over HTTP', () => {
  it('signs a person in, asks consent, and issues verifiable tokens and user info', async () => {
    const client = await createLoginClient(service);
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const pkce = pkcePair();

    const start = await browser.request(authorizePath(client, { code_challenge: pkce.challenge, nonce: 'n-42' }));
    expect(start.status).toBe(302);
    expect(start.location).toMatch(/^\/login\?request=/);

    const signInPage = await browser.request(start.location!);
    expect(signInPage.status).toBe(200);
    expect(signInPage.body).toContain('<label for="identifier">Number or email</label>');
    expect(signInPage.body).toContain('<label for="password">Password</label>');
    expect(signInPage.body).toContain('>Sign in</button>');
    expect(signInPage.body).toContain(client.name);
    const csp = signInPage.headers.get('content-security-policy')!;
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("form-action 'self' https://client.example");
    expect(signInPage.headers.get('cache-control')).toBe('no-store');
    // No inline script: the one script is our own file (passkeys).
    expect(signInPage.body.match(/<script[^>]*>/g)).toEqual(['<script src="/assets/passkeys.js" defer>']);

    const afterSignIn = await browser.request('/login', {
      form: {
        request: Browser.field(signInPage.body, 'request'),
        csrf: Browser.field(signInPage.body, 'csrf'),
        identifier: login.email,
        password: login.password,
      },
    });
    expect(afterSignIn.status).toBe(303);
    expect(afterSignIn.location).toMatch(/^\/consent\?request=/);
    const sessionCookie = afterSignIn.headers.getSetCookie().find((cookie) => cookie.startsWith('session='))!;
    expect(sessionCookie).toContain('HttpOnly');
    expect(sessionCookie).toContain('SameSite=Lax');

    const consentPage = await browser.request(afterSignIn.location!);
    expect(consentPage.body).toContain(client.name);
    expect(consentPage.body).toContain('See your email address');
    expect(consentPage.body).toContain('>Allow</button>');
    expect(consentPage.body).toContain('>Deny</button>');

    const approved = await browser.request('/consent', {
      form: {
        request: Browser.field(consentPage.body, 'request'),
        csrf: Browser.field(consentPage.body, 'csrf'),
        decision: 'allow',
      },
    });
    expect(approved.status).toBe(303);
    const callback = new URL(approved.location!);
    expect(callback.origin + callback.pathname).toBe(REDIRECT_URI);
    expect(callback.searchParams.get('state')).toBe('st-123');
    expect(callback.searchParams.get('iss')).toBe(service.issuer);
    const code = callback.searchParams.get('code')!;
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const token = await exchange(service, client, code, pkce.verifier);
    expect(token.status).toBe(200);
    expect(token.headers.get('cache-control')).toBe('no-store');
    expect(token.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'openid profile email' });
    expect(typeof token.json.refresh_token).toBe('string');

    const access = await verifyWithJwks(service, String(token.json.access_token), {
      audience: service.issuer,
      typ: 'at+jwt',
    });
    expect(access.protectedHeader).toMatchObject({ alg: 'EdDSA', typ: 'at+jwt' });
    expect(access.protectedHeader.kid).toBeTruthy();
    expect(access.payload).toMatchObject({
      iss: service.issuer,
      sub: login.user.svcnumId,
      aud: service.issuer,
      client_id: client.clientId,
      scope: 'openid profile email',
    });
    expect(access.payload.exp! - access.payload.iat!).toBe(3600);
    expect(access.payload.jti).toBeTruthy();

    const id = await verifyWithJwks(service, String(token.json.id_token), { audience: client.clientId, typ: 'JWT' });
    expect(id.payload).toMatchObject({
      iss: service.issuer,
      sub: login.user.svcnumId,
      aud: client.clientId,
      azp: client.clientId,
      nonce: 'n-42',
    });
    expect(typeof id.payload.auth_time).toBe('number');

    const userInfo = await fetch(`${service.issuer}/oauth/userinfo`, {
      headers: { Authorization: `Bearer ${String(token.json.access_token)}` },
    });
    expect(userInfo.status).toBe(200);
    expect(await userInfo.json()).toEqual({
      sub: login.user.svcnumId,
      svcnum: login.user.svcnum,
      email: login.email,
      email_verified: true,
      created_at: new Date(login.user.createdAt).toISOString(),
    });

    // Consent is remembered for this client and scope set: the next authorize goes straight back.
    const second = await browser.request(authorizePath(client, { code_challenge: pkcePair().challenge }));
    expect(second.status).toBe(302);
    expect(new URL(second.location!).searchParams.get('code')).toBeTruthy();
  });

  it('returns no id_token without openid and no email without the email scope', async () => {
    const client = await createLoginClient(service, 'openid profile email');
    const login = await createUser(service);
    const withoutOpenid = await obtainCode(service, client, login, { scope: 'profile' });
    const token = await exchange(service, client, withoutOpenid.code, withoutOpenid.verifier);
    expect(token.status).toBe(200);
    expect(token.json.id_token).toBeUndefined();
    expect(token.json.scope).toBe('profile');
    // UserInfo is an OpenID Connect endpoint: a token without openid is refused.
    const refused = await fetch(`${service.issuer}/oauth/userinfo`, {
      headers: { Authorization: `Bearer ${String(token.json.access_token)}` },
    });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain('error="insufficient_scope"');

    const profileOnly = await obtainCode(service, client, login, { scope: 'openid profile' }, withoutOpenid.browser);
    const profileToken = await exchange(service, client, profileOnly.code, profileOnly.verifier);
    const info = await (
      await fetch(`${service.issuer}/oauth/userinfo`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${String(profileToken.json.access_token)}` },
      })
    ).json();
    expect(info).toEqual({
      sub: login.user.svcnumId,
      svcnum: login.user.svcnum,
      created_at: new Date(login.user.createdAt).toISOString(),
    });
  });

  it('refreshes without rotation: refresh_token null, the same token keeps working', async () => {
    const client = await createLoginClient(service);
    const login = await createUser(service);
    const { code, verifier } = await obtainCode(service, client, login);
    const tokens = await exchange(service, client, code, verifier);
    const refreshToken = String(tokens.json.refresh_token);
    for (let i = 0; i < 2; i++) {
      const refreshed = await postForm(`${service.issuer}/oauth/token`, {
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_id: client.clientId,
      });
      expect(refreshed.status).toBe(200);
      expect(refreshed.json.refresh_token).toBeNull();
      expect(refreshed.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'openid profile email' });
      expect(refreshed.json.id_token).toBeUndefined();
      const access = await verifyWithJwks(service, String(refreshed.json.access_token), {
        audience: service.issuer,
        typ: 'at+jwt',
      });
      expect(access.payload.sub).toBe(login.user.svcnumId);
    }
    // Narrowing on refresh (RFC 6749 §6) is allowed; widening is not.
    const narrowed = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: client.clientId,
      scope: 'openid',
    });
    expect(narrowed.json.scope).toBe('openid');
    const widened = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: client.clientId,
      scope: 'openid messaging',
    });
    expect(widened.status).toBe(400);
    expect(widened.json.error).toBe('invalid_scope');
  });

  it('signs in by number as well as by email, and the account page lists and revokes apps', async () => {
    const client = await createLoginClient(service);
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const { code, verifier } = await obtainCode(
      service,
      client,
      { email: login.user.svcnum, password: login.password },
      {},
      browser,
    );
    const tokens = await exchange(service, client, code, verifier);
    expect(tokens.status).toBe(200);

    const account = await browser.request('/account');
    expect(account.status).toBe(200);
    expect(account.body).toContain(client.name);
    expect(account.body).toContain(login.user.svcnum);
    const revoked = await browser.request('/account/revoke', {
      form: { csrf: Browser.field(account.body, 'csrf'), client_id: client.clientId },
    });
    expect(revoked.status).toBe(303);
    expect((await browser.request('/account')).body).not.toContain(client.name);

    const refresh = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: String(tokens.json.refresh_token),
      client_id: client.clientId,
    });
    expect(refresh.status).toBe(400);
    expect(refresh.json.error).toBe('invalid_grant');

    // Consent was forgotten: the next authorization asks again.
    const again = await browser.request(authorizePath(client, { code_challenge: pkcePair().challenge }));
    expect(again.location).toMatch(/^\/consent\?request=/);
  });

  it('names offline_access in plain words on the consent and account pages; refresh tokens come as without it', async () => {
    const client = await createLoginClient(service, 'openid profile offline_access');
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const words = 'Stay connected when you&#39;re not using it';
    const without = await obtainCode(service, client, login, { scope: 'openid profile' }, browser);
    const plain = await exchange(service, client, without.code, without.verifier);
    expect(plain.json).toMatchObject({ scope: 'openid profile' });
    expect(typeof plain.json.refresh_token).toBe('string');

    // A remembered scope set that gains offline_access asks again (OIDC Core §11: consent for it).
    const pkce = pkcePair();
    const start = await browser.request(
      authorizePath(client, { code_challenge: pkce.challenge, scope: 'openid profile offline_access' }),
    );
    expect(start.location).toMatch(/^\/consent\?request=/);
    const consentPage = await browser.request(start.location!);
    expect(consentPage.body).toContain(words);
    const approved = await browser.request('/consent', {
      form: {
        request: Browser.field(consentPage.body, 'request'),
        csrf: Browser.field(consentPage.body, 'csrf'),
        decision: 'allow',
      },
    });
    const code = new URL(approved.location!).searchParams.get('code')!;
    const offline = await exchange(service, client, code, pkce.verifier);
    expect(offline.json).toMatchObject({ token_type: 'Bearer', scope: 'openid profile offline_access' });
    expect(typeof offline.json.refresh_token).toBe('string');
    expect((await browser.request('/account')).body).toContain(words);
  });

  it('Deny sends the user back with access_denied, state and iss', async () => {
    const client = await createLoginClient(service);
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const start = await browser.request(authorizePath(client, { code_challenge: pkcePair().challenge }));
    const page = await browser.request(start.location!);
    const signedIn = await browser.request('/login', {
      form: {
        request: Browser.field(page.body, 'request'),
        csrf: Browser.field(page.body, 'csrf'),
        identifier: login.email,
        password: login.password,
      },
    });
    const consent = await browser.request(signedIn.location!);
    const denied = await browser.request('/consent', {
      form: {
        request: Browser.field(consent.body, 'request'),
        csrf: Browser.field(consent.body, 'csrf'),
        decision: 'deny',
      },
    });
    const location = new URL(denied.location!);
    expect(location.searchParams.get('error')).toBe('access_denied');
    expect(location.searchParams.get('state')).toBe('st-123');
    expect(location.searchParams.get('iss')).toBe(service.issuer);
    expect(location.searchParams.get('code')).toBeNull();
  });

  it('publishes discovery metadata that matches what is served', async () => {
    const response = await fetch(`${service.issuer}/.well-known/openid-configuration`);
    const document = (await response.json()) as Record<string, unknown>;
    expect(document).toMatchObject({
      issuer: service.issuer,
      authorization_endpoint: `${service.issuer}/oauth/authorize`,
      token_endpoint: `${service.issuer}/oauth/token`,
      userinfo_endpoint: `${service.issuer}/oauth/userinfo`,
      jwks_uri: `${service.issuer}/.well-known/jwks.json`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      id_token_signing_alg_values_supported: ['EdDSA', 'RS256'],
      authorization_response_iss_parameter_supported: true,
    });
    const jwks = (await (await fetch(String(document.jwks_uri))).json()) as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    expect(jwks.keys[0]).not.toHaveProperty('d');
    // The RSA key of RS256 ID tokens after the Ed25519 one, its own kid, public only.
    expect(jwks.keys.map((key) => key.kty)).toEqual(['OKP', 'RSA']);
    expect(jwks.keys[1]).toMatchObject({ alg: 'RS256', use: 'sig', e: 'AQAB' });
    expect(jwks.keys[1]!.kid).not.toBe(jwks.keys[0]!.kid);
    for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi']) expect(jwks.keys[1]).not.toHaveProperty(member);
    expect(document.end_session_endpoint).toBe(`${service.issuer}/logout`);
  });

  it('sends a user whose registration is unfinished back with account_setup_required', async () => {
    const client = await createLoginClient(service);
    const login = await createUser(service, { setupRequired: true });
    const final = await authorizeInBrowser(new Browser(service.issuer), client, login, {
      code_challenge: pkcePair().challenge,
    });
    const location = new URL(final.location!);
    expect(location.origin + location.pathname).toBe(REDIRECT_URI);
    expect(location.searchParams.get('error')).toBe('account_setup_required');
    expect(location.searchParams.get('error_description')).toBeTruthy();
    expect(location.searchParams.get('state')).toBe('st-123');
  });
});
