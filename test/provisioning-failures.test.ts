import { credentials, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { NumberRecord, User } from '../core/kernel/model';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import { slotKey } from '../core/provisioning/quota';
import {
  type Agent,
  AgentServiceClient,
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  RotateAgentSvcnumRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  CreateMaskRequest,
  type Mask,
  MaskServiceClient,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  NumberServiceClient,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { StoreFaults } from './support/faults';
import { call, clientCredentialsToken, failure, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// Multi-item operations without transactions (design §3: claim with a lease, confirm,
// compensate), with a failure injected between their steps. After every failure:
//  - no number is leaked: each number is free in the pool, held by a committed entity or mask
//    that names it, or (a rotated-out number) cooling off in quarantine;
//  - no quota slot is leaked: the owner can still create exactly its quota of agents;
//  - a failure before the commit is an error for the caller and leaves nothing behind;
//  - a failure after the commit is a success, and the lease left unconfirmed is rolled forward
//    by the next allocator once it lapses: the committed holder keeps its number.

const LEASE = defaultProvisioningConfig.lease;
const QUOTA = 2;
const GENERIC = 'the service failed; retry the call';

const faults = new StoreFaults();
let service: TestService;
/** The account whose programmable numbers soak up the pool (see `exhaust`). */
let filler: ProvisioningApp;
const apps: ProvisioningApp[] = [];
/** Every number seeded by this file. */
const seeded: string[] = [];
let range = 0;

/** Where this test's numbers and owners begin (audits look at the current test's own). */
let seededMark = 0;
let appsMark = 0;

beforeAll(async () => {
  service = await startTestService({ wrapStore: faults.wrap });
  filler = await fastApp();
});
beforeEach(() => {
  faults.reset();
  seededMark = seeded.length;
  appsMark = apps.length;
});
afterAll(async () => {
  for (const app of [filler, ...apps]) app?.close();
  await service?.close();
});

const store = () => service.core.store;
const now = () => service.clock.now();

/** `count` fresh numbers in the pool, from a range of their own. */
async function seed(count: number): Promise<string[]> {
  const first = `73${String(++range).padStart(3, '0')}000000`;
  await service.core.provisioning.lifecycle.seed(first, count);
  const numbers = Array.from({ length: count }, (_, offset) => String(BigInt(first) + BigInt(offset)));
  seeded.push(...numbers);
  return numbers;
}

/**
 * Like `provisioningApp`, but the owner has no password (no scrypt: a second less per owner).
 * A business owner with a provisioning client for every prov:* scope and its token.
 */
async function fastApp(): Promise<ProvisioningApp> {
  const owner = await service.core.registration.createUser({ accountType: 'business' });
  const { client, clientSecret } = await service.core.registration.createProvisioningClient({
    name: 'Failures app',
    scope: 'prov:numbers prov:masks prov:agents',
    ownerId: owner.svcnumId,
  });
  const token = await clientCredentialsToken(service, client.clientId, clientSecret!);
  const address = `127.0.0.1:${service.grpcPort}`;
  const numbers = new NumberServiceClient(address, credentials.createInsecure());
  const masks = new MaskServiceClient(address, credentials.createInsecure());
  const agents = new AgentServiceClient(address, credentials.createInsecure());
  return {
    owner,
    clientId: client.clientId,
    clientSecret: clientSecret!,
    token,
    numbers,
    masks,
    agents,
    close() {
      numbers.close();
      masks.close();
      agents.close();
    },
  };
}

/** A business owner with a provisioning client and agent quotas of QUOTA. */
async function owner(): Promise<ProvisioningApp> {
  const app = await fastApp();
  apps.push(app);
  await store().setQuotaOverrides(app.owner.svcnumId, { independentAgentQuota: QUOTA, dependentAgentQuota: QUOTA });
  return app;
}

const createAgent = (app: ProvisioningApp, fields: Partial<CreateAgentRequest> = {}) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    app.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName: 'Agent', ...fields }),
    app.token,
  );
