import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limits } from '../core/kernel/config';
import type { StoreMethod } from './support/faults';
import { StoreFaults } from './support/faults';
import { Browser } from './support/browser';
import { createUser } from './support/flow';
import { freshIp } from './support/public';
import { startTestService, type TestService } from './support/service';

// Sign-in abuse over real HTTP with real browser headers: throttling per identifier instead of a
// lockout, the device cookie that keeps the owner's browser working during an attack, answers
// and work that do not tell known from unknown accounts, the per-IP limit, the bound on
// concurrent password checks, and the signed sign-in CSRF token. Each browser sends from its own
// loopback address (a distinct client for the per-IP limit) unless a test wants one address.
// Nothing here is timed: the test clock decides every delay, and the service hashes at the tests'
// scrypt cost (test/support/service.ts), so the about 100 checks below take seconds, not minutes.

type Response = Awaited<ReturnType<Browser['request']>>;

const FAILED = 'The number, email or password is not right.';
const THROTTLED =
  'Too many attempts to sign in with this number or email. Wait a few minutes and try again, or sign in from a browser you used before.';
const NETWORK = 'Too many sign-in attempts from your network. Wait a few minutes and try again.';
const BUSY = 'We are busy right now. Try again in a moment.';
const PER_IP_BURST = 20;
/** What a client that is no browser sends: no Origin, no Fetch Metadata. */
const NOT_A_BROWSER = {
  Origin: undefined,
  'Sec-Fetch-Site': undefined,
  'Sec-Fetch-Mode': undefined,
  'Sec-Fetch-Dest': undefined,
  'Sec-Fetch-User': undefined,
};

const faults = new StoreFaults();
let service: TestService;
let storeMethods: StoreMethod[];
beforeAll(async () => {
  // One password check at a time and two waiting: the busy test fills that with three sign-ins.
  service = await startTestService({
    wrapStore: faults.wrap,
    signIn: { concurrentChecks: 1, queuedChecks: 2, perIp: { burst: PER_IP_BURST, perMinute: 1 } },
  });
  storeMethods = Object.keys(service.core.store) as StoreMethod[];
});
afterAll(() => service?.close());

const checks = () => service.core.authorization.passwordChecks;

/** A browser with its own address and its sign-in page. */
async function openSignIn(options: { ip?: string } = {}) {
  const browser = new Browser(service.issuer, options.ip ?? freshIp());
  const page = await browser.request('/login');
  expect(page.status).toBe(200);
  return { browser, page };
}

const submit = (
  browser: Browser,
  page: Response,
  identifier: string,
  password: string,
  headers: Record<string, string | undefined> = {},
) => browser.request('/login', { form: { csrf: Browser.field(page.body, 'csrf'), identifier, password }, headers });

/**
 * One attempt as an observer sees it, and the work it caused: status, every header but Date, the
 * page without the identifier and CSRF values (they differ by construction), store calls by
 * method and password checks.
 */
async function observe(browser: Browser, page: Response, identifier: string, password: string) {
  for (const method of storeMethods) faults.before(method, () => undefined);
  const before = checks();
  const response = await submit(browser, page, identifier, password);
  const storeCalls = Object.fromEntries(
    storeMethods.map((method) => [method, faults.calls(method)]).filter(([, calls]) => calls !== 0),
  );
  faults.reset();
  const headers = [...response.headers].filter(([name]) => name !== 'date' && name !== 'content-length');
  const body = response.body
    .replace(/name="identifier"([^>]*) value="[^"]*"/, 'name="identifier"$1 value=""')
    .replace(/name="csrf" value="[^"]*"/, 'name="csrf" value=""');
  return { status: response.status, headers, body, storeCalls, passwordChecks: checks() - before };
}

async function expectSignedIn(response: Response) {
  expect(response.status).toBe(303);
  expect(response.location).toBe('/account');
}

function retryAfter(response: Response): number {
  const seconds = Number(response.headers.get('retry-after'));
  expect(seconds).toBeGreaterThanOrEqual(1);
  return seconds;
}

/** Runs `work` with the clock stopped, so that delays and Retry-After are exact. */
async function frozen<T>(work: (at: number) => Promise<T>): Promise<T> {
  const at = service.clock.freeze();
  try {
    return await work(at);
  } finally {
    service.clock.release();
  }
}

