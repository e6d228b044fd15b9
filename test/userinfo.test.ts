import { createPrivateKey, generateKeyPairSync, sign as nodeSign, type KeyObject } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLocalKeyStore, type LocalKeyStore } from '../core/adapters/local-keys';
import { BatchGetItemCommand } from '@aws-sdk/client-dynamodb';
import { documentClient } from '../core/adapters/dynamo-schema';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { limits } from '../core/kernel/config';
import type { Client, User } from '../core/kernel/model';
import { tableNames } from '../core/tables';
import { localDynamoClient } from '../local/embedded-dynamo';
import { LOCAL_TABLE_PREFIX, startLocal } from '../local/runner';
import { Browser } from './support/browser';
import { TestClock } from './support/clock';
import { StoreFaults, type StoreMethod } from './support/faults';
import { createLoginClient, createUser, exchange, obtainCode, postForm, verifyWithJwks } from './support/flow';
import { startTestService, type TestService } from './support/service';

// GET/POST /oauth/userinfo (OIDC Core §5.3, spec 2.5 and 4.3) with RFC 6750 errors, and signing
// key rotation as seen by the verifier.

let service: TestService;
let client: Client;
let login: { user: User; email: string; password: string };
let browser: Browser;
let tokens: { access: string; refresh: string; id: string };
const faults = new StoreFaults();

beforeAll(async () => {
  service = await startTestService({ wrapStore: faults.wrap });
  client = await createLoginClient(service);
  login = await createUser(service);
  browser = new Browser(service.issuer);
  tokens = await tokensFor(service, client, login, browser);
});
afterAll(() => service?.close());

async function tokensFor(
  target: TestService,
  loginClient: Client,
  person: { email: string; password: string },
  session = new Browser(target.issuer),
  scope = 'openid profile email',
) {
  const { code, verifier } = await obtainCode(target, loginClient, person, { scope }, session);
  const reply = await exchange(target, loginClient, code, verifier);
  expect(reply.status).toBe(200);
  return {
    access: String(reply.json.access_token),
    refresh: String(reply.json.refresh_token),
    id: String(reply.json.id_token),
  };
}

interface Reply {
  status: number;
  json: Record<string, unknown>;
  text: string;
  headers: Headers;
}

async function userinfo(
  target: TestService | { issuer: string },
  init: {
    authorization?: string;
    method?: string;
    body?: string;
    headers?: Record<string, string>;
    query?: string;
  } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.authorization !== undefined) headers.Authorization = init.authorization;
  const response = await fetch(`${target.issuer}/oauth/userinfo${init.query ?? ''}`, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // left empty
  }
  return { status: response.status, json, text, headers: response.headers };
}

const bearer = (token: string) => `Bearer ${token}`;

