import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyAuthenticationResponse, verifyRegistrationResponse } from '@simplewebauthn/server';
import { MINUTE } from '../core/kernel/config';
import { Browser as HttpBrowser, pkcePair } from './support/browser';
import {
  addVirtualAuthenticator,
  button,
  clickAndWait,
  fillLabelled,
  launchChromium,
  link,
  openTab,
  signInOnPage,
  type Tab,
} from './support/chromium';
import { startTestService, type TestService } from './support/service';

// Passkeys in a real Chromium with a virtual authenticator (CDP WebAuthn: CTAP2, internal,
// resident keys, user verification): added on /account after a recent sign-in, used with
// "Sign in with a passkey" and through the identifier field's autofill (conditional UI), renamed,
// removed (then refused). An assertion replayed, one made on another origin, or one of another
// account's passkey is refused. @simplewebauthn/server checks the same browser answers as a
// reference verifier. One service and one browser for the file; the clock is moved by hand.

let service: TestService;
let chromium: Browser;
/** localhost on another port: another origin with the same RP ID (the host), as a look-alike page. */
let other: { server: Server; origin: string };
let counter = 0;

beforeAll(async () => {
  [service, chromium, other] = await Promise.all([startTestService(), launchChromium(), startOtherOrigin()]);
}, 120_000);
afterAll(async () => {
  await chromium?.close();
  await new Promise((resolve) => other?.server.close(resolve));
  await service?.close();
});

async function startOtherOrigin() {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'Content-Type': 'text/html' });
    response.end('<!doctype html><title>Elsewhere</title><p>Elsewhere</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://localhost:${(server.address() as AddressInfo).port}` };
}

let tab: Tab;
let page: Page;
/**
 * The pages run as in a browser that offers no passkey autofill, so that the button is the way in:
 * Chromium's virtual authenticator answers a conditional request at once, as if the person picked
 * the passkey from the identifier field's suggestions (the autofill test lifts this).
 */
let noAutofill: string;
beforeEach(async () => {
  tab = await openTab(chromium);
  page = tab.page;
  ({ identifier: noAutofill } = await page.evaluateOnNewDocument(
    'PublicKeyCredential.isConditionalMediationAvailable = async () => false;',
  ));
  await addVirtualAuthenticator(page);
});
afterEach(async () => {
  expect(tab.problems.list()).toEqual([]);
  await tab.context.close();
});

async function newUser() {
  const login = { email: `passkey${++counter}-${Date.now()}@example.com`, password: 'correct horse battery staple' };
  const user = await service.core.registration.createUser(login);
  return { ...login, svcnumId: user.svcnumId };
}

const heading = () => page.$eval('h1', (element) => element.textContent ?? '');
const mainText = () => page.$eval('main', (element) => element.textContent ?? '');

/** Signs in with the password and adds a passkey on /account (the sign-in is recent). */
async function withPasskey() {
  const login = await newUser();
  await page.goto(`${service.issuer}/login`);
  await signInOnPage(page, login);
  expect(await heading()).toBe('Your account');
  await clickAndWait(page, button('Add a passkey'));
  expect(await mainText()).toContain('Passkey added.');
  expect(await mainText()).toContain('Passkey 1');
  return login;
}

async function signOut() {
  await clickAndWait(page, button('Sign out'));
  expect(await heading()).toBe('Signed out');
}

/**
 * "Sign in with a passkey" on /login, its form post held back from the server (answered 204 here)
 * and returned: an answer to a live challenge, to send as the test likes.
 */
async function heldPasskeyAnswer() {
  await page.goto(`${service.issuer}/login`);
  await page.setRequestInterception(true);
  const held = new Promise<string>((resolve) => {
    page.on('request', (request) => {
      if (request.isInterceptResolutionHandled()) return;
      if (request.method() === 'POST' && request.url().endsWith('/login')) {
        resolve(request.postData() ?? '');
        void request.respond({ status: 204, body: '' });
      } else void request.continue();
    });
  });
  // A 204 to a form post leaves that navigation aborted: the test's own doing, not the page's.
  const aborted = new Promise<void>((resolve) => {
    page.on('requestfailed', (request) => {
      if (request.method() === 'POST' && request.url().endsWith('/login')) resolve();
    });
  });
  await page.locator(button('Sign in with a passkey')).click();
  const body = new URLSearchParams(await held);
  await aborted;
  tab.problems.clear();
  return body;
}

/** What the sign-in form posts (the captured assertion), by watching the request. */
function capturePost(target: Page) {
  return new Promise<string>((resolve) => {
    target.on('request', (request) => {
      if (request.method() === 'POST' && request.url().endsWith('/login')) resolve(request.postData() ?? '');
    });
  });
}

