import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { decodeJwt } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { documentClient } from '../core/adapters/dynamo-schema';
import { DAY, HOUR, limits, MINUTE, SECOND } from '../core/kernel/config';
import type { Client } from '../core/kernel/model';
import { sha256 } from '../core/kernel/secrets';
import { tableNames } from '../core/tables';
import { localDynamoClient } from '../local/embedded-dynamo';
import { LOCAL_TABLE_PREFIX } from '../local/runner';
import { createLoginClient, createUser, exchange, obtainCode, postForm } from './support/flow';
import { startTestService, type TestService } from './support/service';

// Spec 3.2 and 8 with the injected clock: code 5 minutes, access token 1 hour, refresh token
// 180 days of inactivity (sliding, no rotation). The clock only moves forward, so the tests of
// this file run in order on one service and each signs in afresh (browser sessions last 12 h).

let service: TestService;
let client: Client;
let login: { email: string; password: string };

beforeAll(async () => {
  service = await startTestService();
  client = await createLoginClient(service);
  login = await createUser(service);
});
afterAll(async () => {
  raw?.destroy();
  await service?.close();
});

/** Moves the service clock to at least `target` (epoch ms); real time keeps adding a few ms. */
function moveClockTo(target: number) {
  const delta = target - service.clock.now();
  expect(delta).toBeGreaterThanOrEqual(0);
  service.clock.advance(delta);
}

// For boundaries to the millisecond the clock is frozen at an exact instant (TestClock.freeze),
// then released where it stood so that time never runs backwards.
afterEach(() => service.clock.release());

/** Direct reads of stored items (what the store port does not expose). */
let raw: DynamoDBClient | undefined;
const db = () => {
  raw ??= localDynamoClient(service.dynamoEndpoint);
  return documentClient(raw);
};
const tables = tableNames(LOCAL_TABLE_PREFIX);

/** When a code expires, as stored (the code itself is only stored as its hash). */
async function codeExpiresAt(code: string): Promise<number> {
  const item = (await db().send(new GetCommand({ TableName: tables.codes, Key: { codeHash: sha256(code) } }))).Item!;
  return Number(item.expiresAt);
}

/** The start of a grant's inactivity window, as stored. */
async function lastUsedAt(refreshToken: string): Promise<number> {
  return (await service.core.store.getGrant(refreshToken.split('.')[0]!))!.lastUsedAt;
}

const refresh = (refreshToken: string) =>
  postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: client.clientId,
  });

const userinfo = (accessToken: string) =>
  fetch(`${service.issuer}/oauth/userinfo`, { headers: { Authorization: `Bearer ${accessToken}` } });

/** A fresh grant; `before` is a clock reading taken before the grant was written (lastUsedAt ≥ before). */
async function freshGrant() {
  const { code, verifier } = await obtainCode(service, client, login);
  const before = service.clock.now();
  const reply = await exchange(service, client, code, verifier);
  const after = service.clock.now();
  expect(reply.status).toBe(200);
  return { refresh: String(reply.json.refresh_token), access: String(reply.json.access_token), before, after };
}

function expectInvalidGrant(reply: Awaited<ReturnType<typeof postForm>>) {
  expect({ status: reply.status, error: reply.json.error }).toEqual({ status: 400, error: 'invalid_grant' });
  expect(reply.headers.get('cache-control')).toBe('no-store');
}

