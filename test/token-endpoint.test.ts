import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Client } from '../core/kernel/model';
import { Browser, pkcePair } from './support/browser';
import {
  createLoginClient,
  createUser,
  exchange,
  obtainCode,
  postForm,
  REDIRECT_URI,
  send,
  verifyWithJwks,
  type Reply,
} from './support/flow';
import { startTestService, type TestService } from './support/service';

// POST /oauth/token and POST /oauth/revoke over real HTTP: RFC 6749 §4.1.3, §4.4, §5.2, §6,
// RFC 7636, RFC 7009, and the choices of the design brief (section 4).

let service: TestService;
let tokenUrl: string;
let revokeUrl: string;
/** Login client A, with a second registered redirect URI (to prove the exact match). */
let clientA: Client;
/** Login client B, registered with the same redirect URI as A. */
let clientB: Client;
let login: { email: string; password: string; user: { svcnumId: string } };
/** Signed in once; consent is remembered per client, so every further code is a quick round trip. */
let browser: Browser;
let api: { client: Client; clientSecret: string };

const OTHER_REDIRECT_URI = 'https://client.example/other-callback';

beforeAll(async () => {
  service = await startTestService();
  tokenUrl = `${service.issuer}/oauth/token`;
  revokeUrl = `${service.issuer}/oauth/revoke`;
  clientA = await createLoginClient(service, 'openid profile email', [REDIRECT_URI, OTHER_REDIRECT_URI]);
  clientB = await createLoginClient(service, 'openid profile email', [REDIRECT_URI]);
  login = await createUser(service);
  browser = new Browser(service.issuer);
  api = (await service.core.registration.createApiClient({ name: 'Messaging partner', scope: 'messaging poll' })) as {
    client: Client;
    clientSecret: string;
  };
});
afterAll(() => service?.close());

/** RFC 6749 §5.2 error: exact status and code, JSON `{error, error_description}`, never cached. */
function expectOAuthError(reply: Reply, status: number, error: string) {
  expect({ status: reply.status, error: reply.json.error }).toEqual({ status, error });
  expect(Object.keys(reply.json).sort()).toEqual(['error', 'error_description']);
  expect(typeof reply.json.error_description).toBe('string');
  // §5.2: error_description is limited to %x20-21 / %x23-5B / %x5D-7E.
  expect(reply.json.error_description).toMatch(/^[\x20\x21\x23-\x5B\x5D-\x7E]+$/);
  expect(reply.headers.get('cache-control')).toBe('no-store');
  expect(reply.headers.get('content-type')).toBe('application/json');
}

/** RFC 6749 §2.3.1: id and secret are form-urlencoded, then joined by a colon and base64'd. */
const formEncode = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${formEncode(id)}:${formEncode(secret)}`, 'utf8').toString('base64')}`;

const codeFor = (client: Client, params: Record<string, string | undefined> = {}) =>
  obtainCode(service, client, login, params, browser);
const challengeOf = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');

const refresh = (refreshToken: string, client: Client = clientA, extra: Record<string, string> = {}) =>
  postForm(tokenUrl, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: client.clientId,
    ...extra,
  });

async function tokensFor(client: Client = clientA) {
  const { code, verifier } = await codeFor(client);
  const tokens = await exchange(service, client, code, verifier);
  expect(tokens.status).toBe(200);
  return { access: String(tokens.json.access_token), refresh: String(tokens.json.refresh_token) };
}

const codeForm = (client: Client, code: string, verifier: string, extra: Record<string, string> = {}) => ({
  grant_type: 'authorization_code',
  code,
  redirect_uri: REDIRECT_URI,
  client_id: client.clientId,
  code_verifier: verifier,
  ...extra,
});

