import { createRequire } from 'node:module';
import autocannon from 'autocannon';
import { startCpuMeter, type CpuUse } from './cpu';

// A closed-loop load generator: `concurrency` workers each keep one request in flight until the
// time is up (or the input runs out), then the latency distribution is summarised. Requests are
// either made by a function (any client, any input) or, when every request is the same, sent by
// autocannon (a FixedRequest): it costs the machine about a third of the CPU per request of a
// node:http client, which matters when the load generator shares two cores with the server.

/** Returned by a request function that has no more input (e.g. no unused codes left): not timed. */
export const EXHAUSTED = Symbol('exhausted');

/** The edges of a run's phases, each reached with no request in flight. */
export type PhaseEdge = 'warmup-start' | 'warmup-end' | 'measured-start' | 'measured-end';

export interface LoadOptions {
  concurrency: number;
  /** Length of the measured run. */
  seconds: number;
  /** Unmeasured run before it with the same workers (JIT, connections, caches). Default 0. */
  warmupSeconds?: number;
  /**
   * Performs one request and returns its HTTP status (a thrown error counts as an error); or the
   * one request autocannon sends over `concurrency` keep-alive connections.
   */
  request: (() => Promise<number | typeof EXHAUSTED>) | FixedRequest;
  /** Which statuses count as success. Default 2xx. */
  ok?: (status: number) => boolean;
  /** The key a failed status is counted under in `errorKinds`. Default "status <n>". */
  statusName?: (status: number) => string;
  /** A process (the server) whose CPU use during the measured run is reported too. */
  serverPid?: number;
  /** Ends the run at once, rejecting with the signal's reason (e.g. the server died). */
  signal?: AbortSignal;
  /**
   * Awaited at each phase edge (the warm-up's only when there is one), before the phase's clock
   * starts and after its last request finished: a server's counters read here cover one phase exactly.
   */
  onPhase?: (edge: PhaseEdge) => Promise<void>;
}

/** How FixedRequests are sent, for reports. */
const autocannonPackage = createRequire(import.meta.url)('autocannon/package.json') as { version: string };
export const FIXED_REQUEST_CLIENT = `autocannon ${autocannonPackage.version}`;

/** The same HTTP request every time, sent by autocannon. */
export interface FixedRequest {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /** Checks each answer's body; one that fails counts as an error under `mismatch`. */
  verifyBody?: { test: (body: string) => boolean; mismatch: string };
}