const createDependent = (app: ProvisioningApp, ownerSvcnumId = '') =>
  call<CreateDependentAgentRequest, Agent>(
    app.agents,
    'createDependentAgent',
    CreateDependentAgentRequest.fromPartial({ displayName: 'Sub-agent', ownerSvcnumId }),
    app.token,
  );
const provision = (app: ProvisioningApp, requestId = '') =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    app.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName: 'Line', requestId }),
    app.token,
  );
const rotate = (app: ProvisioningApp, svcnumId: string) =>
  call<RotateAgentSvcnumRequest, Agent>(
    app.agents,
    'rotateAgentSvcnum',
    RotateAgentSvcnumRequest.fromPartial({ svcnumId }),
    app.token,
  );

/** An injected failure before the commit: the caller gets a plain INTERNAL error. */
function expectInternal(error: ServiceError) {
  expect(error.code, error.details).toBe(status.INTERNAL);
  expect(error.details).toBe(GENERIC);
}

/**
 * Allocates until the pool is empty (programmable numbers of the filler account). Every lapsed
 * lease on the way is either taken over (its holder never committed) or rolled forward (it did).
 */
async function exhaust(): Promise<string[]> {
  faults.reset();
  const taken: string[] = [];
  for (;;) {
    try {
      taken.push(
        (
          await service.core.provisioning.numbers.provision(
            { ownerId: filler.owner.svcnumId, clientId: filler.clientId },
            { displayName: 'filler' },
          )
        ).svcnum,
      );
    } catch (error) {
      if ((error as { kind?: string }).kind === 'failed_precondition') return taken;
      throw error;
    }
  }
}

/** Whether `number` is held by a committed entity or mask that names it, in a state that fits. */
async function heldByCommitted(number: NumberRecord): Promise<boolean> {
  if (!number.svcnumId) return false;
  if (number.entityType === 'mask') {
    const mask = await store().getMask(number.svcnumId);
    return mask?.svcnum === number.svcnum && ['active', 'leased'].includes(number.state);
  }
  const entity = await store().getUser(number.svcnumId);
  if (entity?.svcnum === number.svcnum) return ['active', 'suspended', 'deactivated', 'leased'].includes(number.state);
  if (entity?.fallbackSvcnum === number.svcnum) return ['reserved', 'leased'].includes(number.state);
  return false;
}

interface Audit {
  free: string[];
  held: string[];
  coolingOff: string[];
  leaked: Array<{ svcnum: string; state: string; holder?: string }>;
}

/** Classifies numbers (default: those seeded by the current test) at the current time. */
async function audit(numbers: readonly string[] = seeded.slice(seededMark)): Promise<Audit> {
  const at = now();
  const pool = new Set((await store().freeNumbers(at, 1000)).map((number) => number.svcnum));
  const result: Audit = { free: [], held: [], coolingOff: [], leaked: [] };
  for (const svcnum of numbers) {
    const number = await store().getNumber(svcnum);
    if (!number) result.leaked.push({ svcnum, state: 'missing' });
    else if (await heldByCommitted(number)) result.held.push(svcnum);
    else if (!number.svcnumId && number.state === 'quarantined' && (number.quarantinedUntil ?? 0) > at)
      result.coolingOff.push(svcnum);
    else if (pool.has(svcnum)) result.free.push(svcnum);
    else result.leaked.push({ svcnum, state: number.state, ...(number.svcnumId ? { holder: number.svcnumId } : {}) });
  }
  return result;
}

/**
 * No leak among `numbers`, and every committed entity and mask of `owners` is the recorded holder
 * of its numbers. Defaults: what the current test seeded and created (every test ends with an
 * empty pool, so earlier numbers are out of its reach); the last test checks everything.
 */
