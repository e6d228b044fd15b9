import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemRandom } from '../core/adapters/system';
import { newUlid } from '../core/kernel/ids';
import {
  CreateAgentRequest,
  type CreateAgentResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  type Alias,
  CreateAliasRequest,
  DeleteAliasRequest,
  ListAliasesRequest,
  type ListAliasesResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/alias_service';
import { CreateMaskRequest, type Mask } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { StoreFaults } from './support/faults';
import { call, clientCredentialsToken, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { runAdmin } from './support/processes';
import { aliasClient, publicGet, resolvePath } from './support/public';
import { startTestService, type TestService } from './support/service';

// AliasService over gRPC and the admin CLI's alias commands: validation and normalisation,
// uniqueness (also when ten owners race for one name), the per-entity limit under concurrency,
// ownership and scopes, inactive entities, deletion, and recovery from interrupted writes.

let service: TestService;
let app: ProvisioningApp;
let aliases: ReturnType<typeof aliasClient>;
const apps: ProvisioningApp[] = [];
const faults = new StoreFaults();

beforeAll(async () => {
  service = await startTestService({ wrapStore: faults.wrap });
  await seedPool(service, '82', 300);
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

const provision = (owner: ProvisioningApp) =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    owner.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName: 'Line' }),
    owner.token,
  );
const createAgent = async (owner: ProvisioningApp) =>
  (
    await call<CreateAgentRequest, CreateAgentResponse>(
      owner.agents,
      'createAgent',
      CreateAgentRequest.fromPartial({ displayName: 'Agent' }),
      owner.token,
    )
  ).agent!;
const createAlias = (token: string, svcnumId: string, alias: string) =>
  call<CreateAliasRequest, Alias>(aliases, 'createAlias', CreateAliasRequest.fromPartial({ svcnumId, alias }), token);
const deleteAlias = (token: string, alias: string) =>
  call<DeleteAliasRequest, object>(aliases, 'deleteAlias', DeleteAliasRequest.fromPartial({ alias }), token);
const listAliases = async (token: string, svcnumId: string) =>
  (
    await call<ListAliasesRequest, ListAliasesResponse>(
      aliases,
      'listAliases',
      ListAliasesRequest.fromPartial({ svcnumId }),
      token,
    )
  ).aliases.map((alias) => alias.alias);
const code = async (promise: Promise<unknown>) => (await failure(promise)).code;

describe('CreateAlias', () => {
  it('normalises to lower case and refuses malformed and reserved aliases with INVALID_ARGUMENT', async () => {
    const number = await provision(app);
    const before = service.clock.now();
    const created = await createAlias(app.token, number.svcnumId, 'Shop-1.x_Y');
    expect(created).toEqual({ alias: 'shop-1.x_y', svcnumId: number.svcnumId, createTime: expect.any(Date) });
    expect(created.createTime!.getTime()).toBeGreaterThanOrEqual(before);
    expect(await listAliases(app.token, number.svcnumId)).toEqual(['shop-1.x_y']);

    const malformed = [
      '',
      'ab',
      'x'.repeat(33),
      '-abc',
      '.abc',
      'abc def',
      'abc/def',
      'a+b',
      '12345',
      '1-2-3',
      'über',
      '\u212Aelvin',
      'caf\u00e9',
    ];
    for (const alias of malformed) {
      const refused = await failure(createAlias(app.token, number.svcnumId, alias));
      expect(refused.code, alias).toBe(status.INVALID_ARGUMENT);
      expect(refused.details, alias).toMatch(/alias/);
    }
    for (const alias of ['admin', 'Support', 'ROOT', 'security']) {
      const refused = await failure(createAlias(app.token, number.svcnumId, alias));
      expect(refused.code, alias).toBe(status.INVALID_ARGUMENT);
      expect(refused.details).toMatch(/reserved/);
    }
    expect(await code(createAlias(app.token, '', 'fine.name'))).toBe(status.INVALID_ARGUMENT);
    expect(await code(createAlias(app.token, 'not-a-ulid', 'fine.name'))).toBe(status.INVALID_ARGUMENT);
    // 3 and 32 characters are fine.
    expect((await createAlias(app.token, number.svcnumId, 'abc')).alias).toBe('abc');
    expect((await createAlias(app.token, number.svcnumId, `a${'9'.repeat(31)}`)).alias).toBe(`a${'9'.repeat(31)}`);
  });

  it('keeps an alias unique across the service: taken by anyone (in any case) is ALREADY_EXISTS', async () => {
    const other = await newApp();
    const otherNumber = await provision(other);
    expect(await code(createAlias(other.token, otherNumber.svcnumId, 'SHOP-1.X_Y'))).toBe(status.ALREADY_EXISTS);
    const second = await provision(app);
    expect(await code(createAlias(app.token, second.svcnumId, 'shop-1.x_y'))).toBe(status.ALREADY_EXISTS);
    // Taken by the very entity that asks again: still ALREADY_EXISTS.
    const owner = (await service.core.store.getAlias('shop-1.x_y'))!.svcnumId;
    expect(await code(createAlias(app.token, owner, 'shop-1.x_y'))).toBe(status.ALREADY_EXISTS);
  });

  it('ten owners racing for one alias: exactly one wins, and the alias resolves to its number', async () => {
    const racers = await Promise.all(Array.from({ length: 10 }, () => newApp()));
    const numbers = await Promise.all(racers.map((racer) => provision(racer)));
    const results = await Promise.allSettled(
      racers.map((racer, index) => createAlias(racer.token, numbers[index]!.svcnumId, 'hot.alias')),
    );
    const winners = results.flatMap((result, index) => (result.status === 'fulfilled' ? [index] : []));
    expect(winners).toHaveLength(1);
    for (const result of results)
      if (result.status === 'rejected') expect((result.reason as { code: number }).code).toBe(status.ALREADY_EXISTS);
    const resolved = await publicGet(service, resolvePath('hot.alias'));
    expect(resolved.json).toEqual({
      svcnum: numbers[winners[0]!]!.svcnum,
      entity_type: 'programmable',
      state: 'active',
    });
  });

  it('gives an entity at most 5 aliases, exactly, also when 10 are asked for at once; deleting one makes room', async () => {
    const number = await provision(app);
    const names = Array.from({ length: 10 }, (_, index) => `many-${index}`);
    const results = await Promise.allSettled(names.map((name) => createAlias(app.token, number.svcnumId, name)));
    const created = names.filter((_, index) => results[index]!.status === 'fulfilled');
    expect(created).toHaveLength(5);
    for (const result of results)
      if (result.status === 'rejected')
        expect((result.reason as { code: number }).code).toBe(status.RESOURCE_EXHAUSTED);
    expect(await listAliases(app.token, number.svcnumId)).toEqual([...created].sort());
    // The refused names were freed at once: another entity may take one.
    const refusedName = names.find((name) => !created.includes(name))!;
    const other = await provision(app);
    expect((await createAlias(app.token, other.svcnumId, refusedName)).alias).toBe(refusedName);

    const sixth = await failure(createAlias(app.token, number.svcnumId, 'one-too-many'));
    expect(sixth.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(sixth.details).toMatch(/5 aliases/);
    await deleteAlias(app.token, created[0]!);
    expect((await createAlias(app.token, number.svcnumId, 'one-too-many')).alias).toBe('one-too-many');
    expect(await listAliases(app.token, number.svcnumId)).toHaveLength(5);
  });

  it('refuses an entity that is not active with FAILED_PRECONDITION; its aliases can still be listed and deleted', async () => {
    const number = await provision(app);
    await createAlias(app.token, number.svcnumId, 'paused.line');
    await service.core.provisioning.lifecycle.suspend(number.svcnum);
    try {
      const refused = await failure(createAlias(app.token, number.svcnumId, 'paused.two'));
      expect(refused.code).toBe(status.FAILED_PRECONDITION);
      expect(refused.details).toMatch(/suspended/);
      expect(await listAliases(app.token, number.svcnumId)).toEqual(['paused.line']);
      expect((await publicGet(service, resolvePath('paused.line'))).json).toMatchObject({ state: 'suspended' });
      await deleteAlias(app.token, 'paused.line');
      expect(await listAliases(app.token, number.svcnumId)).toEqual([]);
    } finally {
      await service.core.provisioning.lifecycle.reactivate(number.svcnum);
    }
  });
});

describe('ownership and scopes', () => {
  it("answers NOT_FOUND for entities and aliases that are not the caller's, as for ones that do not exist", async () => {
    const other = await newApp();
    const theirs = await provision(other);
    await createAlias(other.token, theirs.svcnumId, 'their.alias');
    const person = await service.core.registration.createUser({
      email: `alias-person-${Date.now()}@example.com`,
      password: 'a long password 1',
    });
    const mine = await provision(app);
    const mask = await call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 600,
        participantA: mine.svcnumId,
        participantB: person.svcnumId,
        scope: 'delivery',
      }),
      app.token,
    );
    // Someone else's number, nobody, a person, the caller's own account, a mask id: all the same NOT_FOUND.
    for (const svcnumId of [
      theirs.svcnumId,
      newUlid(service.clock, systemRandom),
      person.svcnumId,
      app.owner.svcnumId,
      mask.maskId,
    ]) {
      const refused = await failure(createAlias(app.token, svcnumId, 'not.mine'));
      expect(refused.code, svcnumId).toBe(status.NOT_FOUND);
      expect(refused.details).toMatch(/in your account/);
      expect(await code(listAliases(app.token, svcnumId))).toBe(status.NOT_FOUND);
    }
    expect(await code(deleteAlias(app.token, 'their.alias'))).toBe(status.NOT_FOUND);
    expect(await code(deleteAlias(app.token, 'never.registered'))).toBe(status.NOT_FOUND);
    expect(await code(deleteAlias(app.token, 'x'))).toBe(status.INVALID_ARGUMENT);
    expect((await publicGet(service, resolvePath('their.alias'))).json).toMatchObject({ svcnum: theirs.svcnum });
  });

  it('lets in a token with prov:numbers or prov:agents, and needs the scope of the entity (numbers or agents)', async () => {
    const owner = await newApp();
    const number = await provision(owner);
    const agent = await createAgent(owner);
    const masksOnly = await clientCredentialsToken(service, owner.clientId, owner.clientSecret, 'prov:masks');
    const agentsOnly = await clientCredentialsToken(service, owner.clientId, owner.clientSecret, 'prov:agents');
    const numbersOnly = await clientCredentialsToken(service, owner.clientId, owner.clientSecret, 'prov:numbers');

    const denied = await failure(createAlias(masksOnly, number.svcnumId, 'masks.only'));
    expect(denied.code).toBe(status.PERMISSION_DENIED);
    expect(denied.details).toContain('prov:numbers or prov:agents');
    expect(await code(listAliases(masksOnly, number.svcnumId))).toBe(status.PERMISSION_DENIED);
    expect(await code(deleteAlias(masksOnly, 'masks.only'))).toBe(status.PERMISSION_DENIED);
    expect(
      await code(call(aliases, 'listAliases', ListAliasesRequest.fromPartial({ svcnumId: number.svcnumId }))),
    ).toBe(status.UNAUTHENTICATED);

    const numberWithAgentsScope = await failure(createAlias(agentsOnly, number.svcnumId, 'scoped.number'));
    expect(numberWithAgentsScope.code).toBe(status.PERMISSION_DENIED);
    expect(numberWithAgentsScope.details).toContain('prov:numbers');
    expect((await createAlias(numbersOnly, number.svcnumId, 'scoped.number')).alias).toBe('scoped.number');

    const agentWithNumbersScope = await failure(createAlias(numbersOnly, agent.svcnumId, 'scoped.agent'));
    expect(agentWithNumbersScope.code).toBe(status.PERMISSION_DENIED);
    expect(agentWithNumbersScope.details).toContain('prov:agents');
    expect((await createAlias(agentsOnly, agent.svcnumId, 'scoped.agent')).alias).toBe('scoped.agent');
    expect(await code(listAliases(numbersOnly, agent.svcnumId))).toBe(status.PERMISSION_DENIED);
    expect(await code(deleteAlias(numbersOnly, 'scoped.agent'))).toBe(status.PERMISSION_DENIED);
    expect(await code(deleteAlias(agentsOnly, 'scoped.number'))).toBe(status.PERMISSION_DENIED);
    expect(await listAliases(agentsOnly, agent.svcnumId)).toEqual(['scoped.agent']);

    // A person's provisioning client (prov:agents) aliases its agents.
    const person = await newApp({ accountType: 'person' });
    const personsAgent = await createAgent(person);
    expect((await createAlias(person.token, personsAgent.svcnumId, 'my.assistant')).alias).toBe('my.assistant');
    expect((await publicGet(service, resolvePath('my.assistant'))).json).toEqual({
      svcnum: personsAgent.svcnum,
      entity_type: 'ai_agent',
      state: 'active',
    });
  });
});

