import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { User } from '../core/kernel/model';
import {
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  ListAgentsRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { NumberState } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import { CreateMaskRequest, type Mask } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ConfigureProgrammableRequest,
  GetNumberRequest,
  ListNumbersRequest,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, clientCredentialsToken, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { runAdmin } from './support/processes';
import { startTestService, type TestService } from './support/service';

// The provisioning commands of the admin CLI, run as child processes against a running local
// service (its embedded DynamoDB through DYNAMODB_PORT), and their effect seen over gRPC.
// Independent commands run in parallel: each one is a Node process start.

const admin = (...args: string[]) => runAdmin(args, env);

/** A command that must succeed: its JSON. */
async function ok(...args: string[]): Promise<Record<string, unknown>> {
  const outcome = await admin(...args);
  expect(outcome.code, `${args.join(' ')}: ${outcome.stderr}`).toBe(0);
  return outcome.json!;
}

/** A command that must fail: exit code, nothing on stdout, exactly one line on stderr. */
async function refused(args: string[], code: number, message: RegExp) {
  const outcome = await admin(...args);
  expect(outcome.code, `${args.join(' ')}: ${outcome.stdout}${outcome.stderr}`).toBe(code);
  expect(outcome.stdout).toBe('');
  expect(outcome.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
  expect(outcome.stderr, args.join(' ')).toMatch(message);
}

let service: TestService;
let env: Record<string, string>;
let app: ProvisioningApp;
beforeAll(async () => {
  service = await startTestService();
  env = { DATA_DIR: service.dataDir, DYNAMODB_PORT: new URL(service.dynamoEndpoint).port };
  app = await provisioningApp(service);
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

/** An account without a password (no scrypt), straight through the core. */
const account = (accountType: User['accountType']) => service.core.registration.createUser({ accountType });

describe('number seed and number show', () => {
  it('seeds consecutive numbers (skipping existing ones) and shows them; refuses bad input', async () => {
    const seeded = await ok('number', 'seed', '--from', '76000000000', '--count', '5');
    expect(seeded).toEqual({ added: 5, skipped: 0, first: '76000000000', last: '76000000004' });

    await Promise.all([
      (async () =>
        expect(await ok('number', 'seed', '--from', '76000000003', '--count', '4')).toEqual({
          added: 2,
          skipped: 2,
          first: '76000000003',
          last: '76000000006',
        }))(),
      (async () => {
        const shown = await ok('number', 'show', '76000000000');
        expect(shown).toEqual({ svcnum: '76000000000', state: 'available', updated_at: expect.any(String) });
        expect(Date.parse(String(shown.updated_at))).not.toBeNaN();
      })(),
      refused(
        ['number', 'seed', '--from', '123', '--count', '1'],
        1,
        /--from must be a service number of 11 to 15 digits/,
      ),
      refused(['number', 'seed', '--from', '76000000000', '--count', 'lots'], 2, /--count must be a whole number/),
      refused(['number', 'show', '76999999999'], 1, /no number 76999999999/),
    ]);
    // The seeded numbers are what the service allocates from.
    const free = (await service.core.store.freeNumbers(service.clock.now(), 100)).map((number) => number.svcnum);
    expect(free).toEqual(expect.arrayContaining(['76000000000', '76000000004', '76000000006']));
  });
});

describe('number suspend | reactivate | deactivate', () => {
  it('walks the lifecycle active ⇄ suspended → deactivated (quarantined), refusing every other transition', async () => {
    await seedPool(service, '77', 4);
    const provision = async () =>
      call<ProvisionNumberRequest, ProgrammableNumber>(
        app.numbers,
        'provisionNumber',
        ProvisionNumberRequest.fromPartial({ displayName: 'Line' }),
        app.token,
      );
    const first = await provision();
    const second = await provision();
    const [a, b] = [first.svcnum, second.svcnum];
    const participants = [await account('person'), await account('person')];
    const mask = await call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 3600,
        participantA: participants[0]!.svcnumId,
        participantB: participants[1]!.svcnumId,
        scope: 'delivery',
      }),
      app.token,
    );
    const available = (await service.core.store.freeNumbers(service.clock.now(), 1))[0]!.svcnum;
    const grpcState = async (svcnumId: string) =>
      (
        await call<GetNumberRequest, ProgrammableNumber>(
          app.numbers,
          'getNumber',
          GetNumberRequest.fromPartial({ svcnumId }),
          app.token,
        )
      ).state;

    const [suspendedA, suspendedB] = await Promise.all([
      ok('number', 'suspend', a),
      ok('number', 'suspend', b),
      refused(['number', 'suspend', available], 1, new RegExp(`number ${available} is available; it must be active`)),
      refused(['number', 'deactivate', mask.svcnum], 1, /mask numbers follow their mask/),
    ]);
    expect(suspendedA).toMatchObject({
      svcnum: a,
      state: 'suspended',
      holder: first.svcnumId,
      entity_type: 'programmable',
    });
    expect(suspendedB).toMatchObject({ svcnum: b, state: 'suspended' });
    // The holder sees the state over gRPC (mirrored onto the entity).
    expect(await grpcState(first.svcnumId)).toBe(NumberState.NUMBER_STATE_SUSPENDED);

    const [reactivated] = await Promise.all([
      ok('number', 'reactivate', a),
      refused(['number', 'suspend', b], 1, new RegExp(`number ${b} is suspended; it must be active`)),
    ]);
    expect(reactivated).toMatchObject({ svcnum: a, state: 'active', holder: first.svcnumId });
    expect(await grpcState(first.svcnumId)).toBe(NumberState.NUMBER_STATE_ACTIVE);

    // Deactivation from active and from suspended: retired into quarantine for the cool-off.
    const [deactivatedA, deactivatedB] = await Promise.all([
      ok('number', 'deactivate', a),
      ok('number', 'deactivate', b),
    ]);
    const coolOff = Date.now() + 90 * 86_400_000;
    for (const [shownNumber, svcnum] of [
      [deactivatedA, a],
      [deactivatedB, b],
    ] as const) {
      expect(shownNumber).toMatchObject({ svcnum, state: 'quarantined' });
      expect(shownNumber).not.toHaveProperty('holder');
      expect(Math.abs(Date.parse(String(shownNumber.cool_off_until)) - coolOff)).toBeLessThan(120_000);
    }
    expect(await grpcState(first.svcnumId)).toBe(NumberState.NUMBER_STATE_DEACTIVATED);
    const configure = await failure(
      call(
        app.numbers,
        'configureProgrammable',
        ConfigureProgrammableRequest.fromPartial({ svcnumId: first.svcnumId, config: { autoReply: 'hi' } }),
        app.token,
      ),
    );
    expect(configure.code).toBe(status.FAILED_PRECONDITION);
    // Not allocatable during the cool-off.
    const free = (await service.core.store.freeNumbers(service.clock.now(), 100)).map((number) => number.svcnum);
    expect(free).not.toContain(a);
    expect(free).not.toContain(b);

    await Promise.all([
      refused(['number', 'deactivate', a], 1, new RegExp(`number ${a} is quarantined; only active or suspended`)),
      refused(['number', 'reactivate', b], 1, /is quarantined; it must be suspended/),
    ]);
  });
});

describe('prov-client create', () => {
  it("grants only the scopes of the owner's account type (person: prov:agents; business: all three)", async () => {
    const [person, business, disabled] = [
      await account('person'),
      await account('business'),
      await account('business'),
    ];
    await service.core.registration.disableUser(disabled.svcnumId);
    await seedPool(service, '78', 2);
    const agent = (
      await call<CreateAgentRequest, CreateAgentResponse>(
        app.agents,
        'createAgent',
        CreateAgentRequest.fromPartial({ displayName: 'Owner agent' }),
        app.token,
      )
    ).agent!;

    const [forPerson, forBusiness] = await Promise.all([
      ok('prov-client', 'create', '--name', 'Person app', '--owner', person.svcnumId, '--scope', 'prov:agents'),
      ok(
        'prov-client',
        'create',
        '--name',
        'Business app',
        '--owner',
        business.svcnumId,
        '--scope',
        'prov:numbers prov:masks prov:agents',
      ),
      refused(
        [
          'prov-client',
          'create',
          '--name',
          'Greedy',
          '--owner',
          person.svcnumId,
          '--scope',
          'prov:agents prov:numbers',
        ],
        1,
        /a person account may not hold prov:numbers \(grantable: prov:agents\)/,
      ),
      refused(
        ['prov-client', 'create', '--name', 'Agent app', '--owner', agent.svcnumId, '--scope', 'prov:agents'],
        1,
        /ai_agent account may not hold prov:agents \(grantable: none\)/,
      ),
      refused(['prov-client', 'create', '--name', 'Nobody', '--scope', 'prov:agents'], 2, /needs --owner/),
      refused(
        ['prov-client', 'create', '--name', 'Ghost', '--owner', '01ARZ3NDEKTSV4RRFFQ69G5FAV', '--scope', 'prov:agents'],
        1,
        /no account 01ARZ3NDEKTSV4RRFFQ69G5FAV/,
      ),
      refused(
        ['prov-client', 'create', '--name', 'Off', '--owner', disabled.svcnumId, '--scope', 'prov:agents'],
        1,
        /is disabled/,
      ),
      refused(
        ['prov-client', 'create', '--name', 'Chat', '--owner', business.svcnumId, '--scope', 'messaging'],
        1,
        /messaging is not available to provisioning clients/,
      ),
    ]);
    expect(forPerson).toMatchObject({
      kind: 'provisioning',
      name: 'Person app',
      scope: 'prov:agents',
      owner: person.svcnumId,
      disabled: false,
    });
    expect(forBusiness).toMatchObject({
      kind: 'provisioning',
      scope: 'prov:numbers prov:masks prov:agents',
      owner: business.svcnumId,
    });
    for (const created of [forPerson, forBusiness]) {
      expect(String(created.client_secret)).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(created).not.toHaveProperty('redirect_uris');
    }

    // The secrets work: client_credentials tokens that the gRPC services accept within their scopes.
    const personToken = await clientCredentialsToken(
      service,
      String(forPerson.client_id),
      String(forPerson.client_secret),
    );
    const businessToken = await clientCredentialsToken(
      service,
      String(forBusiness.client_id),
      String(forBusiness.client_secret),
    );
    expect(
      (
        await call<ListAgentsRequest, { agents: unknown[] }>(
          app.agents,
          'listAgents',
          ListAgentsRequest.fromPartial({}),
          personToken,
        )
      ).agents,
    ).toEqual([]);
    expect(
      (await failure(call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), personToken))).code,
    ).toBe(status.PERMISSION_DENIED);
    expect(
      (
        await call<ListNumbersRequest, { numbers: unknown[] }>(
          app.numbers,
          'listNumbers',
          ListNumbersRequest.fromPartial({}),
          businessToken,
        )
      ).numbers,
    ).toEqual([]);
    // The secret is shown once: the stored record holds only its hash.
    const stored = (await service.core.store.getClient(String(forBusiness.client_id)))!;
    expect(JSON.stringify(stored)).not.toContain(String(forBusiness.client_secret));
  });
});

