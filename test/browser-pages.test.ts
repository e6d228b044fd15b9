import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { escapeHtml } from '../lambdas/pages';
import type { DemoSetup } from '../local/demo';
import type { LocalService } from '../local/runner';
import { pkcePair } from './support/browser';
import { startDemoService } from './support/demo-service';
import {
  button,
  clickAndWait,
  launchChromium,
  link,
  openTab,
  signInOnPage,
  watchFormPosts,
  type Tab,
} from './support/chromium';

// The pages in a real Chromium, driven by their labels as a person would use them, with the
// built-in demo login client as the application. Nothing is intercepted or rewritten. Every page
// of every test must leave the console clean: no error, no CSP violation, no failed subresource.
// A second loopback server plays another site (127.0.0.1 is cross-site to the issuer's
// localhost; localhost on another port is same-site, so Lax cookies do reach us from there).

interface Login {
  email: string;
  password: string;
}

const GENERIC_FAILURE = 'The number, email or password is not right.';
const THROTTLED =
  'Too many attempts to sign in with this number or email. Wait a few minutes and try again, or sign in from a browser you used before.';

let service: LocalService;
let dataDir: string;
let demo: DemoSetup;
let chromium: Browser;
let elsewhere: { server: Server; port: number };
let counter = 0;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'svcnum-chromium-'));
  let started: { service: LocalService; demo: DemoSetup };
  [started, chromium, elsewhere] = await Promise.all([startDemoService(dataDir), launchChromium(), startOtherSite()]);
  ({ service, demo } = started);
});
afterAll(async () => {
  await chromium?.close();
  await new Promise((resolve) => elsewhere?.server.close(resolve));
  await service?.close();
  await rm(dataDir, { recursive: true, force: true });
});

let tab: Tab;
let page: Page;
beforeEach(async () => {
  tab = await openTab(chromium);
  page = tab.page;
});
afterEach(async () => {
  await tab.context.close();
  expect(tab.problems.list(), 'console errors, CSP violations or failed requests').toEqual([]);
});

/**
 * Another site: a page with a form that posts `fields` to `action` (as an attacker would serve), and a page that breaks
 * its own CSP.
 */
