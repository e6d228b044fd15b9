import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader } from 'jose';
import * as oidc from 'openid-client';
import { Issuer, Strategy, type TokenSet, type UserinfoResponse } from 'openid-client-5';
import { Passport } from 'passport';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { escapeHtml } from '../lambdas/pages';
import type { LocalService } from '../local/runner';
import { button, clickAndWait, launchChromium, openTab, signInOnPage, type Tab } from './support/chromium';
import { startDemoService } from './support/demo-service';

// Real relying-party libraries against the local service, with a real Chromium signing in through
// our pages: passport with openid-client 5's Strategy in its default settings (which expect RS256 ID
// tokens: OIDC Core's mandatory algorithm), and openid-client 6's RP-Initiated Logout URL. The RP
// runs on 127.0.0.1, another site than the issuer's localhost.

interface Login {
  email: string;
  password: string;
}

let service: LocalService;
let dataDir: string;
let chromium: Browser;
let rp: { server: Server; origin: string };
let counter = 0;
/** The RP's routes for the current test: path → handler. */
const routes = new Map<string, (request: IncomingMessage, response: ServerResponse) => void>();

function rpPage(response: ServerResponse, title: string, body = '') {
  response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  response.end(
    `<!doctype html><html lang="en"><head><title>${escapeHtml(title)}</title><link rel="icon" href="data:,">` +
      `</head><body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`,
  );
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'svcnum-rp-browser-'));
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://rp.example').pathname;
    const route = routes.get(path);
    if (route) route(request, response);
    else rpPage(response, `RP page ${path}`);
  });
  let started: Awaited<ReturnType<typeof startDemoService>>;
  [started, chromium] = await Promise.all([
    startDemoService(dataDir),
    launchChromium(),
    new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)),
  ]);
  service = started.service;
  rp = { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
});
afterAll(async () => {
  await chromium?.close();
  await new Promise((resolve) => rp?.server.close(resolve));
  await service?.close();
  await rm(dataDir, { recursive: true, force: true });
});

let tab: Tab;
let page: Page;
beforeEach(async () => {
  routes.clear();
  tab = await openTab(chromium);
  page = tab.page;
});
afterEach(async () => {
  await tab.context.close();
  expect(tab.problems.list(), 'console errors, CSP violations or failed requests').toEqual([]);
});

async function newUser(): Promise<Login> {
  const login = { email: `rp${++counter}-${Date.now()}@example.com`, password: 'correct horse battery staple' };
  await service.core.registration.createUser(login);
  return login;
}

const heading = (target: Page) => target.$eval('h1', (element) => element.textContent ?? '');
const mainText = (target: Page) => target.$eval('main', (element) => element.textContent ?? '');

/** Our sign-in page, then consent (Allow), as a person does: ends wherever the client's redirect goes. */
async function signInAndAllow(login: Login) {
  expect(page.url()).toMatch(new RegExp(`^${service.issuer}/login\\?request=`));
  await signInOnPage(page, login);
  expect(page.url()).toMatch(new RegExp(`^${service.issuer}/consent\\?request=`));
  return clickAndWait(page, button('Allow'));
}

/** The RSA key's kid in our JWKS. */
async function rsaKid(): Promise<string> {
  const { keys } = (await (await fetch(`${service.issuer}/.well-known/jwks.json`)).json()) as {
    keys: Array<{ kty: string; kid: string; alg: string; use: string }>;
  };
  const rsa = keys.filter((key) => key.kty === 'RSA');
  expect(rsa).toHaveLength(1);
  expect(rsa[0]).toMatchObject({ alg: 'RS256', use: 'sig' });
  return rsa[0]!.kid;
}

/**
 * A passport app at `/login` and `/cb` with openid-client 5's Strategy, default settings: the page at
 * /cb says who signed in (and the ID token's header), or the error passport reports.
 */
