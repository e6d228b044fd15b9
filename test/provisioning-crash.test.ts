import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { credentials, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { User } from '../core/kernel/model';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import {
  AgentServiceClient,
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  type Agent,
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
import type { StoreMethod } from './support/faults';
import { bundledScript } from './support/bundled';
import { call, clientCredentialsToken } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// Exactly-once creates across crashes. The gRPC service runs in a child process that kills
// itself (SIGKILL) right after a chosen store call of one request, while 7 other creates of the
// same owner run concurrently; DynamoDB (this process's embedded one) outlives it, as in AWS.
// Every step of CreateAgent, CreateDependentAgent, CreateMask and ProvisionNumber is a crash
// point. Then a round of 16 creates plus retries of everything is killed from outside at a random
// instant, and a restarted service retries every request_id. In the end: one resource per
// request_id, the same one on every answer; exact quotas (Q ids give Q agents, one more id is
// RESOURCE_EXHAUSTED once every lease has lapsed); every number free or held by a resource that
// names it; one working client per independent agent, and no other.

type Kind = 'agent' | 'dependent' | 'mask' | 'number';
interface CrashPoint {
  kind: Kind;
  method: StoreMethod;
  nth: number;
}

/**
 * Short leases, so that retries need not wait a minute; long enough that no live attempt outlasts
 * its own lease on a loaded machine (then another allocator could take its number).
 */
const LEASE = 3_000;
/** The creates of one crash run, all for one owner: its quotas are exactly 2 of each agent kind. */
const BATCH: Kind[] = ['agent', 'agent', 'dependent', 'dependent', 'mask', 'mask', 'number', 'number'];
const QUOTA = 2;
/** The round killed at a random instant: 16 creates, 4 of each kind. */
const ROUND: Kind[] = BATCH.flatMap((kind) => [kind, kind]);
const CONCURRENT_RUNS = 3;

/** Every store call of one create, in order: the N-th call of a method is that step. */
function stepsOf(kind: Kind, methods: StoreMethod[]): CrashPoint[] {
  return methods.map((method, index) => ({
    kind,
    method,
    nth: methods.slice(0, index + 1).filter((m) => m === method).length,
  }));
}
const CRASH_POINTS: CrashPoint[] = [
  ...stepsOf('agent', [
    'beginRequest',
    'claimSlot',
    'leaseNumber',
    'leaseNumber',
    'createClient',
    'createUser',
    'confirmNumber',
    'confirmNumber',
    'confirmSlot',
    'indexCapabilities',
    'completeRequest',
  ]),
  ...stepsOf('dependent', [
    'beginRequest',
    'claimSlot',
    'leaseNumber',
    'leaseNumber',
    'createUser',
    'confirmNumber',
    'confirmNumber',
    'confirmSlot',
    'completeRequest',
  ]),
  ...stepsOf('mask', [
    'beginRequest',
    'claimSlot',
    'leaseNumber',
    'createMask',
    'confirmNumber',
    'confirmSlot',
    'completeRequest',
  ]),
  ...stepsOf('number', [
    'beginRequest',
    'claimSlot',
    'leaseNumber',
    'createUser',
    'confirmNumber',
    'confirmSlot',
    'completeRequest',
  ]),
];

/** Outcomes a call may have while the service dies under it; anything else is a bug. */
const CRASH_OUTCOMES = new Set([status.UNAVAILABLE, status.CANCELLED, status.INTERNAL, status.ABORTED]);

interface Owner {
  svcnumId: string;
  token: string;
  quota: number;
}
interface Sent {
  owner: Owner;
  kind: Kind;
  requestId: string;
  answers: Set<string>;
  clientSecret?: string;
  clientId?: string;
}

let service: TestService;
let crashingService: string;
let participants: [User, User];
const sent: Sent[] = [];
const seeded: string[] = [];
const counts = { crashRuns: 0, creates: 0, retries: 0, outcomes: {} as Record<string, number> };

beforeAll(async () => {
  service = await startTestService({ provisioning: { ...defaultProvisioningConfig, lease: LEASE } });
  crashingService = await bundledScript('test/support/crashing-service.ts');
  participants = [await service.core.registration.createUser({}), await service.core.registration.createUser({})];
  const first = 74_000_000_000;
  const count = 600;
  await service.core.provisioning.lifecycle.seed(String(first), count);
  seeded.push(...Array.from({ length: count }, (_, offset) => String(first + offset)));
}, 60_000);

afterAll(async () => {
  await service?.close();
});

/**
 * A business owner with a provisioning client, its token, and quotas of `quota` (agents of each kind, live masks,
 * numbers).
 */
async function newOwner(quota: number): Promise<Owner> {
  const owner = await service.core.registration.createUser({ accountType: 'business' });
  await service.core.store.setQuotaOverrides(owner.svcnumId, {
    independentAgentQuota: quota,
    dependentAgentQuota: quota,
    maskQuota: quota,
    numberQuota: quota,
  });
  const { client, clientSecret } = await service.core.registration.createProvisioningClient({
    name: 'Crash app',
    scope: 'prov:numbers prov:masks prov:agents',
    ownerId: owner.svcnumId,
  });
  return {
    svcnumId: owner.svcnumId,
    token: await clientCredentialsToken(service, client.clientId, clientSecret!),
    quota,
  };
}

interface Child {
  process: ChildProcess;
  numbers: NumberServiceClient;
  masks: MaskServiceClient;
  agents: AgentServiceClient;
  exited: Promise<string>;
  output: () => string;
  close(): void;
}

/** The service in a child process on this test's DynamoDB, optionally armed to crash. */
async function startChild(crash?: { requestId: string; method: StoreMethod; nth: number }): Promise<Child> {
  const child = spawn(process.execPath, [crashingService], {
    env: {
      ...process.env,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      DYNAMO_ENDPOINT: service.dynamoEndpoint,
      DATA_DIR: service.dataDir,
      ISSUER: service.issuer,
      LEASE_MS: String(LEASE),
      ...(crash ? { CRASH: JSON.stringify(crash) } : {}),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ?? `exit ${code}`)),
  );
  const grpcPort = await new Promise<number>((resolve, reject) => {
    let line = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      line += chunk.toString();
      if (line.includes('\n')) resolve((JSON.parse(line) as { grpcPort: number }).grpcPort);
    });
    void exited.then((how) => reject(new Error(`the service exited (${how}) before listening:\n${output}`)));
  });
  const address = `127.0.0.1:${grpcPort}`;
  const clients = {
    numbers: new NumberServiceClient(address, credentials.createInsecure()),
    masks: new MaskServiceClient(address, credentials.createInsecure()),
    agents: new AgentServiceClient(address, credentials.createInsecure()),
  };
  return {
    process: child,
    ...clients,
    exited,
    output: () => output,
    close() {
      clients.numbers.close();
      clients.masks.close();
      clients.agents.close();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** One create (or its retry: the same request with the same request_id); resolves with the resource id. */
async function send(child: Child, request: Sent): Promise<string> {
  const { owner, requestId } = request;
  switch (request.kind) {
    case 'agent': {
      const created = await call<CreateAgentRequest, CreateAgentResponse>(
        child.agents,
        'createAgent',
        CreateAgentRequest.fromPartial({
          requestId,
          displayName: `Agent ${requestId}`,
          capabilities: ['crash-test'],
          discoverable: true,
        }),
        owner.token,
      );
      request.clientId = created.clientId;
      request.clientSecret = created.clientSecret;
      return created.agent!.svcnumId;
    }
    case 'dependent':
      return (
        await call<CreateDependentAgentRequest, Agent>(
          child.agents,
          'createDependentAgent',
          CreateDependentAgentRequest.fromPartial({
            requestId,
            displayName: `Sub-agent ${requestId}`,
          }),
          owner.token,
        )
      ).svcnumId;
    case 'mask':
      return (
        await call<CreateMaskRequest, Mask>(
          child.masks,
          'createMask',
          CreateMaskRequest.fromPartial({
            requestId,
            ttlSeconds: 3600,
            participantA: participants[0].svcnumId,
            participantB: participants[1].svcnumId,
            scope: 'delivery',
          }),
          owner.token,
        )
      ).maskId;
    case 'number':
      return (
        await call<ProvisionNumberRequest, ProgrammableNumber>(
          child.numbers,
          'provisionNumber',
          ProvisionNumberRequest.fromPartial({
            requestId,
            displayName: `Line ${requestId}`,
          }),
          owner.token,
        )
      ).svcnumId;
  }
}

/** Sends while the service may die: an answer is recorded, an error must be one a crash explains. */
async function sendDuringCrash(child: Child, request: Sent): Promise<void> {
  try {
    request.answers.add(await send(child, request));
    count('ok');
  } catch (error) {
    const code = (error as ServiceError).code;
    count(status[code] ?? String(code));
    expect(CRASH_OUTCOMES.has(code), `${request.requestId}: ${status[code]} ${(error as ServiceError).details}`).toBe(
      true,
    );
  }
}

const count = (outcome: string) => {
  counts.outcomes[outcome] = (counts.outcomes[outcome] ?? 0) + 1;
};

/** Runs `work` over `items`, at most `limit` at a time. */
async function inParallel<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await work(items[index]!, index);
      }
    }),
  );
}

