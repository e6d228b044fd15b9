import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECORD_CACHE_TTL } from '../core/accounts';
import { ttlCache } from '../core/kernel/cache';
import type { DomainError } from '../core/kernel/errors';
import type { Client } from '../core/kernel/model';
import { paramsFrom } from '../core/kernel/params';
import { TestClock } from './support/clock';
import { StoreCallCounter, totalCalls } from './support/faults';
import { createLoginClient, createUser, exchange, obtainCode, postForm, send, type Reply } from './support/flow';
import { provisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// The token endpoint's and UserInfo's hot paths (issue 11): store round trips per request, counted
// at the store port of the running service, and the caching that makes client_credentials cost
// none: client records and account status trusted for at most 30 s, a refused one read again.

let service: TestService;
const calls = new StoreCallCounter();
let tokenUrl: string;
let login: { email: string; password: string };
let loginClient: Client;

beforeAll(async () => {
  service = await startTestService({ wrapStore: calls.wrap });
  tokenUrl = `${service.issuer}/oauth/token`;
  login = await createUser(service);
  loginClient = await createLoginClient(service);
}, 60_000);

afterAll(async () => {
  await service?.close();
});

const clientCredentials = (clientId: string, clientSecret: string) =>
  postForm(tokenUrl, { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret });

function expectStatus(reply: Reply, status: number, error?: string) {
  expect({ status: reply.status, error: reply.json.error }).toEqual({ status, error });
}

async function apiClient() {
  const { client, clientSecret } = await service.core.registration.createApiClient({
    name: 'Partner',
    scope: 'messaging poll',
  });
  return { clientId: client.clientId, clientSecret: clientSecret! };
}

async function codeTokens() {
  const { code, verifier } = await obtainCode(service, loginClient, login);
  const tokens = await exchange(service, loginClient, code, verifier);
  expect(tokens.status).toBe(200);
  return { accessToken: String(tokens.json.access_token), refreshToken: String(tokens.json.refresh_token) };
}

describe('store round trips per request', () => {
  it("client_credentials: none once the client (and a provisioning client's owner) is cached", async () => {
    const api = await apiClient();
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
    const app = await provisioningApp(service);
    app.close();
    for (const { clientId, clientSecret } of [api, app, api, app]) {
      const counted = await calls.during(async () =>
        expectStatus(await clientCredentials(clientId, clientSecret), 200),
      );
      expect(counted).toEqual({});
    }
  });

  it('authorization_code: three (redeem the code, create the grant, read the account)', async () => {
    const { code, verifier } = await obtainCode(service, loginClient, login);
    const counted = await calls.during(async () =>
      expect((await exchange(service, loginClient, code, verifier)).status).toBe(200),
    );
    expect(counted).toEqual({ redeemCode: 1, createGrant: 1, getUser: 1 });
  });

  it('refresh_token: one (the grant)', async () => {
    const { refreshToken } = await codeTokens();
    for (let turn = 0; turn < 3; turn++) {
      const counted = await calls.during(async () => {
        expectStatus(
          await postForm(tokenUrl, {
            grant_type: 'refresh_token',
            refresh_token: refreshToken,
            client_id: loginClient.clientId,
          }),
          200,
        );
      });
      expect(counted).toEqual({ getGrant: 1 });
    }
  });

  it('UserInfo: one (the account and the grant together)', async () => {
    const { accessToken } = await codeTokens();
    for (let turn = 0; turn < 3; turn++) {
      const counted = await calls.during(async () => {
        const reply = await send(`${service.issuer}/oauth/userinfo`, {
          method: 'GET',
          headers: { Authorization: `Bearer ${accessToken}` },
        });
        expect(reply.status).toBe(200);
      });
      expect(totalCalls(counted)).toBe(1);
    }
  });
});

describe('client records and account status: trusted for at most 30 s, a refusal read again', () => {
  it('a new secret works at once; the replaced one keeps working for at most 30 s', async () => {
    const api = await apiClient();
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
    const second = await service.core.registration.rotateClientSecret(api.clientId);
    // The cached record still holds the replaced secret's hash …
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
    // … which stops once it is older than 30 s.
    service.clock.advance(RECORD_CACHE_TTL);
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 401, 'invalid_client');
    expectStatus(await clientCredentials(api.clientId, second), 200);

    // A new secret: refused by the cached record, so the record is read again, and it works at once.
    const third = await service.core.registration.rotateClientSecret(api.clientId);
    const counted = await calls.during(async () => expectStatus(await clientCredentials(api.clientId, third), 200));
    expect(counted).toEqual({ getClient: 1 });
    // This process has now read the new record: the replaced secret stops here at once.
    expectStatus(await clientCredentials(api.clientId, second), 401, 'invalid_client');
  });

  it('a disabled client keeps working for at most 30 s; enabled again, it works at once', async () => {
    const api = await apiClient();
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
    await service.core.store.setClientDisabled(api.clientId, true);
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
    service.clock.advance(RECORD_CACHE_TTL);
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 401, 'invalid_client');
    await service.core.store.setClientDisabled(api.clientId, false);
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
  });

  it('a provisioning client of a disabled owner gets tokens for at most 30 s more; reactivated, at once', async () => {
    const app = await provisioningApp(service);
    app.close();
    await service.core.registration.disableUser(app.owner.svcnumId);
    expectStatus(await clientCredentials(app.clientId, app.clientSecret), 200);
    service.clock.advance(RECORD_CACHE_TTL);
    expectStatus(await clientCredentials(app.clientId, app.clientSecret), 400, 'invalid_grant');
    await service.core.store.setUserStatus(app.owner.svcnumId, 'active');
    expectStatus(await clientCredentials(app.clientId, app.clientSecret), 200);
  });

  it('a flood of wrong secrets for one client reads it once per wave, not once per request', async () => {
    const api = await apiClient();
    expectStatus(await clientCredentials(api.clientId, api.clientSecret), 200);
    const wrong = {
      basic: {
        clientId: api.clientId,
        clientSecret: `${api.clientSecret.slice(0, -1)}${api.clientSecret.endsWith('A') ? 'B' : 'A'}`,
      },
    };
    const wave = () =>
      Promise.allSettled(
        Array.from({ length: 20 }, () =>
          service.core.tokenEndpoint.token(
            paramsFrom(new URLSearchParams({ grant_type: 'client_credentials' })),
            wrong,
          ),
        ),
      );
    for (let round = 0; round < 2; round++) {
      let outcomes: PromiseSettledResult<unknown>[] = [];
      const counted = await calls.during(async () => {
        outcomes = await wave();
      });
      expect(outcomes.map((outcome) => outcome.status === 'rejected' && (outcome.reason as DomainError).oauth)).toEqual(
        Array(20).fill('invalid_client'),
      );
      expect(counted).toEqual({ getClient: 1 });
    }
  });

  it('a revoked grant fails its next refresh at once (grants are never cached)', async () => {
    const { refreshToken } = await codeTokens();
    const refresh = () =>
      postForm(tokenUrl, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: loginClient.clientId });
    expectStatus(await refresh(), 200);
    expect(
      (await postForm(`${service.issuer}/oauth/revoke`, { token: refreshToken, client_id: loginClient.clientId }))
        .status,
    ).toBe(200);
    expectStatus(await refresh(), 400, 'invalid_grant');
  });
});