describe('quota set', () => {
  it("overrides the owner's agent quotas, with effect on CreateAgent and CreateDependentAgent over gRPC", async () => {
    const owner = await provisioningApp(service);
    try {
      await seedPool(service, '79', 12);
      const createAgent = () =>
        call<CreateAgentRequest, CreateAgentResponse>(
          owner.agents,
          'createAgent',
          CreateAgentRequest.fromPartial({ displayName: 'Quota agent' }),
          owner.token,
        );
      const createDependent = () =>
        call(
          owner.agents,
          'createDependentAgent',
          CreateDependentAgentRequest.fromPartial({ displayName: 'Quota sub-agent' }),
          owner.token,
        );

      const [set] = await Promise.all([
        ok('quota', 'set', '--owner', owner.owner.svcnumId, '--independent', '1', '--dependent', '1'),
        refused(
          ['quota', 'set', '--owner', owner.owner.svcnumId],
          2,
          /needs at least one of --independent, --dependent, --masks, --numbers/,
        ),
        refused(
          ['quota', 'set', '--owner', owner.owner.svcnumId, '--masks', 'many'],
          2,
          /--masks must be a whole number/,
        ),
        refused(
          ['quota', 'set', '--owner', '01ARZ3NDEKTSV4RRFFQ69G5FAV', '--independent', '3'],
          1,
          /no account 01ARZ3NDEKTSV4RRFFQ69G5FAV/,
        ),
      ]);
      expect(set).toEqual({
        svcnum_id: owner.owner.svcnumId,
        independent_agent_quota: 1,
        dependent_agent_quota: 1,
        mask_quota: null,
        number_quota: null,
      });

      await createAgent();
      const exhausted = await failure(createAgent());
      expect(exhausted.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(exhausted.details).toMatch(/quota of 1 independent agents/);
      await createDependent();
      expect((await failure(createDependent())).code).toBe(status.RESOURCE_EXHAUSTED);

      // Raising one quota keeps the other override.
      expect(await ok('quota', 'set', '--owner', owner.owner.svcnumId, '--independent', '2')).toEqual({
        svcnum_id: owner.owner.svcnumId,
        independent_agent_quota: 2,
        dependent_agent_quota: 1,
        mask_quota: null,
        number_quota: null,
      });
      await createAgent();
      expect((await failure(createAgent())).code).toBe(status.RESOURCE_EXHAUSTED);
      expect((await failure(createDependent())).code).toBe(status.RESOURCE_EXHAUSTED);
      const listed = await call<ListAgentsRequest, { agents: unknown[] }>(
        owner.agents,
        'listAgents',
        ListAgentsRequest.fromPartial({}),
        owner.token,
      );
      expect(listed.agents).toHaveLength(3);
    } finally {
      owner.close();
    }
  });

  it("overrides the owner's limits on live masks and programmable numbers, with effect over gRPC; the agent quotas stay", async () => {
    const owner = await provisioningApp(service);
    try {
      await seedPool(service, '81', 8);
      const [a, b] = [await account('person'), await account('person')];
      const createMask = () =>
        call<CreateMaskRequest, Mask>(
          owner.masks,
          'createMask',
          CreateMaskRequest.fromPartial({
            ttlSeconds: 3600,
            participantA: a.svcnumId,
            participantB: b.svcnumId,
            scope: 'delivery',
          }),
          owner.token,
        );
      const provision = () =>
        call<ProvisionNumberRequest, ProgrammableNumber>(
          owner.numbers,
          'provisionNumber',
          ProvisionNumberRequest.fromPartial({}),
          owner.token,
        );
      expect(await ok('quota', 'set', '--owner', owner.owner.svcnumId, '--masks', '1', '--numbers', '2')).toEqual({
        svcnum_id: owner.owner.svcnumId,
        independent_agent_quota: null,
        dependent_agent_quota: null,
        mask_quota: 1,
        number_quota: 2,
      });
      await createMask();
      const masksUsedUp = await failure(createMask());
      expect(masksUsedUp.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(masksUsedUp.details).toBe(
        `the quota of 1 live masks for ${owner.owner.svcnumId} is used up; higher quotas are available on request`,
      );
      await provision();
      await provision();
      const numbersUsedUp = await failure(provision());
      expect(numbersUsedUp.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(numbersUsedUp.details).toMatch(/quota of 2 programmable numbers/);

      // Raised again: one more of each.
      await ok('quota', 'set', '--owner', owner.owner.svcnumId, '--masks', '2', '--numbers', '3');
      await createMask();
      await provision();
      expect((await failure(createMask())).code).toBe(status.RESOURCE_EXHAUSTED);
    } finally {
      owner.close();
    }
  });

  // An owner's slots are the lowest ones (core/provisioning/quota.ts), so lowering a quota below
  // the slots agents already hold cannot let the owner create more than the new quota.
  it('a lowered quota holds even for agents created while it was higher', async () => {
    const owner = await provisioningApp(service);
    try {
      await seedPool(service, '80', 6);
      const createAgent = () =>
        call<CreateAgentRequest, CreateAgentResponse>(
          owner.agents,
          'createAgent',
          CreateAgentRequest.fromPartial({ displayName: 'Early agent' }),
          owner.token,
        );
      // Math.random() is pinned so the test does not depend on how slots are chosen.
      const random = vi.spyOn(Math, 'random').mockReturnValue(0);
      try {
        await createAgent();
      } finally {
        random.mockRestore();
      }
      await ok('quota', 'set', '--owner', owner.owner.svcnumId, '--independent', '1');
      // One agent exists and the quota is one: no second agent.
      expect((await failure(createAgent())).code).toBe(status.RESOURCE_EXHAUSTED);
    } finally {
      owner.close();
    }
  });
});