function requests(owner: Owner, kinds: Kind[], prefix: string): Sent[] {
  const batch = kinds.map((kind, index) => ({
    owner,
    kind,
    requestId: `${prefix}-${kind}-${index}`,
    answers: new Set<string>(),
  }));
  sent.push(...batch);
  return batch;
}

/** One crash run: the batch runs concurrently until the target request reaches its crash point. */
async function crashRun(point: CrashPoint, index: number): Promise<void> {
  const batch = requests(await newOwner(QUOTA), BATCH, `run${index}`);
  const target = batch.find((request) => request.kind === point.kind)!;
  const child = await startChild({ requestId: target.requestId, method: point.method, nth: point.nth });
  try {
    counts.crashRuns++;
    counts.creates += batch.length;
    await Promise.all(batch.map((request) => sendDuringCrash(child, request)));
    // On a loaded machine the target may be turned away (ABORTED: a lease ran out under it) before
    // its crash point: it is retried, as a client would, until the point is reached.
    for (
      let retry = 0;
      retry < 5 && child.process.exitCode === null && child.process.signalCode === null && target.answers.size === 0;
      retry++
    ) {
      const exited = await Promise.race([child.exited, sleep(LEASE, undefined)]);
      if (exited === undefined) await sendDuringCrash(child, target);
    }
    const how = await Promise.race([child.exited, sleep(5_000, 'still running')]);
    expect(how, `crash point ${point.kind} ${point.method}#${point.nth} not reached:\n${child.output()}`).toBe(
      'SIGKILL',
    );
    // The target died before it could answer.
    expect(target.answers.size, `${point.kind} ${point.method}#${point.nth}`).toBe(0);
  } finally {
    child.close();
  }
}