describe('ttlCache', () => {
  const gate = () => {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    return { open, opened };
  };

  it('shares one load among concurrent misses of a key, and keeps the value for its lifetime by the clock', async () => {
    const clock = new TestClock();
    clock.freeze();
    let loads = 0;
    const loaded = gate();
    const cache = ttlCache(
      async (key) => {
        loads++;
        await loaded.opened;
        return `${key}:${loads}`;
      },
      { clock, ttlMs: 1000 },
    );
    const waiting = Promise.all(Array.from({ length: 10 }, () => cache.get('a')));
    loaded.open();
    expect(await waiting).toEqual(Array(10).fill('a:1'));
    clock.freeze(clock.now() + 999);
    expect(await cache.get('a')).toBe('a:1');
    clock.freeze(clock.now() + 1);
    expect(await cache.get('a')).toBe('a:2');
    expect(loads).toBe(2);
  });

  it('does not keep a failed load: every caller sharing it sees the failure, the next call loads again', async () => {
    const clock = new TestClock();
    let loads = 0;
    const cache = ttlCache(
      async () => {
        if (++loads === 1) throw new Error('store unavailable');
        return 'value';
      },
      { clock, ttlMs: 1000 },
    );
    const first = await Promise.allSettled([cache.get('a'), cache.get('a')]);
    expect(first.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
    expect(await cache.get('a')).toBe('value');
    expect(loads).toBe(2);
  });

  it('is bounded: past maxEntries it starts over', async () => {
    const clock = new TestClock();
    let loads = 0;
    const cache = ttlCache(
      async (key) => {
        loads++;
        return key;
      },
      { clock, ttlMs: 60_000, maxEntries: 3 },
    );
    for (const key of ['a', 'b', 'c', 'a']) await cache.get(key);
    expect(loads).toBe(3);
    await cache.get('d');
    await cache.get('a');
    expect(loads).toBe(5);
  });

  it('recheck: a settled value is not read again; an unsettled one is, once for callers together, unless it was just read', async () => {
    const clock = new TestClock();
    let version = 1;
    let loads = 0;
    const cache = ttlCache(
      async () => {
        loads++;
        return version;
      },
      { clock, ttlMs: 60_000 },
    );
    // Read for this call: not read twice.
    expect(await cache.recheck('a', (value) => value === 2)).toBe(1);
    expect(loads).toBe(1);
    expect(await cache.recheck('a', (value) => value === 1)).toBe(1);
    expect(loads).toBe(1);
    version = 2;
    expect(await Promise.all(Array.from({ length: 10 }, () => cache.recheck('a', (value) => value === 2)))).toEqual(
      Array(10).fill(2),
    );
    expect(loads).toBe(2);
    expect(await cache.get('a')).toBe(2);
  });
});
