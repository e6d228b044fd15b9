import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR } from '../core/directory/aliases';
import { readRuntimeConfig } from '../core/adapters/runtime-config';
import { clientKey, createRateLimiter } from '../core/kernel/rate-limit';
import { newUlid } from '../core/kernel/ids';
import { systemRandom } from '../core/adapters/system';
import {
  type Agent,
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  RotateAgentSvcnumRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { type Alias, CreateAliasRequest } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/alias_service';
import { CreateMaskRequest, type Mask } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { StoreFaults } from './support/faults';
import { call, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { aliasClient, formatted, freshIp, publicGet, resolvePath } from './support/public';
import { startTestService, type TestService } from './support/service';
import { TestClock } from './support/clock';

// GET /api/resolve and GET /api/discover end to end over real HTTP (and gRPC to set things up):
// every entity type by alias and by formatted number, masks without participants and expired
// after their TTL, discover with pagination and hidden agents, and the per-IP rate limit.
// Each request comes from its own loopback address unless a test wants one client's bucket.

let service: TestService;
let app: ProvisioningApp;
let aliases: ReturnType<typeof aliasClient>;
const apps: ProvisioningApp[] = [];
const faults = new StoreFaults();

beforeAll(async () => {
  // A small limit, so the limit test is quick.
  service = await startTestService({ wrapStore: faults.wrap, publicRateLimit: { burst: 5, perMinute: 6 } });
  await seedPool(service, '81', 300);
  app = await newApp();
  aliases = aliasClient(service);
});
afterAll(async () => {
  aliases?.close();
  for (const each of apps) each.close();
  await service?.close();
});

async function newApp(options: Parameters<typeof provisioningApp>[1] = {}) {
  const created = await provisioningApp(service, options);
  apps.push(created);
  return created;
}

const provision = (owner: ProvisioningApp, displayName = 'Line') =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    owner.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName }),
    owner.token,
  );
const createAgent = (owner: ProvisioningApp, fields: Partial<CreateAgentRequest>) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    owner.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName: 'Agent', ...fields }),
    owner.token,
  );
const createAlias = (owner: ProvisioningApp, svcnumId: string, alias: string) =>
  call<CreateAliasRequest, Alias>(
    aliases,
    'createAlias',
    CreateAliasRequest.fromPartial({ svcnumId, alias }),
    owner.token,
  );
const resolve = (query: string) => publicGet(service, resolvePath(query));
const discover = (query: Record<string, string>) =>
  publicGet(service, `/api/discover?${new URLSearchParams(query).toString()}`);