async function startOtherSite(): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://other.example');
    if (url.pathname === '/csp-check') {
      response.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Security-Policy': "default-src 'none'; style-src 'self'",
      });
      response.end(
        '<!doctype html><html lang="en"><head><title>CSP check</title></head><body><p style="color: red">inline style</p></body></html>',
      );
      return;
    }
    const action = url.searchParams.get('action') ?? '';
    const fields = [...url.searchParams]
      .filter(([name]) => name !== 'action')
      .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
      .join('');
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    response.end(
      `<!doctype html><html lang="en"><head><title>You won</title><link rel="icon" href="data:,"></head><body>` +
        `<form method="post" action="${escapeHtml(action)}">${fields}<button type="submit">Claim your prize</button></form></body></html>`,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

async function newUser(): Promise<Login> {
  const login = { email: `chromium${++counter}-${Date.now()}@example.com`, password: 'correct horse battery staple' };
  await service.core.registration.createUser(login);
  return login;
}

const heading = (target: Page) => target.$eval('h1', (element) => element.textContent ?? '');
const mainText = (target: Page) => target.$eval('main', (element) => element.textContent ?? '');
const field = (target: Page, name: string) =>
  target.$eval(`input[name="${name}"]`, (element) => element.getAttribute('value') ?? '');

/**
 * The page's icon loads under its CSP as an image. (Headless Chromium fetches no favicons by
 * itself, so the page loads it the way the tab strip would; a 404 or CSP refusal fails here.)
 */
async function expectIconLoads() {
  const icon = (await page.evaluate(`(async () => {
    const image = new Image();
    image.src = document.querySelector('link[rel="icon"]').href;
    await image.decode();
    return { src: image.src, width: image.naturalWidth };
  })()`)) as { src: string; width: number };
  expect(icon.src).toBe(`${service.issuer}/assets/favicon.svg`);
  expect(icon.width).toBeGreaterThan(0);
}

const signIn = (login: Login) => signInOnPage(page, login);

/** /demo → sign-in → the consent page for the demo app. */
async function toConsent(login: Login) {
  await page.goto(`${service.issuer}/demo`);
  expect(page.url()).toMatch(new RegExp(`^${service.issuer}/login\\?request=`));
  expect(await mainText(page)).toContain('Sign in to continue to Demo app.');
  await signIn(login);
  expect(page.url()).toMatch(new RegExp(`^${service.issuer}/consent\\?request=`));
  expect(await heading(page)).toBe('Allow Demo app to use your account?');
}

async function connectDemoApp(login: Login) {
  await toConsent(login);
  await clickAndWait(page, button('Allow'));
  expect(await heading(page)).toBe('Signed in');
}

/** Opens a page of the other site whose form posts `fields` to our `path`, and presses its button. */
async function postFromElsewhere(origin: string, path: string, fields: Record<string, string>) {
  const query = new URLSearchParams({ action: `${service.issuer}${path}`, ...fields });
  await page.goto(`${origin}/?${query.toString()}`);
  return clickAndWait(page, button('Claim your prize'));
}

describe('pages in Chromium', () => {
  it('signs in at /demo with the demo credentials, Allow, and the demo app shows UserInfo; our forms post with our real Origin', async () => {
    const formPosts = await watchFormPosts(page);
    await toConsent(demo);
    expect(await mainText(page)).toContain('See your email address');
    await expectIconLoads();
    const allowed = await clickAndWait(page, button('Allow'));
    expect(allowed?.status()).toBe(200);
    expect(page.url()).toMatch(new RegExp(`^${service.issuer}/demo/callback\\?code=`));
    expect(await heading(page)).toBe('Signed in');
    const userInfo = JSON.parse(await page.$eval('h2 + pre', (element) => element.textContent ?? '')) as Record<
      string,
      unknown
    >;
    expect(userInfo).toMatchObject({ email: demo.email, email_verified: true });
    expect(userInfo.sub).toMatch(/^[0-9A-Z]{26}$/);
    await expectIconLoads();

    // What Chromium sent: under `Referrer-Policy: same-origin` our real Origin (under no-referrer it was "null").
    const posts = formPosts();
    expect(posts.map((post) => new URL(post.url).pathname)).toEqual(['/login', '/consent']);
    for (const post of posts) {
      expect(post.headers).toMatchObject({
        origin: service.issuer,
        'sec-fetch-site': 'same-origin',
        'sec-fetch-mode': 'navigate',
        'sec-fetch-dest': 'document',
      });
    }
  });

  it('follows Allow to an application on another origin (the consent form may end there under its CSP)', async () => {
    const redirectUri = `http://127.0.0.1:${elsewhere.port}/callback`;
    const { client } = await service.core.registration.createLoginClient({
      name: 'Other-origin app',
      scope: 'openid email',
      redirectUris: [redirectUri],
    });
    const { challenge } = pkcePair();
    const authorize = new URL(`${service.issuer}/oauth/authorize`);
    authorize.search = new URLSearchParams({
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: redirectUri,
      scope: 'openid email',
      state: 'st-other',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }).toString();
    await page.goto(authorize.href);
    await signIn(await newUser());
    expect(await heading(page)).toBe('Allow Other-origin app to use your account?');
    await clickAndWait(page, button('Allow'));
    const callback = new URL(page.url());
    expect(`${callback.origin}${callback.pathname}`).toBe(redirectUri);
    expect(callback.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{16,}$/);
    expect(callback.searchParams.get('state')).toBe('st-other');
    expect(callback.searchParams.get('iss')).toBe(service.issuer);
  });

  it('Deny sends the application error=access_denied', async () => {
    await toConsent(await newUser());
    await clickAndWait(page, button('Deny'));
    const callback = new URL(page.url());
    expect(callback.pathname).toBe('/demo/callback');
    expect(callback.searchParams.get('error')).toBe('access_denied');
    expect(callback.searchParams.get('iss')).toBe(service.issuer);
    expect(callback.searchParams.has('code')).toBe(false);
    expect(await heading(page)).toBe('The sign-in did not complete');
    expect(await mainText(page)).toContain('access_denied');
  });

  it('/account lists the app; Revoke access asks first, Cancel keeps it, confirming removes it', async () => {
    await connectDemoApp(await newUser());
    await page.goto(`${service.issuer}/account`);
    expect(await page.$$eval('ul.apps h3', (names) => names.map((name) => name.textContent))).toEqual(['Demo app']);

    // A secondary, danger-styled link, not the page's primary button.
    expect(await page.$eval(link('Revoke access for Demo app'), (element) => element.className)).toBe(
      'button danger secondary',
    );
    await clickAndWait(page, link('Revoke access for Demo app'));
    expect(await heading(page)).toBe('Revoke access for Demo app?');
    await clickAndWait(page, link('Cancel'));
    expect(new URL(page.url()).pathname).toBe('/account');
    expect(await page.$$eval('ul.apps h3', (names) => names.length)).toBe(1);

    await clickAndWait(page, link('Revoke access for Demo app'));
    await clickAndWait(page, button('Revoke access'));
    expect(new URL(page.url()).pathname).toBe('/account');
    expect(await mainText(page)).toContain('No applications are connected to your account.');
  });

  it('Sign out ends on a page with a way onward, and the session is gone', async () => {
    const login = await newUser();
    await page.goto(`${service.issuer}/login`);
    expect(await mainText(page)).toContain('Sign in to manage your account.');
    await signIn(login);
    expect(new URL(page.url()).pathname).toBe('/account');

    await clickAndWait(page, button('Sign out'));
    expect(await heading(page)).toBe('Signed out');
    await clickAndWait(page, link('Sign in again'));
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.goto(`${service.issuer}/account`);
    expect(new URL(page.url()).pathname).toBe('/login');
  });

  it('shows the throttle message (429) after 5 wrong passwords; each failure is a 400 page', async () => {
    const login = await newUser();
    await page.goto(`${service.issuer}/login`);
    for (let attempt = 1; attempt <= 5; attempt++) {
      const refused = await signIn({ ...login, password: `wrong password ${attempt}` });
      expect(refused?.status()).toBe(400);
      expect(await page.$eval('[role="alert"]', (element) => element.textContent)).toBe(GENERIC_FAILURE);
      // The identifier is kept; the password is not.
      expect(await field(page, 'identifier')).toBe(login.email);
    }
    const throttled = await signIn(login);
    expect(throttled?.status()).toBe(429);
    // The fifth failure delays the next check by 30 s (this clock runs: a little of it has passed).
    expect(Number(throttled?.headers()['retry-after'])).toBeGreaterThan(0);
    expect(Number(throttled?.headers()['retry-after'])).toBeLessThanOrEqual(30);
    expect(await page.$eval('[role="alert"]', (element) => element.textContent)).toBe(THROTTLED);
  });

  it('while strangers are throttled out of an account, the browser its owner signed in with before still signs in', async () => {
    const login = await newUser();
    // The owner signs in once in this browser, then signs out (the device cookie stays).
    await page.goto(`${service.issuer}/login`);
    await signIn(login);
    expect(new URL(page.url()).pathname).toBe('/account');
    await clickAndWait(page, button('Sign out'));

    // A stranger's browser guesses until the account is throttled; then even the right password waits.
    const stranger = await openTab(chromium);
    try {
      await stranger.page.goto(`${service.issuer}/login`);
      for (let attempt = 1; attempt <= 5; attempt++)
        expect((await signInOnPage(stranger.page, { ...login, password: `guess ${attempt}` }))?.status()).toBe(400);
      expect((await signInOnPage(stranger.page, login))?.status()).toBe(429);
      expect(await stranger.page.$eval('[role="alert"]', (element) => element.textContent)).toBe(THROTTLED);
      expect(stranger.problems.list()).toEqual([]);
    } finally {
      await stranger.context.close();
    }

    // The owner's browser: a typo is just a failure, and the right password signs in.
    await page.goto(`${service.issuer}/login`);
    expect((await signIn({ ...login, password: 'a typo' }))?.status()).toBe(400);
    await signIn(login);
    expect(new URL(page.url()).pathname).toBe('/account');
  });

  it('refuses forms posted from a cross-site and a same-site page, even with the right token, and nothing changes', async () => {
    const formPosts = await watchFormPosts(page);
    await toConsent(await newUser());
    const request = await field(page, 'request');
    const csrf = await field(page, 'csrf');
    const consentUrl = page.url();
    const sites = {
      'cross-site': `http://127.0.0.1:${elsewhere.port}`,
      'same-site': `http://localhost:${elsewhere.port}`,
    };

    for (const origin of Object.values(sites)) {
      for (const [path, fields] of [
        ['/consent', { request, csrf, decision: 'allow' }],
        ['/logout', { csrf }],
      ] as const) {
        const refused = await postFromElsewhere(origin, path, fields);
        expect(refused?.status(), `${path} from ${origin}`).toBe(403);
        expect(await heading(page)).toBe('Request refused');
      }
    }
    // Still signed in, and no consent was given: the consent page asks again.
    await page.goto(consentUrl);
    expect(await heading(page)).toBe('Allow Demo app to use your account?');
    await clickAndWait(page, button('Allow'));
    expect(await heading(page)).toBe('Signed in');

    for (const origin of Object.values(sites)) {
      const refused = await postFromElsewhere(origin, '/account/revoke', { csrf, client_id: demo.clientId });
      expect(refused?.status()).toBe(403);
    }
    await page.goto(`${service.issuer}/account`);
    expect(await page.$$eval('ul.apps h3', (names) => names.map((name) => name.textContent))).toEqual(['Demo app']);

    // What Chromium sent from the other site: never same-origin, so the token was never the only defence.
    const fromElsewhere = formPosts().filter((post) => post.headers['sec-fetch-site'] !== 'same-origin');
    expect(fromElsewhere.map((post) => `${post.headers['sec-fetch-site']} ${post.headers.origin}`).sort()).toEqual([
      ...Array(3).fill(`cross-site ${sites['cross-site']}`),
      ...Array(3).fill(`same-site ${sites['same-site']}`),
    ]);
  });

  it('notices a CSP violation (so a clean console elsewhere means something)', async () => {
    await page.goto(`http://127.0.0.1:${elsewhere.port}/csp-check`);
    await page.waitForNetworkIdle();
    expect(tab.problems.list().join('\n')).toMatch(/Content Security Policy/);
    tab.problems.clear();
  });
});
