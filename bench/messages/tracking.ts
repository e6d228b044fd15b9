// What every message-flow scenario shares: the runs that tag and track sent messages, the
// streams that follow an owner's inboxes, the wait loop and the figures made from them.
import { Metadata, status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import {
  StreamAllMessagesRequest,
  type IncomingMessage,
  type NumberServiceClient,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import type { HttpClient } from '../http-client';
import { percentile } from '../load';
import type { BenchChildStats } from '../server-process';
import { methodCalls } from '../store-counters';
import type { Distribution, MemoryFigures, StreamProcessCalls } from './types';

/** Receipts a latency run waits for after its last POST before it counts the rest missing. */
export const DELIVERY_TIMEOUT_MS = 30_000;
/** Time allowed for every one of the many streams to get a probe. */
export const FAN_OUT_TIMEOUT_MS = 120_000;
/** Paced messages before each latency run (JIT, connections, the stream's first reads); not measured. */
export const WARMUP_MESSAGES = 20;
/** Idle window over which P3's polling is counted. */
export const POLL_WINDOW_SECONDS = 5;
/** Pause before a memory reading, so that work triggered by the last step has settled. */
export const SETTLE_MS = 1_000;

export const round2 = (value: number) => Math.round(value * 100) / 100;
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
export const TEXT = /^bench (\S+) #(\d+)$/;

export function distribution(values: number[]): Distribution {
  const sorted = Float64Array.from(values).sort();
  let total = 0;
  for (const value of sorted) total += value;
  return {
    count: sorted.length,
    p50: round2(percentile(sorted, 0.5)),
    p90: round2(percentile(sorted, 0.9)),
    p99: round2(percentile(sorted, 0.99)),
    max: round2(sorted.length ? sorted[sorted.length - 1]! : Number.NaN),
    mean: round2(sorted.length ? total / sorted.length : Number.NaN),
  };
}

export function streamProcessCalls(
  before: BenchChildStats,
  after: BenchChildStats,
  messages: number,
): StreamProcessCalls {
  const streamQueries = methodCalls(after.store, 'readInbox') - methodCalls(before.store, 'readInbox');
  return {
    streamQueries,
    streamQueriesPerMessage: messages > 0 ? round2(streamQueries / messages) : 0,
    polls: methodCalls(after.store, 'inboxHeads') - methodCalls(before.store, 'inboxHeads'),
    batchGetItems: after.store.batchGetItems - before.store.batchGetItems,
  };
}

/** Store calls per message by method between two stats of one process (methods it did not call left out). */
export function callsPerMessage(
  before: BenchChildStats,
  after: BenchChildStats,
  messages: number,
): Record<string, number> {
  return Object.fromEntries(
    Object.keys(after.store.byMethod)
      .sort()
      .map(
        (method) =>
          [
            method,
            messages > 0
              ? round2(((after.store.byMethod[method] ?? 0) - (before.store.byMethod[method] ?? 0)) / messages)
              : 0,
          ] as const,
      )
      .filter(([, perMessage]) => perMessage > 0),
  );
}

/** One sent message, all times performance.now() of this process. */
export interface Sample {
  sendStart: number;
  responseAt?: number;
  status?: number;
  receivedAt?: number;
  /** create_time of the message (the accepting process's wall clock, ms). */
  createTime?: number;
}

/** The messages of one run, and what happened to them. */
export class Run {
  readonly samples: Sample[] = [];
  accepted = 0;
  received = 0;
  duplicates = 0;
  receivedBeforeResponse = 0;
  maxBacklog = 0;
  readonly errorKinds: Record<string, number> = {};
  constructor(readonly tag: string) {}

  text(index: number) {
    return `bench ${this.tag} #${index}`;
  }

  private backlog() {
    this.maxBacklog = Math.max(this.maxBacklog, this.accepted - this.received);
  }

  responded(sample: Sample, statusCode: number) {
    sample.responseAt = performance.now();
    sample.status = statusCode;
    if (statusCode === 202) {
      this.accepted++;
      this.backlog();
    } else {
      this.error(`status ${statusCode}`);
    }
  }

  error(kind: string) {
    this.errorKinds[kind] = (this.errorKinds[kind] ?? 0) + 1;
  }

  receive(index: number, at: number, message: IncomingMessage) {
    const sample = this.samples[index];
    if (!sample) return;
    if (sample.receivedAt !== undefined) {
      this.duplicates++;
      return;
    }
    sample.receivedAt = at;
    sample.createTime = message.createTime?.getTime();
    this.received++;
    if (sample.responseAt === undefined) this.receivedBeforeResponse++;
    this.backlog();
  }

  /** Accepted messages not received yet. */
  outstanding() {
    let count = 0;
    for (const sample of this.samples) if (sample && sample.status === 202 && sample.receivedAt === undefined) count++;
    return count;
  }
}

/** Routes stream messages to their run by the tag in their text. */
export class Runs {
  private readonly runs = new Map<string, Run>();
  strays = 0;
  create(tag: string) {
    const run = new Run(tag);
    this.runs.set(tag, run);
    return run;
  }
  dispatch = (message: IncomingMessage, at: number) => {
    const match = TEXT.exec(message.text);
    const run = match ? this.runs.get(match[1]!) : undefined;
    if (run) run.receive(Number(match![2]), at, message);
    else this.strays++;
  };
}

export interface Follower {
  /** Cursor of the last message received (the resume point for the next stream). */
  cursor: string;
  received: number;
  error?: ServiceError;
  ended: boolean;
  cancel(): void;
}

/** Opens StreamAllMessages from `cursor` and hands every message to `onMessage` with its receipt time. */
export function follow(
  client: NumberServiceClient,
  token: string,
  cursor: string,
  onMessage: (message: IncomingMessage, at: number) => void,
): Follower {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  const call: ClientReadableStream<IncomingMessage> = client.streamAllMessages(
    StreamAllMessagesRequest.fromPartial({ resumeCursor: cursor }),
    metadata,
  );
  const follower: Follower = { cursor, received: 0, ended: false, cancel: () => call.cancel() };
  call.on('data', (message: IncomingMessage) => {
    const at = performance.now();
    follower.received++;
    follower.cursor = message.cursor;
    onMessage(message, at);
  });
  call.on('error', (error: ServiceError) => {
    // CANCELLED is our own cancel().
    if (error.code !== status.CANCELLED) follower.error = error;
  });
  call.on('end', () => {
    follower.ended = true;
  });
  return follower;
}

/** Waits until `done()` (true) or `timeoutMs` (false); throws if `failed()` names a failure or the signal aborts. */
export async function until(
  done: () => boolean,
  timeoutMs: number,
  options: { signal?: AbortSignal; failed?: () => string | undefined } = {},
): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    options.signal?.throwIfAborted();
    const failure = options.failed?.();
    if (failure) throw new Error(failure);
    if (performance.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}

export const streamFailure = (follower: Follower) => () =>
  follower.error
    ? `the stream failed: ${status[follower.error.code]}: ${follower.error.details}`
    : follower.ended
      ? 'the stream ended'
      : undefined;

export function memoryFigures(stats: BenchChildStats): MemoryFigures {
  const { rss, heapUsed, heapTotal, external, arrayBuffers } = stats.memory;
  return { rss, heapUsed, heapTotal, external, arrayBuffers };
}

/** Sends the benchmark's messages to one number through POST /api/messages, as a run's samples. */
export interface Sender {
  /** Message `index` of `run`; resolves to the status code. */
  send(run: Run, index: number, bearer: string): Promise<number>;
  /**
   * `count` messages, one every intervalMs (open loop: a slow POST does not delay the next); resolves to the seconds
   * taken.
   */
  paced(run: Run, count: number, bearer: string): Promise<number>;
}

export function createSender(http: HttpClient, to: string, intervalMs: number, signal?: AbortSignal): Sender {
  const send = (run: Run, index: number, bearer: string): Promise<number> => {
    const sample: Sample = { sendStart: performance.now() };
    run.samples[index] = sample;
    const headers = { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' };
    return http.request('POST', '/api/messages', headers, JSON.stringify({ to, text: run.text(index) })).then(
      (response) => {
        run.responded(sample, response.status);
        return response.status;
      },
      (error: unknown) => {
        run.error(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
        throw error;
      },
    );
  };
  const paced = async (run: Run, count: number, bearer: string): Promise<number> => {
    const started = performance.now();
    const inFlight: Array<Promise<unknown>> = [];
    for (let index = 0; index < count; index++) {
      signal?.throwIfAborted();
      const wait = started + index * intervalMs - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(send(run, index, bearer).catch(() => undefined));
    }
    await Promise.all(inFlight);
    return (performance.now() - started) / 1000;
  };
  return { send, paced };
}
