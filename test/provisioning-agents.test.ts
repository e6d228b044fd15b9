import { status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY, SECOND } from '../core/kernel/config';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import {
  type Agent,
  AgentKind,
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  GetAgentRequest,
  IssueAgentTokenRequest,
  ListAgentsRequest,
  type ListAgentsResponse,
  RotateAgentSvcnumRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { type AccessToken, NumberState } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  ListNumbersRequest,
  type ListNumbersResponse,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { postForm, send, verifyWithJwks } from './support/flow';
import { call, clientCredentialsToken, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { StoreFaults } from './support/faults';
import { startTestService, type TestService } from './support/service';

// AgentService end to end over gRPC on loopback: independent and dependent agents, their
// credentials and tokens, exact quotas under concurrency, listing, and number rotation with
// quarantine. Token exchange has its own file (token-exchange.test.ts).

const ALL_AGENT_SCOPES = 'openid profile messaging';

let service: TestService;
const apps: ProvisioningApp[] = [];
const faults = new StoreFaults();

beforeAll(async () => {
  service = await startTestService({ wrapStore: faults.wrap });
  await seedPool(service, '74', 260);
});
afterAll(async () => {
  for (const app of apps) app.close();
  await service?.close();
});

async function newApp(options: Parameters<typeof provisioningApp>[1] = {}) {
  const app = await provisioningApp(service, options);
  apps.push(app);
  return app;
}

const createAgent = (app: ProvisioningApp, fields: Partial<CreateAgentRequest>) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    app.agents,
    'createAgent',
    CreateAgentRequest.fromPartial(fields),
    app.token,
  );
const createDependent = (app: ProvisioningApp, fields: Partial<CreateDependentAgentRequest>) =>
  call<CreateDependentAgentRequest, Agent>(
    app.agents,
    'createDependentAgent',
    CreateDependentAgentRequest.fromPartial(fields),
    app.token,
  );
const getAgent = (app: ProvisioningApp, svcnumId: string) =>
  call<GetAgentRequest, Agent>(app.agents, 'getAgent', GetAgentRequest.fromPartial({ svcnumId }), app.token);
const listAgents = (app: ProvisioningApp, fields: Partial<ListAgentsRequest>) =>
  call<ListAgentsRequest, ListAgentsResponse>(
    app.agents,
    'listAgents',
    ListAgentsRequest.fromPartial(fields),
    app.token,
  );
const issueToken = (app: ProvisioningApp, svcnumId: string, scope = '') =>
  call<IssueAgentTokenRequest, AccessToken>(
    app.agents,
    'issueAgentToken',
    IssueAgentTokenRequest.fromPartial({ svcnumId, scope }),
    app.token,
  );
const rotate = (app: ProvisioningApp, svcnumId: string) =>
  call<RotateAgentSvcnumRequest, Agent>(
    app.agents,
    'rotateAgentSvcnum',
    RotateAgentSvcnumRequest.fromPartial({ svcnumId }),
    app.token,
  );

const clientCredentials = (clientId: string, clientSecret: string, scope?: string) =>
  postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'client_credentials',
    client_id: clientId,
    client_secret: clientSecret,
    ...(scope ? { scope } : {}),
  });
const userinfo = (token: string) =>
  send(`${service.issuer}/oauth/userinfo`, { method: 'GET', headers: { Authorization: `Bearer ${token}` } });
const claimsOf = async (token: string) =>
  (await verifyWithJwks(service, token, { audience: service.issuer, typ: 'at+jwt' })).payload;

/** Every page of a listing, checking each page's size. */
async function listAll(app: ProvisioningApp, kind: AgentKind, pageSize: number): Promise<Agent[]> {
  const all: Agent[] = [];
  let pageToken = '';
  for (let pages = 0; pages < 50; pages++) {
    const page = await listAgents(app, { pageSize, pageToken, kind });
    expect(page.agents.length).toBeLessThanOrEqual(pageSize);
    // A token never leads to an empty page: the page that ends the list carries none.
    if (pageToken) expect(page.agents.length).toBeGreaterThan(0);
    all.push(...page.agents);
    if (!page.nextPageToken) return all;
    pageToken = page.nextPageToken;
  }
  throw new Error('the listing never ended');
}

async function settle<T>(calls: Array<Promise<T>>) {
  const results = await Promise.allSettled(calls);
  return {
    ok: results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : [])),
    failed: results.flatMap((result) => (result.status === 'rejected' ? [result.reason as ServiceError] : [])),
  };
}