describe('authorization code: 5 minutes', () => {
  it('is redeemable at 4:59 and refused with invalid_grant at 5:00', async () => {
    expect(limits.authorizationCodeTtl).toBe(5 * MINUTE);
    const issuedAt = service.clock.freeze();
    const early = await obtainCode(service, client, login);
    const late = await obtainCode(service, client, login, {}, early.browser);
    expect(await codeExpiresAt(early.code)).toBe(issuedAt + 5 * MINUTE);
    expect(await codeExpiresAt(late.code)).toBe(issuedAt + 5 * MINUTE);

    service.clock.freeze(issuedAt + 4 * MINUTE + 59 * SECOND);
    expect((await exchange(service, client, early.code, early.verifier)).status).toBe(200);
    service.clock.freeze(issuedAt + 5 * MINUTE);
    expectInvalidGrant(await exchange(service, client, late.code, late.verifier));
    // An expired code is not a replay: presenting it again is refused the same way, nothing else happens.
    expectInvalidGrant(await exchange(service, client, late.code, late.verifier));
  });

  it('is still redeemable a millisecond before 5:00 (the boundary is exact)', async () => {
    const issuedAt = service.clock.freeze();
    const { code, verifier } = await obtainCode(service, client, login);
    service.clock.freeze(issuedAt + 5 * MINUTE - 1);
    expect((await exchange(service, client, code, verifier)).status).toBe(200);
  });

  it('a redeemed code replayed after its expiry still counts as a replay and revokes its grant', async () => {
    const { code, verifier } = await obtainCode(service, client, login);
    const tokens = await exchange(service, client, code, verifier);
    expect(tokens.status).toBe(200);
    service.clock.advance(10 * MINUTE);
    // Replayed after expiry: still refused, and the grant it produced is revoked all the same.
    expectInvalidGrant(await exchange(service, client, code, verifier));
    expectInvalidGrant(await refresh(String(tokens.json.refresh_token)));
  });
});

describe('access token: 1 hour', () => {
  it('is accepted by UserInfo at 3599 s (and 3599.999 s) and refused with 401 invalid_token at 3600 s', async () => {
    const { access } = await freshGrant();
    const { iat, exp } = decodeJwt(access);
    expect(exp! - iat!).toBe(3600);

    for (const instant of [(iat! + 3599) * SECOND, exp! * SECOND - 1]) {
      service.clock.freeze(instant);
      expect((await userinfo(access)).status, `at ${instant - iat! * SECOND} ms`).toBe(200);
    }

    service.clock.freeze(exp! * SECOND);
    const after = await userinfo(access);
    expect(after.status).toBe(401);
    expect(after.headers.get('cache-control')).toBe('no-store');
    const challenge = after.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer realm="[^"]+"/);
    expect(challenge).toContain('error="invalid_token"');
    expect(((await after.json()) as { error: string }).error).toBe('invalid_token');
  });

  it('a refresh after the access token expired gives a new one that works for another hour', async () => {
    const { refresh: refreshToken, access } = await freshGrant();
    service.clock.advance(HOUR + MINUTE);
    expect((await userinfo(access)).status).toBe(401);
    const renewed = await refresh(refreshToken);
    expect(renewed.status).toBe(200);
    expect(renewed.json.expires_in).toBe(3600);
    const renewedAccess = String(renewed.json.access_token);
    expect((await userinfo(renewedAccess)).status).toBe(200);
    service.clock.advance(HOUR - MINUTE);
    expect((await userinfo(renewedAccess)).status).toBe(200);
    service.clock.advance(MINUTE);
    expect((await userinfo(renewedAccess)).status).toBe(401);
  });
});