describe('DeleteAlias and interrupted writes', () => {
  it('stops resolving at once and frees the name for anyone', async () => {
    const number = await provision(app);
    await createAlias(app.token, number.svcnumId, 'free.me');
    expect((await publicGet(service, resolvePath('free.me'))).status).toBe(200);
    expect(await deleteAlias(app.token, 'FREE.me')).toEqual({});
    expect((await publicGet(service, resolvePath('free.me'))).status).toBe(404);
    expect(await code(deleteAlias(app.token, 'free.me'))).toBe(status.NOT_FOUND);
    const other = await newApp();
    const theirs = await provision(other);
    await createAlias(other.token, theirs.svcnumId, 'free.me');
    expect((await publicGet(service, resolvePath('free.me'))).json).toMatchObject({ svcnum: theirs.svcnum });
  });

  it('a claim that never committed resolves to nothing and is void after its lease; a failed commit frees the name at once', async () => {
    const number = await provision(app);
    const now = service.clock.now();
    // What a process that died between claim and commit leaves behind.
    await service.core.store.claimAlias({
      alias: 'ghost.claim',
      svcnumId: number.svcnumId,
      claim: newUlid(service.clock, systemRandom),
      createdAt: now,
      leaseUntil: now + 60_000,
    });
    expect((await publicGet(service, resolvePath('ghost.claim'))).status).toBe(404);
    expect(await listAliases(app.token, number.svcnumId)).toEqual([]);
    expect(await code(createAlias(app.token, number.svcnumId, 'ghost.claim'))).toBe(status.ALREADY_EXISTS);
    service.clock.advance(60_001);
    expect((await createAlias(app.token, number.svcnumId, 'ghost.claim')).alias).toBe('ghost.claim');
    expect((await publicGet(service, resolvePath('ghost.claim'))).json).toMatchObject({ svcnum: number.svcnum });

    faults.failOn('addAliasClaim');
    try {
      expect(await code(createAlias(app.token, number.svcnumId, 'failed.commit'))).toBe(status.INTERNAL);
    } finally {
      faults.reset();
    }
    expect(await service.core.store.getAlias('failed.commit')).toBeUndefined();
    expect((await createAlias(app.token, number.svcnumId, 'failed.commit')).alias).toBe('failed.commit');
  });

  it('a listing left behind by an interrupted deletion neither resolves nor counts once the room is needed', async () => {
    const number = await provision(app);
    for (let index = 0; index < 5; index++) await createAlias(app.token, number.svcnumId, `full-${index}`);
    const claim = (await service.core.store.getAlias('full-0'))!.claim;
    await service.core.store.deleteAlias('full-0', claim); // the entity still lists it
    expect((await publicGet(service, resolvePath('full-0'))).status).toBe(404);
    expect(await listAliases(app.token, number.svcnumId)).toEqual(['full-1', 'full-2', 'full-3', 'full-4']);
    expect((await createAlias(app.token, number.svcnumId, 'full-5')).alias).toBe('full-5');
    expect(await code(createAlias(app.token, number.svcnumId, 'full-6'))).toBe(status.RESOURCE_EXHAUSTED);
    expect(await listAliases(app.token, number.svcnumId)).toEqual(['full-1', 'full-2', 'full-3', 'full-4', 'full-5']);
  });
});

