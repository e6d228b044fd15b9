import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../core/kernel/model';
import { Browser, pkcePair } from './support/browser';
import { authorizePath, createLoginClient, createUser, exchange, obtainCode, REDIRECT_URI } from './support/flow';
import { startTestService, type TestService } from './support/service';

// GET /oauth/authorize, adversarially, over real HTTP. Two families of failure:
// - the client or its redirect URI cannot be trusted: a 400 page, never a redirect;
// - anything else: a 302 back to the registered redirect URI with error, error_description,
//   state (unchanged) and iss (RFC 6749 §4.1.2.1, RFC 9207).

const QUERY_REDIRECT_URI = 'https://client.example/cb?tenant=a%20b';
/** RFC 6749 §4.1.2.1: error_description is limited to %x20-21 / %x23-5B / %x5D-7E. */
const DESCRIPTION_CHARSET = /^[\x20\x21\x23-\x5B\x5D-\x7E]+$/;

let service: TestService;
let client: Client;
const challenge = pkcePair().challenge;

beforeAll(async () => {
  service = await startTestService();
  client = await createLoginClient(service, 'openid profile email', [REDIRECT_URI, QUERY_REDIRECT_URI]);
});
afterAll(() => service?.close());

/** Appends raw (possibly repeated) parameters to a query built by authorizePath. */
const withExtra = (path: string, extra: Array<[string, string]>) => `${path}&${new URLSearchParams(extra).toString()}`;

const valid = (params: Record<string, string | undefined> = {}) =>
  authorizePath(client, { code_challenge: challenge, ...params });

async function get(path: string) {
  const response = await fetch(`${service.issuer}${path}`, { redirect: 'manual' });
  return {
    status: response.status,
    headers: response.headers,
    body: await response.text(),
    location: response.headers.get('location'),
  };
}

/** The request was refused on a page, with nothing sent anywhere. */
async function expectErrorPage(path: string, message?: RegExp) {
  const response = await get(path);
  expect(response.status).toBe(400);
  expect(response.location).toBeNull();
  expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
  expect(response.headers.get('cache-control')).toBe('no-store');
  expect(response.headers.get('x-frame-options')).toBe('DENY');
  expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  expect(response.body).toContain('This sign-in link is not valid');
  expect(response.body).not.toContain('<script');
  if (message) expect(response.body).toMatch(message);
  return response;
}

/** The request was sent back to the client with an error. */
async function expectRedirectError(
  path: string,
  error: string,
  state: string | null = 'st-123',
  redirectUri = REDIRECT_URI,
) {
  const response = await get(path);
  expect(response.status).toBe(302);
  expect(response.headers.get('cache-control')).toBe('no-store');
  const location = new URL(response.location!);
  expect(location.origin + location.pathname).toBe(new URL(redirectUri).origin + new URL(redirectUri).pathname);
  expect(location.hash).toBe('');
  expect(location.searchParams.get('error')).toBe(error);
  const description = location.searchParams.get('error_description');
  expect(description).toMatch(DESCRIPTION_CHARSET);
  expect(location.searchParams.getAll('state')).toEqual(state === null ? [] : [state]);
  expect(location.searchParams.get('iss')).toBe(service.issuer);
  expect(location.searchParams.get('code')).toBeNull();
  return { location, description: description! };
}