async function passportApp(idTokenAlg?: 'RS256') {
  const redirectUri = `${rp.origin}/cb`;
  const { client } = await service.core.registration.createLoginClient({
    name: `Passport app ${++counter}`,
    scope: 'openid email',
    redirectUris: [redirectUri],
    ...(idTokenAlg ? { idTokenAlg } : {}),
  });
  const issuer = await Issuer.discover(service.issuer);
  // A public client (PKCE authenticates it); nothing else set: id_token_signed_response_alg is RS256.
  const rpClient = new issuer.Client({
    client_id: client.clientId,
    redirect_uris: [redirectUri],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  });
  const passport = new Passport();
  passport.use(
    'oidc',
    new Strategy(
      { client: rpClient, params: { scope: 'openid email' } },
      (tokenset: TokenSet, userinfo: UserinfoResponse, done: (error: null, user: object) => void) =>
        done(null, { sub: tokenset.claims().sub, email: userinfo.email, idToken: tokenset.id_token }),
    ),
  );
  // One browser at a time: one session object stands for the RP's session store.
  const session: Record<string, unknown> = {};
  const authenticate = (request: IncomingMessage, response: ServerResponse) => {
    Object.assign(request, { session });
    passport.authenticate('oidc', { session: false }, (error, user, info) => {
      if (error || !user) {
        const reason = String(error ?? (info instanceof Error ? info.message : JSON.stringify(info)));
        return rpPage(response, 'Sign-in failed', `<p id="error">${escapeHtml(reason)}</p>`);
      }
      const header = decodeProtectedHeader(user.idToken!);
      return rpPage(
        response,
        'Signed in with passport',
        `<p id="user">${escapeHtml(JSON.stringify({ sub: user.sub, email: user.email, header }))}</p>`,
      );
    })(request, response, (error: unknown) => rpPage(response, 'Sign-in failed', escapeHtml(String(error))));
  };
  routes.set('/login', authenticate);
  routes.set('/cb', authenticate);
  return client;
}

describe('RS256 ID tokens for passport + openid-client 5 (default Strategy settings)', () => {
  it('fails against an EdDSA client (the default): openid-client 5 expects RS256', async () => {
    const login = await newUser();
    await passportApp();
    await page.goto(`${rp.origin}/login`);
    await signInAndAllow(login);
    expect(page.url()).toMatch(new RegExp(`^${rp.origin}/cb\\?code=`));
    expect(await heading(page)).toBe('Sign-in failed');
    expect(await page.$eval('#error', (element) => element.textContent ?? '')).toContain(
      'unexpected JWT alg received, expected RS256, got: EdDSA',
    );
  });

  it('signs in a client registered with --id-token-alg RS256: its ID token is RS256 under the RSA key', async () => {
    const login = await newUser();
    await passportApp('RS256');
    await page.goto(`${rp.origin}/login`);
    await signInAndAllow(login);
    expect(await heading(page)).toBe('Signed in with passport');
    const shown = JSON.parse(await page.$eval('#user', (element) => element.textContent ?? '')) as {
      sub: string;
      email: string;
      header: Record<string, unknown>;
    };
    expect(shown.email).toBe(login.email);
    expect(shown.sub).toMatch(/^[0-9A-Z]{26}$/);
    expect(shown.header).toEqual({ alg: 'RS256', typ: 'JWT', kid: await rsaKid() });
  });
});