describe('admin CLI: alias add | list | remove', () => {
  // The operator's command as `npm run admin` runs it (its bundle: a start costs a fraction of tsx's).
  const admin = (args: string[]) =>
    runAdmin(args, { DATA_DIR: service.dataDir, DYNAMODB_PORT: new URL(service.dynamoEndpoint).port });

  it('lets an operator alias any entity (people and businesses too, reserved names included), list and remove', async () => {
    const person = await service.core.registration.createUser({
      email: `cli-alias-${Date.now()}@example.com`,
      password: 'a long password 1',
    });
    const added = await admin(['alias', 'add', '--svcnum-id', person.svcnumId, '--alias', 'Support']);
    expect(added.code).toBe(0);
    expect(added.json).toEqual({
      alias: 'support',
      svcnum_id: person.svcnumId,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect((await publicGet(service, resolvePath('support'))).json).toEqual({
      svcnum: person.svcnum,
      entity_type: 'person',
      state: 'active',
    });

    expect((await admin(['alias', 'add', '--svcnum-id', app.owner.svcnumId, '--alias', 'acme'])).code).toBe(0);
    expect((await publicGet(service, resolvePath('acme'))).json).toEqual({
      svcnum: app.owner.svcnum,
      entity_type: 'business',
      state: 'active',
    });

    const listed = await admin(['alias', 'list', '--svcnum-id', person.svcnumId]);
    expect(listed.json).toEqual({ svcnum_id: person.svcnumId, aliases: [added.json] });

    const [taken, nobody, malformed, noAlias, noEntity] = await Promise.all([
      admin(['alias', 'add', '--svcnum-id', app.owner.svcnumId, '--alias', 'support']),
      admin(['alias', 'add', '--svcnum-id', newUlid(service.clock, systemRandom), '--alias', 'nobody.home']),
      admin(['alias', 'add', '--svcnum-id', person.svcnumId, '--alias', 'no way']),
      admin(['alias', 'add', '--svcnum-id', person.svcnumId]),
      admin(['alias', 'list']),
    ]);
    expect(taken.code).toBe(1);
    expect(taken.stderr.trim().split('\n')).toHaveLength(1);
    expect(taken.stderr).toMatch(/taken/);
    expect(nobody.stderr).toMatch(/no entity/);
    expect(malformed.code).toBe(1);
    expect(noAlias.code).toBe(2);
    expect(noEntity.code).toBe(2);

    const removed = await admin(['alias', 'remove', 'SUPPORT']);
    expect(removed.json).toEqual({ ...added.json, removed: true });
    expect((await publicGet(service, resolvePath('support'))).status).toBe(404);
    const again = await admin(['alias', 'remove', 'support']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no alias support/);
    expect((await admin(['alias', 'list', '--svcnum-id', person.svcnumId])).json).toEqual({
      svcnum_id: person.svcnumId,
      aliases: [],
    });
  }, 90_000);
});
