import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limits } from '../core/kernel/config';
import type { Client } from '../core/kernel/model';
import { postedFromElsewhere } from '../lambdas/browser';
import type { HttpEvent } from '../lambdas/http';
import { Browser, pkcePair, sameOriginFormHeaders } from './support/browser';
import { authorizePath, createLoginClient, createUser, exchange, obtainCode, REDIRECT_URI } from './support/flow';
import { startTestService, type TestService } from './support/service';

// The pages a person sees (/login, /consent, /account, /account/revoke, /logout), attacked over
// real HTTP: CSRF, session fixation, brute force, expiry, framing, injection. One service for the
// whole file; every test makes its own clients and users. (Local runs are plain http, so the
// cookies are `session` and `csrf`, without the `__Host-` prefix.)

type Response = Awaited<ReturnType<Browser['request']>>;
interface Login {
  email: string;
  password: string;
}

const GENERIC_FAILURE = 'The number, email or password is not right.';
const THROTTLED =
  'Too many attempts to sign in with this number or email. Wait a few minutes and try again, or sign in from a browser you used before.';
const SESSION_TOKEN = /^[A-Za-z0-9_-]{43}$/;

let service: TestService;
/** A user for tests that do not count failures (each sign-in is a ~0.3 s scrypt; so is creating a user). */
let shared: Login;
beforeAll(async () => {
  // Every request of this file comes from 127.0.0.1: a per-IP budget that the failures here do not
  // exhaust (test/sign-in-abuse.test.ts tests the per-IP limit), and room for parallel guesses.
  service = await startTestService({
    signIn: { concurrentChecks: 2, queuedChecks: 30, perIp: { burst: 1000, perMinute: 1000 } },
  });
  shared = await createUser(service);
});
afterAll(() => service?.close());

/**
 * Every HTML page: no framing, no caching, no inline script or style, no sniffing, Referer only to
 * ourselves. Script: none, or (sign-in and account pages) our one file, passkeys', under `script-src 'self'`.
 */
function expectSecurePage(page: Response) {
  expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
  const csp = page.headers.get('content-security-policy') ?? '';
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).toContain("base-uri 'none'");
  expect(csp).toMatch(/form-action 'self'/);
  expect(csp).not.toContain('unsafe-inline');
  expect(csp).not.toContain('unsafe-eval');
  const scripts = page.body.match(/<script[^>]*>/gi) ?? [];
  expect(scripts.filter((tag) => tag !== '<script src="/assets/passkeys.js" defer>')).toEqual([]);
  expect(csp.match(/script-src [^;]*/g) ?? []).toEqual(scripts.length ? ["script-src 'self'"] : []);
  expect(page.headers.get('x-frame-options')).toBe('DENY');
  expect(page.headers.get('cache-control')).toBe('no-store');
  // same-origin, not no-referrer: under no-referrer browsers post our own forms with `Origin: null`.
  expect(page.headers.get('referrer-policy')).toBe('same-origin');
  expect(page.body).toContain('<meta name="referrer" content="same-origin">');
  expect(page.headers.get('x-content-type-options')).toBe('nosniff');
  expect(page.body).not.toMatch(/\son[a-z]+=/i);
  expect(page.body).not.toMatch(/\sstyle=|<style/i);
  expect(page.body).toMatch(/^<!doctype html>/);
  expect(page.location).toBeUndefined();
}

const optionalField = (html: string, name: string) => {
  try {
    return Browser.field(html, name);
  } catch {
    return undefined;
  }
};

/** The sign-in form of `page`, filled in. */
function signInForm(page: Response, login: Login): Record<string, string> {
  const request = optionalField(page.body, 'request');
  return {
    ...(request ? { request } : {}),
    csrf: Browser.field(page.body, 'csrf'),
    identifier: login.email,
    password: login.password,
  };
}

/** Opens `path` (a sign-in page) and submits it. */
async function signIn(browser: Browser, login: Login, path = '/login', headers: Record<string, string> = {}) {
  const page = await browser.request(path);
  expect(page.status).toBe(200);
  return browser.request('/login', { form: signInForm(page, login), headers });
}