async function expectNoLeak(
  numbers: readonly string[] = seeded.slice(seededMark),
  owners: readonly ProvisioningApp[] = apps.slice(appsMark),
) {
  const found = await audit(numbers);
  expect(found.leaked).toEqual([]);
  for (const app of owners) {
    for (const type of ['ai_agent', 'programmable'] as const) {
      for (const entity of (await store().listOwned(app.owner.svcnumId, type, 100)).items) {
        for (const svcnum of [entity.svcnum, entity.fallbackSvcnum].filter((value): value is string => !!value)) {
          expect((await store().getNumber(svcnum))?.svcnumId, `${type} ${entity.svcnumId} number ${svcnum}`).toBe(
            entity.svcnumId,
          );
        }
      }
    }
    for (const mask of (await store().listMasks(app.owner.svcnumId, 100)).items) {
      expect((await store().getNumber(mask.svcnum))?.svcnumId, `mask ${mask.maskId}`).toBe(mask.maskId);
    }
  }
  return found;
}

/**
 * How many more agents of `kind` the owner (or parent agent) can create before RESOURCE_EXHAUSTED;
 * seeds the numbers they need first.
 */
async function remainingQuota(app: ProvisioningApp, kind: 'independent' | 'dependent', parent = ''): Promise<number> {
  faults.reset();
  await seed(2 * QUOTA + 2);
  let created = 0;
  for (;;) {
    try {
      await (kind === 'independent' ? createAgent(app) : createDependent(app, parent));
      created++;
    } catch (error) {
      expect((error as ServiceError).code, (error as ServiceError).details).toBe(status.RESOURCE_EXHAUSTED);
      return created;
    }
    if (created > QUOTA) throw new Error('quota not enforced');
  }
}

const agentsOf = async (app: ProvisioningApp, kind?: 'independent' | 'dependent') =>
  (await store().listOwned(app.owner.svcnumId, 'ai_agent', 100)).items.filter(
    (agent) => !kind || agent.agentKind === kind,
  );
const agentClients = async () => (await store().listClients()).filter((client) => client.kind === 'agent').length;

/** Moves the clock past the lease of every claim made so far. */
const lapse = () => service.clock.advance(LEASE + 1_000);