describe('GET /api/resolve', () => {
  it('resolves a programmable number by alias (any case) and by its number however formatted, revealing nothing else', async () => {
    const number = await provision(app, 'Pizza line');
    expect((await createAlias(app, number.svcnumId, 'Pizza.Shop')).alias).toBe('pizza.shop');
    const expected = { svcnum: number.svcnum, entity_type: 'programmable', state: 'active' };

    const byAlias = await resolve('PIZZA.shop');
    expect(byAlias.status).toBe(200);
    expect(byAlias.json).toEqual(expected);
    expect(byAlias.headers['content-type']).toBe('application/json');
    expect(byAlias.headers['cache-control']).toBe('public, max-age=10');
    expect(byAlias.headers['access-control-allow-origin']).toBe('*');
    for (const written of formatted(number.svcnum)) {
      const byNumber = await resolve(written);
      expect(byNumber.status, written).toBe(200);
      expect(byNumber.json, written).toEqual(expected);
    }
    expect(byAlias.text).not.toContain(number.svcnumId);
    expect(byAlias.text).not.toContain(app.owner.svcnumId);
    expect(byAlias.text).not.toContain('Pizza line');
  });

  it('resolves people and businesses by number, and a person by an operator alias, with nothing but number, type and state', async () => {
    const person = await service.core.registration.createUser({
      email: `resolve-${Date.now()}@example.com`,
      password: 'a long password 1',
    });
    const byNumber = await resolve(formatted(person.svcnum)[0]!);
    expect(byNumber.json).toEqual({ svcnum: person.svcnum, entity_type: 'person', state: 'active' });
    expect(byNumber.text).not.toContain(person.svcnumId);
    expect(byNumber.text).not.toContain('@example.com');

    await service.core.directory.aliases.create(OPERATOR, { svcnumId: person.svcnumId, alias: 'jane.doe' });
    expect((await resolve('jane.doe')).json).toEqual({ svcnum: person.svcnum, entity_type: 'person', state: 'active' });

    expect((await resolve(app.owner.svcnum)).json).toEqual({
      svcnum: app.owner.svcnum,
      entity_type: 'business',
      state: 'active',
    });
  });

  it('resolves an agent by alias, also after its number was rotated; the old number shows quarantined, the fallback is unknown', async () => {
    const { agent } = await createAgent(app, { displayName: 'Concierge' });
    await createAlias(app, agent!.svcnumId, 'concierge');
    expect((await resolve('concierge')).json).toEqual({
      svcnum: agent!.svcnum,
      entity_type: 'ai_agent',
      state: 'active',
    });

    const fallback = (await service.core.store.getUser(agent!.svcnumId))!.fallbackSvcnum!;
    expect((await resolve(fallback)).status).toBe(404); // reserved, not in use yet

    const rotated = await call<RotateAgentSvcnumRequest, Agent>(
      app.agents,
      'rotateAgentSvcnum',
      RotateAgentSvcnumRequest.fromPartial({ svcnumId: agent!.svcnumId }),
      app.token,
    );
    expect(rotated.svcnum).toBe(fallback);
    expect((await resolve('concierge')).json).toEqual({ svcnum: fallback, entity_type: 'ai_agent', state: 'active' });
    expect((await resolve(agent!.svcnum)).json).toEqual({
      svcnum: agent!.svcnum,
      entity_type: 'ai_agent',
      state: 'quarantined',
    });
  });

  it('shows the lifecycle: suspended, active again, then deactivated (quarantined), by alias and by number', async () => {
    const number = await provision(app);
    await createAlias(app, number.svcnumId, 'lifecycle-line');
    await service.core.provisioning.lifecycle.suspend(number.svcnum);
    expect((await resolve('lifecycle-line')).json).toMatchObject({ svcnum: number.svcnum, state: 'suspended' });
    await service.core.provisioning.lifecycle.reactivate(number.svcnum);
    expect((await resolve(number.svcnum)).json).toMatchObject({ state: 'active' });
    await service.core.provisioning.lifecycle.deactivate(number.svcnum);
    expect((await resolve('lifecycle-line')).json).toEqual({
      svcnum: number.svcnum,
      entity_type: 'programmable',
      state: 'quarantined',
    });
    expect((await resolve(number.svcnum)).json).toEqual({
      svcnum: number.svcnum,
      entity_type: 'programmable',
      state: 'quarantined',
    });
  });

  it('resolves a mask number as a mask without participants or owner, cached no longer than it lives, and expired after its TTL', async () => {
    const number = await provision(app);
    const person = await service.core.registration.createUser({
      email: `masked-${Date.now()}@example.com`,
      password: 'a long password 1',
    });
    const mask = await call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 60,
        participantA: number.svcnumId,
        participantB: person.svcnumId,
        scope: 'delivery.order-1',
      }),
      app.token,
    );

    const live = await resolve(formatted(mask.svcnum)[1]!);
    expect(live.status).toBe(200);
    expect(live.json).toEqual({ svcnum: mask.svcnum, entity_type: 'mask', state: 'active' });
    for (const secret of [
      mask.maskId,
      number.svcnumId,
      number.svcnum,
      person.svcnumId,
      person.svcnum,
      app.owner.svcnumId,
      'delivery',
    ]) {
      expect(live.text).not.toContain(secret);
    }
    expect(live.headers['cache-control']).toBe('public, max-age=10');

    service.clock.advance(55_000);
    expect((await resolve(mask.svcnum)).headers['cache-control']).toMatch(/^public, max-age=[1-5]$/);
    service.clock.advance(5_000);
    const expired = await resolve(mask.svcnum);
    expect(expired.json).toEqual({ svcnum: mask.svcnum, entity_type: 'mask', state: 'expired' });
    expect(expired.text).not.toContain(person.svcnumId);
  });

  it('answers 400 invalid_request for a missing, repeated or malformed query and 404 not_found for what is not in service', async () => {
    const refused = [
      '/api/resolve',
      '/api/resolve?alias=',
      '/api/resolve?alias=a&alias=b',
      resolvePath('ab'),
      resolvePath('x'.repeat(33)),
      resolvePath('12345'),
      resolvePath('+1 (555) 010'),
      resolvePath('1234567890123456'),
      resolvePath('-dash'),
      resolvePath('no spaces'),
      resolvePath('ünïcode'),
      resolvePath('\u212Aelvin'),
    ];
    for (const path of refused) {
      const reply = await publicGet(service, path);
      expect(reply.status, path).toBe(400);
      expect(reply.json.error, path).toBe('invalid_request');
      expect(typeof reply.json.error_description, path).toBe('string');
      expect(reply.headers['cache-control'], path).toBe('no-store');
    }
    // Unknown alias, a number nobody has, a number free in the pool.
    await service.core.provisioning.lifecycle.seed('81900000000', 1);
    const unknown = [resolvePath('nobody.here'), resolvePath('+9 999 999 9999'), resolvePath('81900000000')];
    for (const path of unknown) {
      const reply = await publicGet(service, path);
      expect(reply.status, path).toBe(404);
      expect(reply.json).toMatchObject({ error: 'not_found' });
      expect(reply.headers['cache-control'], path).toBe('no-store');
    }
    expect((await publicGet(service, resolvePath('pizza.shop'), { method: 'POST' })).status).toBe(405);
  });
});