describe('CreateAgent', () => {
  it('returns the agent with client credentials that work at the token endpoint and UserInfo as the agent', async () => {
    const app = await newApp({ accountType: 'person' });
    const created = await createAgent(app, {
      displayName: '  Booking helper ',
      capabilities: ['booking', 'travel:flights'],
      discoverable: true,
    });
    const agent = created.agent!;
    expect(agent.svcnumId).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(agent.svcnum).toMatch(/^74\d{9}$/);
    expect(agent).toMatchObject({
      kind: AgentKind.AGENT_KIND_INDEPENDENT,
      ownerSvcnumId: app.owner.svcnumId,
      displayName: 'Booking helper',
      capabilities: ['booking', 'travel:flights'],
      discoverable: true,
      scope: ALL_AGENT_SCOPES,
      state: NumberState.NUMBER_STATE_ACTIVE,
    });
    expect(created.clientId).not.toBe('');
    expect(agent.clientId).toBe(created.clientId);
    expect(created.clientSecret).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(Math.abs(agent.createTime!.getTime() - service.clock.now())).toBeLessThan(60_000);

    const reply = await clientCredentials(created.clientId, created.clientSecret);
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: ALL_AGENT_SCOPES });
    const claims = await claimsOf(String(reply.json.access_token));
    expect(claims.sub).toBe(agent.svcnumId);
    expect(claims.client_id).toBe(created.clientId);

    const info = await userinfo(String(reply.json.access_token));
    expect(info.status).toBe(200);
    expect(info.json).toMatchObject({ sub: agent.svcnumId, svcnum: agent.svcnum, account_type: 'ai_agent' });

    // A wrong secret does not work.
    expect((await clientCredentials(created.clientId, `${created.clientSecret.slice(0, -2)}xx`)).status).toBe(401);
    // The token carries only the scopes of the agent.
    expect((await clientCredentials(created.clientId, created.clientSecret, 'openid email')).json.error).toBe(
      'invalid_scope',
    );
    // An agent created with a narrower scope gets only that.
    const narrow = await createAgent(app, { displayName: 'Narrow', scope: 'messaging' });
    expect(narrow.agent!.scope).toBe('messaging');
    const narrowReply = await clientCredentials(narrow.clientId, narrow.clientSecret);
    expect(narrowReply.json.scope).toBe('messaging');
    // Without openid, UserInfo refuses the token.
    expect((await userinfo(String(narrowReply.json.access_token))).status).toBe(403);
  });

  it('refuses fields out of bounds with INVALID_ARGUMENT and leaves nothing behind', async () => {
    const app = await newApp();
    const bad: Array<[string, Partial<CreateAgentRequest>]> = [
      ['no display_name', {}],
      ['blank display_name', { displayName: '   ' }],
      ['display_name of 101 characters', { displayName: 'x'.repeat(101) }],
      ['upper-case capability', { displayName: 'A', capabilities: ['Booking'] }],
      ['empty capability', { displayName: 'A', capabilities: [''] }],
      ['capability with a space', { displayName: 'A', capabilities: ['book flights'] }],
      ['capability of 65 characters', { displayName: 'A', capabilities: ['c'.repeat(65)] }],
      ['21 capabilities', { displayName: 'A', capabilities: Array.from({ length: 21 }, (_, i) => `cap-${i}`) }],
      ['scope email', { displayName: 'A', scope: 'openid email' }],
      ['scope poll', { displayName: 'A', scope: 'poll' }],
      ['scope prov:agents', { displayName: 'A', scope: 'messaging prov:agents' }],
      ['request_id of 65 characters', { displayName: 'A', requestId: 'r'.repeat(65) }],
    ];
    for (const [why, fields] of bad) {
      const error = await failure(createAgent(app, fields));
      expect(error.code, why).toBe(status.INVALID_ARGUMENT);
      expect(error.details, why).not.toBe('');
    }
    expect((await failure(createAgent(app, { displayName: 'x'.repeat(101) }))).details).toContain('display_name');
    expect((await failure(createAgent(app, { displayName: 'A', scope: 'email' }))).details).toContain(
      'openid profile messaging',
    );
    expect((await listAgents(app, {})).agents).toEqual([]);

    // The bounds themselves are accepted.
    const edge = await createAgent(app, {
      displayName: 'y'.repeat(100),
      capabilities: Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(64, 'k')),
      scope: 'openid profile',
      requestId: 'q'.repeat(64),
    });
    expect(edge.agent!.displayName).toHaveLength(100);
    expect(edge.agent!.capabilities).toHaveLength(20);
    expect(edge.agent!.scope).toBe('openid profile');
  });

  it('replays a request_id: same agent and client with a new secret; a different request with it is ALREADY_EXISTS', async () => {
    const app = await newApp();
    const request = {
      requestId: `agent-${Date.now()}`,
      displayName: 'Idempotent',
      capabilities: ['support'],
      scope: 'openid messaging',
    };
    const first = await createAgent(app, request);
    const again = await createAgent(app, request);
    expect(again.agent).toEqual(first.agent);
    expect(again.clientId).toBe(first.clientId);
    expect(again.clientSecret).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(again.clientSecret).not.toBe(first.clientSecret);
    // The secret of the replay is the one that works (neither secret was used before the replay).
    const fresh = await clientCredentials(again.clientId, again.clientSecret);
    expect(fresh.status).toBe(200);
    expect((await claimsOf(String(fresh.json.access_token))).sub).toBe(first.agent!.svcnumId);
    expect((await clientCredentials(first.clientId, first.clientSecret)).json.error).toBe('invalid_client');

    // One agent only, however often it is retried.
    expect((await listAgents(app, {})).agents.map((agent) => agent.svcnumId)).toEqual([first.agent!.svcnumId]);

    // The same key with a different request.
    const conflict = await failure(createAgent(app, { ...request, displayName: 'Something else' }));
    expect(conflict.code).toBe(status.ALREADY_EXISTS);
    expect(conflict.details).toContain('request_id');
    expect((await failure(createAgent(app, { ...request, scope: '' }))).code).toBe(status.ALREADY_EXISTS);
    // Keys are per caller: another account may use the same request_id for its own agent.
    const other = await newApp();
    const theirs = await createAgent(other, request);
    expect(theirs.agent!.svcnumId).not.toBe(first.agent!.svcnumId);
  });

  it("a replay's new secret works at once and the earlier secret stops at once, also when the earlier one was in use", async () => {
    // The client cache (30 s) still holds the earlier hash after the rotation: the new secret is
    // refused by it, so the record is read again and the new secret works; the cache then holds
    // the new hash, so in this process the earlier secret stops at once (elsewhere within 30 s).
    const app = await newApp();
    const request = { requestId: `used-${Date.now()}`, displayName: 'Used before retry' };
    const first = await createAgent(app, request);
    expect((await clientCredentials(first.clientId, first.clientSecret)).status).toBe(200);
    const again = await createAgent(app, request);
    expect(again.clientId).toBe(first.clientId);
    expect((await clientCredentials(again.clientId, again.clientSecret)).status).toBe(200);
    const stale = await clientCredentials(first.clientId, first.clientSecret);
    expect(stale.status).toBe(401);
    expect(stale.json.error).toBe('invalid_client');
  });
});

