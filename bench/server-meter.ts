import type { ChildProcessStats } from './child';
import type { LoadResult, PhaseEdge } from './load';
import { countersDelta, type StoreCounters } from './store-counters';

// What one request costs the server process, per phase of a load run: the child's stats
// (bench/child.ts) are read at each phase edge (load.ts onPhase), when no request is in flight,
// and the differences are divided by the requests of that phase.

/** One phase (warm-up or measured) of a run, per request. */
export interface PhaseCost {
  requests: number;
  /**
   * Store calls (round trips) per request, and the calls by method over the phase; null for a server without a counted
   * store (the peer).
   */
  storeCallsPerRequest: number | null;
  storeCalls: Record<string, number> | null;
  /**
   * Main-thread active time (event-loop utilisation) per request, µs: wall time the one JavaScript
   * thread spent running, including moments it was ready but another process had the core.
   */
  mainThreadMicrosPerRequest: number;
  /** CPU time of the main thread alone per request, µs (Linux; 10 ms ticks over the phase); null elsewhere. */
  mainThreadCpuMicrosPerRequest: number | null;
  /** CPU of the whole process (every thread: main, libuv pool, GC helpers) per request, µs. */
  processCpuMicrosPerRequest: number;
  /** Main-thread active time over the phase's wall time, percent (near 100: the thread is the limit). */
  mainThreadBusyPercent: number;
}

export interface RunCost {
  warmup: PhaseCost | null;
  measured: PhaseCost;
}

type Stats = ChildProcessStats & { store?: StoreCounters };

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

function phaseCost(before: Stats, after: Stats, requests: number): PhaseCost {
  const activeMs = after.eventLoop.activeMs - before.eventLoop.activeMs;
  const wallMs = activeMs + after.eventLoop.idleMs - before.eventLoop.idleMs;
  const cpuMicros = after.cpu.userMicros + after.cpu.systemMicros - before.cpu.userMicros - before.cpu.systemMicros;
  const store = before.store && after.store ? countersDelta(before.store, after.store) : undefined;
  const per = (total: number, digits: number) => (requests > 0 ? round(total / requests, digits) : Number.NaN);
  return {
    requests,
    storeCallsPerRequest: store ? per(store.calls, 3) : null,
    storeCalls: store ? store.byMethod : null,
    mainThreadMicrosPerRequest: per(activeMs * 1000, 1),
    mainThreadCpuMicrosPerRequest:
      before.mainThreadCpuMicros === null || after.mainThreadCpuMicros === null
        ? null
        : per(after.mainThreadCpuMicros - before.mainThreadCpuMicros, 1),
    processCpuMicrosPerRequest: per(cpuMicros, 1),
    mainThreadBusyPercent: wallMs > 0 ? round((activeMs / wallMs) * 100, 1) : 0,
  };
}

/**
 * Reads `stats` at every phase edge of the runs it is given to (`onPhase`); `cost(result)` then
 * gives the figures of that run. `asWarmup` maps a run's own (measured) phase onto the warm-up:
 * for a warm-up that is a separate run (the code exchange's probe).
 */
export function serverMeter(stats: () => Promise<Stats>) {
  const taken = new Map<PhaseEdge, Stats>();
  const onPhase = async (edge: PhaseEdge) => {
    taken.set(edge, await stats());
  };
  return {
    onPhase,
    asWarmup: async (edge: PhaseEdge) => {
      if (edge === 'measured-start') await onPhase('warmup-start');
      if (edge === 'measured-end') await onPhase('warmup-end');
    },
    cost(result: Pick<LoadResult, 'count' | 'warmupCount'>): RunCost {
      const edge = (name: PhaseEdge) => {
        const value = taken.get(name);
        if (!value) throw new Error(`server meter: no stats taken at ${name}`);
        return value;
      };
      return {
        warmup: taken.has('warmup-start')
          ? phaseCost(edge('warmup-start'), edge('warmup-end'), result.warmupCount)
          : null,
        measured: phaseCost(edge('measured-start'), edge('measured-end'), result.count),
      };
    },
  };
}

export type ServerMeter = ReturnType<typeof serverMeter>;