describe('refresh token: 180 days of inactivity, sliding', () => {
  it('works after 179 days idle and fails after 180 days idle', async () => {
    expect(limits.refreshIdleTtl).toBe(180 * DAY);
    const idle179 = await freshGrant();
    const idle180 = await freshGrant();
    // both are idle from (at the latest) `after` of the second one
    moveClockTo(idle179.before + 179 * DAY);
    const used = await refresh(idle179.refresh);
    expect(used.status).toBe(200);
    expect(used.json.refresh_token).toBeNull();
    expect((await userinfo(String(used.json.access_token))).status).toBe(200);

    moveClockTo(idle180.after + 180 * DAY);
    expectInvalidGrant(await refresh(idle180.refresh));
    // it stays dead: no later use brings it back
    service.clock.advance(DAY);
    expectInvalidGrant(await refresh(idle180.refresh));
    // The one used at day 179 is only 2 days idle: still alive.
    expect((await refresh(idle179.refresh)).status).toBe(200);
  });

  it('works a millisecond before 180 days idle and fails at 180 days exactly', async () => {
    const early = await freshGrant();
    const exact = await freshGrant();
    service.clock.freeze((await lastUsedAt(early.refresh)) + 180 * DAY - 1);
    expect((await refresh(early.refresh)).status).toBe(200);
    service.clock.freeze((await lastUsedAt(exact.refresh)) + 180 * DAY);
    expectInvalidGrant(await refresh(exact.refresh));
  });

  it('lives on while used: refreshed every 100 days for 400 days, it still works, then dies 180 days after the last use', async () => {
    const grant = await freshGrant();
    for (let day = 100; day <= 400; day += 100) {
      service.clock.advance(100 * DAY);
      const reply = await refresh(grant.refresh);
      expect(reply.status, `day ${day}`).toBe(200);
      expect((await userinfo(String(reply.json.access_token))).status, `day ${day}`).toBe(200);
    }
    const lastUse = service.clock.now();

    // The stored item's TTL (DynamoDB's sweeper) moved with the window, or AWS would delete a live token.
    const item = (
      await db().send(new GetCommand({ TableName: tables.grants, Key: { grantId: grant.refresh.split('.')[0]! } }))
    ).Item!;
    expect(item.lastUsedAt).toBeGreaterThan(grant.after + 399 * DAY);
    expect(item.ttl).toBeGreaterThanOrEqual(Math.ceil((Number(item.lastUsedAt) + 180 * DAY) / 1000));

    moveClockTo(lastUse + 179 * DAY);
    // (this use slides the window once more)
    expect((await refresh(grant.refresh)).status).toBe(200);
    service.clock.advance(180 * DAY);
    expectInvalidGrant(await refresh(grant.refresh));
  });

  it('the window slides at most once a day: a use within a day of the last recorded one is not recorded (limits.refreshTouchInterval)', async () => {
    // Documented trade-off of the design brief (one write a day per grant, not one per refresh):
    // the expiry counts from the last *recorded* use, so it may come up to a day early.
    expect(limits.refreshTouchInterval).toBe(DAY);
    const grant = await freshGrant();
    service.clock.advance(23 * HOUR);
    expect((await refresh(grant.refresh)).status).toBe(200); // not recorded: < 1 day since the last write
    moveClockTo(grant.before + 180 * DAY - MINUTE);
    expect((await refresh(grant.refresh)).status).toBe(200); // recorded: > 1 day since the last write
    // and that use did slide the window
    service.clock.advance(179 * DAY);
    expect((await refresh(grant.refresh)).status).toBe(200);

    const unrecorded = await freshGrant();
    service.clock.advance(23 * HOUR);
    expect((await refresh(unrecorded.refresh)).status).toBe(200);
    moveClockTo(unrecorded.after + 180 * DAY);
    // 179 days and an hour after its last use, but 180 days after the last recorded one
    expectInvalidGrant(await refresh(unrecorded.refresh));
  });

  it('an idle-expired refresh token is not revived by revocation attempts or by the owner signing in again', async () => {
    const grant = await freshGrant();
    service.clock.advance(181 * DAY);
    expectInvalidGrant(await refresh(grant.refresh));
    // A new sign-in produces a new, independent grant; the old token stays dead.
    const again = await freshGrant();
    expect(again.refresh).not.toBe(grant.refresh);
    expect((await refresh(again.refresh)).status).toBe(200);
    expectInvalidGrant(await refresh(grant.refresh));
    // Revoking the dead token is still a 200 (RFC 7009) and changes nothing.
    expect(
      (await postForm(`${service.issuer}/oauth/revoke`, { token: grant.refresh, client_id: client.clientId })).status,
    ).toBe(200);
    expect((await refresh(again.refresh)).status).toBe(200);
  });
});
