import { status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { User } from '../core/kernel/model';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import { agentClientId } from '../core/provisioning/agents';
import { slotKey } from '../core/provisioning/quota';
import {
  type Agent,
  CreateAgentRequest,
  type CreateAgentResponse,
  RotateAgentSvcnumRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { CreateMaskRequest, type Mask } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import { StoreFaults } from './support/faults';
import {
  call,
  callerOf,
  clientCredentialsToken,
  failure,
  provisioningApp,
  seedPool,
  type ProvisioningApp,
} from './support/grpc';
import { startTestService, type TestService } from './support/service';

// A retry with the same request_id after the attempt before it died (test/provisioning-crash.test.ts
// kills real processes; here, step by step on a hand-moved clock): the attempt "dies" by hanging
// for good at a chosen store call, the clock moves past its leases, and the retry must find what
// it committed or build it under the same id, and leave nothing of the dead attempt behind.

const LEASE = defaultProvisioningConfig.lease;
const QUOTA = 2;

const faults = new StoreFaults();
let service: TestService;
let participants: [User, User];
let range = 0;

beforeAll(async () => {
  service = await startTestService({ wrapStore: faults.wrap });
  participants = [await service.core.registration.createUser({}), await service.core.registration.createUser({})];
});
beforeEach(() => faults.reset());
afterAll(async () => {
  await service?.close();
});

const store = () => service.core.store;
const lapse = () => service.clock.advance(LEASE + 1_000);
/** A store call that never returns: the attempt making it is as good as dead. */
const never = () => new Promise<never>(() => undefined);

async function owner(): Promise<ProvisioningApp> {
  const app = await provisioningApp(service);
  await store().setQuotaOverrides(app.owner.svcnumId, { independentAgentQuota: QUOTA, dependentAgentQuota: QUOTA });
  await seedPool(service, `76${String(++range).padStart(2, '0')}`, 8);
  return app;
}

const createAgent = (app: ProvisioningApp, requestId: string) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    app.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName: 'Agent', requestId }),
    app.token,
  );

/** An attempt of CreateAgent (in the core, no answer awaited) that dies at the first `method` call concerning it. */
function dyingAgent(app: ProvisioningApp, requestId: string, method: 'createUser' | 'confirmNumber'): void {
  if (method === 'createUser') faults.before(method, () => never());
  // Only its own confirmation (an allocator may confirm others' lapsed leases on the way).
  else
    faults.before(method, async (_svcnum, holder) => {
      if ((await store().getUser(holder))?.ownerId === app.owner.svcnumId) await never();
    });
  void service.core.provisioning.agents.create(callerOf(app), { displayName: 'Agent', requestId });
}