describe('GET /oauth/authorize: untrusted client or redirect URI → error page, never a redirect', () => {
  it('refuses a missing client_id', async () => {
    await expectErrorPage(valid({ client_id: undefined }), /client_id is missing/);
    await expectErrorPage(valid({ client_id: '' }), /client_id is missing/);
  });

  it('refuses an unknown client_id, even when everything else is wrong too', async () => {
    await expectErrorPage(valid({ client_id: 'no-such-client' }), /not registered/);
    await expectErrorPage(
      authorizePath(client, { client_id: 'no-such-client', response_type: 'token', code_challenge: undefined }),
      /not registered/,
    );
  });

  it('refuses a client that is not a login client', async () => {
    const { client: api } = await service.core.registration.createApiClient({ name: 'API only', scope: 'messaging' });
    await expectErrorPage(valid({ client_id: api.clientId }), /not registered/);
  });

  it('refuses a disabled client; enabled again, serves it at once', async () => {
    // Never fetched before, so the in-process client cache cannot hide the change.
    const fresh = await createLoginClient(service);
    await service.core.store.setClientDisabled(fresh.clientId, true);
    await expectErrorPage(authorizePath(fresh, { code_challenge: challenge }), /not registered/);
    // The cached disabled record is read again before refusing (disabled means disabled, enabled means enabled).
    await service.core.store.setClientDisabled(fresh.clientId, false);
    expect((await get(authorizePath(fresh, { code_challenge: challenge }))).status).not.toBe(400);
  });

  it('refuses a missing redirect_uri', async () => {
    await expectErrorPage(valid({ redirect_uri: undefined }), /redirect_uri is missing/);
    await expectErrorPage(valid({ redirect_uri: '' }), /redirect_uri is missing/);
  });

  it.each([
    ['trailing slash', `${REDIRECT_URI}/`],
    ['upper-case host', 'https://CLIENT.example/callback'],
    ['upper-case path', 'https://client.example/Callback'],
    ['extra query', `${REDIRECT_URI}?next=/admin`],
    ['empty query', `${REDIRECT_URI}?`],
    ['fragment', `${REDIRECT_URI}#x`],
    ['http instead of https', 'http://client.example/callback'],
    ['explicit default port', 'https://client.example:443/callback'],
    ['other port', 'https://client.example:8443/callback'],
    ['percent-encoded path', 'https://client.example/%63allback'],
    ['dot segments', 'https://client.example/x/../callback'],
    ['user info', 'https://client.example@evil.example/callback'],
    ['other host with the registered one as prefix', 'https://client.example.evil.example/callback'],
    ['registered query re-encoded', 'https://client.example/cb?tenant=a+b'],
    ['registered query dropped', 'https://client.example/cb'],
    ['not a URL', 'callback'],
  ])('refuses a redirect_uri that does not match exactly (%s)', async (_name, redirectUri) => {
    await expectErrorPage(valid({ redirect_uri: redirectUri }), /does not match/);
  });

  it('checks the redirect URI before anything else: a bad one with other errors is still a page', async () => {
    await expectErrorPage(
      valid({ redirect_uri: 'https://evil.example/callback', response_type: undefined, scope: undefined }),
      /does not match/,
    );
    await expectErrorPage(
      withExtra(valid({ redirect_uri: 'https://evil.example/callback' }), [['request_uri', 'https://evil.example/r']]),
      /does not match/,
    );
  });

  it('refuses a repeated client_id or redirect_uri, even with the same value twice', async () => {
    await expectErrorPage(withExtra(valid(), [['client_id', client.clientId]]), /client_id must not be repeated/);
    await expectErrorPage(withExtra(valid(), [['client_id', 'other']]), /client_id must not be repeated/);
    await expectErrorPage(withExtra(valid(), [['redirect_uri', REDIRECT_URI]]), /redirect_uri must not be repeated/);
    await expectErrorPage(
      withExtra(valid(), [['redirect_uri', 'https://evil.example/callback']]),
      /redirect_uri must not be repeated/,
    );
  });

  it('refuses an oversized client_id or redirect_uri with a page, not a 500', async () => {
    await expectErrorPage(valid({ client_id: 'x'.repeat(5000) }));
    await expectErrorPage(valid({ redirect_uri: `${REDIRECT_URI}?${'x'.repeat(5000)}` }));
  });
});