describe('RP-Initiated Logout, started by openid-client 6 buildEndSessionUrl', () => {
  /** A login client at the RP with a post-logout page, and openid-client 6's configuration of it. */
  async function logoutApp(idTokenAlg?: 'RS256') {
    const { client } = await service.core.registration.createLoginClient({
      name: `Logout app ${++counter}`,
      scope: 'openid email',
      redirectUris: [`${rp.origin}/cb6`],
      postLogoutRedirectUris: [`${rp.origin}/bye`],
      ...(idTokenAlg ? { idTokenAlg } : {}),
    });
    const config = await oidc.discovery(new URL(service.issuer), client.clientId, undefined, oidc.None(), {
      execute: [oidc.allowInsecureRequests],
    });
    return { client, config };
  }

  /** Signs in through the app (Chromium), and redeems the code: the app's ID token. */
  async function signInThrough(config: oidc.Configuration, login: Login): Promise<string> {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: `${rp.origin}/cb6`,
      scope: 'openid email',
      state,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    await page.goto(url.href);
    await signInAndAllow(login);
    expect(page.url()).toMatch(new RegExp(`^${rp.origin}/cb6\\?code=`));
    const tokens = await oidc.authorizationCodeGrant(config, new URL(page.url()), {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
    return tokens.id_token!;
  }

  /** Whether this browser is still signed in: /account, or the sign-in page. */
  async function signedIn() {
    await page.goto(`${service.issuer}/account`);
    return new URL(page.url()).pathname === '/account';
  }

  it('with the id_token_hint: straight back to the client with state, and the session is gone', async () => {
    const login = await newUser();
    const { config } = await logoutApp();
    const idToken = await signInThrough(config, login);
    expect(await signedIn()).toBe(true);
    const end = oidc.buildEndSessionUrl(config, {
      id_token_hint: idToken,
      post_logout_redirect_uri: `${rp.origin}/bye`,
      state: 'st-hinted',
    });
    expect(end.origin + end.pathname).toBe(`${service.issuer}/logout`);
    await page.goto(end.href);
    expect(page.url()).toBe(`${rp.origin}/bye?state=st-hinted`);
    expect(await signedIn()).toBe(false);
    // Authorize shows the sign-in page again.
    await page.goto(
      oidc.buildAuthorizationUrl(config, {
        redirect_uri: `${rp.origin}/cb6`,
        scope: 'openid email',
        code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
      }).href,
    );
    expect(page.url()).toMatch(new RegExp(`^${service.issuer}/login\\?request=`));
    expect(await heading(page)).toBe('Sign in');
  });

  it('an RS256 ID token is a hint as well', async () => {
    const login = await newUser();
    const { config } = await logoutApp('RS256');
    const idToken = await signInThrough(config, login);
    expect(decodeProtectedHeader(idToken)).toMatchObject({ alg: 'RS256', kid: await rsaKid() });
    await page.goto(
      oidc.buildEndSessionUrl(config, {
        id_token_hint: idToken,
        post_logout_redirect_uri: `${rp.origin}/bye`,
        state: 'st-rsa',
      }).href,
    );
    expect(page.url()).toBe(`${rp.origin}/bye?state=st-rsa`);
    expect(await signedIn()).toBe(false);
  });

  it('without a hint: asks first ("Sign out"), then back to the client with state; "Stay signed in" keeps the session', async () => {
    const login = await newUser();
    const { client, config } = await logoutApp();
    await signInThrough(config, login);
    const end = oidc.buildEndSessionUrl(config, { post_logout_redirect_uri: `${rp.origin}/bye`, state: 'st-asked' });
    await page.goto(end.href);
    expect(new URL(page.url()).pathname).toBe('/logout');
    expect(await heading(page)).toBe(`Sign out of ${client.name}?`);
    expect(await mainText(page)).toContain(login.email);
    // Staying: nothing ends.
    await clickAndWait(page, `::-p-aria([name="Stay signed in"][role="link"])`);
    expect(await signedIn()).toBe(true);
    await page.goto(end.href);
    await clickAndWait(page, button('Sign out'));
    expect(page.url()).toBe(`${rp.origin}/bye?state=st-asked`);
    expect(await signedIn()).toBe(false);
  });

  it("the client's form post (POST from its own site) with the hint: back to the client, the session gone", async () => {
    const login = await newUser();
    const { config } = await logoutApp();
    const idToken = await signInThrough(config, login);
    const fields = { id_token_hint: idToken, post_logout_redirect_uri: `${rp.origin}/bye`, state: 'st-posted' };
    routes.set('/sign-out', (_request, response) =>
      rpPage(
        response,
        'Sign out here',
        `<form method="post" action="${escapeHtml(`${service.issuer}/logout`)}">` +
          Object.entries(fields)
            .map(([name, value]) => `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`)
            .join('') +
          '<button type="submit">Sign out of the app</button></form>',
      ),
    );
    await page.goto(`${rp.origin}/sign-out`);
    await clickAndWait(page, button('Sign out of the app'));
    expect(page.url()).toBe(`${rp.origin}/bye?state=st-posted`);
    expect(await signedIn()).toBe(false);
  });

  it("another person's hint is stale: asked first", async () => {
    const [first, second] = [await newUser(), await newUser()];
    const { client, config } = await logoutApp();
    const firstToken = await signInThrough(config, first);
    // Signed in again as someone else in the same browser.
    await page.goto(`${service.issuer}/login`);
    await signInOnPage(page, second);
    await page.goto(
      oidc.buildEndSessionUrl(config, { id_token_hint: firstToken, post_logout_redirect_uri: `${rp.origin}/bye` }).href,
    );
    expect(await heading(page)).toBe(`Sign out of ${client.name}?`);
    expect(await mainText(page)).toContain(second.email);
    await clickAndWait(page, button('Sign out'));
    expect(page.url()).toBe(`${rp.origin}/bye`);
    expect(await signedIn()).toBe(false);
  });

  it('a post_logout_redirect_uri the client did not register: an error page, no redirect, still signed in', async () => {
    const login = await newUser();
    const { config } = await logoutApp();
    const idToken = await signInThrough(config, login);
    const response = await page.goto(
      oidc.buildEndSessionUrl(config, {
        id_token_hint: idToken,
        post_logout_redirect_uri: `${rp.origin}/elsewhere`,
        state: 'st-wrong',
      }).href,
    );
    expect(response?.status()).toBe(400);
    expect(new URL(page.url()).origin).toBe(service.issuer);
    expect(await heading(page)).toBe('This sign-out link cannot be used');
    expect(await signedIn()).toBe(true);
  });

  it('a person who opens /logout is asked, and then sees "You are signed out"', async () => {
    const login = await newUser();
    await page.goto(`${service.issuer}/login`);
    await signInOnPage(page, login);
    await page.goto(`${service.issuer}/logout`);
    expect(await heading(page)).toBe('Sign out of your account?');
    await clickAndWait(page, button('Sign out'));
    expect(await mainText(page)).toContain('You are signed out.');
    expect(await signedIn()).toBe(false);
  });
});