describe('grant_type=authorization_code', () => {
  it('exchanges a code for access, refresh and ID tokens, never cached', async () => {
    const { code, verifier } = await codeFor(clientA, { nonce: 'n-1' });
    const reply = await exchange(service, clientA, code, verifier);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.headers.get('pragma')).toBe('no-cache');
    expect(reply.headers.get('content-type')).toBe('application/json');
    expect(Object.keys(reply.json).sort()).toEqual([
      'access_token',
      'expires_in',
      'id_token',
      'refresh_token',
      'scope',
      'token_type',
    ]);
    expect(reply.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'openid profile email' });
    expect(reply.json.refresh_token).toMatch(/^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
    const access = await verifyWithJwks(service, String(reply.json.access_token), {
      audience: service.issuer,
      typ: 'at+jwt',
    });
    expect(access.payload).toMatchObject({
      sub: login.user.svcnumId,
      client_id: clientA.clientId,
      scope: 'openid profile email',
    });
    const id = await verifyWithJwks(service, String(reply.json.id_token), { audience: clientA.clientId, typ: 'JWT' });
    expect(id.payload).toMatchObject({ sub: login.user.svcnumId, azp: clientA.clientId, nonce: 'n-1' });
  });

  it('refuses a replayed code with invalid_grant and revokes the refresh token of the first exchange', async () => {
    const { code, verifier } = await codeFor(clientA);
    const first = await exchange(service, clientA, code, verifier);
    expect(first.status).toBe(200);
    const refreshToken = String(first.json.refresh_token);
    expect((await refresh(refreshToken)).status).toBe(200);

    const replay = await exchange(service, clientA, code, verifier);
    expectOAuthError(replay, 400, 'invalid_grant');
    expectOAuthError(await refresh(refreshToken), 400, 'invalid_grant');
    // and a third attempt changes nothing
    expectOAuthError(await exchange(service, clientA, code, verifier), 400, 'invalid_grant');
  });

  it('refuses a wrong code_verifier with invalid_grant, and the code stays usable with the right one', async () => {
    const { code, verifier } = await codeFor(clientA);
    const wrong = await exchange(service, clientA, code, pkcePair().verifier);
    expectOAuthError(wrong, 400, 'invalid_grant');
    // the challenge itself is not a verifier
    expectOAuthError(await exchange(service, clientA, code, challengeOf(verifier)), 400, 'invalid_grant');
    const right = await exchange(service, clientA, code, verifier);
    expect(right.status).toBe(200);
  });

  it('refuses a code_verifier of 42 or 129 characters or with characters outside [A-Za-z0-9-._~] with invalid_request', async () => {
    const { code, verifier } = await codeFor(clientA);
    const malformed = [
      'a'.repeat(42),
      'a'.repeat(129),
      `${'a'.repeat(42)}+`,
      `${'a'.repeat(42)}/`,
      `${'a'.repeat(42)}=`,
      `${'a'.repeat(21)} ${'a'.repeat(21)}`,
      `${'a'.repeat(42)}é`,
      `${'a'.repeat(42)}\u0000`,
      `${verifier}\n`,
    ];
    for (const bad of malformed) expectOAuthError(await exchange(service, clientA, code, bad), 400, 'invalid_request');
    // None of that used the code up.
    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it('accepts verifiers of exactly 43 and 128 characters using every allowed character', async () => {
    const v43 = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123-._';
    const v128 = `${'~._-0123456789'.repeat(9)}ABC`.slice(0, 128);
    expect([v43.length, v128.length]).toEqual([43, 128]);
    for (const verifier of [v43, v128]) {
      const { code } = await codeFor(clientA, { code_challenge: challengeOf(verifier) });
      expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
    }
  });

  it('refuses a redirect_uri that differs from the one in the authorization request, even another registered one', async () => {
    const { code, verifier } = await codeFor(clientA);
    for (const redirectUri of [
      OTHER_REDIRECT_URI,
      `${REDIRECT_URI}/`,
      `${REDIRECT_URI}?x=1`,
      REDIRECT_URI.toUpperCase(),
      'https://evil.example/callback',
    ]) {
      expectOAuthError(
        await postForm(tokenUrl, codeForm(clientA, code, verifier, { redirect_uri: redirectUri })),
        400,
        'invalid_grant',
      );
    }
    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it("refuses client A's code presented by client B (same redirect URI, right verifier) with invalid_grant", async () => {
    const { code, verifier } = await codeFor(clientA);
    expectOAuthError(await exchange(service, clientB, code, verifier), 400, 'invalid_grant');
    // B's attempt did not burn A's code
    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it('refuses unknown and malformed codes with invalid_grant', async () => {
    const { verifier } = pkcePair();
    for (const code of [
      randomBytes(32).toString('base64url'),
      'abc',
      '../../etc/passwd',
      'x'.repeat(129),
      '%00',
      'code with spaces',
    ]) {
      expectOAuthError(await exchange(service, clientA, code, verifier), 400, 'invalid_grant');
    }
  });

  it('refuses a request missing (or with an empty) code, redirect_uri or code_verifier with invalid_request; missing client_id is invalid_client', async () => {
    const { code, verifier } = await codeFor(clientA);
    const full = codeForm(clientA, code, verifier);
    for (const field of ['code', 'redirect_uri', 'code_verifier'] as const) {
      const { [field]: _omitted, ...without } = full;
      expectOAuthError(await postForm(tokenUrl, without), 400, 'invalid_request');
      expectOAuthError(await postForm(tokenUrl, { ...full, [field]: '' }), 400, 'invalid_request');
    }
    // RFC 6749 §5.2: no client authentication at all is invalid_client (401); no Basic was tried, so no challenge.
    const { client_id: _id, ...anonymous } = full;
    const noClient = await postForm(tokenUrl, anonymous);
    expectOAuthError(noClient, 401, 'invalid_client');
    expect(noClient.headers.get('www-authenticate')).toBeNull();
    const { grant_type: _grant, ...noGrantType } = full;
    expectOAuthError(await postForm(tokenUrl, noGrantType), 400, 'invalid_request');
    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it('refuses any repeated parameter with invalid_request (RFC 6749 §3.2) without using the code up', async () => {
    const { code, verifier } = await codeFor(clientA);
    const full = codeForm(clientA, code, verifier);
    for (const field of Object.keys(full) as Array<keyof typeof full>) {
      const body = new URLSearchParams(full);
      body.append(field, full[field]); // the very same value twice
      expectOAuthError(
        await send(tokenUrl, {
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: body.toString(),
        }),
        400,
        'invalid_request',
      );
    }
    const twoCodes = new URLSearchParams(full);
    twoCodes.append('code', randomBytes(32).toString('base64url'));
    expectOAuthError(
      await send(tokenUrl, {
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: twoCodes.toString(),
      }),
      400,
      'invalid_request',
    );
    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it('answers a login client that sends a client_secret or Basic credentials with 401 invalid_client', async () => {
    const { code, verifier } = await codeFor(clientA);
    const posted = await postForm(tokenUrl, codeForm(clientA, code, verifier, { client_secret: 'a'.repeat(43) }));
    expectOAuthError(posted, 401, 'invalid_client');

    const { client_id: _id, ...form } = codeForm(clientA, code, verifier);
    const viaBasic = await postForm(tokenUrl, form, { Authorization: basic(clientA.clientId, 'a'.repeat(43)) });
    expectOAuthError(viaBasic, 401, 'invalid_client');
    expect(viaBasic.headers.get('www-authenticate')).toMatch(/^Basic realm="[^"]+"/);

    // Basic with an empty password is still a secret being presented.
    const emptySecret = await postForm(tokenUrl, form, { Authorization: basic(clientA.clientId, '') });
    expect(emptySecret.status).toBe(401);

    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it('answers an External API client that tries authorization_code with unauthorized_client', async () => {
    const { code, verifier } = await codeFor(clientA);
    const form = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier };
    expectOAuthError(
      await postForm(tokenUrl, form, { Authorization: basic(api.client.clientId, api.clientSecret) }),
      400,
      'unauthorized_client',
    );
    expectOAuthError(
      await postForm(tokenUrl, { ...form, client_id: api.client.clientId, client_secret: api.clientSecret }),
      400,
      'unauthorized_client',
    );
    // without its secret the API client is not even authenticated
    expectOAuthError(await postForm(tokenUrl, { ...form, client_id: api.client.clientId }), 401, 'invalid_client');
    expect((await exchange(service, clientA, code, verifier)).status).toBe(200);
  });

  it("20 concurrent redemptions of one code: exactly one 200, nineteen invalid_grant, and the replays revoke the winner's refresh token", async () => {
    // One conditional update decides the winner. The nineteen losers are replays, and the design
    // (section 4) revokes the grant of a replayed code: so the winner's refresh token must end up
    // revoked too (its access token, a self-contained JWT, lives out its hour). Were a loser's
    // revocation ever to land before the winner wrote its grant, the tombstone would win and
    // nobody would get tokens: also safe, but not observed (the winner is a round trip ahead).
    const { code, verifier } = await codeFor(clientA);
    const replies = await Promise.all(Array.from({ length: 20 }, () => exchange(service, clientA, code, verifier)));
    expect(replies.map((reply) => reply.status).sort()).toEqual([200, ...Array<number>(19).fill(400)]);
    const winner = replies.find((reply) => reply.status === 200)!;
    for (const loser of replies.filter((reply) => reply !== winner)) expectOAuthError(loser, 400, 'invalid_grant');
    expect(winner.json.refresh_token).toMatch(/^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
    expectOAuthError(await refresh(String(winner.json.refresh_token)), 400, 'invalid_grant');
    // the access token it got is genuine all the same
    await verifyWithJwks(service, String(winner.json.access_token), { audience: service.issuer, typ: 'at+jwt' });
    // Afterwards the code is dead for everybody.
    expectOAuthError(await exchange(service, clientA, code, verifier), 400, 'invalid_grant');
  });
});

describe('grant_type=refresh_token', () => {
  it("refuses another client's refresh token with invalid_grant, and the token still works for its own client", async () => {
    const { refresh: token } = await tokensFor(clientA);
    expectOAuthError(await refresh(token, clientB), 400, 'invalid_grant');
    expect((await refresh(token, clientA)).status).toBe(200);
  });

  it('refuses malformed and forged refresh tokens with invalid_grant', async () => {
    const { refresh: token } = await tokensFor(clientA);
    const [grantId, secret] = token.split('.') as [string, string];
    const forged = [
      'garbage',
      'a.b',
      `${grantId}.${randomBytes(32).toString('base64url')}`, // a real grant id, a guessed secret
      `${randomBytes(16).toString('base64url')}.${secret}`, // the real secret under another id
      `${grantId}.${secret}.x`,
      `${grantId}${secret}`,
      ` ${token}`,
      `${token}=`,
      token.toUpperCase(),
      'x'.repeat(4096),
    ];
    for (const value of forged) expectOAuthError(await refresh(value), 400, 'invalid_grant');
    expectOAuthError(await refresh('x'.repeat(4097)), 400, 'invalid_request');
    expect((await refresh(token)).status).toBe(200);
  });

  it('refuses a refresh token revoked through POST /oauth/revoke with invalid_grant', async () => {
    const { refresh: token } = await tokensFor(clientA);
    const revoked = await postForm(revokeUrl, { token, client_id: clientA.clientId });
    expect(revoked.status).toBe(200);
    expectOAuthError(await refresh(token), 400, 'invalid_grant');
  });

  it('refuses a refresh without client_id with invalid_client and without refresh_token with invalid_request', async () => {
    const { refresh: token } = await tokensFor(clientA);
    expectOAuthError(
      await postForm(tokenUrl, { grant_type: 'refresh_token', refresh_token: token }),
      401,
      'invalid_client',
    );
    expectOAuthError(
      await postForm(tokenUrl, { grant_type: 'refresh_token', client_id: clientA.clientId }),
      400,
      'invalid_request',
    );
    expect((await refresh(token)).status).toBe(200);
  });

  it('refuses the refresh_token grant to an External API client with unauthorized_client', async () => {
    const { refresh: token } = await tokensFor(clientA);
    const reply = await postForm(
      tokenUrl,
      { grant_type: 'refresh_token', refresh_token: token },
      { Authorization: basic(api.client.clientId, api.clientSecret) },
    );
    expectOAuthError(reply, 400, 'unauthorized_client');
  });

  it('refuses a scope wider than the grant with invalid_scope, and a malformed scope too', async () => {
    const { code, verifier } = await codeFor(clientA, { scope: 'openid profile' });
    const tokens = await exchange(service, clientA, code, verifier);
    const token = String(tokens.json.refresh_token);
    expectOAuthError(await refresh(token, clientA, { scope: 'openid profile email' }), 400, 'invalid_scope');
    expectOAuthError(await refresh(token, clientA, { scope: 'openid "profile"' }), 400, 'invalid_scope');
    const narrowed = await refresh(token, clientA, { scope: 'profile' });
    expect(narrowed.json).toMatchObject({ scope: 'profile', refresh_token: null });
  });

  it('answers "refresh_token": null by default (the spec), and leaves the member out for a client registered with omit', async () => {
    const omit = (
      await service.core.registration.createLoginClient({
        name: 'Omit app',
        scope: 'openid profile email',
        redirectUris: [REDIRECT_URI],
        refreshResponse: 'omit',
      })
    ).client;
    expect(omit.refreshResponse).toBe('omit');
    expect(clientA.refreshResponse).toBe('null');
    // A record stored before the option existed has no attribute: it gets the default.
    const { refreshResponse: _, ...older } = clientB;
    const legacy: Client = { ...older, clientId: randomBytes(16).toString('base64url') };
    await service.core.store.createClient(legacy);
    for (const [client, member] of [
      [clientA, ['refresh_token']],
      [legacy, ['refresh_token']],
      [omit, []],
    ] as const) {
      const { refresh: token } = await tokensFor(client);
      // The same refresh token keeps working either way (no rotation).
      for (let use = 0; use < 2; use++) {
        const reply = await refresh(token, client);
        expect(reply.status).toBe(200);
        expect(Object.keys(reply.json).sort()).toEqual([
          'access_token',
          'expires_in',
          ...member,
          'scope',
          'token_type',
        ]);
        if (member.length > 0) expect(reply.text).toContain('"refresh_token":null');
      }
    }
    await expect(
      service.core.registration.createLoginClient({
        name: 'Bad',
        scope: 'openid',
        redirectUris: [REDIRECT_URI],
        refreshResponse: 'absent',
      }),
    ).rejects.toThrow('refresh response must be null or omit');
  });
});

describe('grant_type=client_credentials', () => {
  it('authenticates with client_secret_basic (credentials form-urlencoded before base64, RFC 6749 §2.3.1)', async () => {
    const reply = await postForm(
      tokenUrl,
      { grant_type: 'client_credentials' },
      { Authorization: basic(api.client.clientId, api.clientSecret) },
    );
    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(Object.keys(reply.json).sort()).toEqual(['access_token', 'expires_in', 'scope', 'token_type']);
    expect(reply.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'messaging poll' });

    // A client that percent-encodes every character is still correct: the server must decode.
    const everyCharEncoded = (value: string) =>
      [...value].map((char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');
    const header = `Basic ${Buffer.from(`${everyCharEncoded(api.client.clientId)}:${everyCharEncoded(api.clientSecret)}`).toString('base64')}`;
    expect((await postForm(tokenUrl, { grant_type: 'client_credentials' }, { Authorization: header })).status).toBe(
      200,
    );
    // The scheme name is case-insensitive (RFC 9110 §11.1).
    const lower = basic(api.client.clientId, api.clientSecret).replace('Basic', 'basic');
    expect((await postForm(tokenUrl, { grant_type: 'client_credentials' }, { Authorization: lower })).status).toBe(200);
  });

  it('issues an RFC 9068 access token for the client itself: sub = client_id = the API client, typ at+jwt', async () => {
    const reply = await postForm(tokenUrl, {
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: api.clientSecret,
    });
    expect(reply.status).toBe(200);
    expect(reply.json.refresh_token).toBeUndefined();
    expect(reply.json.id_token).toBeUndefined();
    const verified = await verifyWithJwks(service, String(reply.json.access_token), {
      audience: service.issuer,
      typ: 'at+jwt',
    });
    expect(verified.protectedHeader).toMatchObject({ alg: 'EdDSA', typ: 'at+jwt' });
    expect(verified.payload).toMatchObject({
      iss: service.issuer,
      aud: service.issuer,
      sub: api.client.clientId,
      client_id: api.client.clientId,
      scope: 'messaging poll',
    });
    expect(verified.payload.exp! - verified.payload.iat!).toBe(3600);
    expect(verified.payload.jti).toBeTruthy();
    expect(verified.payload.auth_time).toBeUndefined();
  });

  it('refuses both authentication methods at once with invalid_request', async () => {
    const reply = await postForm(
      tokenUrl,
      { grant_type: 'client_credentials', client_id: api.client.clientId, client_secret: api.clientSecret },
      { Authorization: basic(api.client.clientId, api.clientSecret) },
    );
    expectOAuthError(reply, 400, 'invalid_request');
    // client_id in the body naming another client than the Basic header
    const mismatch = await postForm(
      tokenUrl,
      { grant_type: 'client_credentials', client_id: clientA.clientId },
      { Authorization: basic(api.client.clientId, api.clientSecret) },
    );
    expectOAuthError(mismatch, 400, 'invalid_request');
  });

  it('answers a wrong secret with 401 invalid_client, with a Basic challenge only when Basic was used', async () => {
    const wrongSecret = randomBytes(32).toString('base64url');
    const viaBasic = await postForm(
      tokenUrl,
      { grant_type: 'client_credentials' },
      { Authorization: basic(api.client.clientId, wrongSecret) },
    );
    expectOAuthError(viaBasic, 401, 'invalid_client');
    expect(viaBasic.headers.get('www-authenticate')).toMatch(/^Basic realm="[^"]+"/);

    const viaPost = await postForm(tokenUrl, {
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: wrongSecret,
    });
    expectOAuthError(viaPost, 401, 'invalid_client');
    expect(viaPost.headers.get('www-authenticate')).toBeNull();

    for (const secret of [
      api.clientSecret.slice(0, -1),
      `${api.clientSecret}x`,
      api.clientSecret.toUpperCase(),
      ' '.repeat(43),
      'é'.repeat(43),
    ]) {
      expectOAuthError(
        await postForm(tokenUrl, {
          grant_type: 'client_credentials',
          client_id: api.client.clientId,
          client_secret: secret,
        }),
        401,
        'invalid_client',
      );
    }
    // an API client that sends no secret at all
    expectOAuthError(
      await postForm(tokenUrl, { grant_type: 'client_credentials', client_id: api.client.clientId }),
      401,
      'invalid_client',
    );
    // an unknown client id
    expectOAuthError(
      await postForm(tokenUrl, {
        grant_type: 'client_credentials',
        client_id: 'no-such-client',
        client_secret: api.clientSecret,
      }),
      401,
      'invalid_client',
    );
  });

  it('answers malformed Basic headers with 401 invalid_client and a challenge, never a 500', async () => {
    const headers = [
      'Basic',
      'Basic !!!',
      `Basic ${Buffer.from('no-colon-here').toString('base64')}`,
      `Basic ${Buffer.from(`:${api.clientSecret}`).toString('base64')}`, // empty client id
      // bad percent-encoding
      `Basic ${Buffer.from(`${api.client.clientId}%ZZ:${api.clientSecret}`).toString('base64')}`,
      `Basic ${Buffer.from(`${'x'.repeat(300)}:${api.clientSecret}`).toString('base64')}`,
      `Bearer ${api.clientSecret}`,
      'Digest username="x"',
    ];
    for (const authorization of headers) {
      const reply = await postForm(tokenUrl, { grant_type: 'client_credentials' }, { Authorization: authorization });
      expectOAuthError(reply, 401, 'invalid_client');
      expect(reply.headers.get('www-authenticate')).toMatch(/^Basic /);
    }
  });

  it("narrows the scope on request and refuses scopes beyond the client's with invalid_scope", async () => {
    const auth = { Authorization: basic(api.client.clientId, api.clientSecret) };
    const narrowed = await postForm(tokenUrl, { grant_type: 'client_credentials', scope: 'poll' }, auth);
    expect(narrowed.status).toBe(200);
    expect(narrowed.json.scope).toBe('poll');
    const verified = await verifyWithJwks(service, String(narrowed.json.access_token), {
      audience: service.issuer,
      typ: 'at+jwt',
    });
    expect(verified.payload.scope).toBe('poll');

    for (const scope of ['messaging openid', 'admin', 'prov:numbers', 'poll\\', 'poll "x"']) {
      expectOAuthError(
        await postForm(tokenUrl, { grant_type: 'client_credentials', scope }, auth),
        400,
        'invalid_scope',
      );
    }
  });

  it('refuses client_credentials to a login client with unauthorized_client', async () => {
    expectOAuthError(
      await postForm(tokenUrl, { grant_type: 'client_credentials', client_id: clientA.clientId }),
      400,
      'unauthorized_client',
    );
  });

  it('refuses a disabled API client with 401 invalid_client', async () => {
    const disabled = await service.core.registration.createApiClient({
      name: 'Disabled partner',
      scope: 'messaging poll',
    });
    // Disabled before the first use: client records are cached in-process for 30 s.
    await service.core.store.setClientDisabled(disabled.client.clientId, true);
    const viaBasic = await postForm(
      tokenUrl,
      { grant_type: 'client_credentials' },
      { Authorization: basic(disabled.client.clientId, disabled.clientSecret!) },
    );
    expectOAuthError(viaBasic, 401, 'invalid_client');
    expect(viaBasic.headers.get('www-authenticate')).toMatch(/^Basic /);
    const viaPost = await postForm(tokenUrl, {
      grant_type: 'client_credentials',
      client_id: disabled.client.clientId,
      client_secret: disabled.clientSecret!,
    });
    expectOAuthError(viaPost, 401, 'invalid_client');
  });
});

describe('bad input at the token endpoint', () => {
  const form = { 'Content-Type': 'application/x-www-form-urlencoded' };

  it('answers unknown or unsupported grant types with unsupported_grant_type', async () => {
    for (const grantType of [
      'password',
      'implicit',
      'urn:ietf:params:oauth:grant-type:device_code',
      'AUTHORIZATION_CODE',
      'x'.repeat(1000),
    ]) {
      expectOAuthError(
        await postForm(tokenUrl, { grant_type: grantType, client_id: clientA.clientId }),
        400,
        'unsupported_grant_type',
      );
    }
    // Token exchange is supported (issue 10), for provisioning clients only: test/token-exchange-endpoint.test.ts.
    expectOAuthError(
      await postForm(tokenUrl, {
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        client_id: clientA.clientId,
      }),
      400,
      'unauthorized_client',
    );
  });

  it('does not mistake names of Object.prototype for grant types (constructor, toString, __proto__ …)', async () => {
    for (const grantType of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf', '__defineGetter__']) {
      for (const credentials of [
        { client_id: clientA.clientId },
        { client_id: api.client.clientId, client_secret: api.clientSecret },
      ] as Array<Record<string, string>>) {
        const reply = await postForm(tokenUrl, { grant_type: grantType, ...credentials });
        expectOAuthError(reply, 400, 'unsupported_grant_type');
      }
    }
  });

  it('never echoes characters RFC 6749 §5.2 forbids in error_description', async () => {
    for (const grantType of ['pass"word', 'back\\slash', 'ünïcödé', 'new\nline', '\u0000']) {
      expectOAuthError(await postForm(tokenUrl, { grant_type: grantType }), 400, 'unsupported_grant_type');
    }
  });

  it('answers a missing or empty grant_type with invalid_request', async () => {
    expectOAuthError(await postForm(tokenUrl, { client_id: clientA.clientId }), 400, 'invalid_request');
    expectOAuthError(await postForm(tokenUrl, { grant_type: '' }), 400, 'invalid_request');
    expectOAuthError(await send(tokenUrl, { headers: form }), 400, 'invalid_request');
    expectOAuthError(await send(tokenUrl), 400, 'invalid_request');
  });

  it('refuses bodies that are not application/x-www-form-urlencoded with invalid_request', async () => {
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: api.clientSecret,
    }).toString();
    const json = JSON.stringify({
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: api.clientSecret,
    });
    expectOAuthError(
      await send(tokenUrl, { headers: { 'Content-Type': 'application/json' }, body: json }),
      400,
      'invalid_request',
    );
    expectOAuthError(await send(tokenUrl, { headers: { 'Content-Type': 'text/plain' }, body }), 400, 'invalid_request');
    expectOAuthError(
      await send(tokenUrl, { headers: { 'Content-Type': 'multipart/form-data; boundary=x' }, body }),
      400,
      'invalid_request',
    );
    // no Content-Type at all
    expectOAuthError(await send(tokenUrl, { body: new TextEncoder().encode(body) }), 400, 'invalid_request');
    // The same body with the right media type (parameters and case allowed) works.
    expect(
      (await send(tokenUrl, { headers: { 'Content-Type': 'Application/X-WWW-Form-Urlencoded; charset=UTF-8' }, body }))
        .status,
    ).toBe(200);
  });

  it('refuses a body over 64 KiB with 400 invalid_request and one over 1 MiB with 413', async () => {
    const padding = (bytes: number) => `grant_type=client_credentials&pad=${'a'.repeat(bytes)}`;
    expectOAuthError(await send(tokenUrl, { headers: form, body: padding(64 * 1024) }), 400, 'invalid_request');
    const huge = await send(tokenUrl, { headers: form, body: padding(1024 * 1024 + 1) });
    expect(huge.status).toBe(413);
    expect(huge.json.error).toBe('invalid_request');
    expect(huge.headers.get('cache-control')).toBe('no-store');
    // a single parameter value longer than 4096 characters
    expectOAuthError(
      await postForm(tokenUrl, { grant_type: 'client_credentials', client_id: 'x'.repeat(5000) }),
      400,
      'invalid_request',
    );
  });

  it('answers GET and other methods with 405 and an Allow header', async () => {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const reply = await send(`${tokenUrl}?grant_type=client_credentials`, { method });
      expect(reply.status).toBe(405);
      expect(reply.headers.get('allow')).toBe('POST');
      expect(reply.headers.get('cache-control')).toBe('no-store');
      expect(reply.json.error).toBe('invalid_request');
    }
    const revoke = await send(revokeUrl, { method: 'GET' });
    expect(revoke.status).toBe(405);
    expect(revoke.headers.get('allow')).toBe('POST');
  });

  it('survives garbage percent-encoding, invalid UTF-8 and odd separators without a 500', async () => {
    const bodies: Array<[string, number, string]> = [
      ['grant_type=client_credentials&client_id=%ZZ&client_secret=%', 401, 'invalid_client'],
      ['grant_type=%E0%A4%A&client_id=x', 400, 'unsupported_grant_type'],
      ['grant_type=%FF%FE', 400, 'unsupported_grant_type'],
      ['grant_type=authorization_code&code=%ED%A0%80&client_id=' + '%C0%AF', 401, 'invalid_client'],
      ['%%%%&&&===', 400, 'invalid_request'],
      ['grant_type', 400, 'invalid_request'],
      ['=client_credentials', 400, 'invalid_request'],
      [
        `grant_type=client_credentials&client_id=${encodeURIComponent(api.client.clientId)}%00&client_secret=${api.clientSecret}`,
        401,
        'invalid_client',
      ],
      ['grant_type=client_credentials;client_id=x', 400, 'unsupported_grant_type'],
    ];
    for (const [body, status, error] of bodies)
      expectOAuthError(await send(tokenUrl, { headers: form, body }), status, error);
    // raw bytes that are not UTF-8 at all
    const raw = Buffer.concat([
      Buffer.from('grant_type=client_credentials&client_id='),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('&client_secret=x'),
    ]);
    expectOAuthError(await send(tokenUrl, { headers: form, body: new Uint8Array(raw) }), 401, 'invalid_client');
  });

  it('answers every error as JSON {error, error_description} with Cache-Control: no-store, never a 500', async () => {
    const requests: Array<Parameters<typeof send>[1]> = [
      { headers: form, body: 'grant_type=refresh_token&client_id=nobody&refresh_token=x' },
      { headers: form, body: 'grant_type=authorization_code' },
      { headers: { ...form, Authorization: `Basic ${'A'.repeat(10_000)}` }, body: 'grant_type=client_credentials' },
      { headers: { ...form, Authorization: basic('é', 'ü') }, body: 'grant_type=client_credentials' },
      {
        headers: form,
        body: `grant_type=client_credentials&client_id=${'é'.repeat(100)}&client_secret=${'x'.repeat(43)}`,
      },
      { headers: form, body: `grant_type=client_credentials&scope=${encodeURIComponent('\u0000')}` },
      { headers: form, body: `grant_type=refresh_token&refresh_token=a.b&client_id=${encodeURIComponent('😀')}` },
    ];
    for (const request of requests) {
      const reply = await send(tokenUrl, request);
      expect(reply.status, reply.text).toBeGreaterThanOrEqual(400);
      expect(reply.status, reply.text).toBeLessThan(500);
      expectOAuthError(reply, reply.status, String(reply.json.error));
    }
  });
});

describe('POST /oauth/revoke (RFC 7009)', () => {
  it('revokes a refresh token: 200 with an empty JSON body, and the token stops working', async () => {
    const { refresh: token } = await tokensFor(clientA);
    const reply = await postForm(revokeUrl, { token, token_type_hint: 'refresh_token', client_id: clientA.clientId });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({});
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expectOAuthError(await refresh(token), 400, 'invalid_grant');
    // revoking again is still a success
    expect((await postForm(revokeUrl, { token, client_id: clientA.clientId })).status).toBe(200);
  });

  it('ignores a wrong token_type_hint: a refresh token hinted as access_token is still revoked', async () => {
    const { refresh: token } = await tokensFor(clientA);
    expect(
      (await postForm(revokeUrl, { token, token_type_hint: 'access_token', client_id: clientA.clientId })).status,
    ).toBe(200);
    expectOAuthError(await refresh(token), 400, 'invalid_grant');
  });

  it('answers 200 for unknown or malformed tokens', async () => {
    for (const token of [
      `${randomBytes(16).toString('base64url')}.${randomBytes(32).toString('base64url')}`,
      'garbage',
      'a.b',
    ]) {
      const reply = await postForm(revokeUrl, { token, client_id: clientA.clientId });
      expect(reply.status).toBe(200);
      expect(reply.json).toEqual({});
    }
  });

  it("answers 200 for another client's token but leaves that token working", async () => {
    const { refresh: token } = await tokensFor(clientA);
    expect((await postForm(revokeUrl, { token, client_id: clientB.clientId })).status).toBe(200);
    const viaApi = await postForm(
      revokeUrl,
      { token },
      { Authorization: basic(api.client.clientId, api.clientSecret) },
    );
    expect(viaApi.status).toBe(200);
    expect((await refresh(token)).status).toBe(200);
  });

  it('refuses an access token with 400 unsupported_token_type', async () => {
    const { access } = await tokensFor(clientA);
    expectOAuthError(
      await postForm(revokeUrl, { token: access, client_id: clientA.clientId }),
      400,
      'unsupported_token_type',
    );
    expectOAuthError(
      await postForm(revokeUrl, { token: access, token_type_hint: 'access_token', client_id: clientA.clientId }),
      400,
      'unsupported_token_type',
    );
  });

  it('refuses a missing token with invalid_request and a missing or wrong client with 401 invalid_client', async () => {
    const { refresh: token } = await tokensFor(clientA);
    expectOAuthError(await postForm(revokeUrl, { client_id: clientA.clientId }), 400, 'invalid_request');
    expectOAuthError(await postForm(revokeUrl, { token }), 401, 'invalid_client');
    const wrongSecret = await postForm(
      revokeUrl,
      { token },
      { Authorization: basic(api.client.clientId, 'x'.repeat(43)) },
    );
    expectOAuthError(wrongSecret, 401, 'invalid_client');
    expect(wrongSecret.headers.get('www-authenticate')).toMatch(/^Basic /);
    const twice = new URLSearchParams({ token, client_id: clientA.clientId });
    twice.append('token', token);
    expectOAuthError(
      await send(revokeUrl, {
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: twice.toString(),
      }),
      400,
      'invalid_request',
    );
    expectOAuthError(
      await send(revokeUrl, {
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token, client_id: clientA.clientId }),
      }),
      400,
      'invalid_request',
    );
    // none of the refused requests revoked anything
    expect((await refresh(token)).status).toBe(200);
  });
});

describe('logs', () => {
  it('log one structured line per request with its status, and never a code, token, secret or password', async () => {
    // The log level is read once per process (core/adapters/log.ts), when the first logger is
    // built: build a fresh module graph, hence fresh settings and loggers, with INFO, and run a
    // whole service on it.
    const written: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return true;
    });
    const previousLevel = process.env.LOG_LEVEL;
    process.env.LOG_LEVEL = 'INFO';
    vi.resetModules();
    const secrets: Record<string, string> = {};
    let logged: TestService | undefined;
    try {
      const { startTestService: startLogged } = await import('./support/service');
      logged = await startLogged();
      const token = `${logged.issuer}/oauth/token`;
      const client = await createLoginClient(logged);
      const person = await createUser(logged);
      secrets.password = person.password;
      const { code, verifier } = await obtainCode(logged, client, person);
      secrets.code = code;
      secrets.verifier = verifier;
      const tokens = await exchange(logged, client, code, verifier);
      expect(tokens.status).toBe(200);
      secrets.refresh = String(tokens.json.refresh_token);
      secrets.access = String(tokens.json.access_token);
      secrets.idToken = String(tokens.json.id_token);
      expect(
        (
          await postForm(token, {
            grant_type: 'refresh_token',
            refresh_token: secrets.refresh,
            client_id: client.clientId,
          })
        ).status,
      ).toBe(200);
      expect(
        (await fetch(`${logged.issuer}/oauth/userinfo`, { headers: { Authorization: `Bearer ${secrets.access}` } }))
          .status,
      ).toBe(200);
      expect((await exchange(logged, client, code, verifier)).status).toBe(400); // a replay, logged as an error
      const partner = await logged.core.registration.createApiClient({
        name: 'Logged partner',
        scope: 'messaging poll',
      });
      secrets.clientSecret = partner.clientSecret!;
      const cc = await postForm(
        token,
        { grant_type: 'client_credentials' },
        { Authorization: basic(partner.client.clientId, partner.clientSecret!) },
      );
      expect(cc.status).toBe(200);
      secrets.apiAccess = String(cc.json.access_token);
      const badSecret = `${partner.clientSecret!.slice(0, -4)}zzzz`;
      secrets.badSecret = badSecret;
      expect(
        (
          await postForm(token, {
            grant_type: 'client_credentials',
            client_id: partner.client.clientId,
            client_secret: badSecret,
          })
        ).status,
      ).toBe(401);
      // The replay revoked the grant, and with it this access token.
      expect(
        (await fetch(`${logged.issuer}/oauth/userinfo`, { headers: { Authorization: `Bearer ${secrets.access}` } }))
          .status,
      ).toBe(401);
      expect((await fetch(`${logged.issuer}/oauth/userinfo?access_token=${secrets.apiAccess}`)).status).toBe(401);
      expect(
        (await postForm(`${logged.issuer}/oauth/revoke`, { token: secrets.refresh, client_id: client.clientId }))
          .status,
      ).toBe(200);
    } finally {
      await logged?.close();
      spy.mockRestore();
      process.env.LOG_LEVEL = previousLevel;
      vi.resetModules();
    }
    const output = written.join('');
    for (const [name, value] of Object.entries(secrets)) {
      expect(value.length, name).toBeGreaterThan(8);
      expect(output.includes(value), `${name} appears in the log`).toBe(false);
      // nor a recognisable part of it (a refresh token's secret half, a JWT's payload or signature)
      for (const part of value.split('.'))
        if (part.length >= 20) expect(output.includes(part), `part of ${name} appears in the log`).toBe(false);
    }
    expect(output.includes(encodeURIComponent(secrets.password!))).toBe(false);

    const lines = output
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const requests = lines.filter((line) => line.message === 'request');
    expect(requests.length).toBeGreaterThanOrEqual(10);
    for (const line of requests) {
      expect(line.level).toBe('INFO');
      expect(typeof line.status).toBe('number');
      expect(typeof line.requestId).toBe('string');
      expect(line.resource).toMatch(/^\/[a-z/.-]*$/);
    }
    expect(requests).toContainEqual(expect.objectContaining({ resource: '/oauth/token', method: 'POST', status: 200 }));
    expect(requests).toContainEqual(
      expect.objectContaining({ resource: '/oauth/token', status: 400, error: 'invalid_grant' }),
    );
    expect(requests).toContainEqual(
      expect.objectContaining({ resource: '/oauth/token', status: 401, error: 'invalid_client' }),
    );
    expect(requests).toContainEqual(expect.objectContaining({ resource: '/oauth/userinfo', status: 200 }));
    expect(requests).toContainEqual(
      expect.objectContaining({ resource: '/oauth/userinfo', status: 401, error: 'invalid_token' }),
    );
    expect(requests).toContainEqual(expect.objectContaining({ resource: '/oauth/revoke', status: 200 }));
    expect(requests).toContainEqual(expect.objectContaining({ resource: '/login', method: 'POST' }));
    // the request ids differ per request
    expect(new Set(requests.map((line) => line.requestId)).size).toBe(requests.length);
  });
});