describe('GET /oauth/authorize: other errors → 302 to the client with error, state and iss', () => {
  it.each<[string, Record<string, string | undefined>, string]>([
    ['missing response_type', { response_type: undefined }, 'invalid_request'],
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
    ['response_type=code id_token', { response_type: 'code id_token' }, 'unsupported_response_type'],
    ['response_type=CODE', { response_type: 'CODE' }, 'unsupported_response_type'],
    ['missing scope', { scope: undefined }, 'invalid_request'],
    ['empty scope', { scope: '' }, 'invalid_request'],
    ['scope of another client kind', { scope: 'openid messaging' }, 'invalid_scope'],
    ['unknown scope', { scope: 'openid phone' }, 'invalid_scope'],
    ['offline_access the client did not register', { scope: 'openid offline_access' }, 'invalid_scope'],
    ['malformed scope', { scope: 'openid "profile"' }, 'invalid_scope'],
    ['missing code_challenge', { code_challenge: undefined }, 'invalid_request'],
    ['missing code_challenge_method', { code_challenge_method: undefined }, 'invalid_request'],
    ['code_challenge_method=plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['code_challenge_method=s256 (wrong case)', { code_challenge_method: 's256' }, 'invalid_request'],
    ['code_challenge too short', { code_challenge: challenge.slice(0, 42) }, 'invalid_request'],
    ['code_challenge too long', { code_challenge: `${challenge}A` }, 'invalid_request'],
    ['code_challenge padded', { code_challenge: `${challenge.slice(0, 42)}=` }, 'invalid_request'],
    [
      'code_challenge in base64 (not url) alphabet',
      { code_challenge: `${challenge.slice(0, 41)}+/` },
      'invalid_request',
    ],
    ['code_challenge that is a plain verifier', { code_challenge: 'a'.repeat(64) }, 'invalid_request'],
    ['response_mode=fragment', { response_mode: 'fragment' }, 'invalid_request'],
    ['response_mode=form_post', { response_mode: 'form_post' }, 'invalid_request'],
    ['request object', { request: 'eyJhbGciOiJub25lIn0.e30.' }, 'request_not_supported'],
    ['request_uri', { request_uri: 'https://client.example/request.jwt' }, 'request_uri_not_supported'],
    ['unsupported prompt', { prompt: 'select_account' }, 'invalid_request'],
    ['prompt=none with login', { prompt: 'none login' }, 'invalid_request'],
    ['prompt=none with consent', { prompt: 'consent none' }, 'invalid_request'],
    ['negative max_age', { max_age: '-1' }, 'invalid_request'],
    ['non-numeric max_age', { max_age: 'soon' }, 'invalid_request'],
    ['fractional max_age', { max_age: '1.5' }, 'invalid_request'],
    ['exponent max_age', { max_age: '1e3' }, 'invalid_request'],
    ['huge max_age', { max_age: '99999999999999999999' }, 'invalid_request'],
    ['oversized nonce', { nonce: 'n'.repeat(600) }, 'invalid_request'],
  ])('%s', async (_name, params, error) => {
    await expectRedirectError(valid(params), error);
  });

  it('accepts the same request once it is fixed (so the cases above fail for their stated reason)', async () => {
    const response = await get(valid({ response_mode: 'query', max_age: '300', prompt: 'login' }));
    expect(response.status).toBe(302);
    expect(response.location).toMatch(/^\/login\?request=[A-Za-z0-9_-]{43}$/);
  });

  it('echoes state exactly, including characters that need encoding', async () => {
    const odd = 'a b+c&d=e/f?g#h%20i%zz ü € 😀 <x> "q" \'s\' \\ ;,:@!$*()[]{}|^`~';
    await expectRedirectError(valid({ state: odd, response_type: 'token' }), 'unsupported_response_type', odd);
    const long = 's'.repeat(2048);
    await expectRedirectError(valid({ state: long, scope: undefined }), 'invalid_request', long);
  });

  it('sends no state when none was sent', async () => {
    await expectRedirectError(valid({ state: undefined, response_type: 'token' }), 'unsupported_response_type', null);
  });

  it('keeps the registered query of the redirect URI and appends to it', async () => {
    const { location } = await expectRedirectError(
      valid({ redirect_uri: QUERY_REDIRECT_URI, response_type: 'token' }),
      'unsupported_response_type',
      'st-123',
      QUERY_REDIRECT_URI,
    );
    expect(location.searchParams.get('tenant')).toBe('a b');
  });

  it.each<[string, Array<[string, string]>, string | null]>([
    ['scope', [['scope', 'openid']], 'st-123'],
    ['response_type', [['response_type', 'code']], 'st-123'],
    ['code_challenge', [['code_challenge', challenge]], 'st-123'],
    ['code_challenge_method', [['code_challenge_method', 'S256']], 'st-123'],
    [
      'nonce',
      [
        ['nonce', 'a'],
        ['nonce', 'b'],
      ],
      'st-123',
    ],
    [
      'prompt',
      [
        ['prompt', 'login'],
        ['prompt', 'consent'],
      ],
      'st-123',
    ],
    [
      'max_age',
      [
        ['max_age', '1'],
        ['max_age', '2'],
      ],
      'st-123',
    ],
    // Two states: neither can be "the" value to echo.
    ['state', [['state', 'other']], null],
  ])('refuses a repeated %s with invalid_request', async (_name, extra, state) => {
    const { description } = await expectRedirectError(withExtra(valid(), extra), 'invalid_request', state);
    expect(description).toMatch(/must not be repeated/);
  });

  it('refuses an oversized state (> 2048) or parameter (> 4096) with invalid_request, never a 500', async () => {
    const state = 's'.repeat(2049);
    const { description } = await expectRedirectError(valid({ state }), 'invalid_request', state);
    expect(description).toMatch(/state/);
    // Beyond the per-parameter limit the state itself is refused and cannot be echoed.
    await expectRedirectError(valid({ state: 's'.repeat(4097) }), 'invalid_request', null);
    await expectRedirectError(valid({ nonce: 'n'.repeat(4097) }), 'invalid_request');
    await expectRedirectError(valid({ code_challenge: 'c'.repeat(5000) }), 'invalid_request');
    await expectRedirectError(valid({ scope: `openid ${'p'.repeat(5000)}` }), 'invalid_request');
  });

  it('does not reflect attacker-chosen text into error_description (clients show it to their users)', async () => {
    const lure = 'Your"account\\is_locked._Call_+1-555-0100_now_<b>é</b>';
    for (const params of [{ prompt: lure }, { scope: `openid ${lure.replace(/["\\é]/g, '')}` }]) {
      const { description } = await expectRedirectError(
        valid(params),
        params.prompt ? 'invalid_request' : 'invalid_scope',
      );
      expect(description).not.toContain('Call_');
    }
  });
});

describe('prompt and max_age', () => {
  let login: { email: string; password: string };
  let signedIn: Browser;
  let consentClient: Client;
  const browser = () => signedIn;

  beforeAll(async () => {
    login = await createUser(service);
    consentClient = await createLoginClient(service);
    signedIn = new Browser(service.issuer);
    // Signs in and remembers consent for `consentClient`.
    const { code, verifier } = await obtainCode(service, consentClient, login, {}, signedIn);
    expect((await exchange(service, consentClient, code, verifier)).status).toBe(200);
  });

  it('prompt=none without a session → login_required, and nothing is parked', async () => {
    const { location } = await expectRedirectError(valid({ prompt: 'none' }), 'login_required');
    expect(location.searchParams.get('error_description')).toBeTruthy();
  });

  it('prompt=none signed in without consent → consent_required', async () => {
    const response = await browser().request(authorizePath(client, { code_challenge: challenge, prompt: 'none' }));
    expect(response.status).toBe(302);
    const location = new URL(response.location!);
    expect(location.origin + location.pathname).toBe(REDIRECT_URI);
    expect(location.searchParams.get('error')).toBe('consent_required');
    expect(location.searchParams.get('state')).toBe('st-123');
    expect(location.searchParams.get('iss')).toBe(service.issuer);
    expect(location.searchParams.get('code')).toBeNull();
  });

  it('prompt=none signed in with consent → a code that works', async () => {
    const pkce = pkcePair();
    const response = await browser().request(
      authorizePath(consentClient, { code_challenge: pkce.challenge, prompt: 'none' }),
    );
    expect(response.status).toBe(302);
    const location = new URL(response.location!);
    expect(location.searchParams.get('error')).toBeNull();
    expect(location.searchParams.get('state')).toBe('st-123');
    expect(location.searchParams.get('iss')).toBe(service.issuer);
    const token = await exchange(service, consentClient, location.searchParams.get('code')!, pkce.verifier);
    expect(token.status).toBe(200);
  });

  it('prompt=login shows the sign-in page despite a session; signing in then finishes the flow', async () => {
    const pkce = pkcePair();
    const start = await browser().request(
      authorizePath(consentClient, { code_challenge: pkce.challenge, prompt: 'login' }),
    );
    expect(start.status).toBe(302);
    expect(start.location).toMatch(/^\/login\?request=/);
    const page = await browser().request(start.location!);
    expect(page.status).toBe(200);
    const done = await browser().request('/login', {
      form: {
        request: Browser.field(page.body, 'request'),
        csrf: Browser.field(page.body, 'csrf'),
        identifier: login.email,
        password: login.password,
      },
    });
    expect(done.status).toBe(303);
    const location = new URL(done.location!);
    expect(location.origin + location.pathname).toBe(REDIRECT_URI);
    expect((await exchange(service, consentClient, location.searchParams.get('code')!, pkce.verifier)).status).toBe(
      200,
    );
  });

  it('prompt=consent shows the consent page despite remembered consent', async () => {
    const pkce = pkcePair();
    const start = await browser().request(
      authorizePath(consentClient, { code_challenge: pkce.challenge, prompt: 'consent' }),
    );
    expect(start.status).toBe(302);
    expect(start.location).toMatch(/^\/consent\?request=/);
    const page = await browser().request(start.location!);
    expect(page.status).toBe(200);
    expect(page.body).toContain('>Allow</button>');
    const allowed = await browser().request('/consent', {
      form: { request: Browser.field(page.body, 'request'), csrf: Browser.field(page.body, 'csrf'), decision: 'allow' },
    });
    expect(allowed.status).toBe(303);
    const location = new URL(allowed.location!);
    expect((await exchange(service, consentClient, location.searchParams.get('code')!, pkce.verifier)).status).toBe(
      200,
    );
  });

  it('max_age=0 after a sign-in forces a new sign-in, which then completes (no sign-in loop)', async () => {
    service.clock.advance(1000);
    const pkce = pkcePair();
    const start = await browser().request(
      authorizePath(consentClient, { code_challenge: pkce.challenge, max_age: '0' }),
    );
    expect(start.status).toBe(302);
    expect(start.location).toMatch(/^\/login\?request=/);
    const page = await browser().request(start.location!);
    const done = await browser().request('/login', {
      form: {
        request: Browser.field(page.body, 'request'),
        csrf: Browser.field(page.body, 'csrf'),
        identifier: login.email,
        password: login.password,
      },
    });
    expect(done.status).toBe(303);
    const location = new URL(done.location!, service.issuer);
    expect(location.origin + location.pathname).toBe(REDIRECT_URI);
    expect((await exchange(service, consentClient, location.searchParams.get('code')!, pkce.verifier)).status).toBe(
      200,
    );
  });

  it('max_age honours the age of the sign-in: fresh enough → code, too old → login_required with prompt=none', async () => {
    const fresh = await browser().request(
      authorizePath(consentClient, { code_challenge: challenge, max_age: '60', prompt: 'none' }),
    );
    expect(new URL(fresh.location!).searchParams.get('code')).toBeTruthy();
    service.clock.advance(61_000);
    const stale = await browser().request(
      authorizePath(consentClient, { code_challenge: challenge, max_age: '60', prompt: 'none' }),
    );
    const location = new URL(stale.location!);
    expect(location.searchParams.get('error')).toBe('login_required');
    expect(location.searchParams.get('state')).toBe('st-123');
    // The session itself is still good without max_age.
    const still = await browser().request(authorizePath(consentClient, { code_challenge: challenge, prompt: 'none' }));
    expect(new URL(still.location!).searchParams.get('code')).toBeTruthy();
  });
});