/** A sign-in that must fail with `message` on a 400 page (429 when throttled), and leave no session behind. */
async function expectSignInRefused(browser: Browser, page: Response, login: Login, message: string, status = 400) {
  const before = browser.cookies.get('session');
  const refused = await browser.request('/login', { form: signInForm(page, login) });
  expect(refused.status).toBe(status);
  expectSecurePage(refused);
  expect(refused.body).toContain(`<p class="error" role="alert" id="sign-in-error">${message}</p>`);
  expect(refused.body).toContain('aria-describedby="sign-in-error"');
  if (login.password) expect(refused.body).not.toContain(login.password);
  expect(refused.headers.getSetCookie().filter((cookie) => cookie.startsWith('session='))).toEqual([]);
  expect(browser.cookies.get('session')).toBe(before);
  return refused;
}

async function expectSignedIn(browser: Browser, response: Response, location: string | RegExp = '/account') {
  expect(response.status).toBe(303);
  if (typeof location === 'string') expect(response.location).toBe(location);
  else expect(response.location).toMatch(location);
  const cookie = response.headers.getSetCookie().find((value) => value.startsWith('session='));
  expect(cookie).toBeDefined();
  expect(browser.cookies.get('session')).toMatch(SESSION_TOKEN);
}

/**
 * Forms posted from elsewhere, with the headers browsers send (Fetch Metadata and Origin). A
 * `null` Origin comes from a sandboxed or opaque page, or from a browser without Fetch Metadata
 * whose page had `Referrer-Policy: no-referrer`.
 */
const ELSEWHERE: Record<string, Record<string, string | undefined>> = {
  'a cross-site page': { Origin: 'https://evil.example', 'Sec-Fetch-Site': 'cross-site' },
  'a same-site page on another port': { Origin: 'http://localhost:1', 'Sec-Fetch-Site': 'same-site' },
  'a sandboxed page': { Origin: 'null', 'Sec-Fetch-Site': 'cross-site' },
  'a browser without Fetch Metadata, cross-site': {
    Origin: 'https://evil.example',
    'Sec-Fetch-Site': undefined,
    'Sec-Fetch-Mode': undefined,
    'Sec-Fetch-Dest': undefined,
    'Sec-Fetch-User': undefined,
  },
  'a browser without Fetch Metadata, Origin null': {
    Origin: 'null',
    'Sec-Fetch-Site': undefined,
    'Sec-Fetch-Mode': undefined,
    'Sec-Fetch-Dest': undefined,
    'Sec-Fetch-User': undefined,
  },
};
/** A client that is no browser (curl, a script): no Origin, no Fetch Metadata. */
const NOT_A_BROWSER = {
  Origin: undefined,
  'Sec-Fetch-Site': undefined,
  'Sec-Fetch-Mode': undefined,
  'Sec-Fetch-Dest': undefined,
  'Sec-Fetch-User': undefined,
};

const expectForbidden = (response: Response) => {
  expect(response.status).toBe(403);
  expectSecurePage(response);
  expect(response.body).toContain('Request refused');
  expect(response.headers.getSetCookie().filter((cookie) => cookie.startsWith('session='))).toEqual([]);
};

/** Goes to /oauth/authorize and follows our own redirect to the sign-in or consent page. */
async function startAuthorize(browser: Browser, client: Client, params: Record<string, string | undefined> = {}) {
  const start = await browser.request(authorizePath(client, { code_challenge: pkcePair().challenge, ...params }));
  expect(start.status).toBe(302);
  expect(start.location).toMatch(/^\/(login|consent)\?request=[A-Za-z0-9_-]{43}$/);
  return { start, page: await browser.request(start.location!) };
}