describe('GET /api/discover', () => {
  type Listed = { agents: Array<Record<string, unknown>>; next_page_token: string };

  it('lists active, discoverable agents offering the capability, with svcnum, display name and capabilities only', async () => {
    const owner = await newApp();
    const shown = [];
    for (const name of ['Table booker', 'Room booker'])
      shown.push(
        (await createAgent(owner, { displayName: name, capabilities: ['booking.tables', 'chat'], discoverable: true }))
          .agent!,
      );
    await createAgent(owner, { displayName: 'Private', capabilities: ['booking.tables'], discoverable: false });
    await createAgent(owner, { displayName: 'Other skill', capabilities: ['chat'], discoverable: true });
    const suspended = (
      await createAgent(owner, { displayName: 'Suspended', capabilities: ['booking.tables'], discoverable: true })
    ).agent!;
    await service.core.provisioning.lifecycle.suspend(suspended.svcnum);
    const dependent = await call<CreateDependentAgentRequest, Agent>(
      owner.agents,
      'createDependentAgent',
      CreateDependentAgentRequest.fromPartial({
        displayName: 'Sub booker',
        capabilities: ['booking.tables'],
        discoverable: true,
      }),
      owner.token,
    );
    shown.push(dependent);

    const reply = await discover({ capability: 'booking.tables' });
    expect(reply.status).toBe(200);
    expect(reply.headers['cache-control']).toBe('public, max-age=30');
    expect(reply.json).toEqual({
      agents: shown.map((agent) => ({
        svcnum: agent.svcnum,
        display_name: agent.displayName,
        capabilities: agent.capabilities,
      })),
      next_page_token: '',
    });
    for (const secret of [owner.owner.svcnumId, ...shown.map((agent) => agent.svcnumId), 'Private', 'Suspended'])
      expect(reply.text).not.toContain(secret);

    // Reactivated, it shows again; suspended again, it is gone (readers re-check every agent).
    await service.core.provisioning.lifecycle.reactivate(suspended.svcnum);
    expect(
      ((await discover({ capability: 'booking.tables' })).json as Listed).agents.map((agent) => agent.display_name),
    ).toContain('Suspended');
    await service.core.provisioning.lifecycle.suspend(suspended.svcnum);
    expect(
      ((await discover({ capability: 'booking.tables' })).json as Listed).agents.map((agent) => agent.display_name),
    ).not.toContain('Suspended');

    expect((await discover({ capability: 'nobody.offers.this' })).json).toEqual({ agents: [], next_page_token: '' });
  });

  it('pages oldest first with page_size and page_token, skipping hidden agents, with no token on the last page', async () => {
    const owner = await newApp();
    const visible: string[] = [];
    for (let index = 0; index < 9; index++) {
      const hidden = index === 2 || index === 6;
      service.clock.advance(1); // distinct ULID times: index order is creation order
      const { agent } = await createAgent(owner, {
        displayName: `Pager ${index}`,
        capabilities: ['paging'],
        discoverable: !hidden,
      });
      if (!hidden) visible.push(agent!.svcnum);
    }
    const seen: string[] = [];
    const sizes: number[] = [];
    let token = '';
    for (let pages = 0; pages < 10; pages++) {
      const reply = await discover({ capability: 'paging', page_size: '3', ...(token ? { page_token: token } : {}) });
      expect(reply.status).toBe(200);
      const page = reply.json as Listed;
      sizes.push(page.agents.length);
      seen.push(...page.agents.map((agent) => String(agent.svcnum)));
      token = page.next_page_token;
      if (!token) break;
    }
    expect(seen).toEqual(visible);
    expect(sizes).toEqual([3, 3, 1]);

    // Defaults and bounds: 20 by default, page_size above 50 counts as 50, 0 as the default.
    expect(((await discover({ capability: 'paging' })).json as Listed).agents).toHaveLength(7);
    expect(((await discover({ capability: 'paging', page_size: '500' })).json as Listed).agents).toHaveLength(7);
    expect(((await discover({ capability: 'paging', page_size: '0' })).json as Listed).agents).toHaveLength(7);
  });

  it('answers 400 invalid_request for a missing or malformed capability, page_size or page_token', async () => {
    const first = (await discover({ capability: 'paging', page_size: '1' })).json as Listed;
    const other = Buffer.from(JSON.stringify({ c: 'chat', k: newUlid(service.clock, systemRandom) })).toString(
      'base64url',
    );
    for (const query of [
      {},
      { capability: '' },
      { capability: 'Has Space' },
      { capability: '-x' },
      { capability: 'x'.repeat(65) },
      { capability: 'paging', page_size: 'ten' },
      { capability: 'paging', page_size: '-1' },
      { capability: 'paging', page_size: '2.5' },
      { capability: 'paging', page_token: 'garbage' },
      { capability: 'paging', page_token: other },
      { capability: 'chat', page_token: first.next_page_token },
    ]) {
      const reply = await discover(query as Record<string, string>);
      expect(reply.status, JSON.stringify(query)).toBe(400);
      expect(reply.json.error).toBe('invalid_request');
      expect(reply.headers['cache-control']).toBe('no-store');
    }
  });

  it('skips index entries of agents that are gone, and a lost index write leaves the agent out instead of failing its creation', async () => {
    const ghost = newUlid(service.clock, systemRandom);
    await service.core.store.indexCapabilities(ghost, ['ghosts'], service.clock.now());
    expect((await discover({ capability: 'ghosts' })).json).toEqual({ agents: [], next_page_token: '' });

    faults.failOn('indexCapabilities');
    try {
      const { agent } = await createAgent(app, {
        displayName: 'Unindexed',
        capabilities: ['lost.write'],
        discoverable: true,
      });
      expect(agent!.discoverable).toBe(true);
      expect(faults.fired).toEqual(['indexCapabilities#1']);
    } finally {
      faults.reset();
    }
    expect((await discover({ capability: 'lost.write' })).json).toEqual({ agents: [], next_page_token: '' });
  });

  it('hides agents whose owner account is disabled or gone, within the account cache lifetime, at no owner read per request in steady state', async () => {
    const kept = await newApp();
    const disabled = await newApp();
    const keptAgent = (
      await createAgent(kept, { displayName: 'Kept', capabilities: ['owner.check'], discoverable: true })
    ).agent!;
    await createAgent(disabled, {
      displayName: 'Of a disabled owner',
      capabilities: ['owner.check'],
      discoverable: true,
    });
    // An agent whose owner record is gone (no deployed path deletes accounts; the admin CLI's operator may).
    const orphan = newUlid(service.clock, systemRandom);
    await service.core.store.createUser({
      svcnumId: orphan,
      svcnum: '89000000001',
      status: 'active',
      accountType: 'ai_agent',
      createdAt: service.clock.now(),
      ownerId: newUlid(service.clock, systemRandom),
      displayName: 'Orphan',
      capabilities: ['owner.check'],
      discoverable: true,
    });
    await service.core.store.indexCapabilities(orphan, ['owner.check'], service.clock.now());
    const names = async () =>
      ((await discover({ capability: 'owner.check' })).json as Listed).agents.map((agent) => agent.display_name);

    expect(await names()).toEqual(['Kept', 'Of a disabled owner']);
    await service.core.registration.disableUser(disabled.owner.svcnumId);
    // Owner status comes from the accounts cache (RECORD_CACHE_TTL, 30 s): past it, the change shows.
    service.clock.advance(30_001);
    faults.before('getUser', () => undefined);
    try {
      expect(await names()).toEqual(['Kept']);
      // The cache was stale: one read per distinct owner on the page (kept, disabled, gone).
      expect(faults.calls('getUser')).toBe(3);
      faults.reset();
      faults.before('getUser', () => undefined);
      // Warm: a disabled or unknown owner is not read again per request (anonymous callers cannot force reads).
      for (let request = 0; request < 3; request++) expect(await names()).toEqual(['Kept']);
      expect(faults.calls('getUser')).toBe(0);
    } finally {
      faults.reset();
    }
    const reply = await discover({ capability: 'owner.check' });
    expect(reply.text).not.toContain(disabled.owner.svcnumId);
    expect(reply.json).toEqual({
      agents: [{ svcnum: keptAgent.svcnum, display_name: 'Kept', capabilities: ['owner.check'] }],
      next_page_token: '',
    });

    // Active again, its agents show again once the cached answer has lapsed.
    await service.core.store.setUserStatus(disabled.owner.svcnumId, 'active');
    service.clock.advance(30_001);
    expect(await names()).toEqual(['Kept', 'Of a disabled owner']);
  });
});