describe('passkeys in Chromium', () => {
  it('adds a passkey, signs in with the button, and lists it as used', async () => {
    const login = await withPasskey();
    const [stored] = await service.core.store.listPasskeys(login.svcnumId);
    expect(stored).toMatchObject({ name: 'Passkey 1', transports: ['internal'], backupEligible: false });
    await signOut();
    await page.goto(`${service.issuer}/login`);
    await clickAndWait(page, button('Sign in with a passkey'));
    expect(await heading()).toBe('Your account');
    expect(await mainText()).toContain('Last used on');
    expect(await mainText()).toContain('On this device only.');
    // Signed in as the account: the device cookie and session came from the one sign-in path.
    const cookies = await page.cookies();
    expect(cookies.map((cookie) => cookie.name).sort()).toEqual(['device', 'session']);
  });

  it('signs in through the identifier field autofill (conditional UI)', async () => {
    await withPasskey();
    await signOut();
    await page.removeScriptToEvaluateOnNewDocument(noAutofill);
    const html = await (await fetch(`${service.issuer}/login`)).text();
    expect(html).toContain('autocomplete="username webauthn"');
    // The page asks for a passkey in the field's autofill as it loads, and the virtual authenticator
    // answers as a person picking it would: the form is posted, and the account page follows.
    const posted = page.waitForResponse(
      (response) => response.request().method() === 'POST' && response.url().endsWith('/login'),
    );
    await page.goto(`${service.issuer}/login`);
    expect((await posted).status()).toBe(303);
    await page.waitForFunction("location.pathname === '/account' && document.readyState === 'complete'");
    expect(await heading()).toBe('Your account');
  });

  it('asks for the password first when the sign-in is over 5 minutes old', async () => {
    const login = await newUser();
    await page.goto(`${service.issuer}/login`);
    await signInOnPage(page, login);
    service.clock.advance(6 * MINUTE);
    await page.reload();
    await clickAndWait(page, button('Add a passkey'));
    expect(await heading()).toBe('Confirm it is you');
    await fillLabelled(page, 'Password', 'not the password');
    await clickAndWait(page, button('Continue'));
    expect(await mainText()).toContain('The number, email or password is not right.');
    await fillLabelled(page, 'Password', login.password);
    await clickAndWait(page, button('Continue'));
    expect(await mainText()).toContain('You can add a passkey now.');
    await clickAndWait(page, button('Add a passkey'));
    expect(await mainText()).toContain('Passkey added.');
  });

  it('renames and removes a passkey; a removed one is refused', async () => {
    const login = await withPasskey();
    await clickAndWait(page, link('Rename Passkey 1'));
    await fillLabelled(page, 'Passkey name', 'Work laptop');
    await clickAndWait(page, button('Save'));
    expect(await mainText()).toContain('Passkey renamed.');
    await clickAndWait(page, link('Remove Work laptop'));
    expect(await heading()).toBe('Remove Work laptop?');
    await clickAndWait(page, button('Remove'));
    expect(await mainText()).toContain('Passkey removed.');
    expect(await service.core.store.listPasskeys(login.svcnumId)).toEqual([]);
    await signOut();
    await page.goto(`${service.issuer}/login`);
    const response = await clickAndWait(page, button('Sign in with a passkey'));
    expect(response?.status()).toBe(400);
    expect(await mainText()).toContain('This passkey could not sign you in.');
  });

  it('refuses a replayed assertion, and one made on another origin', async () => {
    const login = await withPasskey();
    await signOut();
    await page.goto(`${service.issuer}/login`);
    const posted = capturePost(page);
    await clickAndWait(page, button('Sign in with a passkey'));
    expect(await heading()).toBe('Your account');
    const body = new URLSearchParams(await posted);
    const assertion = JSON.parse(body.get('passkey')!);

    // The library's verifier accepts what Chromium sent, as ours did (the counter moved to 2 since).
    const [stored] = await service.core.store.listPasskeys(login.svcnumId);
    const reference = await verifyAuthenticationResponse({
      response: assertion,
      expectedChallenge: () => true,
      expectedOrigin: service.issuer,
      expectedRPID: 'localhost',
      credential: { id: stored!.credentialId, publicKey: Buffer.from(stored!.publicKey, 'base64url'), counter: 0 },
    });
    expect(reference.verified).toBe(true);
    expect(reference.authenticationInfo.newCounter).toBe(stored!.counter);

    // Replayed as the browser posted it, from a browser with a fresh CSRF token: the challenge is spent.
    expect((await replay(body)).body).toContain('This passkey could not sign you in.');

    // A credential id or challenge no passkey can have is refused like any bad passkey, never a store error.
    const clientData = JSON.parse(Buffer.from(assertion.response.clientDataJSON, 'base64url').toString());
    const withChallenge = (challenge: unknown) =>
      Buffer.from(JSON.stringify({ ...clientData, challenge })).toString('base64url');
    for (const malformed of [
      { ...assertion, id: '' },
      { ...assertion, id: 'x'.repeat(5000) },
      { ...assertion, id: 42 },
      { ...assertion, response: { ...assertion.response, clientDataJSON: withChallenge('') } },
      { ...assertion, response: { ...assertion.response, clientDataJSON: withChallenge('x'.repeat(3000)) } },
    ]) {
      const refused = await replay(
        new URLSearchParams({ ...Object.fromEntries(body), passkey: JSON.stringify(malformed) }),
      );
      // 400 either way: the passkey refused, or (an id too long for any form field) the request.
      expect(refused.status).toBe(400);
      expect(refused.body).toMatch(/This passkey could not sign you in\.|This request is not valid/);
    }

    // Made on another origin (same host, so the same RP ID): Chromium signs its origin, we refuse it.
    await page.goto(other.origin);
    const elsewhere = (await page.evaluate(`(async () => {
      const credential = await navigator.credentials.get({ publicKey: {
        challenge: new Uint8Array(32), rpId: 'localhost', userVerification: 'required' } });
      const b64 = (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\\+/g, '-').replace(/\\//g, '_')
        .replace(/=+$/, '');
      return JSON.stringify({ id: credential.id, rawId: b64(credential.rawId), type: credential.type, response: {
        clientDataJSON: b64(credential.response.clientDataJSON),
        authenticatorData: b64(credential.response.authenticatorData),
        signature: b64(credential.response.signature), userHandle: b64(credential.response.userHandle) } });
    })()`)) as string;
    expect(JSON.parse(Buffer.from(JSON.parse(elsewhere).response.clientDataJSON, 'base64url').toString()).origin).toBe(
      other.origin,
    );
    body.set('passkey', elsewhere);
    expect((await replay(body)).body).toContain('This passkey could not sign you in.');
  });

  it("does not let a second account use the first one's passkey", async () => {
    await withPasskey();
    await signOut();
    const second = await newUser();
    // An answer to a fresh challenge, kept from the server, then sent as the second account's.
    await page.goto(`${service.issuer}/login`);
    const body = await heldPasskeyAnswer();
    const assertion = JSON.parse(body.get('passkey')!);
    assertion.response.userHandle = Buffer.from(second.svcnumId).toString('base64url');
    body.set('passkey', JSON.stringify(assertion));
    const refused = await replay(body);
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('This passkey could not sign you in.');
    expect(await service.core.store.listPasskeys(second.svcnumId)).toEqual([]);
  });

  it('refuses a signature counter that went back, and says so for the log', async () => {
    const login = await withPasskey();
    await signOut();
    const body = await heldPasskeyAnswer();
    // The stored counter ahead of the authenticator's, as after a cloned authenticator was used.
    const [stored] = await service.core.store.listPasskeys(login.svcnumId);
    const ahead = { counter: 1000, backedUp: false, lastUsedAt: service.clock.now() };
    expect(await service.core.store.recordPasskeyUse(stored!, stored!.counter, ahead)).toBe(true);
    const result = await service.core.authorization.signIn({ passkey: body.get('passkey')! });
    expect(result.outcome).toMatchObject({ type: 'sign_in_error', alert: 'counter_regression' });
    expect((await service.core.store.getPasskey(login.svcnumId, stored!.credentialId))?.counter).toBe(1000);
  });

  it('goes through consent like a password sign-in', async () => {
    await withPasskey();
    await signOut();
    const { client } = await service.core.registration.createLoginClient({
      name: 'Passkey App',
      redirectUris: [`${other.origin}/callback`],
      scope: 'openid',
    });
    const { challenge } = pkcePair();
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: `${other.origin}/callback`,
      scope: 'openid',
      state: 's1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    await page.goto(`${service.issuer}/oauth/authorize?${query}`);
    await clickAndWait(page, button('Sign in with a passkey'));
    expect(await heading()).toContain('Passkey App');
    await clickAndWait(page, button('Allow'));
    expect(new URL(page.url()).searchParams.get('code')).toBeTruthy();
  });

  it("the library's verifier accepts what our pages registered", async () => {
    const login = await newUser();
    await page.goto(`${service.issuer}/login`);
    await signInOnPage(page, login);
    const posted = new Promise<string>((resolve) => {
      page.on('request', (request) => {
        if (request.method() === 'POST' && request.url().endsWith('/account/passkeys'))
          resolve(request.postData() ?? '');
      });
    });
    await clickAndWait(page, button('Add a passkey'));
    const registration = JSON.parse(new URLSearchParams(await posted).get('credential')!);
    const reference = await verifyRegistrationResponse({
      response: registration,
      expectedChallenge: () => true,
      expectedOrigin: service.issuer,
      expectedRPID: 'localhost',
      requireUserVerification: true,
    });
    expect(reference.verified).toBe(true);
    const [stored] = await service.core.store.listPasskeys(login.svcnumId);
    expect(stored!.credentialId).toBe(reference.registrationInfo!.credential.id);
    expect(Buffer.from(stored!.publicKey, 'base64url')).toEqual(
      Buffer.from(reference.registrationInfo!.credential.publicKey),
    );
  });
});

/** A client that got a sign-in form (its CSRF cookie and field), posting with a browser's headers. */
async function freshSignInForm() {
  const browser = new HttpBrowser(service.issuer);
  const form = await browser.request('/login');
  return Object.assign(browser, { csrf: HttpBrowser.field(form.body, 'csrf') });
}

/** Posts a sign-in form as a browser would, from a client with its own fresh CSRF token. */
async function replay(body: URLSearchParams) {
  const browser = await freshSignInForm();
  body.set('csrf', browser.csrf);
  return browser.request('/login', { form: Object.fromEntries(body) });
}
