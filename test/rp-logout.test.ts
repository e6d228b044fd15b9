import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../core/kernel/model';
import { Browser } from './support/browser';
import { createUser, exchange, obtainCode } from './support/flow';
import { startTestService, type TestService } from './support/service';

// RP-Initiated Logout's checks over HTTP (the Chromium walk is test/rp-browser.test.ts): an expired
// hint still identifies its client and person, a forged or misdirected one is refused with a page,
// a client's cross-site form post, and the confirmation form's CSRF check.

const BYE = 'https://client.example/bye';

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service?.close());

let counter = 0;
async function loginClient(): Promise<Client> {
  const { client } = await service.core.registration.createLoginClient({
    name: `Logout app ${++counter}`,
    scope: 'openid email',
    redirectUris: ['https://client.example/callback'],
    postLogoutRedirectUris: [BYE],
  });
  return client;
}

/** A signed-in browser and the client's ID token for that person. */
async function signedIn(client: Client) {
  const login = await createUser(service);
  const { code, verifier, browser } = await obtainCode(service, client, login, { scope: 'openid email' });
  const tokens = await exchange(service, client, code, verifier);
  expect(tokens.status).toBe(200);
  return { browser, idToken: String(tokens.json.id_token), login };
}

const stillSignedIn = async (browser: Browser) => (await browser.request('/account')).status === 200;
const logoutPath = (params: Record<string, string>) => `/logout?${new URLSearchParams(params).toString()}`;

describe('RP-Initiated Logout', () => {
  it('is the end_session_endpoint of discovery, beside RS256 in the ID token algorithms', async () => {
    const document = (await (await fetch(`${service.issuer}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(document.end_session_endpoint).toBe(`${service.issuer}/logout`);
    expect(document.id_token_signing_alg_values_supported).toEqual(['EdDSA', 'RS256']);
  });

  it('takes an expired ID token as hint (expiry ignored): signed out at once, back with state', async () => {
    const client = await loginClient();
    const { browser, idToken } = await signedIn(client);
    // Past the ID token's hour, within the session's 12.
    service.clock.advance(2 * 60 * 60 * 1000);
    const answer = await browser.request(
      logoutPath({ id_token_hint: idToken, post_logout_redirect_uri: BYE, state: 's/1 2' }),
    );
    expect(answer.status).toBe(302);
    expect(answer.location).toBe(`${BYE}?state=s%2F1+2`);
    expect(answer.headers.get('set-cookie')).toMatch(/Max-Age=0/);
    expect(await stillSignedIn(browser)).toBe(false);
  });

  it('refuses a forged hint, one for another client, and a redirect without a client: a page, no redirect', async () => {
    const client = await loginClient();
    const other = await loginClient();
    const { browser, idToken } = await signedIn(client);
    const [header, payload, signature] = idToken.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, sub: 'someone' })).toString('base64url')}.${signature}`;
    const cases: Array<Record<string, string>> = [
      { id_token_hint: forged, post_logout_redirect_uri: BYE },
      { id_token_hint: idToken, client_id: other.clientId, post_logout_redirect_uri: BYE },
      { post_logout_redirect_uri: BYE, state: 'x' },
      { client_id: 'no-such-client', post_logout_redirect_uri: BYE },
      { id_token_hint: idToken, post_logout_redirect_uri: `${BYE}/other` },
    ];
    for (const params of cases) {
      const answer = await browser.request(logoutPath(params));
      expect(answer.status, JSON.stringify(params)).toBe(400);
      expect(answer.location).toBeUndefined();
      expect(answer.body).toContain('This sign-out link cannot be used');
    }
    expect(await stillSignedIn(browser)).toBe(true);
  });

  it("takes a client's cross-site form post (by GET): with the person's hint it signs out; our form needs its CSRF token", async () => {
    const client = await loginClient();
    const crossSite = { Origin: 'https://client.example', 'Sec-Fetch-Site': 'cross-site' };
    // Without a hint: the question, nothing ended.
    const first = await signedIn(client);
    const posted = await first.browser.request('/logout', {
      form: { client_id: client.clientId, post_logout_redirect_uri: BYE, state: 'st', ui_locales: 'de' },
      headers: crossSite,
    });
    // Answered by GET (a top-level GET carries the Lax session cookie; a cross-site POST does not).
    expect(posted.status).toBe(303);
    expect(posted.location).toBe(
      `/logout?client_id=${client.clientId}&post_logout_redirect_uri=${encodeURIComponent(BYE)}&state=st`,
    );
    expect(posted.headers.get('set-cookie')).toBeNull();
    const asked = await first.browser.request(posted.location!);
    expect(asked.status).toBe(200);
    expect(asked.body).toContain(`Sign out of <strong>${client.name}</strong>?`);
    expect(asked.headers.get('content-security-policy')).toContain('https://client.example');
    expect(await stillSignedIn(first.browser)).toBe(true);
    // The question's form posted from elsewhere, or with another CSRF token: refused.
    const fields = {
      csrf: Browser.field(asked.body, 'csrf'),
      client_id: Browser.field(asked.body, 'client_id'),
      post_logout_redirect_uri: Browser.field(asked.body, 'post_logout_redirect_uri'),
      state: Browser.field(asked.body, 'state'),
    };
    expect((await first.browser.request('/logout', { form: fields, headers: crossSite })).status).toBe(403);
    expect((await first.browser.request('/logout', { form: { ...fields, csrf: 'x' } })).status).toBe(403);
    expect(await stillSignedIn(first.browser)).toBe(true);
    // Confirmed from our page: back to the client with state.
    const confirmed = await first.browser.request('/logout', { form: fields });
    expect(confirmed.status).toBe(303);
    expect(confirmed.location).toBe(`${BYE}?state=st`);
    expect(await stillSignedIn(first.browser)).toBe(false);

    const second = await signedIn(client);
    const direct = await second.browser.request('/logout', {
      form: { id_token_hint: second.idToken, post_logout_redirect_uri: BYE },
      headers: crossSite,
    });
    expect(direct.status).toBe(303);
    const back = await second.browser.request(direct.location!);
    expect(back.status).toBe(302);
    expect(back.location).toBe(BYE);
    expect(await stillSignedIn(second.browser)).toBe(false);
  });

  it('sends the browser back to no disabled client: a page, then back once enabled again', async () => {
    const client = await loginClient();
    const browser = new Browser(service.issuer);
    const path = logoutPath({ client_id: client.clientId, post_logout_redirect_uri: BYE });
    await service.core.store.setClientDisabled(client.clientId, true);
    const refused = await browser.request(path);
    expect(refused.status).toBe(400);
    expect(refused.location).toBeUndefined();
    await service.core.store.setClientDisabled(client.clientId, false);
    expect((await browser.request(path)).location).toBe(BYE);
  });

  it('with nobody signed in: nothing to ask, straight back (or "You are signed out")', async () => {
    const client = await loginClient();
    const browser = new Browser(service.issuer);
    const back = await browser.request(logoutPath({ client_id: client.clientId, post_logout_redirect_uri: BYE }));
    expect(back.status).toBe(302);
    expect(back.location).toBe(BYE);
    const page = await browser.request('/logout');
    expect(page.status).toBe(200);
    expect(page.body).toContain('You are signed out.');
  });
});