describe('page contract and security headers', () => {
  it('the sign-in page has the labelled inputs and the button; the consent page has Allow and Deny; cookies are HttpOnly', async () => {
    const client = await createLoginClient(service);
    const login = shared;
    const browser = new Browser(service.issuer);
    const { page } = await startAuthorize(browser, client);
    expect(page.status).toBe(200);
    const csrfCookie = page.headers.getSetCookie().find((cookie) => cookie.startsWith('csrf='))!;
    expect(csrfCookie).toMatch(/; Path=\/; HttpOnly; SameSite=Lax/);
    expect(page.body).toContain('<label for="identifier">Number or email</label>');
    expect(page.body).toMatch(
      /<input id="identifier" name="identifier" type="text" autocomplete="username webauthn" required/,
    );
    expect(page.body).toContain('<label for="password">Password</label>');
    expect(page.body).toMatch(
      /<input id="password" name="password" type="password" autocomplete="current-password" required/,
    );
    expect(page.body).toContain('<button type="submit">Sign in</button>');
    expect(page.body).toContain('<form method="post" action="/login">');
    expect(page.body).toContain(`Sign in to continue to <strong>${client.name}</strong>`);
    // The standalone page (no authorization request) has the same form.
    const standalone = await new Browser(service.issuer).request('/login');
    expect(standalone.body).toContain('<label for="identifier">Number or email</label>');
    expect(standalone.body).toContain('<label for="password">Password</label>');
    expect(standalone.body).toContain('<button type="submit">Sign in</button>');

    const signedIn = await browser.request('/login', { form: signInForm(page, login) });
    await expectSignedIn(browser, signedIn, /^\/consent\?request=/);
    const sessionCookie = signedIn.headers.getSetCookie().find((cookie) => cookie.startsWith('session='))!;
    expect(sessionCookie).toMatch(/; Path=\/; HttpOnly; SameSite=Lax/);
    expect(sessionCookie).toContain(`Max-Age=${limits.sessionTtl / 1000}`);
    expect(sessionCookie).not.toMatch(/Domain=/i);
    // The one-time sign-in CSRF cookie is dropped once signed in.
    expect(signedIn.headers.getSetCookie().find((cookie) => cookie.startsWith('csrf='))).toMatch(/Max-Age=0/);
    const consent = await browser.request(signedIn.location!);
    expect(consent.status).toBe(200);
    expect(consent.body).toContain('<button type="submit" name="decision" value="allow">Allow</button>');
    expect(consent.body).toMatch(/<button type="submit" name="decision" value="deny"[^>]*>Deny<\/button>/);
    expect(consent.body).toContain('<form method="post" action="/consent">');
  });

  it('sends the security headers on every HTML page and none of them runs inline script', async () => {
    const client = await createLoginClient(service);
    const login = shared;
    const browser = new Browser(service.issuer);
    const pages: Array<[string, Response, number]> = [];

    const { page: signInPage } = await startAuthorize(browser, client);
    pages.push(['sign-in', signInPage, 200]);
    pages.push(['standalone sign-in', await new Browser(service.issuer).request('/login'), 200]);
    pages.push([
      'failed sign-in',
      await browser.request('/login', { form: signInForm(signInPage, { ...login, password: 'wrong password' }) }),
      400,
    ]);
    pages.push([
      'refused sign-in',
      await browser.request('/login', { form: { ...signInForm(signInPage, login), csrf: 'forged' } }),
      403,
    ]);
    pages.push(['expired sign-in', await browser.request('/login?request=not-a-request'), 400]);
    const signedIn = await browser.request('/login', { form: signInForm(signInPage, login) });
    const consent = await browser.request(signedIn.location!);
    pages.push(['consent', consent, 200]);
    // The page may post to the client's origin (the 303 after Allow lands there).
    expect(consent.headers.get('content-security-policy')).toContain("form-action 'self' https://client.example;");
    pages.push([
      'consent without a decision',
      await browser.request('/consent', {
        form: { request: Browser.field(consent.body, 'request'), csrf: Browser.field(consent.body, 'csrf') },
      }),
      400,
    ]);
    pages.push(['consent of an unknown request', await browser.request('/consent?request=nope'), 400]);
    const allowed = await browser.request('/consent', {
      form: {
        request: Browser.field(consent.body, 'request'),
        csrf: Browser.field(consent.body, 'csrf'),
        decision: 'allow',
      },
    });
    expect(allowed.status).toBe(303);
    const account = await browser.request('/account');
    pages.push(['account', account, 200]);
    pages.push(['revoke confirmation', await browser.request(`/account/revoke?client_id=${client.clientId}`), 200]);
    pages.push(['revoke of an app not connected', await browser.request('/account/revoke?client_id=unknown'), 404]);
    pages.push([
      'refused revoke',
      await browser.request('/account/revoke', { form: { csrf: 'forged', client_id: client.clientId } }),
      403,
    ]);
    pages.push(['authorize error', await browser.request(authorizePath(client, { client_id: 'unknown' })), 400]);
    pages.push([
      'signed out',
      await browser.request('/logout', { form: { csrf: Browser.field(account.body, 'csrf') } }),
      200,
    ]);

    for (const [name, page, status] of pages) {
      expect.soft(page.status, name).toBe(status);
      expectSecurePage(page);
    }

    const css = await browser.request('/assets/style.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(css.headers.get('x-content-type-options')).toBe('nosniff');
    // Every page names its icon (else browsers ask for /favicon.ico and log a 404).
    expect(account.body).toContain('<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">');
    const icon = await browser.request('/assets/favicon.svg');
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/svg+xml');
    expect(icon.body).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(icon.body).not.toMatch(/<script|\son[a-z]+=/i);
  });

  it('escapes a hostile client name on the sign-in, consent and account pages, and a hostile identifier', async () => {
    const hostile = '<script>alert(1)</script>';
    const escaped = '&#60;script&#62;alert(1)&#60;/script&#62;';
    const { client } = await service.core.registration.createLoginClient({
      name: hostile,
      scope: 'openid profile',
      redirectUris: [REDIRECT_URI],
    });
    const login = shared;
    const browser = new Browser(service.issuer);
    const { page } = await startAuthorize(browser, client, { scope: 'openid profile' });
    expect(page.body).toContain(`Sign in to continue to <strong>${escaped}</strong>`);
    expectSecurePage(page);

    const injection = '"><script>alert(2)</script><input value="';
    const refused = await browser.request('/login', {
      form: signInForm(page, { email: injection, password: 'whatever1' }),
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('value="&#34;&#62;&#60;script&#62;alert(2)&#60;/script&#62;&#60;input value=&#34;"');
    expectSecurePage(refused);

    const signedIn = await browser.request('/login', { form: signInForm(page, login) });
    const consent = await browser.request(signedIn.location!);
    expect(consent.status).toBe(200);
    expect(consent.body).toContain(`<title>Allow ${escaped}?</title>`);
    expect(consent.body).toContain(`<h1>Allow <strong>${escaped}</strong> to use your account?</h1>`);
    expectSecurePage(consent);
    await browser.request('/consent', {
      form: {
        request: Browser.field(consent.body, 'request'),
        csrf: Browser.field(consent.body, 'csrf'),
        decision: 'allow',
      },
    });
    const account = await browser.request('/account');
    expect(account.body).toContain(`<h3>${escaped}</h3>`);
    expect(account.body).toContain(`aria-label="Revoke access for ${escaped}"`);
    expectSecurePage(account);
    const confirm = await browser.request(`/account/revoke?client_id=${client.clientId}`);
    expect(confirm.body).toContain(`<title>Revoke access for ${escaped}?</title>`);
    expect(confirm.body).toContain(`<h1>Revoke access for <strong>${escaped}</strong>?</h1>`);
    expectSecurePage(confirm);
  });
});

describe('sign-in failures and throttling', () => {
  it('answers a wrong password and an unknown account with the same generic message', async () => {
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const page = await browser.request('/login');
    const wrong = await expectSignInRefused(browser, page, { ...login, password: 'not the password' }, GENERIC_FAILURE);
    // The identifier is kept so the person can fix the password; the password is not.
    expect(wrong.body).toContain(`value="${login.email}"`);
    const unknown = await expectSignInRefused(
      browser,
      page,
      { email: 'nobody@example.com', password: login.password },
      GENERIC_FAILURE,
    );
    const unknownNumber = await expectSignInRefused(
      browser,
      page,
      { email: '99999999999', password: login.password },
      GENERIC_FAILURE,
    );
    const strip = (body: string) => body.replace(/value="[^"]*"/g, '');
    expect(strip(unknown.body)).toBe(strip(wrong.body));
    expect(strip(unknownNumber.body)).toBe(strip(wrong.body));
    await expectSignInRefused(browser, page, { email: '', password: login.password }, GENERIC_FAILURE);
    await expectSignInRefused(browser, page, { email: login.email, password: '' }, GENERIC_FAILURE);
    await expectSignInRefused(browser, page, { email: login.email, password: 'x'.repeat(257) }, GENERIC_FAILURE);
  });

  // Many scrypt checks in a row: slow when other test files share the cores; nothing here depends on time.
  it('five failures are free, then each failure delays the next check (429 + Retry-After, doubling); never a lockout, and a success clears the count', async () => {
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const page = await browser.request('/login');
    const checks = () => service.core.authorization.passwordChecks;
    const at = service.clock.freeze();
    try {
      for (let attempt = 1; attempt <= limits.signInFreeFailures; attempt++) {
        await expectSignInRefused(browser, page, { ...login, password: `wrong password ${attempt}` }, GENERIC_FAILURE);
      }
      // The fifth failure delays the next check by 30 s: refused without a password check, even the right password.
      let before = checks();
      const throttled = await expectSignInRefused(browser, page, login, THROTTLED, 429);
      expect(throttled.headers.get('retry-after')).toBe(String(limits.signInFirstDelay / 1000));
      expect(checks()).toBe(before);
      service.clock.freeze(at + limits.signInFirstDelay);
      await expectSignInRefused(browser, page, { ...login, password: 'wrong password 6' }, GENERIC_FAILURE);
      // The sixth doubles the delay.
      expect((await expectSignInRefused(browser, page, login, THROTTLED, 429)).headers.get('retry-after')).toBe(
        String((2 * limits.signInFirstDelay) / 1000),
      );
      service.clock.freeze(at + 3 * limits.signInFirstDelay);
      before = checks();
      await expectSignedIn(browser, await browser.request('/login', { form: signInForm(page, login) }));
      expect(checks()).toBe(before + 1);
      // The success cleared the count: five free failures again (from another browser: this one
      // now holds a device cookie and is judged by its own count, see test/sign-in-abuse.test.ts).
      const other = new Browser(service.issuer);
      const again = await other.request('/login');
      for (let attempt = 1; attempt <= limits.signInFreeFailures; attempt++) {
        await expectSignInRefused(other, again, { ...login, password: `wrong again ${attempt}` }, GENERIC_FAILURE);
      }
      await expectSignInRefused(other, again, login, THROTTLED, 429);
      // However long the attack, the delay stops growing at 15 minutes.
      for (let failures = limits.signInFreeFailures; failures < 12; failures++) {
        service.clock.freeze(service.clock.now() + limits.signInMaxDelay);
        await expectSignInRefused(other, again, { ...login, password: 'still wrong' }, GENERIC_FAILURE);
      }
      expect((await expectSignInRefused(other, again, login, THROTTLED, 429)).headers.get('retry-after')).toBe(
        String(limits.signInMaxDelay / 1000),
      );
      service.clock.freeze(service.clock.now() + limits.signInMaxDelay);
      await expectSignedIn(other, await other.request('/login', { form: signInForm(again, login) }));
    } finally {
      service.clock.release();
    }
  }, 90_000);

  it('checks at most 5 passwords of a burst of 20 parallel guesses; every guess is counted before its check', async () => {
    const login = await createUser(service);
    const browser = new Browser(service.issuer);
    const page = await browser.request('/login');
    const before = service.core.authorization.passwordChecks;
    const guesses = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        browser.request('/login', { form: signInForm(page, { ...login, password: `guess ${index}` }) }),
      ),
    );
    const checked = service.core.authorization.passwordChecks - before;
    expect(checked).toBeGreaterThanOrEqual(1);
    expect(checked).toBeLessThanOrEqual(limits.signInFreeFailures);
    expect(guesses.filter((guess) => guess.status === 400 && guess.body.includes(GENERIC_FAILURE))).toHaveLength(
      checked,
    );
    const throttled = guesses.filter((guess) => guess.status === 429);
    expect(throttled).toHaveLength(20 - checked);
    expect(
      throttled.every((guess) => guess.body.includes(THROTTLED) && Number(guess.headers.get('retry-after')) >= 1),
    ).toBe(true);
  });
});

describe('malformed page requests', () => {
  it('answers repeated or oversized form fields and query parameters with an HTML page, not JSON', async () => {
    const browser = new Browser(service.issuer);
    const page = await browser.request('/login');
    const repeatedQuery = await browser.request('/login?request=a&request=b');
    expect(repeatedQuery.status).toBe(400);
    expectSecurePage(repeatedQuery);
    expect(repeatedQuery.body).toContain('request must not be repeated');
    const body = new URLSearchParams(signInForm(page, shared));
    body.append('identifier', 'second');
    const cookie = [...browser.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const repeatedField = await fetch(`${service.issuer}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Cookie: cookie },
      body: body.toString(),
      redirect: 'manual',
    });
    expect(repeatedField.status).toBe(400);
    expect(repeatedField.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const wrongType = await fetch(`${service.issuer}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Cookie: cookie },
      body: '{}',
      redirect: 'manual',
    });
    expect(wrongType.status).toBe(400);
    expect(await wrongType.text()).toContain('application/x-www-form-urlencoded');
  });
});