describe('per-IP rate limit of the public endpoints', () => {
  it('allows a burst of 5 per address across both endpoints, then 429 with Retry-After, and recovers as time passes', async () => {
    const ip = freshIp();
    const other = freshIp();
    const paths = [
      resolvePath('pizza.shop'),
      '/api/discover?capability=chat',
      resolvePath('nobody.here'),
      resolvePath('pizza.shop'),
      '/api/discover?capability=chat',
    ];
    for (const path of paths) expect((await publicGet(service, path, { ip })).status, path).not.toBe(429);

    const limited = await publicGet(service, resolvePath('pizza.shop'), { ip });
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    // 6 per minute: one request every 10 s (a little less if the burst took a while).
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(9);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(10);
    expect(limited.json).toMatchObject({ error: 'rate_limited' });
    expect(String(limited.json.error_description)).toContain('retry');
    expect(limited.headers['cache-control']).toBe('no-store');
    expect((await publicGet(service, '/api/discover?capability=chat', { ip })).status).toBe(429);

    // Another address has its own bucket.
    expect((await publicGet(service, resolvePath('pizza.shop'), { ip: other })).status).toBe(200);

    // 10 s later one request is allowed again, and only one.
    service.clock.advance(10_000);
    expect((await publicGet(service, resolvePath('pizza.shop'), { ip })).status).toBe(200);
    expect((await publicGet(service, resolvePath('pizza.shop'), { ip })).status).toBe(429);
    // After a minute idle the whole burst is back.
    service.clock.advance(60_000);
    for (let index = 0; index < 5; index++)
      expect((await publicGet(service, resolvePath('pizza.shop'), { ip })).status).toBe(200);
    expect((await publicGet(service, resolvePath('pizza.shop'), { ip })).status).toBe(429);
  });

  it('keeps a bounded number of buckets, keys IPv6 clients by /64, and reads its limits from the environment', () => {
    const clock = new TestClock();
    const limiter = createRateLimiter({ burst: 2, perMinute: 60, maxClients: 100 }, clock);
    for (let index = 0; index < 5_000; index++) limiter.take(`10.0.${Math.floor(index / 250)}.${index % 250}`);
    expect(limiter.size).toBeLessThanOrEqual(100);
    expect(limiter.take('192.0.2.1')).toEqual({ allowed: true, remaining: 1 });
    expect(limiter.take('192.0.2.1')).toEqual({ allowed: true, remaining: 0 });
    expect(limiter.take('192.0.2.1')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    clock.advance(1_000);
    expect(limiter.take('192.0.2.1').allowed).toBe(true);

    expect(clientKey('::ffff:203.0.113.9')).toBe('203.0.113.9');
    expect(clientKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe(clientKey('2001:0db8:0001:0002::9'));
    expect(clientKey('2001:db8:1:3::9')).not.toBe(clientKey('2001:db8:1:2::9'));
    expect(clientKey(undefined)).toBe('unknown');
    expect(clientKey('not an address')).toBe('unknown');

    const rateLimitFromEnvironment = (env: Record<string, string>) =>
      readRuntimeConfig('local', env).service.publicRateLimit;
    expect(rateLimitFromEnvironment({})).toEqual({ burst: 20, perMinute: 300 });
    expect(rateLimitFromEnvironment({ PUBLIC_RATE_LIMIT_BURST: '50', PUBLIC_RATE_LIMIT_PER_MINUTE: '600' })).toEqual({
      burst: 50,
      perMinute: 600,
    });
    expect(() => rateLimitFromEnvironment({ PUBLIC_RATE_LIMIT_PER_MINUTE: '0' })).toThrow(
      /PUBLIC_RATE_LIMIT_PER_MINUTE/,
    );
    expect(() => rateLimitFromEnvironment({ PUBLIC_RATE_LIMIT_BURST: 'lots' })).toThrow(/PUBLIC_RATE_LIMIT_BURST/);
  });
});