describe('CreateAgent with a failure between its steps', () => {
  it('fails at createClient (before the commit): error, numbers and slot given back', async () => {
    const app = await owner();
    const numbers = await seed(2);
    const clients = await agentClients();
    faults.failOn('createClient');
    expectInternal(await failure(createAgent(app)));
    expect(faults.fired).toEqual(['createClient#1']);
    expect(await agentsOf(app)).toEqual([]);
    expect(await agentClients()).toBe(clients);
    expect((await expectNoLeak(numbers)).free).toEqual(numbers);
    expect(await remainingQuota(app, 'independent')).toBe(QUOTA);
    await exhaust();
  });

  it('fails at createUser (the commit): error, client deleted, numbers and slot given back', async () => {
    const app = await owner();
    const numbers = await seed(2);
    const clients = await agentClients();
    faults.failOn('createUser');
    expectInternal(await failure(createAgent(app)));
    expect(await agentsOf(app)).toEqual([]);
    expect(await agentClients()).toBe(clients);
    expect((await expectNoLeak(numbers)).free).toEqual(numbers);
    expect(await remainingQuota(app, 'independent')).toBe(QUOTA);
    await exhaust();
  });

  it('fails before the commit and its compensations fail too: everything comes back when the leases lapse', async () => {
    const app = await owner();
    const numbers = await seed(2);
    faults.failOn('createUser').failOn('returnNumber', [1, 2]).failOn('releaseSlot');
    expectInternal(await failure(createAgent(app)));
    expect(faults.fired).toEqual(['createUser#1', 'returnNumber#1', 'returnNumber#2', 'releaseSlot#1']);
    faults.reset();
    // Still leased to a holder that never committed: not allocatable, and the slot still taken.
    const pending = await audit(numbers);
    expect(pending.leaked.map((number) => number.state)).toEqual(['leased', 'leased']);
    expect(await remainingQuota(app, 'independent')).toBe(QUOTA - 1);
    await exhaust();

    lapse();
    expect((await expectNoLeak(numbers)).free.sort()).toEqual(numbers);
    // The lapsed numbers go to the next allocator, the lapsed slot to the next creation.
    expect(await exhaust()).toEqual(expect.arrayContaining(numbers));
    expect(await remainingQuota(app, 'independent')).toBe(1);
    expect(await agentsOf(app)).toHaveLength(QUOTA);
    await exhaust();
    await expectNoLeak();
  });

  it('fails at the second lease (between number and fallback): the first number is given back', async () => {
    const app = await owner();
    const numbers = await seed(3);
    faults.failOn('leaseNumber', 2);
    expectInternal(await failure(createAgent(app)));
    expect((await expectNoLeak(numbers)).free.sort()).toEqual(numbers);
    await exhaust();

    // The pool running dry at the fallback is an answer, not an internal error.
    const [last] = await seed(1);
    const empty = await failure(createAgent(app));
    expect(empty.code).toBe(status.FAILED_PRECONDITION);
    expect(empty.details).toMatch(/no number is free/);
    expect((await expectNoLeak([last!])).free).toEqual([last]);
    expect(await remainingQuota(app, 'independent')).toBe(QUOTA);
    await exhaust();
  });

  for (const [which, nth, state] of [
    ['number', 1, 'active'],
    ['fallback', 2, 'reserved'],
  ] as const) {
    it(`fails at confirmNumber of the ${which} (after the commit): success, and the lease is rolled forward`, async () => {
      const app = await owner();
      await seed(2);
      faults.failOn('confirmNumber', nth);
      const created = await createAgent(app);
      expect(faults.fired).toEqual([`confirmNumber#${nth}`]);
      faults.reset();
      const agent = (await store().getUser(created.agent!.svcnumId))!;
      const svcnum = which === 'number' ? agent.svcnum : agent.fallbackSvcnum!;
      expect((await store().getNumber(svcnum))!.state).toBe('leased');
      await expectNoLeak();

      // The lease lapses; the next allocator must not steal the number of a committed holder.
      lapse();
      await seed(3);
      const taken = await exhaust();
      expect(taken).not.toContain(svcnum);
      expect(await store().getNumber(svcnum)).toMatchObject({ svcnum, state, svcnumId: agent.svcnumId });
      await expectNoLeak();
      // The agent works: it can get a token and rotate to its fallback.
      await seed(1);
      const rotated = await rotate(app, agent.svcnumId);
      expect(rotated.svcnum).toBe(agent.fallbackSvcnum);
      expect(await remainingQuota(app, 'independent')).toBe(QUOTA - 1);
      await exhaust();
      await expectNoLeak();
    });
  }

  it('fails at confirmSlot (after the commit): success, and the slot keeps counting after its lease lapses', async () => {
    const app = await owner();
    await seed(2);
    faults.failOn('confirmSlot');
    await createAgent(app);
    expect(faults.fired).toEqual(['confirmSlot#1']);
    expect(await remainingQuota(app, 'independent')).toBe(QUOTA - 1);
    lapse();
    // The lapsed slot of a committed agent is confirmed, not taken over.
    await seed(2);
    expect((await failure(createAgent(app))).code).toBe(status.RESOURCE_EXHAUSTED);
    expect(await agentsOf(app)).toHaveLength(QUOTA);
    await exhaust();
    await expectNoLeak();
  });
});

describe('CreateDependentAgent with a failure between its steps', () => {
  it('fails at createUser (the commit): error, nothing left, the dependent quota intact', async () => {
    const app = await owner();
    const numbers = await seed(2);
    faults.failOn('createUser');
    expectInternal(await failure(createDependent(app)));
    expect((await expectNoLeak(numbers)).free.sort()).toEqual(numbers);
    expect(await remainingQuota(app, 'dependent')).toBe(QUOTA);
    await exhaust();
  });

  it("under an independent agent, fails at the commit: the parent agent's quota is intact", async () => {
    const app = await owner();
    await seed(2);
    const parent = (await createAgent(app)).agent!.svcnumId;
    // An agent owning dependents is their quota owner, with a quota of its own.
    await store().setQuotaOverrides(parent, { dependentAgentQuota: QUOTA });
    const numbers = await seed(2);
    faults.failOn('createUser');
    expectInternal(await failure(createDependent(app, parent)));
    expect((await expectNoLeak(numbers)).free.sort()).toEqual(numbers);
    expect(await remainingQuota(app, 'dependent', parent)).toBe(QUOTA);
    expect((await agentsOf(app, 'dependent')).every((agent) => agent.parentId === parent)).toBe(true);
    await exhaust();
  });

  it('fails at confirmSlot and confirmNumber (after the commit): success, rolled forward later', async () => {
    const app = await owner();
    await seed(2);
    faults.failOn('confirmSlot').failOn('confirmNumber', 1);
    const created = await createDependent(app);
    expect(faults.fired).toEqual(['confirmNumber#1', 'confirmSlot#1']);
    faults.reset();
    expect(await remainingQuota(app, 'dependent')).toBe(QUOTA - 1);
    lapse();
    await seed(3);
    const taken = await exhaust();
    expect(taken).not.toContain(created.svcnum);
    expect(await store().getNumber(created.svcnum)).toMatchObject({ state: 'active', svcnumId: created.svcnumId });
    await seed(2);
    expect((await failure(createDependent(app))).code).toBe(status.RESOURCE_EXHAUSTED);
    await exhaust();
    await expectNoLeak();
  });
});

