import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcessStats } from '../bench/child';
import { serverMeter } from '../bench/server-meter';
import {
  countersDelta,
  countingStore,
  methodCalls,
  snapshotCounters,
  type StoreCounters,
} from '../bench/store-counters';
import { startTestService, type TestService } from './support/service';

// The bench's counting store (bench/store-counters.ts) over the real store of a local runner, and
// the per-request arithmetic of bench/server-meter.ts. No timings are asserted.

let service: TestService;
let counters: StoreCounters;

beforeAll(async () => {
  service = await startTestService({
    wrapStore: (store) => {
      const counted = countingStore(store);
      counters = counted.counters;
      return counted.store;
    },
  });
});

afterAll(async () => {
  await service?.close();
});

describe('countingStore', () => {
  it('counts every store method call once, by name, and passes the answer through', async () => {
    const user = await service.core.registration.createUser({});
    const before = snapshotCounters(counters);
    const read = await service.core.store.getUser(user.svcnumId);
    const missing = await service.core.store.getClient('no-such-client');
    expect(read?.svcnumId).toBe(user.svcnumId);
    expect(missing).toBeUndefined();
    expect(countersDelta(before, counters)).toEqual({ calls: 2, byMethod: { getUser: 1, getClient: 1 } });
  });

  it('counts the calls the core makes on its own (a registration), and the total is the sum by method', async () => {
    const before = snapshotCounters(counters);
    await service.core.registration.createUser({});
    const delta = countersDelta(before, counters);
    expect(delta.calls).toBeGreaterThan(0);
    expect(Object.values(delta.byMethod).reduce((sum, calls) => sum + calls, 0)).toBe(delta.calls);
    expect(Object.values(counters.byMethod).reduce((sum, calls) => sum + calls, 0)).toBe(counters.calls);
  });

  it('counts a batch read once, with the BatchGetItem requests and ids of the message path beside it', async () => {
    const before = snapshotCounters(counters);
    const ids = Array.from({ length: 150 }, (_, index) => `bench-inbox-${index}`);
    const heads = await service.core.store.inboxHeads(ids);
    expect(heads).toBeInstanceOf(Map);
    expect(countersDelta(before, counters)).toEqual({ calls: 1, byMethod: { inboxHeads: 1 } });
    expect(methodCalls(counters, 'inboxHeads') - methodCalls(before, 'inboxHeads')).toBe(1);
    expect(counters.inboxHeadsIds - before.inboxHeadsIds).toBe(150);
    expect(counters.batchGetItems - before.batchGetItems).toBe(2);
  });

  it('counts a call that fails', async () => {
    const before = snapshotCounters(counters);
    await expect(service.core.store.getUser('')).rejects.toThrow();
    expect(countersDelta(before, counters).byMethod).toEqual({ getUser: 1 });
  });

  it('keeps a snapshot apart from later calls', async () => {
    const snapshot = snapshotCounters(counters);
    const getUsers = methodCalls(snapshot, 'getUser');
    await service.core.store.getUser('bench-nobody');
    expect(methodCalls(snapshot, 'getUser')).toBe(getUsers);
    expect(methodCalls(counters, 'getUser')).toBe(getUsers + 1);
  });
});

describe('serverMeter', () => {
  const stats = (at: {
    activeMs: number;
    idleMs: number;
    mainCpu: number | null;
    cpu: number;
    calls: Record<string, number>;
  }): ChildProcessStats & { store: StoreCounters } => ({
    pid: 1,
    gcRun: false,
    memory: process.memoryUsage(),
    eventLoop: { activeMs: at.activeMs, idleMs: at.idleMs },
    mainThreadCpuMicros: at.mainCpu,
    cpu: { userMicros: at.cpu, systemMicros: 0 },
    store: {
      calls: Object.values(at.calls).reduce((sum, calls) => sum + calls, 0),
      byMethod: at.calls,
      inboxHeadsIds: 0,
      batchGetItems: 0,
      itemsRead: 0,
      itemsReadByMethod: {},
    },
  });

  it('divides what the server did between two phase edges by the requests of that phase', async () => {
    const readings = [
      stats({ activeMs: 100, idleMs: 50, mainCpu: 80_000, cpu: 90_000, calls: { getClient: 5 } }),
      // warm-up: 100 requests
      stats({ activeMs: 300, idleMs: 50, mainCpu: 260_000, cpu: 300_000, calls: { getClient: 105 } }),
      stats({ activeMs: 300, idleMs: 50, mainCpu: 260_000, cpu: 300_000, calls: { getClient: 105 } }),
      stats({
        activeMs: 1300,
        idleMs: 1050,
        mainCpu: 1_060_000,
        cpu: 1_500_000,
        calls: { getClient: 105, getGrant: 1000 },
      }), // measured: 1000 requests
    ];
    const meter = serverMeter(async () => readings.shift()!);
    for (const edge of ['warmup-start', 'warmup-end', 'measured-start', 'measured-end'] as const)
      await meter.onPhase(edge);
    const cost = meter.cost({ warmupCount: 100, count: 1000 });
    expect(cost.warmup).toMatchObject({
      requests: 100,
      storeCallsPerRequest: 1,
      storeCalls: { getClient: 100 },
      mainThreadMicrosPerRequest: 2000,
      mainThreadCpuMicrosPerRequest: 1800,
      processCpuMicrosPerRequest: 2100,
    });
    expect(cost.measured).toMatchObject({
      requests: 1000,
      storeCallsPerRequest: 1,
      storeCalls: { getGrant: 1000 },
      mainThreadMicrosPerRequest: 1000,
      mainThreadCpuMicrosPerRequest: 800,
      processCpuMicrosPerRequest: 1200,
      mainThreadBusyPercent: 50,
    });
  });

  it('maps a separate warm-up run onto the warm-up phase', async () => {
    const readings = [
      stats({ activeMs: 0, idleMs: 0, mainCpu: null, cpu: 0, calls: {} }),
      stats({ activeMs: 10, idleMs: 0, mainCpu: null, cpu: 10_000, calls: { redeemCode: 10 } }),
      stats({ activeMs: 10, idleMs: 0, mainCpu: null, cpu: 10_000, calls: { redeemCode: 10 } }),
      stats({ activeMs: 30, idleMs: 0, mainCpu: null, cpu: 30_000, calls: { redeemCode: 30 } }),
    ];
    const meter = serverMeter(async () => readings.shift()!);
    await meter.asWarmup('measured-start');
    await meter.asWarmup('measured-end');
    await meter.onPhase('measured-start');
    await meter.onPhase('measured-end');
    const cost = meter.cost({ warmupCount: 10, count: 20 });
    expect(cost.warmup).toMatchObject({
      requests: 10,
      storeCalls: { redeemCode: 10 },
      mainThreadCpuMicrosPerRequest: null,
    });
    expect(cost.measured).toMatchObject({
      requests: 20,
      storeCalls: { redeemCode: 20 },
      mainThreadMicrosPerRequest: 1000,
    });
  });
});