/** Waits until the store saw a call of `method` (the dying attempt got there). */
async function reached(method: Parameters<StoreFaults['calls']>[0]) {
  for (let tries = 0; faults.calls(method) === 0; tries++) {
    if (tries > 200) throw new Error(`${method} never reached`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const agentsOf = async (app: ProvisioningApp) => (await store().listOwned(app.owner.svcnumId, 'ai_agent', 100)).items;

/** How many more independent agents the owner gets before RESOURCE_EXHAUSTED. */
async function remainingQuota(app: ProvisioningApp): Promise<number> {
  for (let created = 0; ; created++) {
    const outcome = await createAgent(app, `fill-${created}`).then(
      () => 'created',
      (error: ServiceError) => status[error.code],
    );
    if (outcome !== 'created') {
      expect(outcome).toBe('RESOURCE_EXHAUSTED');
      return created;
    }
  }
}

describe('CreateAgent retried after its attempt died', () => {
  it('after the commit: ABORTED while the lease runs, then the committed agent, its leases and slot confirmed, with a new secret', async () => {
    const app = await owner();
    dyingAgent(app, 'died-after-commit', 'confirmNumber');
    await reached('confirmNumber');
    faults.reset();
    const [agent] = await agentsOf(app);
    expect(agent).toBeDefined();
    expect((await failure(createAgent(app, 'died-after-commit'))).code).toBe(status.ABORTED);

    lapse();
    const retried = await createAgent(app, 'died-after-commit');
    expect(retried.agent!.svcnumId).toBe(agent!.svcnumId);
    expect(await store().getNumber(agent!.svcnum)).toMatchObject({ state: 'active', svcnumId: agent!.svcnumId });
    expect(await store().getNumber(agent!.fallbackSvcnum!)).toMatchObject({
      state: 'reserved',
      svcnumId: agent!.svcnumId,
    });
    await clientCredentialsToken(service, retried.clientId, retried.clientSecret);
    // Its slot is confirmed: it counts, and only once.
    lapse();
    expect(await remainingQuota(app)).toBe(QUOTA - 1);
    expect((await createAgent(app, 'died-after-commit')).agent!.svcnumId).toBe(agent!.svcnumId);
  });

  it('before the commit: the agent is built under the same id, reusing the client and slot the dead attempt left', async () => {
    const app = await owner();
    dyingAgent(app, 'died-before-commit', 'createUser');
    await reached('createUser');
    faults.reset();
    expect(await agentsOf(app)).toEqual([]);
    // The dead attempt's client: its agent does not exist.
    const orphans: string[] = [];
    for (const client of await store().listClients()) {
      if (client.kind === 'agent' && !(await store().getUser(client.subjectId!))) orphans.push(client.clientId);
    }
    expect(orphans).toHaveLength(1);

    lapse();
    const retried = await createAgent(app, 'died-before-commit');
    expect(retried.clientId).toBe(orphans[0]);
    expect(retried.clientId).toBe(agentClientId(retried.agent!.svcnumId));
    expect((await store().listClients()).filter((client) => client.subjectId === retried.agent!.svcnumId)).toHaveLength(
      1,
    );
    await clientCredentialsToken(service, retried.clientId, retried.clientSecret);
    expect(await remainingQuota(app)).toBe(QUOTA - 1);
  });

  it('keeps no slot of the dead attempt when its retry committed with another one', async () => {
    const app = await owner();
    // A creation that holds slot 0 while the dying attempt takes slot 1, then fails and frees slot 0.
    let failFirst!: () => void;
    const firstHolds = new Promise<void>((resolve) => {
      failFirst = resolve;
    });
    let holders = 0;
    faults.before('leaseNumber', async () => {
      if (++holders === 1) {
        await firstHolds;
        throw new Error('injected failure of the first creation');
      }
      if (holders === 2) await never();
    });
    const first = failure(createAgent(app, 'first'));
    await reached('leaseNumber');
    void service.core.provisioning.agents.create(callerOf(app), {
      displayName: 'Agent',
      requestId: 'dies-holding-slot-1',
    });
    while (holders < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    failFirst();
    await first;
    faults.reset();

    lapse();
    const retried = await createAgent(app, 'dies-holding-slot-1');
    expect((await store().getUser(retried.agent!.svcnumId))!.quotaSlot).toBe(
      slotKey(app.owner.svcnumId, 'independent', 0),
    );
    // Slot 1 is still leased to the same id; it lapses and goes to the next creation.
    lapse();
    expect(await remainingQuota(app)).toBe(QUOTA - 1);
    expect(await agentsOf(app)).toHaveLength(QUOTA);
  });
});

describe('an attempt that outlived its lease, and the retry that took over', () => {
  /**
   * CreateAgent with `requestId`, stalled in its first call of `method` until the clock has moved
   * past its lease and a retry (over gRPC) has created the agent; then let go. Its outcome is
   * `code: message`.
   */
  async function stalledThenRetried(app: ProvisioningApp, requestId: string, method: 'createUser' | 'createClient') {
    let resume!: () => void;
    const stalled = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let calls = 0;
    faults.before(method, async () => {
      if (++calls === 1) await stalled;
    });
    const slow = service.core.provisioning.agents.create(callerOf(app), { displayName: 'Agent', requestId }).then(
      () => 'created',
      (error: Error) => `${(error as { kind?: string }).kind}: ${error.message}`,
    );
    await reached(method);
    lapse();
    const retried = await createAgent(app, requestId);
    resume();
    const outcome = await slow;
    faults.reset();
    return { retried, outcome };
  }

  /** One agent, the retry's, with its numbers, working client and one quota slot. */
  async function onlyTheRetrysAgent(app: ProvisioningApp, retried: CreateAgentResponse) {
    const [agent, ...others] = await agentsOf(app);
    expect([agent!.svcnumId, others]).toEqual([retried.agent!.svcnumId, []]);
    expect(await store().getNumber(agent!.svcnum)).toMatchObject({ state: 'active', svcnumId: agent!.svcnumId });
    expect(await store().getNumber(agent!.fallbackSvcnum!)).toMatchObject({
      state: 'reserved',
      svcnumId: agent!.svcnumId,
    });
    expect(await store().getClient(agent!.clientId!)).toMatchObject({ subjectId: agent!.svcnumId });
    await clientCredentialsToken(service, retried.clientId, retried.clientSecret);
    lapse();
    expect(await remainingQuota(app)).toBe(QUOTA - 1);
  }

  it('stalled in its commit write: the write fails (same id), nothing is undone, and its caller is told to retry', async () => {
    const app = await owner();
    const { retried, outcome } = await stalledThenRetried(app, 'slow', 'createUser');
    // Its own numbers (not the agent's) lapse back to the pool.
    expect(outcome).toMatch(/^aborted: this call took longer than its request_id may be held; retry/);
    await onlyTheRetrysAgent(app, retried);
  });

  it('stalled before its commit: it neither commits nor undoes, ABORTED; the retry returns the same agent', async () => {
    const app = await owner();
    const { retried, outcome } = await stalledThenRetried(app, 'stalled', 'createClient');
    expect(outcome).toMatch(/^aborted: this call took longer/);
    await onlyTheRetrysAgent(app, retried);
    expect((await createAgent(app, 'stalled')).agent!.svcnumId).toBe(retried.agent!.svcnumId);
  });
});

describe('an ambiguous commit (the write applied, its answer lost)', () => {
  const createMask = (app: ProvisioningApp, requestId: string) =>
    call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 3600,
        participantA: participants[0].svcnumId,
        participantB: participants[1].svcnumId,
        scope: 'delivery',
        requestId,
      }),
      app.token,
    );
  const applyThenLose = (mask: Parameters<ReturnType<typeof store>['createMask']>[0]) =>
    store()
      .createMask(mask)
      .then(() => {
        throw new Error('the answer was lost');
      });

  it('is a success when a read shows it applied', async () => {
    const app = await owner();
    faults.answerOn('createMask', 1, applyThenLose);
    const mask = await createMask(app, 'lost-answer');
    expect(await store().getNumber(mask.svcnum)).toMatchObject({ state: 'active', svcnumId: mask.maskId });
    expect((await createMask(app, 'lost-answer')).maskId).toBe(mask.maskId);
  });

  it('when that cannot be told: an error, nothing undone, and the retry returns the mask', async () => {
    const app = await owner();
    faults.answerOn('createMask', 1, applyThenLose).failOn('getMask', 1);
    expect((await failure(createMask(app, 'unknown-outcome'))).code).toBe(status.INTERNAL);
    faults.reset();
    const [stored] = (await store().listMasks(app.owner.svcnumId, 10)).items;
    // Its number was not given back to the pool while a mask names it.
    expect(await store().getNumber(stored!.svcnum)).toMatchObject({ state: 'leased', svcnumId: stored!.maskId });
    // The request's lease was ended, so the retry need not wait for it.
    const retried = await createMask(app, 'unknown-outcome');
    expect(retried.maskId).toBe(stored!.maskId);
    expect(await store().getNumber(stored!.svcnum)).toMatchObject({ state: 'active', svcnumId: stored!.maskId });
    expect((await store().listMasks(app.owner.svcnumId, 10)).items).toHaveLength(1);
  });
});

it('takes over a pending record written before resource ids, once its lease lapsed', async () => {
  const app = await owner();
  // The previous code's record: pending, no resource id; its attempt died right after writing it.
  faults.answerOn('beginRequest', 1, async (record) => {
    const { resourceId: _id, ...previous } = record;
    await store().beginRequest(previous);
    throw new Error('died');
  });
  expect((await failure(createAgent(app, 'old-record'))).code).toBe(status.INTERNAL);
  faults.reset();
  expect((await failure(createAgent(app, 'old-record'))).code).toBe(status.ABORTED);
  lapse();
  const created = await createAgent(app, 'old-record');
  expect((await createAgent(app, 'old-record')).agent!.svcnumId).toBe(created.agent!.svcnumId);
  expect(await agentsOf(app)).toHaveLength(1);
});

describe('RotateAgentSvcnum after a rotation died', () => {
  const rotate = (app: ProvisioningApp, svcnumId: string) =>
    call<RotateAgentSvcnumRequest, Agent>(
      app.agents,
      'rotateAgentSvcnum',
      RotateAgentSvcnumRequest.fromPartial({ svcnumId }),
      app.token,
    );

  it('is ABORTED while the dead one holds the agent, then finishes it: the old number retired, the fallback in use, a new fallback reserved', async () => {
    const app = await owner();
    const { agent } = await createAgent(app, 'to-rotate');
    const before = (await store().getUser(agent!.svcnumId))!;
    // Dies after retiring the old number, before switching to the fallback.
    faults.before('transitionNumber', () => never());
    void service.core.provisioning.agents.rotate(callerOf(app), agent!.svcnumId);
    await reached('transitionNumber');
    faults.reset();
    expect(await store().getNumber(before.svcnum)).toMatchObject({
      state: 'quarantined',
      previousSvcnumId: before.svcnumId,
    });
    expect((await failure(rotate(app, agent!.svcnumId))).code).toBe(status.ABORTED);
    lapse();
    const rotated = await rotate(app, agent!.svcnumId);
    expect(rotated.svcnum).toBe(before.fallbackSvcnum);
    const after = (await store().getUser(agent!.svcnumId))!;
    expect(after.rotationUntil).toBeUndefined();
    expect(await store().getNumber(before.svcnum)).toMatchObject({
      state: 'quarantined',
      previousSvcnumId: before.svcnumId,
    });
    expect(await store().getNumber(before.fallbackSvcnum!)).toMatchObject({
      state: 'active',
      svcnumId: before.svcnumId,
    });
    expect(await store().getNumber(after.fallbackSvcnum!)).toMatchObject({
      state: 'reserved',
      svcnumId: before.svcnumId,
    });
    // And it rotates again as usual.
    expect((await rotate(app, agent!.svcnumId)).svcnum).toBe(after.fallbackSvcnum);
  });

  it('lets one of two concurrent rotations win; the other is ABORTED and undoes nothing of the winner', async () => {
    const app = await owner();
    const { agent } = await createAgent(app, 'rotate-twice');
    const before = (await store().getUser(agent!.svcnumId))!;
    const outcomes = await Promise.allSettled([rotate(app, agent!.svcnumId), rotate(app, agent!.svcnumId)]);
    const won = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    expect(won).toHaveLength(1);
    expect(
      outcomes
        .filter((outcome) => outcome.status === 'rejected')
        .map((outcome) => ((outcome as PromiseRejectedResult).reason as ServiceError).code),
    ).toStrictEqual([status.ABORTED]);
    const after = (await store().getUser(agent!.svcnumId))!;
    expect(after.svcnum).toBe(before.fallbackSvcnum);
    expect(await store().getNumber(after.svcnum)).toMatchObject({ state: 'active', svcnumId: before.svcnumId });
    expect(await store().getNumber(after.fallbackSvcnum!)).toMatchObject({
      state: 'reserved',
      svcnumId: before.svcnumId,
    });
    expect(await store().getNumber(before.svcnum)).toMatchObject({ state: 'quarantined' });
  });
});
