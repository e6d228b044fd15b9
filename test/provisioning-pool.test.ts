import { credentials, status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { countersDelta, countingStore, snapshotCounters, type StoreCounters } from '../bench/store-counters';
import { RECORD_CACHE_TTL } from '../core/accounts';
import { DAY } from '../core/kernel/config';
import { poolTime } from '../core/adapters/dynamo-provisioning-store';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import { CANDIDATES_PER_QUERY } from '../core/provisioning/pool';
import {
  CreateMaskRequest,
  MaskServiceClient,
  type Mask,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import { call, currentToken, failure, provisioningApp, rejects, type ProvisioningApp } from './support/grpc';
import { startSecondProcess } from './support/second-service';
import { ROOMY_POOL_LIMITS, startTestService, type TestService } from './support/service';

// The number pool under concurrency, through MaskService.CreateMask over gRPC on loopback: each
// process keeps one query's allocatable numbers as its supply and hands each to one allocation;
// the conditional lease still decides between processes. Store calls are counted (the bench's
// counting store), never timed. The pool uses the prefix 87; each test empties it.

const COOL_OFF = DAY;
const TTL_SECONDS = 3600;

let service: TestService;
let counters: StoreCounters;
let app: ProvisioningApp;
let alice: string;
let bob: string;

beforeAll(async () => {
  service = await startTestService({
    provisioning: { ...defaultProvisioningConfig, ...ROOMY_POOL_LIMITS, coolOff: COOL_OFF },
    wrapStore: (store) => {
      const counted = countingStore(store);
      counters = counted.counters;
      return counted.store;
    },
  });
  app = await provisioningApp(service);
  [alice, bob] = await Promise.all([someone(), someone()]);
});
afterAll(async () => {
  app?.close();
  await service?.close();
});
afterEach(() => service.clock.release());

/** Adds `count` numbers after those added before (prefix 87), so that every seed adds new ones. */
let seededSoFar = 0;
async function seed(count: number) {
  const added = await service.core.provisioning.lifecycle.seed(String(87_000_000_000 + seededSoFar), count);
  seededSoFar += count;
  expect(added.added).toBe(count);
}

async function someone(): Promise<string> {
  return (await service.core.registration.createUser({ accountType: 'person' })).svcnumId;
}

async function createMask(
  masks = app.masks,
  participants: { participantA?: string; participantB?: string } = {},
): Promise<Mask> {
  const request = CreateMaskRequest.fromPartial({
    ttlSeconds: TTL_SECONDS,
    participantA: alice,
    participantB: bob,
    scope: 'pool.test',
    ...participants,
  });
  return call<CreateMaskRequest, Mask>(masks, 'createMask', request, await currentToken(service, app));
}

/**
 * Every mask holds its own number, and each number record names its mask and comes back only after expiry and cool-off.
 */
async function expectEachNumberHeldByItsMask(masks: Mask[], coolOffOf: (mask: Mask) => number = () => COOL_OFF) {
  expect(new Set(masks.map((mask) => mask.svcnum)).size).toBe(masks.length);
  for (const mask of masks) {
    const number = await service.core.store.getNumber(mask.svcnum);
    expect(number).toMatchObject({
      state: 'active',
      svcnumId: mask.maskId,
      entityType: 'mask',
      availableAt: poolTime(mask.expireTime!.getTime() + coolOffOf(mask)),
    });
  }
}

/** Creates masks until the pool says it is empty; the pool must be empty then. */
async function expectPoolEmpty() {
  await rejects(createMask(), status.FAILED_PRECONDITION, /no number is free in the pool/);
  expect(await service.core.store.freeNumbers(service.clock.now(), 1)).toEqual([]);
}

describe('CreateMask at concurrency', () => {
  it("hands 64 concurrent calls 64 different numbers, with 5 store writes and one read (the owner's limits) each and one pool query for all", async () => {
    // Warm-up: the participants and the caller are in the accounts caches, the supply is drained
    // (its query found fewer numbers than it asks for).
    await seed(1);
    await createMask();
    await seed(70);
    // A frozen clock: no cache or supply lifetime ends during the burst.
    service.clock.freeze();
    const before = snapshotCounters(counters);
    const masks = await Promise.all(Array.from({ length: 64 }, () => createMask()));
    // Concurrent calls of one process claim different quota slots: one conditional put each.
    expect(countersDelta(before, counters)).toEqual({
      calls: 1 + 6 * 64,
      byMethod: {
        freeNumbers: 1,
        getUser: 64,
        claimSlot: 64,
        leaseNumber: 64,
        createMask: 64,
        confirmNumber: 64,
        confirmSlot: 64,
      },
    });
    await expectEachNumberHeldByItsMask(masks);
    service.clock.release();
    // The 7 numbers left over are still allocatable, then the pool is empty.
    await Promise.all(Array.from({ length: 70 - 64 - 1 }, () => createMask()));
    await createMask();
    await expectPoolEmpty();
  });

  it('first-seen participants cost one read each, read at the same time', async () => {
    await seed(1);
    const [carol, dave] = await Promise.all([someone(), someone()]);
    service.clock.freeze();
    const before = snapshotCounters(counters);
    await createMask(app.masks, { participantA: carol, participantB: dave });
    // The participants' reads and the owner's (its limits), at the same time.
    expect(countersDelta(before, counters).byMethod).toEqual({
      getUser: 3,
      freeNumbers: 1,
      claimSlot: 1,
      leaseNumber: 1,
      createMask: 1,
      confirmNumber: 1,
      confirmSlot: 1,
    });
    await expectPoolEmpty();
  });

  it(`serves more concurrent calls than one query reads (${CANDIDATES_PER_QUERY}), then answers FAILED_PRECONDITION, never UNAVAILABLE`, async () => {
    const seeded = CANDIDATES_PER_QUERY + 30;
    await seed(seeded);
    service.clock.freeze();
    const before = snapshotCounters(counters);
    const outcomes = await Promise.allSettled(Array.from({ length: seeded + 10 }, () => createMask()));
    const masks = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    const refusals = await Promise.all(
      outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [failure(Promise.reject(outcome.reason))] : [])),
    );
    expect(masks).toHaveLength(seeded);
    expect(refusals.map((error) => [error.code, error.details])).toEqual(
      Array.from({ length: 10 }, () => [
        status.FAILED_PRECONDITION,
        expect.stringMatching(/no number is free in the pool/),
      ]),
    );
    // One process: no allocation ever loses a number to another.
    expect(countersDelta(before, counters).byMethod.leaseNumber).toBe(seeded);
    await expectEachNumberHeldByItsMask(masks);
    service.clock.release();
    await expectPoolEmpty();
  });
});