/** Retries until the request answers (ABORTED while an interrupted attempt's lease runs). */
async function settle(child: Child, request: Sent): Promise<void> {
  const deadline = Date.now() + 5 * LEASE + 5_000;
  for (;;) {
    counts.retries++;
    try {
      request.answers.add(await send(child, request));
      return;
    } catch (error) {
      if ((error as ServiceError).code !== status.ABORTED || Date.now() > deadline)
        throw new Error(`${request.requestId}: ${(error as ServiceError).details}`);
      await sleep(100);
    }
  }
}

it('creates exactly once whatever step the service is killed at, and leaks no number, slot or client', async () => {
  // 1. Every crash point, each in a service process of its own, a few processes at a time.
  await inParallel(CRASH_POINTS, CONCURRENT_RUNS, (point, index) => crashRun(point, index));

  // 2. Retries of everything so far plus 16 new creates, killed from outside at a random instant
  //    (also in the middle of retries that took a request over).
  await sleep(LEASE);
  const earlier = [...sent];
  const round = requests(await newOwner(ROUND.length / 4), ROUND, 'round');
  const child = await startChild();
  try {
    counts.creates += round.length;
    const killed = sleep(50 + Math.floor(Math.random() * 400)).then(() => child.process.kill('SIGKILL'));
    await Promise.all([
      ...round.map((request) => sendDuringCrash(child, request)),
      inParallel(earlier, 16, async (request) => {
        if (child.process.signalCode === null) {
          counts.retries++;
          await sendDuringCrash(child, request);
        }
      }),
      killed,
    ]);
    expect(await child.exited).toBe('SIGKILL');
  } finally {
    child.close();
  }

  // 3. A restarted service: every request_id answers with the one resource any answer named.
  await sleep(LEASE);
  const restarted = await startChild();
  try {
    await inParallel(sent, 16, (request) => settle(restarted, request));
  } finally {
    restarted.close();
  }
  for (const request of sent) expect([...request.answers], request.requestId).toHaveLength(1);
  const answered = (kind: Kind) =>
    new Set(sent.filter((request) => request.kind === kind).map((request) => [...request.answers][0]!));

  // Every lease of an interrupted attempt has lapsed from here on.
  await sleep(LEASE);
  const store = service.core.store;
  const owners = [...new Set(sent.map((request) => request.owner))];
  const grpc = `127.0.0.1:${service.grpcPort}`;
  const agentClient = new AgentServiceClient(grpc, credentials.createInsecure());
  const maskClient = new MaskServiceClient(grpc, credentials.createInsecure());
  const numberClient = new NumberServiceClient(grpc, credentials.createInsecure());
  try {
    for (const owner of owners) {
      const mine = sent.filter((request) => request.owner === owner);
      const ids = (kind: Kind) =>
        mine
          .filter((request) => request.kind === kind)
          .map((request) => [...request.answers][0])
          .sort();
      const agents = (await store.listOwned(owner.svcnumId, 'ai_agent', 100)).items;
      // One resource per request_id, and no other.
      expect(
        agents
          .filter((agent) => agent.agentKind === 'independent')
          .map((agent) => agent.svcnumId)
          .sort(),
      ).toEqual(ids('agent'));
      expect(
        agents
          .filter((agent) => agent.agentKind === 'dependent')
          .map((agent) => agent.svcnumId)
          .sort(),
      ).toEqual(ids('dependent'));
      expect((await store.listMasks(owner.svcnumId, 100)).items.map((mask) => mask.maskId).sort()).toEqual(ids('mask'));
      expect(
        (await store.listOwned(owner.svcnumId, 'programmable', 100)).items.map((entity) => entity.svcnumId).sort(),
      ).toEqual(ids('number'));
      // Exact quotas: as many resources as request_ids fill each quota, and no slot is held by an orphan.
      expect([ids('agent').length, ids('dependent').length, ids('mask').length, ids('number').length]).toEqual([
        owner.quota,
        owner.quota,
        owner.quota,
        owner.quota,
      ]);
      const oneMore = { requestId: 'one-more' };
      const exhausted = (request: Promise<unknown>) =>
        request.then(
          () => 'created',
          (error: ServiceError) => status[error.code],
        );
      expect(
        await Promise.all([
          exhausted(
            call(
              agentClient,
              'createAgent',
              CreateAgentRequest.fromPartial({ displayName: 'One too many', ...oneMore }),
              owner.token,
            ),
          ),
          exhausted(
            call(
              agentClient,
              'createDependentAgent',
              CreateDependentAgentRequest.fromPartial({ displayName: 'One too many', ...oneMore }),
              owner.token,
            ),
          ),
          exhausted(
            call(
              maskClient,
              'createMask',
              CreateMaskRequest.fromPartial({
                ...oneMore,
                ttlSeconds: 3600,
                participantA: participants[0].svcnumId,
                participantB: participants[1].svcnumId,
                scope: 'delivery',
              }),
              owner.token,
            ),
          ),
          exhausted(
            call(
              numberClient,
              'provisionNumber',
              ProvisionNumberRequest.fromPartial({ displayName: 'One too many', ...oneMore }),
              owner.token,
            ),
          ),
        ]),
      ).toEqual(['RESOURCE_EXHAUSTED', 'RESOURCE_EXHAUSTED', 'RESOURCE_EXHAUSTED', 'RESOURCE_EXHAUSTED']);
    }

    // Every number is free in the pool or held by a resource of this test that names it.
    const free = new Set((await store.freeNumbers(Date.now(), 2 * seeded.length)).map((number) => number.svcnum));
    const entities = new Set([...answered('agent'), ...answered('dependent'), ...answered('number')]);
    const masks = answered('mask');
    const leaked: unknown[] = [];
    let held = 0;
    await inParallel(seeded, 16, async (svcnum) => {
      const number = (await store.getNumber(svcnum))!;
      const holder = number.svcnumId;
      const named =
        holder && number.entityType === 'mask'
          ? masks.has(holder) && (await store.getMask(holder))?.svcnum === svcnum && number.state === 'active'
          : holder &&
            entities.has(holder) &&
            (await (async () => {
              const entity = (await store.getUser(holder))!;
              return (
                (entity.svcnum === svcnum && number.state === 'active') ||
                (entity.fallbackSvcnum === svcnum && number.state === 'reserved')
              );
            })());
      if (named) held++;
      else if (!free.has(svcnum)) leaked.push({ svcnum, state: number.state, holder });
    });
    expect(leaked).toEqual([]);
    expect(held).toBe(
      2 * answered('agent').size + 2 * answered('dependent').size + masks.size + answered('number').size,
    );

    // One client per independent agent, the one it names, and the last answer's secret works.
    const agentClients = (await store.listClients()).filter((client) => client.kind === 'agent');
    expect(agentClients.map((client) => client.subjectId).sort()).toEqual([...answered('agent')].sort());
    for (const request of sent.filter((each) => each.kind === 'agent')) {
      const agent = (await store.getUser([...request.answers][0]!))!;
      expect(agent.clientId).toBe(request.clientId);
      await clientCredentialsToken(service, request.clientId!, request.clientSecret!);
    }
  } finally {
    agentClient.close();
    maskClient.close();
    numberClient.close();
  }

  console.log(
    `crash test: ${CRASH_POINTS.length} crash points (${counts.crashRuns} killed processes) and one random kill; ` +
      `${counts.creates} creates, ${counts.retries} retries; outcomes while dying: ${JSON.stringify(counts.outcomes)}`,
  );
}, 240_000);