describe('CreateMask with a failure between its steps', () => {
  let participants: [User, User];
  beforeAll(async () => {
    participants = [await service.core.registration.createUser({}), await service.core.registration.createUser({})];
  });
  const createMask = (app: ProvisioningApp) =>
    call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 3600,
        participantA: participants[0].svcnumId,
        participantB: participants[1].svcnumId,
        scope: 'delivery',
      }),
      app.token,
    );

  it('fails at createMask (the commit): error, the number given back', async () => {
    const app = await owner();
    const numbers = await seed(1);
    faults.failOn('createMask');
    expectInternal(await failure(createMask(app)));
    expect((await store().listMasks(app.owner.svcnumId, 10)).items).toEqual([]);
    expect((await expectNoLeak(numbers)).free).toEqual(numbers);
    await exhaust();
  });

  it('fails at confirmNumber (after the commit): success; the mask keeps its number until expiry and cool-off', async () => {
    const app = await owner();
    const [number] = await seed(1);
    faults.failOn('confirmNumber');
    const mask = await createMask(app);
    expect(mask.svcnum).toBe(number);
    faults.reset();
    expect(await store().getNumber(number!)).toMatchObject({ state: 'leased', svcnumId: mask.maskId });

    lapse();
    await seed(2);
    const taken = await exhaust();
    expect(taken).not.toContain(number);
    const rolled = (await store().getNumber(number!))!;
    expect(rolled).toMatchObject({ state: 'active', svcnumId: mask.maskId, poolKey: 'free' });
    // Back in the pool only after the mask's expiry plus the cool-off.
    expect(Number(rolled.availableAt)).toBe(mask.expireTime!.getTime() + defaultProvisioningConfig.coolOff);
    await expectNoLeak();
  });
});