describe('two processes allocating from one pool at once', () => {
  it('never hand one number to two masks, and every call succeeds while numbers are left', async () => {
    const second = await startSecondProcess(service);
    const secondMasks = new MaskServiceClient(`127.0.0.1:${second.grpcPort}`, credentials.createInsecure());
    try {
      // Both processes read the same numbers into their supplies; the conditional lease decides.
      await seed(64);
      const masks = await Promise.all(
        Array.from({ length: 64 }, (_, index) => createMask(index % 2 === 0 ? app.masks : secondMasks)),
      );
      // The second process runs with the default cool-off.
      const bySecond = new Set(masks.filter((_, index) => index % 2 === 1));
      await expectEachNumberHeldByItsMask(masks, (mask) =>
        bySecond.has(mask) ? defaultProvisioningConfig.coolOff : COOL_OFF,
      );
      await expectPoolEmpty();
    } finally {
      secondMasks.close();
      await second.stop();
    }
  });
});

describe('participants', () => {
  // Last: it moves the clock on (the second process above keeps its own clock).
  it('refuses a participant disabled meanwhile once the accounts cache lifetime has passed', async () => {
    await seed(1);
    const erin = await someone();
    await createMask(app.masks, { participantB: erin });
    await service.core.registration.disableUser(erin);
    service.clock.advance(RECORD_CACHE_TTL);
    await rejects(
      createMask(app.masks, { participantB: erin }),
      status.FAILED_PRECONDITION,
      new RegExp(`participant_b ${erin} is not active`),
    );
    await expectPoolEmpty();
  });
});