export interface LoadResult {
  /**
   * Completed requests in the measured run, errors included (under autocannon, a connection error or timeout completes
   * none: it is in `errors` only).
   */
  count: number;
  /** Requests that did not succeed (unexpected status or thrown). */
  errors: number;
  /** Errors by status ("status 400", or `statusName`'s name) or message ("Error: socket hang up"). */
  errorKinds: Record<string, number>;
  /** Wall time of the measured run, until the last in-flight request finished. */
  seconds: number;
  /** count / seconds. */
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  /** The run ended early because the request function returned EXHAUSTED. */
  exhausted: boolean;
  /** Requests completed during the warm-up, and how many of them failed (also reported). */
  warmupCount: number;
  warmupErrors: number;
  /** CPU use during the measured run, percent of one core. */
  cpu: CpuUse;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

interface Phase {
  count: number;
  errors: number;
  errorKinds: Record<string, number>;
  latencies: Float64Array;
  seconds: number;
  exhausted: boolean;
  cpu: CpuUse;
}

/** Latencies and errors of one phase, as requests complete. */
function phaseRecorder(options: LoadOptions) {
  const ok = options.ok ?? ((status: number) => status >= 200 && status < 300);
  const statusName = options.statusName ?? ((status: number) => `status ${status}`);
  let latencies = new Float64Array(1 << 14);
  let count = 0;
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  let lastFailed = false;
  const failed = (kind: string) => {
    errors++;
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
  };
  return {
    /** A completed request: its latency, and the error it counts under if it failed. */
    record(ms: number, error?: string) {
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[count++] = ms;
      lastFailed = error !== undefined;
      if (error !== undefined) failed(error);
    },
    /** A completed request with this HTTP status. */
    status(ms: number, status: number) {
      this.record(ms, ok(status) ? undefined : statusName(status));
    },
    /** The request recorded last failed after all (unless its status already counted it). */
    refuseLast(kind: string) {
      if (!lastFailed) failed(kind);
      lastFailed = true;
    },
    /** A failure that completed no response (no latency). */
    failed,
    phase: (seconds: number, exhausted: boolean, cpu: CpuUse): Phase => ({
      count,
      errors,
      errorKinds,
      latencies: latencies.subarray(0, count),
      seconds,
      exhausted,
      cpu,
    }),
  };
}

async function phase(options: LoadOptions, seconds: number): Promise<Phase> {
  const result =
    typeof options.request === 'function'
      ? await functionPhase(options, options.request, seconds)
      : await autocannonPhase(options, options.request, seconds);
  options.signal?.throwIfAborted();
  return result;
}

async function functionPhase(
  options: LoadOptions,
  request: () => Promise<number | typeof EXHAUSTED>,
  seconds: number,
): Promise<Phase> {
  const recorder = phaseRecorder(options);
  let exhausted = false;
  const cpu = startCpuMeter(options.serverPid);
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (!exhausted && !options.signal?.aborted && performance.now() < deadline) {
      const begin = performance.now();
      let outcome: number | typeof EXHAUSTED;
      try {
        outcome = await request();
      } catch (error) {
        recorder.record(
          performance.now() - begin,
          error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        );
        continue;
      }
      if (outcome === EXHAUSTED) {
        exhausted = true;
        break;
      }
      recorder.status(performance.now() - begin, outcome);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return recorder.phase((performance.now() - started) / 1000, exhausted, cpu());
}

/**
 * autocannon for `seconds`, rounded to whole seconds (it stops only on its one-second tick; the
 * phase's measured length is what rates are taken over): each response is recorded as it arrives;
 * requests still in flight at the end are dropped by autocannon (at most `concurrency`, neither
 * counted nor timed).
 */
async function autocannonPhase(options: LoadOptions, request: FixedRequest, seconds: number): Promise<Phase> {
  options.signal?.throwIfAborted();
  const recorder = phaseRecorder(options);
  const cpu = startCpuMeter(options.serverPid);
  const started = performance.now();
  const verify = request.verifyBody;
  await new Promise<void>((resolve, reject) => {
    const stop = () => instance.stop();
    const instance = autocannon(
      {
        url: request.url,
        method: request.method,
        headers: request.headers,
        body: request.body,
        connections: options.concurrency,
        duration: Math.max(1, Math.round(seconds)),
        ...(verify ? { verifyBody: (body: string) => verify.test(body) } : {}),
      },
      (error) => {
        options.signal?.removeEventListener('abort', stop);
        if (error) reject(error);
        else resolve();
      },
    );
    instance.on('response', (_client, status, _bytes, milliseconds) => recorder.status(milliseconds, status));
    // Emitted right after the same response's 'response' event.
    instance.on('reqMismatch', () => recorder.refuseLast(verify!.mismatch));
    // Connection errors and timeouts complete no response.
    instance.on('reqError', (error) => recorder.failed(`${error.name}: ${error.message}`));
    options.signal?.addEventListener('abort', stop, { once: true });
  });
  return recorder.phase((performance.now() - started) / 1000, false, cpu());
}

/** Phases run one after another, as one (the slices of runLoadAlternating). */
function mergePhases(phases: Phase[]): Phase {
  const count = phases.reduce((sum, part) => sum + part.count, 0);
  const seconds = phases.reduce((sum, part) => sum + part.seconds, 0);
  const latencies = new Float64Array(count);
  const errorKinds: Record<string, number> = {};
  let offset = 0;
  for (const part of phases) {
    latencies.set(part.latencies, offset);
    offset += part.count;
    for (const [kind, times] of Object.entries(part.errorKinds)) errorKinds[kind] = (errorKinds[kind] ?? 0) + times;
  }
  // CPU percentages weighted by each slice's length.
  const weighted = (value: (part: Phase) => number) =>
    Math.round(phases.reduce((sum, part) => sum + value(part) * part.seconds, 0) / (seconds || 1));
  const serverKnown = phases.every((part) => part.cpu.serverPercent !== null);
  return {
    count,
    errors: phases.reduce((sum, part) => sum + part.errors, 0),
    errorKinds,
    latencies,
    seconds,
    exhausted: phases.some((part) => part.exhausted),
    cpu: {
      loadGeneratorPercent: weighted((part) => part.cpu.loadGeneratorPercent),
      serverPercent: serverKnown ? weighted((part) => part.cpu.serverPercent!) : null,
    },
  };
}

function summary(measured: Phase, warmup: Phase | undefined): LoadResult {
  const sorted = measured.latencies.slice().sort();
  let total = 0;
  for (const value of sorted) total += value;
  const round = (value: number) => Math.round(value * 100) / 100;
  return {
    count: measured.count,
    errors: measured.errors,
    errorKinds: measured.errorKinds,
    seconds: round(measured.seconds),
    rps: measured.seconds > 0 ? round(measured.count / measured.seconds) : 0,
    p50: round(percentile(sorted, 0.5)),
    p90: round(percentile(sorted, 0.9)),
    p99: round(percentile(sorted, 0.99)),
    max: round(sorted.length ? sorted[sorted.length - 1]! : Number.NaN),
    mean: round(sorted.length ? total / sorted.length : Number.NaN),
    exhausted: measured.exhausted,
    warmupCount: warmup?.count ?? 0,
    warmupErrors: warmup?.errors ?? 0,
    cpu: measured.cpu,
  };
}

/** Awaits `options.onPhase` at an edge, then stops if the run was aborted meanwhile. */
async function phaseEdge(options: LoadOptions, name: PhaseEdge) {
  await options.onPhase?.(name);
  options.signal?.throwIfAborted();
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  options.signal?.throwIfAborted();
  let warmup: Phase | undefined;
  if (options.warmupSeconds) {
    await phaseEdge(options, 'warmup-start');
    warmup = await phase(options, options.warmupSeconds);
    await phaseEdge(options, 'warmup-end');
  }
  await phaseEdge(options, 'measured-start');
  const measured = warmup?.exhausted
    ? { ...warmup, count: 0, errors: 0, errorKinds: {}, latencies: new Float64Array(0), seconds: 0 }
    : await phase(options, options.seconds);
  await phaseEdge(options, 'measured-end');
  return summary(measured, warmup);
}

/**
 * Several servers under the same load, taking turns: each warms up, then each run's `seconds` are
 * measured in `rounds` slices, the order reversed every round (A B B A A B …), so that other work
 * on a shared machine weighs on all of them alike. Each result is as runLoad's over its slices.
 * onPhase: the warm-up edges around each warm-up, measured-start before a run's first slice and
 * measured-end after its last (its server idles while the others take their turns).
 */
export async function runLoadAlternating(runs: LoadOptions[], rounds: number): Promise<LoadResult[]> {
  const warmups: Array<Phase | undefined> = [];
  for (const options of runs) {
    options.signal?.throwIfAborted();
    if (!options.warmupSeconds) {
      warmups.push(undefined);
      continue;
    }
    await phaseEdge(options, 'warmup-start');
    warmups.push(await phase(options, options.warmupSeconds));
    await phaseEdge(options, 'warmup-end');
  }
  for (const options of runs) await phaseEdge(options, 'measured-start');
  const slices: Phase[][] = runs.map(() => []);
  for (let round = 0; round < rounds; round++) {
    const order = runs.map((_, index) => index);
    if (round % 2 === 1) order.reverse();
    for (const index of order) slices[index]!.push(await phase(runs[index]!, runs[index]!.seconds / rounds));
  }
  for (const options of runs) await phaseEdge(options, 'measured-end');
  return runs.map((_, index) => summary(mergePhases(slices[index]!), warmups[index]));
}