describe('agent quotas', () => {
  it('30 concurrent CreateAgent calls for one owner: exactly 10 succeed, 20 are RESOURCE_EXHAUSTED', async () => {
    const app = await newApp({ accountType: 'person' });
    const { ok, failed } = await settle(
      Array.from({ length: 30 }, (_, i) => createAgent(app, { displayName: `Racer ${i}` })),
    );
    expect(failed.map((error) => error.code)).toEqual(Array(20).fill(status.RESOURCE_EXHAUSTED));
    expect(ok).toHaveLength(10);
    expect(failed[0]!.details).toMatch(/quota of 10 independent agents/);
    expect(failed[0]!.details).toMatch(/on request/);
    expect(new Set(ok.map((created) => created.agent!.svcnum)).size).toBe(10);
    expect(await listAll(app, AgentKind.AGENT_KIND_INDEPENDENT, 100)).toHaveLength(10);
    // Still full afterwards.
    expect((await failure(createAgent(app, { displayName: 'One more' }))).code).toBe(status.RESOURCE_EXHAUSTED);
  });

  it('30 concurrent CreateDependentAgent calls under one owner: exactly 10; another owner (an agent) has its own 10', async () => {
    const app = await newApp();
    const { ok, failed } = await settle(
      Array.from({ length: 30 }, (_, i) => createDependent(app, { displayName: `Sub ${i}` })),
    );
    expect(failed.map((error) => error.code)).toEqual(Array(20).fill(status.RESOURCE_EXHAUSTED));
    expect(ok).toHaveLength(10);
    expect(failed[0]!.details).toMatch(/quota of 10 dependent agents/);
    expect(ok.every((agent) => agent.ownerSvcnumId === app.owner.svcnumId)).toBe(true);

    // The dependent quota is per owner: an independent agent of the same account has its own 10,
    // and the account's independent quota is untouched by dependents.
    const owner = (await createAgent(app, { displayName: 'Team lead' })).agent!;
    const underAgent = await settle(
      Array.from({ length: 12 }, (_, i) =>
        createDependent(app, { displayName: `Helper ${i}`, ownerSvcnumId: owner.svcnumId }),
      ),
    );
    expect(underAgent.ok).toHaveLength(10);
    expect(underAgent.failed.map((error) => error.code)).toEqual([
      status.RESOURCE_EXHAUSTED,
      status.RESOURCE_EXHAUSTED,
    ]);
    expect(underAgent.ok.every((agent) => agent.ownerSvcnumId === owner.svcnumId)).toBe(true);
    expect(await listAll(app, AgentKind.AGENT_KIND_DEPENDENT, 100)).toHaveLength(20);
    expect((await failure(createDependent(app, { displayName: 'Over' }))).code).toBe(status.RESOURCE_EXHAUSTED);
  });

  it('a per-owner override raises the quota: exactly 12 of 30 concurrent creations', async () => {
    const app = await newApp({ accountType: 'person' });
    await service.core.store.setQuotaOverrides(app.owner.svcnumId, { independentAgentQuota: 12 });
    const { ok, failed } = await settle(
      Array.from({ length: 30 }, (_, i) => createAgent(app, { displayName: `Big ${i}` })),
    );
    expect(ok).toHaveLength(12);
    expect(failed.map((error) => error.code)).toEqual(Array(18).fill(status.RESOURCE_EXHAUSTED));
    expect(failed[0]!.details).toMatch(/quota of 12 independent agents/);
  });
});

