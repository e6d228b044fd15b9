import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createFreeNumbersGauge } from '../core/adapters/metrics';
import type { User } from '../core/kernel/model';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import { leaseResolver } from '../core/provisioning/lifecycle';
import { createNumberPool } from '../core/provisioning/pool';
import {
  CloseMaskRequest,
  CreateMaskRequest,
  type Mask,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, currentToken, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// Fair shares of the number pool over gRPC: per-owner limits on live masks and programmable
// numbers (defaults 10 and 10), exact under concurrent bursts; a slot is free again when its mask
// is closed or expires (at that very millisecond) or its number is deactivated; an owner at its
// limit leaves the pool to the others. And the free pool's gauge.

let service: TestService;
let participants: [User, User];
const apps: ProvisioningApp[] = [];

beforeAll(async () => {
  service = await startTestService({ provisioning: defaultProvisioningConfig });
  const person = () => service.core.registration.createUser({ accountType: 'person' });
  participants = [await person(), await person()];
});
afterAll(async () => {
  for (const app of apps) app.close();
  await service?.close();
});

async function newApp() {
  const app = await provisioningApp(service);
  apps.push(app);
  return app;
}

const createMask = async (app: ProvisioningApp, ttlSeconds = 3600) =>
  call<CreateMaskRequest, Mask>(
    app.masks,
    'createMask',
    CreateMaskRequest.fromPartial({
      ttlSeconds,
      participantA: participants[0].svcnumId,
      participantB: participants[1].svcnumId,
      scope: 'delivery',
    }),
    await currentToken(service, app),
  );
const closeMask = async (app: ProvisioningApp, maskId: string) =>
  call<CloseMaskRequest, Mask>(
    app.masks,
    'closeMask',
    CloseMaskRequest.fromPartial({ maskId }),
    await currentToken(service, app),
  );
const provisionNumber = async (app: ProvisioningApp) =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    app.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName: 'Line' }),
    await currentToken(service, app),
  );

/** Every call of a burst at once: the successes, and the codes and messages of the refusals. */
async function burst<T>(count: number, one: () => Promise<T>) {
  const outcomes = await Promise.allSettled(Array.from({ length: count }, one));
  const refusals = outcomes.flatMap((outcome) =>
    outcome.status === 'rejected' ? [outcome.reason as { code: number; details: string }] : [],
  );
  return {
    ok: outcomes.length - refusals.length,
    codes: new Set(refusals.map((refusal) => refusal.code)),
    details: new Set(refusals.map((refusal) => refusal.details)),
  };
}

const freeCount = async () => (await service.core.store.freeNumbers(service.clock.now(), 1000)).length;

describe('per-owner limits', () => {
  it('a burst stops exactly at the default limits (10 live masks, 10 numbers) with RESOURCE_EXHAUSTED; another owner still gets numbers from the small pool', async () => {
    await seedPool(service, '61', 25);
    const greedy = await newApp();
    const masks = await burst(30, () => createMask(greedy));
    expect(masks).toEqual({
      ok: 10,
      codes: new Set([status.RESOURCE_EXHAUSTED]),
      details: new Set([
        `the quota of 10 live masks for ${greedy.owner.svcnumId} is used up; higher quotas are available on request`,
      ]),
    });
    const numbers = await burst(30, () => provisionNumber(greedy));
    expect(numbers).toEqual({
      ok: 10,
      codes: new Set([status.RESOURCE_EXHAUSTED]),
      details: new Set([
        `the quota of 10 programmable numbers for ${greedy.owner.svcnumId} is used up; higher quotas are available on request`,
      ]),
    });
    // The refusals took no number: 25 seeded, 20 taken.
    expect(await freeCount()).toBe(5);

    const other = await newApp();
    await createMask(other);
    await provisionNumber(other);
    expect(await freeCount()).toBe(3);
  });

  it('a mask frees its slot when closed, and when it expires at that very millisecond', async () => {
    await seedPool(service, '62', 14);
    const app = await newApp();
    const short = await createMask(app, 60);
    const others = await Promise.all(Array.from({ length: 9 }, () => createMask(app)));
    expect((await failure(createMask(app))).code).toBe(status.RESOURCE_EXHAUSTED);

    // Closed: its slot is free at once (and closing it again changes nothing).
    await closeMask(app, others[0]!.maskId);
    await closeMask(app, others[0]!.maskId);
    await createMask(app);
    expect((await failure(createMask(app))).code).toBe(status.RESOURCE_EXHAUSTED);

    // Expired: still counted a millisecond before its expiry, free from it on.
    const expiry = short.expireTime!.getTime();
    service.clock.freeze(expiry - 1);
    try {
      expect((await failure(createMask(app))).code).toBe(status.RESOURCE_EXHAUSTED);
      service.clock.freeze(expiry);
      await createMask(app);
      expect((await failure(createMask(app))).code).toBe(status.RESOURCE_EXHAUSTED);
    } finally {
      service.clock.release();
    }
  });

  it('a deactivated number frees its slot; a per-owner override applies at once', async () => {
    await seedPool(service, '63', 6);
    const app = await newApp();
    await service.core.store.setQuotaOverrides(app.owner.svcnumId, { numberQuota: 2, maskQuota: 1 });
    const [first] = await Promise.all([provisionNumber(app), provisionNumber(app)]);
    expect((await failure(provisionNumber(app))).details).toMatch(/quota of 2 programmable numbers/);
    await createMask(app);
    expect((await failure(createMask(app))).details).toMatch(/quota of 1 live masks/);

    await service.core.provisioning.lifecycle.deactivate(first!.svcnum);
    // Deactivating again (a half-done deactivation finished) frees nothing more.
    await service.core.provisioning.lifecycle.deactivate(first!.svcnum).catch(() => undefined);
    await provisionNumber(app);
    expect((await failure(provisionNumber(app))).code).toBe(status.RESOURCE_EXHAUSTED);
  });
});

describe('the free pool gauge', () => {
  it('each pool query reports the allocatable numbers it saw', async () => {
    const readings: number[] = [];
    const store = service.core.store;
    const config = defaultProvisioningConfig;
    const pool = createNumberPool(store, service.clock, config, leaseResolver(store, config), (count) =>
      readings.push(count),
    );
    const free = await freeCount();
    const leased = await pool.lease('01GAUGEHOLDER0000000000000', 'programmable');
    expect(readings).toEqual([free]);
    await pool.giveBack(leased, '01GAUGEHOLDER0000000000000');
  });

  it('is one EMF line: FreeNumbers, Count, by service, in METRICS_NAMESPACE; nothing without one', () => {
    const lines: string[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      createFreeNumbersGauge('svcnum', {
        logLevel: 'INFO',
        metricsNamespace: 'svcnum',
        serviceName: 'svcnum-provisioning',
      })(42);
      createFreeNumbersGauge('svcnum', { logLevel: 'INFO' })(7);
    } finally {
      write.mockRestore();
    }
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown> & { _aws: { CloudWatchMetrics: unknown[] } };
    expect(line._aws.CloudWatchMetrics).toEqual([
      { Namespace: 'svcnum', Dimensions: [['service']], Metrics: [{ Name: 'FreeNumbers', Unit: 'Count' }] },
    ]);
    expect(line).toMatchObject({ service: 'svcnum-provisioning', FreeNumbers: 42 });
  });
});