/** RFC 6750 §3: status, the error code in both the challenge and the JSON body, never cached. */
function expectRefusal(
  reply: Reply,
  status: 400 | 401 | 403,
  error: 'invalid_request' | 'invalid_token' | 'insufficient_scope',
) {
  expect({ status: reply.status, error: reply.json.error }).toEqual({ status, error });
  expect(typeof reply.json.error_description).toBe('string');
  const challenge = reply.headers.get('www-authenticate') ?? '';
  expect(challenge).toMatch(/^Bearer realm="[^"]+"/);
  expect(challenge).toContain(`error="${error}"`);
  // auth-param values are quoted-strings: no bare quotes or backslashes inside
  expect(challenge).toMatch(/^Bearer( [a-z_]+="[^"\\]*",?)+$/);
  expect(reply.headers.get('cache-control')).toBe('no-store');
  expect(reply.headers.get('content-type')).toBe('application/json');
}

/**
 * No credential at all (or an unsupported scheme): a bare challenge, no error code or other error information (RFC 6750
 * §3.1).
 */
function expectBareChallenge(reply: Reply) {
  expect(reply.status).toBe(401);
  expect(reply.headers.get('www-authenticate')).toBe('Bearer realm="userinfo"');
  expect(reply.text).toBe('{}');
  expect(reply.headers.get('content-type')).toBe('application/json');
  expect(reply.headers.get('cache-control')).toBe('no-store');
}

/**
 * The service's own signing key, read from its key folder: for tokens that are correctly signed but wrong otherwise.
 */
async function serviceKey(target: TestService): Promise<{ kid: string; key: KeyObject }> {
  const kid = decodeProtectedHeader(tokens.access).kid!;
  return { kid, key: createPrivateKey(await readFile(join(target.dataDir, 'keys', `${kid}.pem`))) };
}

function validClaims(overrides: JWTPayload = {}): JWTPayload {
  const now = Math.floor(service.clock.now() / 1000);
  return {
    iss: service.issuer,
    sub: login.user.svcnumId,
    aud: service.issuer,
    client_id: client.clientId,
    iat: now,
    exp: now + 3600,
    jti: `jti-${now}-${Math.random()}`,
    scope: 'openid profile email',
    ...overrides,
  };
}

async function sign(key: KeyObject, kid: string, claims: JWTPayload, header: Record<string, unknown> = {}) {
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt', kid, ...header }).sign(key);
}

/** A JWS assembled by hand (jose refuses to sign some of the odd headers tested here). */
function rawSign(key: KeyObject, header: Record<string, unknown>, claims: JWTPayload) {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${encode(header)}.${encode(claims)}`;
  return `${input}.${nodeSign(null, Buffer.from(input), key).toString('base64url')}`;
}

describe('UserInfo: answers', () => {
  it('returns exactly the spec fields for openid profile email, over GET and POST, never cached', async () => {
    const expected = {
      sub: login.user.svcnumId,
      svcnum: login.user.svcnum,
      email: login.email,
      email_verified: true,
      created_at: new Date(login.user.createdAt).toISOString(),
    };
    for (const method of ['GET', 'POST']) {
      const reply = await userinfo(service, { authorization: bearer(tokens.access), method });
      expect(reply.status).toBe(200);
      expect(reply.json).toEqual(expected);
      expect(reply.headers.get('cache-control')).toBe('no-store');
      expect(reply.headers.get('content-type')).toBe('application/json');
    }
    expect(login.user.svcnum).toMatch(/^\d{11,}$/);
    expect(login.user.svcnumId).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(new Date(String(expected.created_at)).toISOString()).toBe(expected.created_at);
    // The scheme name is case-insensitive.
    expect((await userinfo(service, { authorization: `bearer ${tokens.access}` })).status).toBe(200);
  });

  it('returns sub, svcnum and created_at (and no email) for a token with only openid', async () => {
    const narrow = await tokensFor(service, client, login, browser, 'openid');
    const reply = await userinfo(service, { authorization: bearer(narrow.access) });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      sub: login.user.svcnumId,
      svcnum: login.user.svcnum,
      created_at: new Date(login.user.createdAt).toISOString(),
    });
  });

  it('never returns a username, display name or any other field, and no account_type for a person', async () => {
    const reply = await userinfo(service, { authorization: bearer(tokens.access) });
    expect(Object.keys(reply.json).sort()).toEqual(['created_at', 'email', 'email_verified', 'sub', 'svcnum']);
    for (const field of [
      'account_type',
      'name',
      'preferred_username',
      'username',
      'nickname',
      'given_name',
      'family_name',
      'status',
      'passwordHash',
      'accountType',
    ]) {
      expect(reply.json).not.toHaveProperty(field);
    }
  });

  it('returns account_type ai_agent for an AI agent account', async () => {
    const email = `agent-${Date.now()}@example.com`;
    const password = 'agent password long enough';
    const agent = await service.core.registration.createUser({ email, password, accountType: 'ai_agent' });
    const agentTokens = await tokensFor(service, client, { email, password });
    const reply = await userinfo(service, { authorization: bearer(agentTokens.access) });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      sub: agent.svcnumId,
      svcnum: agent.svcnum,
      email,
      email_verified: true,
      created_at: new Date(agent.createdAt).toISOString(),
      account_type: 'ai_agent',
    });
  });

  it('answers 405 with Allow for other methods', async () => {
    const reply = await userinfo(service, { authorization: bearer(tokens.access), method: 'PUT' });
    expect(reply.status).toBe(405);
    expect(reply.headers.get('allow')).toBe('GET, POST');
  });
});

describe('UserInfo: refusals (RFC 6750)', () => {
  it('answers a request without credentials with 401 and a bare Bearer challenge (no error code)', async () => {
    expectBareChallenge(await userinfo(service));
    expectBareChallenge(await userinfo(service, { method: 'POST' }));
    // Only the Authorization header is supported: a token in the query or a form body is no credential.
    expectBareChallenge(await userinfo(service, { query: `?access_token=${tokens.access}` }));
    expectBareChallenge(
      await userinfo(service, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `access_token=${tokens.access}`,
      }),
    );
  });

  it('answers an unsupported authentication scheme like a missing credential (RFC 6750 §3.1)', async () => {
    expectBareChallenge(await userinfo(service, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }));
    // DPoP is a scheme we serve (test/rp-libraries-dpop.test.ts): an unbound token under it is invalid_token.
    const unbound = await userinfo(service, { authorization: `DPoP ${tokens.access}` });
    expect(unbound.status).toBe(401);
    expect(unbound.headers.get('www-authenticate')).toMatch(/^DPoP realm="userinfo", error="invalid_token", .*algs=/);
    expectBareChallenge(await userinfo(service, { authorization: tokens.access }));
    expectBareChallenge(await userinfo(service, { authorization: '' }));
  });

  it('answers a malformed Bearer header with 400 invalid_request', async () => {
    for (const authorization of [
      'Bearer',
      'Bearer ',
      `Bearer  ${tokens.access}`,
      `Bearer ${tokens.access} extra`,
      `Bearer ${tokens.access}, Bearer ${tokens.access}`,
      'Bearer a"b',
      'Bearer ===',
      `Bearer ${tokens.access}=x`,
    ]) {
      expectRefusal(await userinfo(service, { authorization }), 400, 'invalid_request');
    }
  });

  it('answers garbage tokens with 401 invalid_token', async () => {
    const [header, payload] = tokens.access.split('.') as [string, string, string];
    for (const token of [
      'garbage',
      'a.b.c',
      `${header}.${payload}.`,
      `${header}.${payload}`,
      `${header}.${payload}.${'A'.repeat(86)}`,
      tokens.refresh,
      `${tokens.access}x`,
      'x'.repeat(6000),
    ]) {
      expectRefusal(await userinfo(service, { authorization: bearer(token) }), 401, 'invalid_token');
    }
    // a tampered payload under the genuine signature
    const tampered = Buffer.from(
      JSON.stringify({ ...decodeJwt(tokens.access), sub: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }),
    ).toString('base64url');
    expectRefusal(
      await userinfo(service, { authorization: bearer(`${header}.${tampered}.${tokens.access.split('.')[2]}`) }),
      401,
      'invalid_token',
    );
  });

  it('answers a token signed by another Ed25519 key under the same kid with 401 invalid_token', async () => {
    const { kid } = await serviceKey(service);
    const { privateKey } = generateKeyPairSync('ed25519');
    expectRefusal(
      await userinfo(service, { authorization: bearer(await sign(privateKey, kid, validClaims())) }),
      401,
      'invalid_token',
    );
    // and under an unknown kid
    expectRefusal(
      await userinfo(service, { authorization: bearer(await sign(privateKey, 'unknown-kid', validClaims())) }),
      401,
      'invalid_token',
    );
  });

  it('answers alg none and HS256 key-confusion tokens with 401 invalid_token', async () => {
    const { kid } = await serviceKey(service);
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsecured = `${encode({ alg: 'none', typ: 'at+jwt', kid })}.${encode(validClaims())}.`;
    expectRefusal(await userinfo(service, { authorization: bearer(unsecured) }), 401, 'invalid_token');
    const jwks = (await (await fetch(`${service.issuer}/.well-known/jwks.json`)).json()) as {
      keys: Array<{ x: string }>;
    };
    const hmacKey = new TextEncoder().encode(jwks.keys[0]!.x);
    const confused = await new SignJWT(validClaims())
      .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid })
      .sign(hmacKey);
    expectRefusal(await userinfo(service, { authorization: bearer(confused) }), 401, 'invalid_token');
  });

  it('answers an ID token presented as an access token with 401 invalid_token', async () => {
    expect(decodeProtectedHeader(tokens.id).typ).toBe('JWT');
    expectRefusal(await userinfo(service, { authorization: bearer(tokens.id) }), 401, 'invalid_token');
  });

  it('answers correctly signed tokens with the wrong issuer, audience, type or claims with 401 invalid_token', async () => {
    const { kid, key } = await serviceKey(service);
    // Sanity check: the helper makes a token the service accepts.
    expect((await userinfo(service, { authorization: bearer(await sign(key, kid, validClaims())) })).status).toBe(200);
    const now = Math.floor(service.clock.now() / 1000);
    const bad: Array<[string, Promise<string>]> = [
      ['wrong issuer', sign(key, kid, validClaims({ iss: 'https://evil.example' }))],
      ['issuer with a trailing slash', sign(key, kid, validClaims({ iss: `${service.issuer}/` }))],
      ['audience of the client (an ID token audience)', sign(key, kid, validClaims({ aud: client.clientId }))],
      ['another audience', sign(key, kid, validClaims({ aud: 'https://api.other.example' }))],
      ['typ JWT', sign(key, kid, validClaims(), { typ: 'JWT' })],
      ['no typ', new SignJWT(validClaims()).setProtectedHeader({ alg: 'EdDSA', kid }).sign(key)],
      ['expired', sign(key, kid, validClaims({ iat: now - 7200, exp: now - 3600 }))],
      ['not yet valid', sign(key, kid, validClaims({ nbf: now + 600 }))],
      ['no client_id', sign(key, kid, validClaims({ client_id: undefined }))],
      ['no scope', sign(key, kid, validClaims({ scope: undefined }))],
      ['scope as an array', sign(key, kid, validClaims({ scope: ['openid', 'email'] as unknown as string }))],
      ['no jti', sign(key, kid, validClaims({ jti: undefined }))],
      ['no exp', sign(key, kid, validClaims({ exp: undefined }))],
      ['sub not a string', sign(key, kid, validClaims({ sub: 42 as unknown as string }))],
      ['sub of nobody', sign(key, kid, validClaims({ sub: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }))],
      [
        'unknown critical header',
        Promise.resolve(
          rawSign(key, { alg: 'EdDSA', typ: 'at+jwt', kid, crit: ['x-unknown'], 'x-unknown': true }, validClaims()),
        ),
      ],
    ];
    for (const [name, token] of bad) {
      const reply = await userinfo(service, { authorization: bearer(await token) });
      expect(reply.status, name).toBe(401);
      expectRefusal(reply, 401, 'invalid_token');
    }
  });

  it('answers a client_credentials token (no openid) with 403 insufficient_scope', async () => {
    const api = await service.core.registration.createApiClient({ name: 'Partner', scope: 'messaging poll' });
    const cc = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: api.clientSecret!,
    });
    expect(cc.status).toBe(200);
    expectRefusal(
      await userinfo(service, { authorization: bearer(String(cc.json.access_token)) }),
      403,
      'insufficient_scope',
    );
  });

  it('refuses a disabled account with 401 invalid_token, and its refresh tokens are revoked', async () => {
    const person = await createUser(service);
    const session = new Browser(service.issuer);
    const first = await tokensFor(service, client, person, session);
    const second = await tokensFor(service, client, person, session);
    expect((await userinfo(service, { authorization: bearer(first.access) })).status).toBe(200);

    await service.core.registration.disableUser(person.user.svcnumId);
    expectRefusal(await userinfo(service, { authorization: bearer(first.access) }), 401, 'invalid_token');
    for (const refreshToken of [first.refresh, second.refresh]) {
      const refreshed = await postForm(`${service.issuer}/oauth/token`, {
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_id: client.clientId,
      });
      expect({ status: refreshed.status, error: refreshed.json.error }).toEqual({
        status: 400,
        error: 'invalid_grant',
      });
    }
  });

  it('gives no tokens for a code issued before the account was disabled and redeemed after', async () => {
    const person = await createUser(service);
    const { code, verifier } = await obtainCode(service, client, person);
    await service.core.registration.disableUser(person.user.svcnumId);
    const reply = await exchange(service, client, code, verifier);
    expect({ status: reply.status, error: reply.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
    // and no grant was left behind for that account
    const grants = await service.core.store.listGrants(person.user.svcnumId);
    expect(grants.filter((grant) => grant.revokedAt === undefined)).toEqual([]);
  });
});

/** The store methods called while `run` runs, in order (a StoreFaults hook on every method). */
async function storeCalls(run: () => Promise<unknown>): Promise<string[]> {
  const calls: string[] = [];
  for (const method of Object.keys(service.core.store) as StoreMethod[])
    faults.before(method, () => void calls.push(method));
  try {
    await run();
  } finally {
    faults.reset();
  }
  return calls;
}

const refresh = (refreshToken: string, loginClient = client) =>
  postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: loginClient.clientId,
  });

describe('UserInfo: the grant behind a token (RFC 6749 §4.1.2)', () => {
  it('names the grant in every access token of it, the first and each refreshed one; the claim redeems nothing', async () => {
    const first = await tokensFor(service, client, login, browser);
    const grantId = decodeJwt(first.access).grant_id;
    expect(grantId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const refreshed = await refresh(first.refresh);
    expect(refreshed.status).toBe(200);
    expect(decodeJwt(String(refreshed.json.access_token)).grant_id).toBe(grantId);
    // Another sign-in is another grant.
    expect(decodeJwt(tokens.access).grant_id).not.toBe(grantId);
    // No secret in it: the refresh token's secret part appears nowhere in the access token.
    const secret = first.refresh.split('.')[1]!;
    expect(Buffer.from(first.access.split('.')[1]!, 'base64url').toString()).not.toContain(secret);
    // The id alone is no refresh token, and revoking it changes nothing.
    expect((await refresh(String(grantId))).json.error).toBe('invalid_grant');
    expect(
      (await postForm(`${service.issuer}/oauth/revoke`, { token: String(grantId), client_id: client.clientId })).status,
    ).toBe(200);
    expect((await userinfo(service, { authorization: bearer(first.access) })).status).toBe(200);
    // Tokens of no grant carry none.
    const api = await service.core.registration.createApiClient({ name: 'No grant', scope: 'messaging' });
    const cc = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: api.clientSecret!,
    });
    expect(decodeJwt(String(cc.json.access_token))).not.toHaveProperty('grant_id');
  });

  it('reads the account and the grant in one store call (one BatchGetItem); a token of no grant reads the account only', async () => {
    expect(
      await storeCalls(async () =>
        expect((await userinfo(service, { authorization: bearer(tokens.access) })).status).toBe(200),
      ),
    ).toEqual(['getUserAndGrant']);
    // Revoked: still one call.
    const revoked = await tokensFor(service, client, login, browser);
    await postForm(`${service.issuer}/oauth/revoke`, { token: revoked.refresh, client_id: client.clientId });
    expect(
      await storeCalls(async () =>
        expectRefusal(await userinfo(service, { authorization: bearer(revoked.access) }), 401, 'invalid_token'),
      ),
    ).toEqual(['getUserAndGrant']);
    // A token with openid but no grant_id (none is issued so now; tokens from before the claim existed).
    const { kid, key } = await serviceKey(service);
    const grantless = await sign(key, kid, validClaims());
    expect(
      await storeCalls(async () =>
        expect((await userinfo(service, { authorization: bearer(grantless) })).status).toBe(200),
      ),
    ).toEqual(['getUser']);
    // A client_credentials token (no openid) is refused before any read, as before.
    const api = await service.core.registration.createApiClient({ name: 'Unaffected', scope: 'messaging poll' });
    const cc = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: api.client.clientId,
      client_secret: api.clientSecret!,
    });
    expect(
      await storeCalls(async () =>
        expectRefusal(
          await userinfo(service, { authorization: bearer(String(cc.json.access_token)) }),
          403,
          'insufficient_scope',
        ),
      ),
    ).toEqual([]);
  });

  it("refuses a token whose grant claim is not a grant id, or names a grant that does not exist or is another person's", async () => {
    const { kid, key } = await serviceKey(service);
    const other = await tokensFor(service, client, await createUser(service));
    const cases: Array<[string, JWTPayload]> = [
      ['grant_id a number', { grant_id: 42 }],
      ['grant_id empty', { grant_id: '' }],
      ['grant_id no store key', { grant_id: 'x'.repeat(3000) }],
      ['an unknown grant', { grant_id: 'A'.repeat(22) }],
      ["another person's grant", { grant_id: decodeJwt(other.access).grant_id }],
    ];
    for (const [name, claims] of cases) {
      const reply = await userinfo(service, { authorization: bearer(await sign(key, kid, validClaims(claims))) });
      expect(reply.status, name).toBe(401);
      expectRefusal(reply, 401, 'invalid_token');
    }
  });

  it("refuses a token whose grant has gone idle past the refresh token's inactivity limit (expiry checked on read)", async () => {
    const idle = await tokensFor(service, client, login, browser);
    // The store still holds the grant (DynamoDB TTL deletes late, or not at all): its lastUsedAt decides.
    const now = service.clock.now();
    faults.answerOn('getUserAndGrant', 1, async (svcnumId, grantId) => {
      const found = await service.core.store.getUserAndGrant(svcnumId, grantId);
      return { ...found, grant: { ...found.grant!, lastUsedAt: now - limits.refreshIdleTtl } };
    });
    try {
      expectRefusal(await userinfo(service, { authorization: bearer(idle.access) }), 401, 'invalid_token');
      expect(faults.fired).toEqual(['getUserAndGrant#1=answer']);
    } finally {
      faults.reset();
    }
    expect((await userinfo(service, { authorization: bearer(idle.access) })).status).toBe(200);
  });

  it('store: getUserAndGrant asks again for the keys BatchGetItem leaves unprocessed, and gives up after five batches', async () => {
    const fresh = await tokensFor(service, client, login, browser);
    const grantId = String(decodeJwt(fresh.access).grant_id);
    const dynamo = localDynamoClient(service.dynamoEndpoint);
    const tables = tableNames(LOCAL_TABLE_PREFIX);
    // DynamoDB may answer part of a batch and return the rest as UnprocessedKeys (throttling). This
    // client's first `partial` batches get such answers: the first table's keys are read, the rest
    // returned unprocessed (or all of them, when one table is left).
    const partialBatches = (partial: number) => {
      const db = documentClient(dynamo);
      let batches = 0;
      // The store reads through its read client (core/adapters/dynamo-schema.ts).
      const reads = new Proxy(db.reads, {
        get: (target, property, receiver) =>
          property !== 'send'
            ? Reflect.get(target, property, receiver)
            : async (command: unknown) => {
                if (!(command instanceof BatchGetItemCommand)) return target.send(command as never);
                if (++batches > partial) return target.send(command);
                const tablesAsked = Object.entries(command.input.RequestItems!);
                if (tablesAsked.length === 1)
                  return { Responses: {}, UnprocessedKeys: command.input.RequestItems, $metadata: {} };
                const answered = await target.send(
                  new BatchGetItemCommand({ RequestItems: Object.fromEntries(tablesAsked.slice(0, 1)) }),
                );
                return { ...answered, UnprocessedKeys: Object.fromEntries(tablesAsked.slice(1)) };
              },
      });
      const client = new Proxy(db, {
        get: (target, property, receiver) => (property === 'reads' ? reads : Reflect.get(target, property, receiver)),
      });
      return { store: createDynamoStore(client, tables), batches: () => batches };
    };
    try {
      const twice = partialBatches(2);
      const found = await twice.store.getUserAndGrant(login.user.svcnumId, grantId);
      expect({ user: found.user?.svcnumId, grant: found.grant?.grantId, batches: twice.batches() }).toEqual({
        user: login.user.svcnumId,
        grant: grantId,
        batches: 3,
      });
      expect(found.grant).not.toHaveProperty('ttl');
      const always = partialBatches(Infinity);
      await expect(always.store.getUserAndGrant(login.user.svcnumId, grantId)).rejects.toThrow(/unprocessed/);
      expect(always.batches()).toBe(5);
    } finally {
      dynamo.destroy();
    }
  });
});

describe('signing key rotation', () => {
  it('publishes an added key at once, signs with it only once activated, and keeps accepting tokens of the old key', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-rotation-'));
    const clock = new TestClock();
    const jwksOf = async (issuer: string) =>
      // The Ed25519 keys (the RSA key of RS256 ID tokens after them rotates on its own).
      (
        (await (await fetch(`${issuer}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string; kty: string }> }
      ).keys
        .filter((key) => key.kty === 'OKP')
        .map((key) => key.kid);
    try {
      const first = { ...(await startLocal({ dataDir, port: 0, dynamoPort: 0, grpcPort: 0, clock })), clock, dataDir };
      let oldTokens!: { access: string; refresh: string; id: string };
      let newKid!: string;
      const rotationClient = await createLoginClient(first);
      const person = await createUser(first);
      try {
        oldTokens = await tokensFor(first, rotationClient, person);
        const oldKid = decodeProtectedHeader(oldTokens.access).kid!;
        expect(await jwksOf(first.issuer)).toEqual([oldKid]);
        expect((await userinfo(first, { authorization: bearer(oldTokens.access) })).status).toBe(200);

        // Step 1: add. The running service's key store is the local one; the key is published at once
        // but does not sign yet.
        const keys = first.core.keys as LocalKeyStore;
        newKid = await keys.add();
        expect(newKid).not.toBe(oldKid);
        expect(await jwksOf(first.issuer)).toEqual([oldKid, newKid]);
        const stillOld = await postForm(`${first.issuer}/oauth/token`, {
          grant_type: 'refresh_token',
          refresh_token: oldTokens.refresh,
          client_id: rotationClient.clientId,
        });
        expect(decodeProtectedHeader(String(stillOld.json.access_token)).kid).toBe(oldKid);
      } finally {
        await first.close();
      }

      // Step 2: activate (as `admin key activate` would, on the key folder), and deploy: a fresh
      // process on the same data and the same issuer.
      await (await openLocalKeyStore(join(dataDir, 'keys'))).activate(newKid);
      const second = {
        ...(await startLocal({ dataDir, port: first.port, dynamoPort: 0, grpcPort: 0, clock })),
        clock,
        dataDir,
      };
      try {
        expect(second.issuer).toBe(first.issuer);
        const oldKid = decodeProtectedHeader(oldTokens.access).kid!;
        expect(await jwksOf(second.issuer)).toEqual([newKid, oldKid]); // active key first

        // Tokens of the old key still verify, at UserInfo and with the published JWKS.
        expect((await userinfo(second, { authorization: bearer(oldTokens.access) })).status).toBe(200);
        await verifyWithJwks(second, oldTokens.access, { audience: second.issuer, typ: 'at+jwt' });

        // New tokens carry the new kid: from a refresh of an old grant and from a fresh sign-in.
        const refreshed = await postForm(`${second.issuer}/oauth/token`, {
          grant_type: 'refresh_token',
          refresh_token: oldTokens.refresh,
          client_id: rotationClient.clientId,
        });
        expect(refreshed.status).toBe(200);
        const newAccess = String(refreshed.json.access_token);
        expect(decodeProtectedHeader(newAccess).kid).toBe(newKid);
        expect((await userinfo(second, { authorization: bearer(newAccess) })).status).toBe(200);
        const fresh = await tokensFor(second, rotationClient, person);
        expect(decodeProtectedHeader(fresh.access).kid).toBe(newKid);
        expect(decodeProtectedHeader(fresh.id).kid).toBe(newKid);
        await verifyWithJwks(second, fresh.id, { audience: rotationClient.clientId, typ: 'JWT' });
        await verifyWithJwks(second, newAccess, { audience: second.issuer, typ: 'at+jwt' });

        // Step 3: retire the old key (after the longest token lifetime): its tokens stop verifying.
        await (second.core.keys as LocalKeyStore).retire(oldKid);
        await expect((second.core.keys as LocalKeyStore).retire(newKid)).rejects.toThrow(/active/);
      } finally {
        await second.close();
      }
      const third = {
        ...(await startLocal({ dataDir, port: first.port, dynamoPort: 0, grpcPort: 0, clock })),
        clock,
        dataDir,
      };
      try {
        expect(await jwksOf(third.issuer)).toEqual([newKid]);
        expectRefusal(await userinfo(third, { authorization: bearer(oldTokens.access) }), 401, 'invalid_token');
      } finally {
        await third.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