/** Waits (without asserting any timing) until `condition` holds. */
async function until(condition: () => boolean) {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('known and unknown accounts', () => {
  it('get identical answers (status, headers, page) and identical work (store calls by method, one password check) in every state', async () => {
    const known = await createUser(service);
    const disabled = await createUser(service);
    await service.core.registration.disableUser(disabled.user.svcnumId);
    // Unknown identifiers of the same length, so that even Content-Length would match.
    const pairs: Array<{ name: string; known: [string, string]; unknown: [string, string] }> = [
      {
        name: 'email, wrong password',
        known: [known.email, 'wrong password'],
        unknown: [known.email.replace(/^user/, 'nobo'), 'wrong password'],
      },
      {
        name: 'number, wrong password',
        known: [known.user.svcnum, 'wrong password'],
        unknown: [`9${known.user.svcnum.slice(1).split('').reverse().join('')}`, 'wrong password'],
      },
      {
        name: 'disabled account, right password',
        known: [disabled.email, disabled.password],
        unknown: [disabled.email.replace(/^user/, 'gone'), disabled.password],
      },
    ];
    await frozen(async () => {
      for (const pair of pairs) {
        const at = service.clock.now();
        const a = await openSignIn();
        const b = await openSignIn();
        const both = async (state: string) => {
          const seen = [
            await observe(a.browser, a.page, pair.known[0], pair.known[1]),
            await observe(b.browser, b.page, pair.unknown[0], pair.unknown[1]),
          ];
          expect(seen[0], `${pair.name}: ${state}`).toEqual(seen[1]);
          return seen[0]!;
        };
        for (let attempt = 1; attempt <= limits.signInFreeFailures; attempt++) {
          const fresh = await both(`failure ${attempt}`);
          expect(fresh.status).toBe(400);
          expect(fresh.body).toContain(FAILED);
          expect(fresh.passwordChecks).toBe(1);
        }
        const throttled = await both('throttled');
        expect(throttled.status).toBe(429);
        expect(throttled.body).toContain(THROTTLED);
        expect(throttled.passwordChecks).toBe(0);
        expect(throttled.headers).toContainEqual(['retry-after', String(limits.signInFirstDelay / 1000)]);
        service.clock.freeze(at + limits.signInFirstDelay);
        expect((await both('after the delay')).passwordChecks).toBe(1);
        expect((await both('throttled again')).headers).toContainEqual([
          'retry-after',
          String((2 * limits.signInFirstDelay) / 1000),
        ]);
      }
    });
  });
});

describe('an attack on one account', () => {
  it('cannot stop the owner, whose browser signed in before, from signing in with the right password; a new browser is throttled while it lasts', async () => {
    const owner = await createUser(service);
    const ownerSide = await openSignIn();
    const first = await submit(ownerSide.browser, ownerSide.page, owner.email, owner.password);
    await expectSignedIn(first);
    const deviceCookie = first.headers.getSetCookie().find((cookie) => cookie.startsWith('device='));
    expect(deviceCookie).toMatch(
      new RegExp(`^device=[^;]+; Path=/; HttpOnly; SameSite=Lax; Max-Age=${limits.deviceCookieTtl / 1000}$`),
    );
    // Later: the session has ended, the device cookie is still there.
    ownerSide.browser.cookies.delete('session');

    await frozen(async () => {
      // A botnet: every guess from another address, and it waits out every delay it earns.
      let checked = 0;
      for (let guess = 0; guess < 30; guess++) {
        const attacker = await openSignIn();
        const before = checks();
        const answer = await submit(attacker.browser, attacker.page, owner.email, `guess ${guess}`);
        checked += checks() - before;
        if (answer.status === 429) service.clock.freeze(service.clock.now() + retryAfter(answer) * 1000);
        else expect(answer.status).toBe(400);
      }
      // Five free, then one check per delay waited out (every other guess): 30 s, 1, 2, 4, 8, 15 min…
      expect(checked).toBe(limits.signInFreeFailures + 12);
      const attacker = await openSignIn();
      await submit(attacker.browser, attacker.page, owner.email, 'one more guess');

      // A new browser with the right password: throttled, no password check.
      const stranger = await openSignIn();
      let before = checks();
      const refused = await submit(stranger.browser, stranger.page, owner.email, owner.password);
      expect(refused.status).toBe(429);
      expect(refused.body).toContain(THROTTLED);
      expect(checks()).toBe(before);

      // The owner's browser: judged by its own count, so it signs in.
      const page = await ownerSide.browser.request('/login');
      before = checks();
      const signedIn = await submit(ownerSide.browser, page, owner.email, owner.password);
      await expectSignedIn(signedIn);
      expect(checks()).toBe(before + 1);
      expect(signedIn.headers.getSetCookie().some((cookie) => cookie.startsWith('device='))).toBe(true);

      // The owner's success did not give strangers a fresh count.
      expect((await submit(stranger.browser, stranger.page, owner.email, 'after the owner')).status).toBe(429);
    });
  });

  it('ignores a tampered device cookie or one of another account; a device that collects too many failures is no longer trusted', async () => {
    const owner = await createUser(service);
    const other = await createUser(service);
    const ownerSide = await openSignIn();
    await expectSignedIn(await submit(ownerSide.browser, ownerSide.page, owner.email, owner.password));
    const otherSide = await openSignIn();
    await expectSignedIn(await submit(otherSide.browser, otherSide.page, other.email, other.password));
    const device = ownerSide.browser.cookies.get('device')!;
    const [svcnumId, deviceId, expiry, mac] = device.split('.');
    expect(svcnumId).toBe(owner.user.svcnumId);
    const flip = (text: string) => `${text.slice(0, -2)}${text.at(-2) === 'A' ? 'B' : 'A'}${text.at(-1)}`;

    await frozen(async () => {
      for (let guess = 0; guess < limits.signInFreeFailures; guess++) {
        const attacker = await openSignIn();
        expect((await submit(attacker.browser, attacker.page, owner.email, `guess ${guess}`)).status).toBe(400);
      }
      const forged = {
        'a changed MAC': [svcnumId, deviceId, expiry, flip(mac!)].join('.'),
        'another device id': [svcnumId, flip(deviceId!), expiry, mac].join('.'),
        'a later expiry': [svcnumId, deviceId, String(Number(expiry) + 86_400), mac].join('.'),
        'no MAC': [svcnumId, deviceId, expiry].join('.'),
        "another account's cookie": otherSide.browser.cookies.get('device')!,
      };
      for (const [name, cookie] of Object.entries(forged)) {
        const holder = await openSignIn();
        holder.browser.cookies.set('device', cookie);
        const before = checks();
        const answer = await submit(holder.browser, holder.page, owner.email, owner.password);
        expect(answer.status, name).toBe(429);
        expect(checks(), name).toBe(before);
      }

      // The owner's own browser mistypes: its failures count on the device, and are checked.
      const page = await ownerSide.browser.request('/login');
      for (let attempt = 1; attempt <= limits.signInFreeFailures; attempt++) {
        const before = checks();
        expect((await submit(ownerSide.browser, page, owner.email, `typo ${attempt}`)).status).toBe(400);
        expect(checks()).toBe(before + 1);
      }
      // Too many: the device is judged like any browser, and the account is under attack.
      expect((await submit(ownerSide.browser, page, owner.email, owner.password)).status).toBe(429);
    });
  });
});

describe('limits per client and per process', () => {
  it('limits attempts per client IP; a success gives its attempt back; other addresses are not affected', async () => {
    const user = await createUser(service);
    await frozen(async () => {
      const ip = freshIp();
      const guesser = await openSignIn({ ip });
      const target = `nobody-${Date.now()}@example.com`;
      // Five checked failures, then throttled attempts: all take from the address's bucket.
      for (let attempt = 1; attempt < PER_IP_BURST; attempt++) {
        expect([400, 429]).toContain((await submit(guesser.browser, guesser.page, target, 'guess')).status);
      }
      // Successes from the same address do not use it up.
      for (let round = 0; round < 2; round++) {
        const owner = await openSignIn({ ip });
        await expectSignedIn(await submit(owner.browser, owner.page, user.email, user.password));
      }
      expect((await submit(guesser.browser, guesser.page, `${target}.x`, 'guess')).status).toBe(400);
      const before = checks();
      const limited = await submit(guesser.browser, guesser.page, `${target}.y`, 'guess');
      expect(limited.status).toBe(429);
      expect(limited.body).toContain(NETWORK);
      expect(retryAfter(limited)).toBe(60);
      expect(checks()).toBe(before);
      // Another address is another client.
      const elsewhere = await openSignIn();
      expect((await submit(elsewhere.browser, elsewhere.page, `${target}.y`, 'guess')).status).toBe(400);
    });
  });

  it('bounds concurrent password checks: when every place is taken, any sign-in gets the same busy answer (503 + Retry-After) at once, but a browser that signed in before is let in', async () => {
    const known = await createUser(service);
    // The owner signed in from this browser before: it holds a device cookie.
    const owner = await openSignIn();
    await expectSignedIn(await submit(owner.browser, owner.page, known.email, known.password));
    const ownerAgain = await owner.browser.request('/login');
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    faults.before('findSvcnumIdByEmail', () => gate);
    try {
      const before = checks();
      // One check running and two waiting fill this process (1 + 2): held at the account lookup.
      const held = await Promise.all(Array.from({ length: 3 }, () => openSignIn()));
      const pending = held.map((side, index) =>
        submit(side.browser, side.page, `held-${index}-${Date.now()}@example.com`, 'password'),
      );
      await until(() => faults.calls('findSvcnumIdByEmail') === 3);
      const a = await openSignIn();
      const b = await openSignIn();
      const [busyKnown, busyUnknown] = [
        await submit(a.browser, a.page, known.email, known.password),
        await submit(b.browser, b.page, known.email.replace(/^user/, 'nobo'), known.password),
      ];
      for (const busy of [busyKnown, busyUnknown]) {
        expect(busy.status).toBe(503);
        expect(busy.body).toContain(BUSY);
        expect(busy.headers.get('retry-after')).toBe('2');
      }
      // They did no work: no lookup beyond the three held ones.
      expect(faults.calls('findSvcnumIdByEmail')).toBe(3);
      // The owner's browser has places of its own (and goes first in the queue).
      const ownerSignIn = submit(owner.browser, ownerAgain, known.email, known.password);
      await until(() => faults.calls('findSvcnumIdByEmail') === 4);
      open();
      expect((await Promise.all(pending)).map((answer) => answer.status)).toEqual([400, 400, 400]);
      await expectSignedIn(await ownerSignIn);
      expect(checks() - before).toBe(4);
      // Places are free again.
      faults.reset();
      await expectSignedIn(await submit(a.browser, a.page, known.email, known.password));
    } finally {
      open();
      faults.reset();
    }
  });
});

describe('the signed sign-in CSRF token', () => {
  it('refuses a planted cookie with a matching field but no valid MAC (403), also from a client without Origin; a valid token passes', async () => {
    const user = await createUser(service);
    const real = await openSignIn();
    const token = Browser.field(real.page.body, 'csrf');
    const [nonce, expiry, mac] = token.split('.');
    const device = await openSignIn();
    await expectSignedIn(await submit(device.browser, device.page, user.email, user.password));
    const planted = {
      'a random value': 'planted-by-someone-else',
      'a changed MAC': [nonce, expiry, `${mac!.slice(0, -2)}${mac!.at(-2) === 'A' ? 'B' : 'A'}${mac!.at(-1)}`].join(
        '.',
      ),
      'a later expiry': [nonce, String(Number(expiry) + 86_400), mac].join('.'),
      'a device cookie (signed for another purpose)': device.browser.cookies.get('device')!,
    };
    for (const [name, value] of Object.entries(planted)) {
      const victim = new Browser(service.issuer, freshIp());
      victim.cookies.set('csrf', value);
      const before = checks();
      const answer = await victim.request('/login', {
        form: { csrf: value, identifier: user.email, password: user.password },
        headers: NOT_A_BROWSER,
      });
      expect(answer.status, name).toBe(403);
      expect(answer.body, name).toContain('Request refused');
      expect(
        answer.headers.getSetCookie().filter((cookie) => cookie.startsWith('session=')),
        name,
      ).toEqual([]);
      expect(checks(), name).toBe(before);
    }
    // The real token from a client without Origin: the token alone decides, and it passes.
    expect((await submit(real.browser, real.page, user.email, 'wrong password', NOT_A_BROWSER)).status).toBe(400);
    // Reopening the page keeps a valid token (other open tabs stay usable); an expired one is replaced.
    expect(Browser.field((await real.browser.request('/login')).body, 'csrf')).toBe(token);
    service.clock.advance(limits.signInCsrfTtl);
    expect((await submit(real.browser, real.page, user.email, user.password)).status).toBe(403);
    const renewed = await real.browser.request('/login');
    expect(Browser.field(renewed.body, 'csrf')).not.toBe(token);
    expect(renewed.headers.getSetCookie().some((cookie) => cookie.startsWith('csrf='))).toBe(true);
  });
});