describe('ListAgents and GetAgent', () => {
  let app: ProvisioningApp;
  let other: ProvisioningApp;
  let independents: Agent[];
  let dependents: Agent[];
  beforeAll(async () => {
    app = await newApp();
    other = await newApp();
    independents = [];
    dependents = [];
    independents.push((await createAgent(app, { displayName: 'First' })).agent!);
    dependents.push(await createDependent(app, { displayName: 'Second' }));
    independents.push((await createAgent(app, { displayName: 'Third', scope: 'openid messaging' })).agent!);
    dependents.push(await createDependent(app, { displayName: 'Fourth', ownerSvcnumId: independents[0]!.svcnumId }));
    independents.push((await createAgent(app, { displayName: 'Fifth' })).agent!);
    await createAgent(other, { displayName: 'Not yours' });
  });

  it("lists the caller's agents oldest first, page by page, and filters by kind", async () => {
    const names = (agents: Agent[]) => agents.map((agent) => agent.displayName);
    expect(names(await listAll(app, AgentKind.AGENT_KIND_UNSPECIFIED, 2))).toEqual([
      'First',
      'Second',
      'Third',
      'Fourth',
      'Fifth',
    ]);
    const firstPage = await listAgents(app, { pageSize: 2 });
    expect(firstPage.agents).toHaveLength(2);
    expect(firstPage.nextPageToken).not.toBe('');
    expect(names(await listAll(app, AgentKind.AGENT_KIND_INDEPENDENT, 2))).toEqual(['First', 'Third', 'Fifth']);
    expect(names(await listAll(app, AgentKind.AGENT_KIND_DEPENDENT, 1))).toEqual(['Second', 'Fourth']);
    // A page that ends the list exactly has no next_page_token.
    expect((await listAgents(app, { pageSize: 3, kind: AgentKind.AGENT_KIND_INDEPENDENT })).nextPageToken).toBe('');
    expect((await listAgents(app, { pageSize: 5 })).nextPageToken).toBe('');
    expect((await listAgents(app, { pageSize: 4 })).nextPageToken).not.toBe('');
    const everything = await listAgents(app, {});
    expect(everything.nextPageToken).toBe('');
    expect(everything.agents.map((agent) => agent.kind)).toEqual([
      AgentKind.AGENT_KIND_INDEPENDENT,
      AgentKind.AGENT_KIND_DEPENDENT,
      AgentKind.AGENT_KIND_INDEPENDENT,
      AgentKind.AGENT_KIND_DEPENDENT,
      AgentKind.AGENT_KIND_INDEPENDENT,
    ]);
    expect(everything.agents[3]!.ownerSvcnumId).toBe(independents[0]!.svcnumId);
    expect(everything.agents[1]!.clientId).toBe('');
    expect(names((await listAgents(other, {})).agents)).toEqual(['Not yours']);
  });

  it('is oldest first by create_time after concurrent creates, whichever commits first', async () => {
    const owner = await newApp();
    // The first create is held just before its commit while a second one, asked for a second later, commits.
    let reachedCommit!: () => void;
    const atCommit = new Promise<void>((resolve) => {
      reachedCommit = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    faults.before('createUser', async (entity) => {
      if (entity.displayName !== 'Asked first') return;
      reachedCommit();
      await released;
    });
    try {
      const first = createAgent(owner, { displayName: 'Asked first' });
      await atCommit;
      service.clock.advance(1_000);
      const second = (await createAgent(owner, { displayName: 'Asked second' })).agent!;
      service.clock.advance(1_000);
      release();
      const firstAgent = (await first).agent!;
      expect(firstAgent.createTime!.getTime()).toBeLessThan(second.createTime!.getTime());
      // A burst besides: every create_time of the listing is at or after the one before it.
      await Promise.all([1, 2, 3, 4, 5, 6].map((n) => createAgent(owner, { displayName: `Burst ${n}` })));
      const listed = (await listAgents(owner, {})).agents;
      expect(listed.slice(0, 2).map((agent) => agent.displayName)).toEqual(['Asked first', 'Asked second']);
      expect(listed.map((agent) => agent.createTime!.getTime())).toEqual(
        listed.map((agent) => agent.createTime!.getTime()).sort((a, b) => a - b),
      );
      expect((await getAgent(owner, firstAgent.svcnumId)).createTime).toEqual(firstAgent.createTime);
    } finally {
      faults.reset();
      release();
    }
  });

  it('refuses a negative page_size and page tokens it did not issue for this caller and kind', async () => {
    expect((await failure(listAgents(app, { pageSize: -1 }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await failure(listAgents(app, { pageToken: 'not-a-token' }))).code).toBe(status.INVALID_ARGUMENT);
    const independentToken = (await listAgents(app, { pageSize: 1, kind: AgentKind.AGENT_KIND_INDEPENDENT }))
      .nextPageToken;
    expect(independentToken).not.toBe('');
    // Someone else's token.
    expect(
      (await failure(listAgents(other, { pageToken: independentToken, kind: AgentKind.AGENT_KIND_INDEPENDENT }))).code,
    ).toBe(status.INVALID_ARGUMENT);
    // A token returned for a different kind.
    const wrongKind = await failure(
      listAgents(app, { pageToken: independentToken, kind: AgentKind.AGENT_KIND_DEPENDENT }),
    );
    expect(wrongKind.code).toBe(status.INVALID_ARGUMENT);
    expect(wrongKind.details).toContain('page_token');
    // A token of another RPC (ListNumbers).
    for (let i = 0; i < 2; i++) {
      await call<ProvisionNumberRequest, ProgrammableNumber>(
        app.numbers,
        'provisionNumber',
        ProvisionNumberRequest.fromPartial({ displayName: `Line ${i}` }),
        app.token,
      );
    }
    const numbersPage = await call<ListNumbersRequest, ListNumbersResponse>(
      app.numbers,
      'listNumbers',
      ListNumbersRequest.fromPartial({ pageSize: 1 }),
      app.token,
    );
    expect(numbersPage.nextPageToken).not.toBe('');
    expect((await failure(listAgents(app, { pageToken: numbersPage.nextPageToken }))).code).toBe(
      status.INVALID_ARGUMENT,
    );
    // The token still works with its own kind.
    expect(
      (await listAgents(app, { pageToken: independentToken, kind: AgentKind.AGENT_KIND_INDEPENDENT })).agents[0]!
        .displayName,
    ).toBe('Third');
  });

  it("gets one of the caller's agents; another owner's agent is NOT_FOUND", async () => {
    const agent = await getAgent(app, independents[1]!.svcnumId);
    expect(agent).toEqual(independents[1]);
    expect(await getAgent(app, dependents[1]!.svcnumId)).toEqual(dependents[1]);
    const theirs = (await listAgents(other, {})).agents[0]!;
    const notFound = await failure(getAgent(app, theirs.svcnumId));
    expect(notFound.code).toBe(status.NOT_FOUND);
    expect((await failure(getAgent(other, agent.svcnumId))).code).toBe(status.NOT_FOUND);
    // The owner account itself is not an agent; an unknown id is NOT_FOUND; a malformed one INVALID_ARGUMENT.
    expect((await failure(getAgent(app, app.owner.svcnumId))).code).toBe(status.NOT_FOUND);
    expect((await failure(getAgent(app, '01ARZ3NDEKTSV4RRFFQ69G5FAV'))).code).toBe(status.NOT_FOUND);
    expect((await failure(getAgent(app, 'not-an-id'))).code).toBe(status.INVALID_ARGUMENT);
    expect((await failure(getAgent(app, ''))).code).toBe(status.INVALID_ARGUMENT);
  });
});

describe('IssueAgentToken', () => {
  it('issues a JWT as the agent (sub, client_id), narrowed on request, never widened', async () => {
    const app = await newApp();
    const created = await createAgent(app, { displayName: 'Issuer test', scope: 'openid messaging' });
    const agent = created.agent!;
    const full = await issueToken(app, agent.svcnumId);
    expect(full).toMatchObject({ tokenType: 'Bearer', expiresIn: 3600, scope: 'openid messaging' });
    const claims = await claimsOf(full.accessToken);
    expect(claims).toMatchObject({
      iss: service.issuer,
      aud: service.issuer,
      sub: agent.svcnumId,
      client_id: created.clientId,
      scope: 'openid messaging',
    });
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(claims.act).toBeUndefined();
    expect((await userinfo(full.accessToken)).json).toMatchObject({
      sub: agent.svcnumId,
      svcnum: agent.svcnum,
      account_type: 'ai_agent',
    });

    const narrowed = await issueToken(app, agent.svcnumId, 'messaging');
    expect(narrowed.scope).toBe('messaging');
    expect((await claimsOf(narrowed.accessToken)).scope).toBe('messaging');

    for (const scope of ['openid profile', 'messaging email', 'prov:agents']) {
      const error = await failure(issueToken(app, agent.svcnumId, scope));
      expect(error.code, scope).toBe(status.INVALID_ARGUMENT);
      expect(error.details, scope).toContain('openid messaging');
    }
  });

  it("refuses dependents (FAILED_PRECONDITION), another owner's agents (NOT_FOUND) and malformed ids", async () => {
    const app = await newApp();
    const dependent = await createDependent(app, { displayName: 'No secret' });
    const error = await failure(issueToken(app, dependent.svcnumId));
    expect(error.code).toBe(status.FAILED_PRECONDITION);
    expect(error.details).toContain('ExchangeToken');
    const other = await newApp();
    const theirs = (await createAgent(other, { displayName: 'Theirs' })).agent!;
    expect((await failure(issueToken(app, theirs.svcnumId))).code).toBe(status.NOT_FOUND);
    expect((await failure(issueToken(app, 'x'))).code).toBe(status.INVALID_ARGUMENT);
  });
});

describe('CreateDependentAgent', () => {
  it("defaults the owner to the caller's account; an independent agent of the caller may own one; its scope stays within the owner's", async () => {
    const app = await newApp();
    const dependent = await createDependent(app, { displayName: 'Account helper', capabilities: ['notes'] });
    expect(dependent).toMatchObject({
      kind: AgentKind.AGENT_KIND_DEPENDENT,
      ownerSvcnumId: app.owner.svcnumId,
      clientId: '',
      scope: ALL_AGENT_SCOPES,
      capabilities: ['notes'],
      state: NumberState.NUMBER_STATE_ACTIVE,
    });
    expect(dependent.svcnum).toMatch(/^74\d{9}$/);
    const explicit = await createDependent(app, {
      displayName: 'Explicit',
      ownerSvcnumId: app.owner.svcnumId,
      scope: 'profile',
    });
    expect(explicit.ownerSvcnumId).toBe(app.owner.svcnumId);
    expect(explicit.scope).toBe('profile');

    const owner = (await createAgent(app, { displayName: 'Owner agent', scope: 'openid messaging' })).agent!;
    const underAgent = await createDependent(app, { displayName: 'Sub', ownerSvcnumId: owner.svcnumId });
    expect(underAgent.ownerSvcnumId).toBe(owner.svcnumId);
    expect(underAgent.scope).toBe('openid messaging');
    expect(
      (await createDependent(app, { displayName: 'Narrow sub', ownerSvcnumId: owner.svcnumId, scope: 'messaging' }))
        .scope,
    ).toBe('messaging');
    const wider = await failure(
      createDependent(app, { displayName: 'Too wide', ownerSvcnumId: owner.svcnumId, scope: 'openid profile' }),
    );
    expect(wider.code).toBe(status.INVALID_ARGUMENT);
    expect(wider.details).toContain('openid messaging');
    expect((await failure(createDependent(app, { displayName: 'Not an agent scope', scope: 'email' }))).code).toBe(
      status.INVALID_ARGUMENT,
    );
    expect((await failure(createDependent(app, { displayName: '' }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await failure(createDependent(app, { displayName: 'Bad caps', capabilities: ['NO'] }))).code).toBe(
      status.INVALID_ARGUMENT,
    );
  });

  it("refuses another owner's agent (NOT_FOUND), a dependent as owner and malformed ids (INVALID_ARGUMENT)", async () => {
    const app = await newApp();
    const other = await newApp();
    const theirs = (await createAgent(other, { displayName: 'Theirs' })).agent!;
    expect((await failure(createDependent(app, { displayName: 'Stolen', ownerSvcnumId: theirs.svcnumId }))).code).toBe(
      status.NOT_FOUND,
    );
    // Another account (not an agent) as owner.
    expect(
      (await failure(createDependent(app, { displayName: 'Stolen', ownerSvcnumId: other.owner.svcnumId }))).code,
    ).toBe(status.NOT_FOUND);
    const dependent = await createDependent(app, { displayName: 'Leaf' });
    const nested = await failure(createDependent(app, { displayName: 'Nested', ownerSvcnumId: dependent.svcnumId }));
    expect(nested.code).toBe(status.INVALID_ARGUMENT);
    expect(nested.details).toContain('owner_svcnum_id');
    expect((await failure(createDependent(app, { displayName: 'Bad', ownerSvcnumId: 'agent-1' }))).code).toBe(
      status.INVALID_ARGUMENT,
    );
    expect((await listAgents(other, {})).agents).toHaveLength(1);
  });

  it('replays a request_id to the same agent; a different request with it is ALREADY_EXISTS', async () => {
    const app = await newApp();
    const request = { requestId: `dep-${Date.now()}`, displayName: 'Once' };
    const first = await createDependent(app, request);
    expect(await createDependent(app, request)).toEqual(first);
    expect((await failure(createDependent(app, { ...request, displayName: 'Twice' }))).code).toBe(
      status.ALREADY_EXISTS,
    );
    expect(await listAll(app, AgentKind.AGENT_KIND_DEPENDENT, 10)).toHaveLength(1);
  });
});

describe('RotateAgentSvcnum', () => {
  it('switches to the fallback, reserves a new one and quarantines the old number; id and credentials stay', async () => {
    const app = await newApp();
    const created = await createAgent(app, { displayName: 'Rotator' });
    const agent = created.agent!;
    const before = await service.core.store.getUser(agent.svcnumId);
    const oldFallback = before!.fallbackSvcnum!;
    expect(oldFallback).toMatch(/^74\d{9}$/);
    expect(oldFallback).not.toBe(agent.svcnum);
    expect((await service.core.provisioning.lifecycle.show(oldFallback)).state).toBe('reserved');
    const tokenBefore = await issueToken(app, agent.svcnumId);

    const rotated = await rotate(app, agent.svcnumId);
    expect(rotated.svcnumId).toBe(agent.svcnumId);
    expect(rotated.svcnum).toBe(oldFallback);
    expect(rotated.clientId).toBe(created.clientId);
    expect(rotated.state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    expect((await getAgent(app, agent.svcnumId)).svcnum).toBe(oldFallback);

    const old = await service.core.provisioning.lifecycle.show(agent.svcnum);
    expect(old.state).toBe('quarantined');
    expect(old).not.toHaveProperty('holder');
    expect(new Date(old.cool_off_until!).getTime()).toBeGreaterThan(service.clock.now() + 89 * DAY);
    expect(await service.core.provisioning.lifecycle.show(oldFallback)).toMatchObject({
      state: 'active',
      holder: agent.svcnumId,
    });
    const newFallback = (await service.core.store.getUser(agent.svcnumId))!.fallbackSvcnum!;
    expect([agent.svcnum, oldFallback]).not.toContain(newFallback);
    expect(await service.core.provisioning.lifecycle.show(newFallback)).toMatchObject({
      state: 'reserved',
      holder: agent.svcnumId,
    });

    // Tokens and credentials are unchanged; UserInfo shows the new number.
    expect((await userinfo(tokenBefore.accessToken)).json).toMatchObject({ sub: agent.svcnumId, svcnum: oldFallback });
    expect((await clientCredentials(created.clientId, created.clientSecret)).status).toBe(200);

    // Rotating again moves to the newly reserved fallback.
    expect((await rotate(app, agent.svcnumId)).svcnum).toBe(newFallback);
    expect((await service.core.provisioning.lifecycle.show(oldFallback)).state).toBe('quarantined');

    // Dependents rotate too; another owner's agent is NOT_FOUND.
    const dependent = await createDependent(app, { displayName: 'Dependent rotator' });
    const dependentFallback = (await service.core.store.getUser(dependent.svcnumId))!.fallbackSvcnum!;
    expect((await rotate(app, dependent.svcnumId)).svcnum).toBe(dependentFallback);
    const other = await newApp();
    expect((await failure(rotate(other, agent.svcnumId))).code).toBe(status.NOT_FOUND);
    expect((await failure(rotate(app, ''))).code).toBe(status.INVALID_ARGUMENT);
  });

  it('a suspended agent cannot rotate, get tokens or own new dependents (FAILED_PRECONDITION) until reactivated', async () => {
    const app = await newApp();
    const created = await createAgent(app, { displayName: 'Suspended' });
    const agent = created.agent!;
    await service.core.provisioning.lifecycle.suspend(agent.svcnum);
    expect((await getAgent(app, agent.svcnumId)).state).toBe(NumberState.NUMBER_STATE_SUSPENDED);

    expect((await failure(rotate(app, agent.svcnumId))).code).toBe(status.FAILED_PRECONDITION);
    expect((await failure(issueToken(app, agent.svcnumId))).code).toBe(status.FAILED_PRECONDITION);
    expect((await failure(createDependent(app, { displayName: 'Child', ownerSvcnumId: agent.svcnumId }))).code).toBe(
      status.FAILED_PRECONDITION,
    );
    const refused = await clientCredentials(created.clientId, created.clientSecret);
    expect(refused.status).toBe(400);
    expect(refused.json.error).toBe('invalid_grant');
    // Nothing changed.
    expect((await getAgent(app, agent.svcnumId)).svcnum).toBe(agent.svcnum);
    expect((await service.core.provisioning.lifecycle.show(agent.svcnum)).state).toBe('suspended');

    await service.core.provisioning.lifecycle.reactivate(agent.svcnum);
    expect((await issueToken(app, agent.svcnumId)).tokenType).toBe('Bearer');
    expect((await rotate(app, agent.svcnumId)).svcnum).not.toBe(agent.svcnum);
  });

  it('does not hand out a rotated-away number before its cool-off ends, and does after', async () => {
    const local = await startTestService({ provisioning: { ...defaultProvisioningConfig, coolOff: DAY } });
    const app = await provisioningApp(local);
    try {
      // Just enough for one agent (number + fallback) and one rotation.
      await seedPool(local, '74', 3);
      const agent = (
        await call<CreateAgentRequest, CreateAgentResponse>(
          app.agents,
          'createAgent',
          CreateAgentRequest.fromPartial({ displayName: 'Cooling' }),
          app.token,
        )
      ).agent!;
      const rotateLocal = () =>
        call<RotateAgentSvcnumRequest, Agent>(
          app.agents,
          'rotateAgentSvcnum',
          RotateAgentSvcnumRequest.fromPartial({ svcnumId: agent.svcnumId }),
          app.token,
        );
      const provision = () =>
        call<ProvisionNumberRequest, ProgrammableNumber>(
          app.numbers,
          'provisionNumber',
          ProvisionNumberRequest.fromPartial({ displayName: 'Line' }),
          app.token,
        );
      const rotated = await rotateLocal();
      expect((await local.core.provisioning.lifecycle.show(agent.svcnum)).state).toBe('quarantined');

      // The pool is drained: the quarantined number is not handed out, and a rotation that cannot
      // reserve a next fallback changes nothing.
      const empty = await failure(rotateLocal());
      expect(empty.code).toBe(status.FAILED_PRECONDITION);
      expect((await failure(provision())).code).toBe(status.FAILED_PRECONDITION);
      local.clock.advance(DAY - 60 * SECOND);
      app.token = await clientCredentialsToken(local, app.clientId, app.clientSecret);
      expect((await failure(provision())).code).toBe(status.FAILED_PRECONDITION);
      const unchanged = await call<GetAgentRequest, Agent>(
        app.agents,
        'getAgent',
        GetAgentRequest.fromPartial({ svcnumId: agent.svcnumId }),
        app.token,
      );
      expect(unchanged.svcnum).toBe(rotated.svcnum);
      expect((await local.core.provisioning.lifecycle.show(agent.svcnum)).state).toBe('quarantined');

      // After the cool-off it goes back to the pool and is allocated again.
      local.clock.advance(2 * 60 * SECOND);
      expect((await local.core.provisioning.lifecycle.show(agent.svcnum)).state).toBe('available');
      const recycled = await provision();
      expect(recycled.svcnum).toBe(agent.svcnum);
      expect(await local.core.provisioning.lifecycle.show(agent.svcnum)).toMatchObject({
        state: 'active',
        holder: recycled.svcnumId,
      });
    } finally {
      app.close();
      await local.close();
    }
  });
});