describe('ProvisionNumber with a failure between its steps', () => {
  it('fails at createUser (the commit): error, the number given back; the request_id can be used again', async () => {
    const app = await owner();
    const numbers = await seed(1);
    faults.failOn('createUser');
    expectInternal(await failure(provision(app, 'req-commit-fails')));
    expect((await expectNoLeak(numbers)).free).toEqual(numbers);
    faults.reset();
    const retried = await provision(app, 'req-commit-fails');
    expect(retried.svcnum).toBe(numbers[0]);
    expect((await provision(app, 'req-commit-fails')).svcnumId).toBe(retried.svcnumId);
    await expectNoLeak(numbers);
    await exhaust();
  });

  it('fails at confirmNumber (after the commit): success, rolled forward later', async () => {
    const app = await owner();
    const [number] = await seed(1);
    faults.failOn('confirmNumber');
    const created = await provision(app);
    expect(created.svcnum).toBe(number);
    lapse();
    await seed(2);
    expect(await exhaust()).not.toContain(number);
    expect(await store().getNumber(number!)).toMatchObject({ state: 'active', svcnumId: created.svcnumId });
    await expectNoLeak();
  });

  it('fails at completeRequest (after the commit): success, and a retry does not create a second number', async () => {
    const app = await owner();
    await seed(3);
    faults.failOn('completeRequest');
    const created = await provision(app, 'req-complete-fails');
    expect(faults.fired).toEqual(['completeRequest#1']);
    faults.reset();
    // The retry of a caller that did not hear the answer: the same number, or "still in progress".
    const retry = await provision(app, 'req-complete-fails').then(
      (number) => number.svcnumId,
      (error: ServiceError) => status[error.code],
    );
    expect([created.svcnumId, 'ABORTED']).toContain(retry);
    expect(
      (await store().listOwned(app.owner.svcnumId, 'programmable', 10)).items.map((entity) => entity.svcnumId),
    ).toEqual([created.svcnumId]);
    await exhaust();
    await expectNoLeak();
  });

  it('cannot record the request at all after the commit: success, and a retry is ABORTED rather than a duplicate', async () => {
    const app = await owner();
    await seed(3);
    faults.failOn('completeRequest', [1, 2]);
    const created = await provision(app, 'req-complete-lost');
    expect(faults.fired).toEqual(['completeRequest#1', 'completeRequest#2']);
    faults.reset();
    const retry = await failure(provision(app, 'req-complete-lost'));
    expect(retry.code).toBe(status.ABORTED);
    expect(retry.details).toMatch(/still in progress/);
    expect(
      (await store().listOwned(app.owner.svcnumId, 'programmable', 10)).items.map((entity) => entity.svcnumId),
    ).toEqual([created.svcnumId]);
    // Once its lease lapsed, a retry finds the number committed under the request's id.
    lapse();
    expect((await provision(app, 'req-complete-lost')).svcnumId).toBe(created.svcnumId);
    expect((await store().listOwned(app.owner.svcnumId, 'programmable', 10)).items).toHaveLength(1);
    await exhaust();
    await expectNoLeak();
  });
});

/** An agent with its number and fallback, and one more free number for the new fallback. */
async function agentToRotate() {
  const app = await owner();
  await seed(2);
  const agent = (await createAgent(app)).agent!;
  const user = (await store().getUser(agent.svcnumId))!;
  const [spare] = await seed(1);
  return { app, id: agent.svcnumId, number: user.svcnum, fallback: user.fallbackSvcnum!, spare: spare! };
}

async function expectUnchanged(setup: Awaited<ReturnType<typeof agentToRotate>>) {
  const agent = (await store().getUser(setup.id))!;
  expect({ svcnum: agent.svcnum, fallback: agent.fallbackSvcnum, state: agent.numberState }).toEqual({
    svcnum: setup.number,
    fallback: setup.fallback,
    state: 'active',
  });
  expect(await store().getNumber(setup.number)).toMatchObject({ state: 'active', svcnumId: setup.id });
  expect(await store().getNumber(setup.fallback)).toMatchObject({ state: 'reserved', svcnumId: setup.id });
  expect((await expectNoLeak([setup.number, setup.fallback, setup.spare])).free).toEqual([setup.spare]);
}

describe('RotateAgentSvcnum with a failure between its steps', () => {
  for (const [method, nth] of [
    ['quarantineNumber', 1],
    ['transitionNumber', 1],
    ['updateEntity', 1],
  ] as const) {
    it(`fails at ${method}${method === 'updateEntity' ? ' (the commit)' : ''}: error, the agent and its numbers unchanged`, async () => {
      const setup = await agentToRotate();
      faults.failOn(method, nth);
      expectInternal(await failure(rotate(setup.app, setup.id)));
      expect(faults.fired).toEqual([`${method}#${nth}`]);
      faults.reset();
      await expectUnchanged(setup);
      // And a rotation afterwards works.
      const rotated = await rotate(setup.app, setup.id);
      expect(rotated.svcnum).toBe(setup.fallback);
      await exhaust();
      await expectNoLeak();
    });
  }

  it('fails at confirmNumber of the new fallback (after the commit): success, rolled forward later', async () => {
    const setup = await agentToRotate();
    faults.failOn('confirmNumber');
    const rotated = await rotate(setup.app, setup.id);
    expect(rotated.svcnumId).toBe(setup.id);
    expect(rotated.svcnum).toBe(setup.fallback);
    faults.reset();
    const agent = (await store().getUser(setup.id))!;
    expect(agent.fallbackSvcnum).toBe(setup.spare);
    expect(await store().getNumber(setup.spare)).toMatchObject({ state: 'leased', svcnumId: setup.id });
    expect(await store().getNumber(setup.number)).toMatchObject({ state: 'quarantined' });
    const found = await expectNoLeak([setup.number, setup.fallback, setup.spare]);
    expect(found.coolingOff).toEqual([setup.number]);

    lapse();
    await seed(2);
    expect(await exhaust()).not.toContain(setup.spare);
    expect(await store().getNumber(setup.spare)).toMatchObject({ state: 'reserved', svcnumId: setup.id });
    await expectNoLeak();
  });
});