describe('CSRF and cross-site posts', () => {
  it('judges where a post comes from by Sec-Fetch-Site, else Origin, else not at all (the CSRF token decides)', () => {
    const ours = 'https://id.example';
    const posted = (headers: Record<string, string>) => postedFromElsewhere({ headers } as unknown as HttpEvent, ours);
    expect(posted({ Origin: ours, 'Sec-Fetch-Site': 'same-origin' })).toBe(false);
    expect(posted({ 'sec-fetch-site': 'same-origin' })).toBe(false);
    expect(posted({ Origin: ours })).toBe(false);
    expect(posted({})).toBe(false);
    for (const site of ['cross-site', 'same-site', 'none', ''])
      expect(posted({ Origin: ours, 'Sec-Fetch-Site': site }), site).toBe(true);
    for (const origin of [
      'null',
      'https://evil.example',
      'http://id.example',
      'https://id.example:444',
      'https://sub.id.example',
    ])
      expect(posted({ Origin: origin }), origin).toBe(true);
  });

  it('refuses POST /login without the csrf cookie, with a mismatched or missing csrf field, or from another site', async () => {
    const login = shared;
    const client = await createLoginClient(service);
    const browser = new Browser(service.issuer);
    const { page } = await startAuthorize(browser, client);
    const form = signInForm(page, login);

    // A victim's browser that never loaded our page has no csrf cookie.
    expectForbidden(await new Browser(service.issuer).request('/login', { form }));
    expectForbidden(
      await browser.request('/login', {
        form: { ...form, csrf: `${form.csrf!.slice(0, -1)}${form.csrf!.endsWith('A') ? 'B' : 'A'}` },
      }),
    );
    expectForbidden(await browser.request('/login', { form: { ...form, csrf: '' } }));
    const { csrf: _csrf, ...withoutCsrf } = form;
    expectForbidden(await browser.request('/login', { form: withoutCsrf }));
    for (const headers of Object.values(ELSEWHERE)) expectForbidden(await browser.request('/login', { form, headers }));
    // Same host, other scheme: another origin (and, to a browser without Fetch Metadata, another site).
    expectForbidden(
      await browser.request('/login', {
        form,
        headers: { ...NOT_A_BROWSER, Origin: service.issuer.replace('http:', 'https:') },
      }),
    );
    expect(browser.cookies.has('session')).toBe(false);

    // The very same form as a browser posts it from our page works: the refusals above were about CSRF only.
    expect(sameOriginFormHeaders(service.issuer)).toMatchObject({
      Origin: service.issuer,
      'Sec-Fetch-Site': 'same-origin',
    });
    await expectSignedIn(browser, await browser.request('/login', { form }), /^\/consent\?request=/);
    // A client that is no browser sends neither header: the CSRF token alone decides.
    const script = new Browser(service.issuer);
    const { page: scriptPage } = await startAuthorize(script, client);
    expectForbidden(
      await script.request('/login', {
        form: { ...signInForm(scriptPage, login), csrf: 'forged' },
        headers: NOT_A_BROWSER,
      }),
    );
    await expectSignedIn(
      script,
      await script.request('/login', { form: signInForm(scriptPage, login), headers: NOT_A_BROWSER }),
      /^\/consent\?request=/,
    );
  });

  it('refuses POST /consent with a wrong csrf or from another site, and issues no code', async () => {
    const login = shared;
    const client = await createLoginClient(service);
    const browser = new Browser(service.issuer);
    const { page } = await startAuthorize(browser, client);
    const signedIn = await browser.request('/login', { form: signInForm(page, login) });
    const consent = await browser.request(signedIn.location!);
    const request = Browser.field(consent.body, 'request');
    const csrf = Browser.field(consent.body, 'csrf');

    // Another signed-in session's (valid) csrf token does not fit this session.
    const attacker = new Browser(service.issuer);
    const { page: attackerPage } = await startAuthorize(attacker, client);
    const attackerConsent = await attacker.request(
      (await attacker.request('/login', { form: signInForm(attackerPage, login) })).location!,
    );
    const attackerCsrf = Browser.field(attackerConsent.body, 'csrf');

    const attempts: Array<{ form: Record<string, string>; headers?: Record<string, string | undefined> }> = [
      { form: { request, csrf: 'forged', decision: 'allow' } },
      { form: { request, csrf: '', decision: 'allow' } },
      { form: { request, decision: 'allow' } },
      { form: { request, csrf: attackerCsrf, decision: 'allow' } },
      ...Object.values(ELSEWHERE).map((headers) => ({ form: { request, csrf, decision: 'allow' }, headers })),
    ];
    for (const attempt of attempts) {
      const refused = await browser.request('/consent', attempt);
      expectForbidden(refused);
      expect(refused.location).toBeUndefined();
    }
    // Nothing was remembered either: a silent request still needs consent.
    const silent = await browser.request(
      authorizePath(client, { code_challenge: pkcePair().challenge, prompt: 'none' }),
    );
    expect(new URL(silent.location!).searchParams.get('error')).toBe('consent_required');

    const approved = await browser.request('/consent', { form: { request, csrf, decision: 'allow' } });
    expect(approved.status).toBe(303);
    expect(new URL(approved.location!).searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('refuses POST /account/revoke and POST /logout with a wrong csrf or from another site: the app stays listed, the session stays', async () => {
    const login = shared;
    const client = await createLoginClient(service);
    const { code, verifier, browser } = await obtainCode(service, client, login);
    const tokens = await exchange(service, client, code, verifier);
    expect(tokens.status).toBe(200);
    const account = await browser.request('/account');
    expect(account.body).toContain(`<h3>${client.name}</h3>`);
    const csrf = Browser.field(account.body, 'csrf');

    expectForbidden(await browser.request('/account/revoke', { form: { csrf: 'forged', client_id: client.clientId } }));
    expectForbidden(await browser.request('/account/revoke', { form: { client_id: client.clientId } }));
    expectForbidden(await browser.request('/logout', { form: { csrf: 'forged' } }));
    for (const headers of Object.values(ELSEWHERE)) {
      expectForbidden(
        await browser.request('/account/revoke', { form: { csrf, client_id: client.clientId }, headers }),
      );
      expectForbidden(await browser.request('/logout', { form: { csrf }, headers }));
      // A cross-site post carries no Lax cookie; it must not get to clear one either.
      expectForbidden(await new Browser(service.issuer).request('/logout', { form: {}, headers }));
    }

    const still = await browser.request('/account');
    expect(still.status).toBe(200);
    expect(still.body).toContain(`<h3>${client.name}</h3>`);
    const refreshed = await fetch(`${service.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: String(tokens.json.refresh_token),
        client_id: client.clientId,
      }),
    });
    expect(refreshed.status).toBe(200);

    // Without a session there is nothing to revoke: back to sign-in.
    const anonymous = await new Browser(service.issuer).request('/account/revoke', {
      form: { csrf, client_id: client.clientId },
    });
    expect(anonymous.status).toBe(303);
    expect(anonymous.location).toBe('/login');
    expect((await new Browser(service.issuer).request(`/account/revoke?client_id=${client.clientId}`)).location).toBe(
      '/login',
    );
    expect((await browser.request('/account')).body).toContain(`<h3>${client.name}</h3>`);
  });
});

describe('sessions', () => {
  it('issues a new session cookie on every sign-in and never adopts one set before', async () => {
    const login = shared;
    const client = await createLoginClient(service);
    const browser = new Browser(service.issuer);
    // An attacker planted a session id of their choosing.
    const planted = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    browser.cookies.set('session', planted);
    await expectSignedIn(browser, await signIn(browser, login));
    const first = browser.cookies.get('session')!;
    expect(first).not.toBe(planted);
    const attackerView = new Browser(service.issuer);
    attackerView.cookies.set('session', planted);
    expect((await attackerView.request('/account')).location).toBe('/login');

    // Signing in again (prompt=login) gives yet another id.
    const { page } = await startAuthorize(browser, client, { prompt: 'login' });
    expect(page.body).toContain('<button type="submit">Sign in</button>');
    await expectSignedIn(
      browser,
      await browser.request('/login', { form: signInForm(page, login) }),
      /^\/consent\?request=/,
    );
    const second = browser.cookies.get('session')!;
    expect(second).not.toBe(first);
    // The replaced session is ended, not left usable by whoever may hold it.
    const oldCookie = new Browser(service.issuer);
    oldCookie.cookies.set('session', first);
    expect((await oldCookie.request('/account')).location).toBe('/login');
    expect((await browser.request('/account')).status).toBe(200);
  });

  it('treats a garbage or oversized session cookie as signed out, without an error', async () => {
    for (const value of ['x', 'x'.repeat(101), '%00%ff', '"quoted"']) {
      const browser = new Browser(service.issuer);
      browser.cookies.set('session', value);
      const response = await browser.request('/account');
      expect(response.status).toBe(302);
      expect(response.location).toBe('/login');
    }
  });

  it('sign-out deletes the session: the old cookie no longer reaches /account', async () => {
    const login = shared;
    const client = await createLoginClient(service);
    const browser = new Browser(service.issuer);
    await expectSignedIn(browser, await signIn(browser, login));
    const oldSession = browser.cookies.get('session')!;
    const account = await browser.request('/account');
    expect(account.status).toBe(200);
    expect(account.body).toMatch(/<form method="post" action="\/logout">/);

    const signedOut = await browser.request('/logout', { form: { csrf: Browser.field(account.body, 'csrf') } });
    expect(signedOut.status).toBe(200);
    expect(signedOut.body).toContain('You are signed out.');
    // A way onward, not a dead end.
    expect(signedOut.body).toContain('<a href="/login">Sign in again</a>');
    expect(signedOut.headers.getSetCookie()).toContainEqual(expect.stringMatching(/^session=; .*Max-Age=0/));
    expect(browser.cookies.has('session')).toBe(false);
    const afterwards = await browser.request('/account');
    expect(afterwards.status).toBe(302);
    expect(afterwards.location).toBe('/login');

    // A copy of the old cookie (stolen, or a stale tab) is dead too.
    const replay = new Browser(service.issuer);
    replay.cookies.set('session', oldSession);
    const replayed = await replay.request('/account');
    expect(replayed.status).toBe(302);
    expect(replayed.location).toBe('/login');
    const silent = await replay.request(
      authorizePath(client, { code_challenge: pkcePair().challenge, prompt: 'none' }),
    );
    expect(new URL(silent.location!).searchParams.get('error')).toBe('login_required');
  });

  it('shows the expired page for a parked request past its lifetime, on GET /login and on POST /consent', async () => {
    const login = shared;
    const client = await createLoginClient(service);
    // One browser parked at the sign-in page, one (signed in) parked at the consent page.
    const atSignIn = new Browser(service.issuer);
    const { start: signInStart, page: signInPage } = await startAuthorize(atSignIn, client);
    expect(signInStart.location).toMatch(/^\/login\?/);
    const atConsent = new Browser(service.issuer);
    await expectSignedIn(atConsent, await signIn(atConsent, login));
    const { start: consentStart, page: consentPage } = await startAuthorize(atConsent, client);
    expect(consentStart.location).toMatch(/^\/consent\?/);

    service.clock.advance(limits.authRequestTtl + 1_000);

    const expiredSignIn = await atSignIn.request(signInStart.location!);
    expect(expiredSignIn.status).toBe(400);
    expectSecurePage(expiredSignIn);
    expect(expiredSignIn.body).toContain('<h1>This sign-in has expired</h1>');
    expect(expiredSignIn.body).not.toContain('name="password"');
    // Posting the old form does not sign in either.
    const latePost = await atSignIn.request('/login', { form: signInForm(signInPage, login) });
    expect(latePost.status).toBe(400);
    expect(latePost.body).toContain('expired');
    expect(atSignIn.cookies.has('session')).toBe(false);

    const expiredConsentPage = await atConsent.request(consentStart.location!);
    expect(expiredConsentPage.status).toBe(400);
    expect(expiredConsentPage.body).toContain('<h1>This request has expired</h1>');
    const lateConsent = await atConsent.request('/consent', {
      form: {
        request: Browser.field(consentPage.body, 'request'),
        csrf: Browser.field(consentPage.body, 'csrf'),
        decision: 'allow',
      },
    });
    expect(lateConsent.status).toBe(400);
    expect(lateConsent.location).toBeUndefined();
    expectSecurePage(lateConsent);
    expect(lateConsent.body).toContain('<h1>This request has expired</h1>');
    // And no consent was recorded.
    const silent = await atConsent.request(
      authorizePath(client, { code_challenge: pkcePair().challenge, prompt: 'none' }),
    );
    expect(new URL(silent.location!).searchParams.get('error')).toBe('consent_required');
  });
});