describe('a crashed operation', () => {
  it('frees its leased number and its quota slot once the lease lapses', async () => {
    const app = await owner();
    const [number] = await seed(1);
    // A creation that leased a number and claimed a slot, then died before its commit.
    const crashed = '01CRASHEDHOLDER0000000000X';
    const candidate = (await store().freeNumbers(now(), 1000)).find((record) => record.svcnum === number)!;
    expect(await store().leaseNumber(candidate, crashed, 'ai_agent', now() + LEASE, now())).toBe(true);
    expect(
      await store().claimSlot(slotKey(app.owner.svcnumId, 'independent', 0), crashed, now() + LEASE, now()),
    ).toEqual({ outcome: 'claimed' });

    // While the lease runs: the number is not allocatable and the slot counts.
    expect((await audit([number!])).leaked).toEqual([{ svcnum: number, state: 'leased', holder: crashed }]);
    expect(await exhaust()).not.toContain(number);
    expect(await remainingQuota(app, 'independent')).toBe(QUOTA - 1);
    await exhaust();

    lapse();
    expect((await expectNoLeak([number!])).free).toEqual([number]);
    expect(await exhaust()).toContain(number);
    expect(await remainingQuota(app, 'independent')).toBe(1);
    expect(await agentsOf(app)).toHaveLength(QUOTA);
    await exhaust();
    await expectNoLeak();
  });
});

describe('the whole pool at the end', () => {
  it('has no leaked number among everything seeded by this file', async () => {
    const found = await expectNoLeak(seeded, [filler, ...apps]);
    expect(found.free.length + found.held.length + found.coolingOff.length).toBe(seeded.length);
    // Every test ended with an empty pool, rotated-out numbers cool off for 90 days.
    expect(found.free).toEqual([]);
  });
});

// Known gaps of RotateAgentSvcnum (core/provisioning/agents.ts, outside this file's remit):
// these tests state the correct behaviour and are expected to fail until agents.ts is fixed;
// then drop `.fails`. They run last, and the lost race last of all: it leaves an agent whose
// number is quarantined.
describe('RotateAgentSvcnum after earlier failures', () => {
  // A rotation whose fallback confirmation failed leaves the new fallback `leased`; the next
  // rotation confirms it for the agent first.
  it('rotates again right after a rotation whose fallback confirmation failed', async () => {
    const setup = await agentToRotate();
    faults.failOn('confirmNumber');
    await rotate(setup.app, setup.id);
    faults.reset();
    await seed(1);
    // The agent's record names the still-leased fallback: it is the agent's, committed.
    const again = await rotate(setup.app, setup.id);
    expect(again.svcnum).toBe(setup.spare);
    await exhaust();
    await expectNoLeak();
  });

  // A lost conditional write at the commit throws inside the commit, so the steps before it
  // (quarantine, fallback switch, new lease) are undone.
  it('loses the race at the commit (the agent changed meanwhile): ABORTED, the agent and its numbers unchanged', async () => {
    const setup = await agentToRotate();
    // The conditional write finds the agent changed: the store answers "condition failed".
    faults.answerOn('updateEntity', 1, async () => undefined);
    const aborted = await failure(rotate(setup.app, setup.id));
    expect(aborted.code).toBe(status.ABORTED);
    faults.reset();
    await expectUnchanged(setup);
    await exhaust();
  });
});
