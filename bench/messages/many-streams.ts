// Scenario 3 (see run.ts): `count` streams on a fresh gRPC server process (P3): its memory before,
// with them open and after they close, the fan-out of one message to all, and its hub's idle polls.
import { credentials, status } from '@grpc/grpc-js';
import { NumberServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { MAX_STREAMS_PER_CONNECTION } from '../../grpc-service/server';
import { CHANNEL_OPTIONS } from '../provisioning';
import type { BenchChildStats, BenchGrpcServer } from '../server-process';
import { methodCalls } from '../store-counters';
import type { FlowContext } from './one-stream';
import {
  distribution,
  FAN_OUT_TIMEOUT_MS,
  follow,
  memoryFigures,
  POLL_WINDOW_SECONDS,
  round2,
  SETTLE_MS,
  sleep,
  TEXT,
  until,
  type Follower,
} from './tracking';
import type { MemoryFigures, StreamsResult } from './types';

/** `count` open streams of the owner over several channels, and the probes that reach them all. */
class StreamCrowd {
  readonly clients: NumberServiceClient[];
  readonly followers: Follower[] = [];
  /** Per probe run tag: when each stream got it (NaN: not yet). */
  private readonly got = new Map<string, Float64Array>();

  constructor(
    private readonly context: FlowContext,
    p3: BenchGrpcServer,
    private readonly count: number,
    private readonly bearer: string,
  ) {
    const address = `127.0.0.1:${p3.info.grpcPort}`;
    // The server takes at most MAX_STREAMS_PER_CONNECTION streams per connection: more channels when needed.
    const channels = Math.max(context.options.streamChannels, Math.ceil(count / MAX_STREAMS_PER_CONNECTION));
    const insecure = credentials.createInsecure();
    this.clients = Array.from({ length: channels }, () => new NumberServiceClient(address, insecure, CHANNEL_OPTIONS));
  }

  open(): void {
    for (let index = 0; index < this.count; index++) {
      const client = this.clients[index % this.clients.length]!;
      this.followers.push(
        follow(client, this.context.token, this.context.cursor, (message, at) => {
          const match = TEXT.exec(message.text);
          const times = match ? this.got.get(match[1]!) : undefined;
          if (times && Number.isNaN(times[index]!)) times[index] = at;
          else if (!times) this.context.runs.dispatch(message, at);
        }),
      );
    }
  }

  errors(): Record<string, number> {
    const kinds: Record<string, number> = {};
    for (const follower of this.followers) {
      if (!follower.error) continue;
      const kind = status[follower.error.code] ?? String(follower.error.code);
      kinds[kind] = (kinds[kind] ?? 0) + 1;
    }
    return kinds;
  }

  failedCount(): number {
    return this.followers.reduce((sum, follower) => sum + (follower.error || follower.ended ? 1 : 0), 0);
  }

  /** Sends one probe message to the runner and waits until every live stream has it. */
  async probe(tag: string): Promise<{ sentAt: number; times: Float64Array; complete: boolean }> {
    const times = new Float64Array(this.count).fill(Number.NaN);
    this.got.set(tag, times);
    const run = this.context.runs.create(tag);
    const sentAt = performance.now();
    const code = await this.context.sender.send(run, 0, this.bearer);
    if (code !== 202) throw new Error(`probe ${tag}: POST answered ${code}`);
    const complete = await until(
      () => {
        let have = 0;
        for (const time of times) if (!Number.isNaN(time)) have++;
        return have + this.failedCount() >= this.count;
      },
      FAN_OUT_TIMEOUT_MS,
      { signal: this.context.options.signal },
    );
    return { sentAt, times, complete };
  }

  close(): void {
    for (const follower of this.followers) follower.cancel();
    for (const client of this.clients) client.close();
  }
}

/** `count` streams on P3: memory, fan-out of one message, idle polling. */
export async function manyStreams(
  context: FlowContext,
  p3: BenchGrpcServer,
  count: number,
  bearer: string,
): Promise<StreamsResult> {
  const { log } = context.options;
  const crowd = new StreamCrowd(context, p3, count, bearer);
  try {
    const before = await p3.stats({ gc: true });
    log(`opening ${count} streams over ${context.options.streamChannels} channels on pid ${p3.info.pid}`);
    const opened = performance.now();
    crowd.open();
    // Every stream that gets a message sent after it was opened is authenticated, listed and watching.
    const ready = await crowd.probe('streams-ready');
    const live = ready.times.filter((time) => !Number.isNaN(time)).length;
    const openSeconds = round2((performance.now() - opened) / 1000);
    const failed = crowd.failedCount() ? `; ${crowd.failedCount()} failed: ${JSON.stringify(crowd.errors())}` : '';
    log(`${live} of ${count} streams live after ${openSeconds} s${failed}`);
    await sleep(SETTLE_MS);
    const open = await p3.stats({ gc: true });
    const fanOut = await fanOutOfOne(crowd, p3, log);
    const polling = await idlePolling(p3, open, log);
    for (const follower of crowd.followers) follower.cancel();
    await sleep(SETTLE_MS);
    const closed = await p3.stats({ gc: true });
    const figures = { before: memoryFigures(before), open: memoryFigures(open), closed: memoryFigures(closed) };
    const perStream = Object.fromEntries(
      Object.entries(figures.open).map(([key, value]) => [
        key,
        Math.round((value - figures.before[key as keyof MemoryFigures]) / count),
      ]),
    ) as unknown as MemoryFigures;
    return {
      streams: count,
      channels: crowd.clients.length,
      streamErrors: crowd.errors(),
      openSeconds,
      live,
      memory: { ...figures, perStream },
      fanOut,
      polling,
    };
  } finally {
    crowd.close();
  }
}

/** One message to every open stream: send → receipt per stream, and the inbox Queries P3 made for it. */
async function fanOutOfOne(crowd: StreamCrowd, p3: BenchGrpcServer, log: (message: string) => void) {
  log('fan-out: one message to every open stream');
  const before = await p3.stats();
  const fan = await crowd.probe('streams-fanout');
  const after = await p3.stats();
  const times = Array.from(fan.times)
    .filter((time) => !Number.isNaN(time))
    .map((time) => time - fan.sentAt);
  return {
    ...distribution(times),
    streamQueries: methodCalls(after.store, 'readInbox') - methodCalls(before.store, 'readInbox'),
  };
}

/** P3's hub over POLL_WINDOW_SECONDS with every stream idle. */
async function idlePolling(
  p3: BenchGrpcServer,
  open: BenchChildStats,
  log: (message: string) => void,
): Promise<StreamsResult['polling']> {
  log(`polling: ${POLL_WINDOW_SECONDS} s with every stream idle`);
  await sleep(SETTLE_MS);
  const start = await p3.stats();
  const started = performance.now();
  await sleep(POLL_WINDOW_SECONDS * 1000);
  const end = await p3.stats();
  const seconds = (performance.now() - started) / 1000;
  const polls = methodCalls(end.store, 'inboxHeads') - methodCalls(start.store, 'inboxHeads');
  const streamQueries = methodCalls(end.store, 'readInbox') - methodCalls(start.store, 'readInbox');
  return {
    watchedInboxes: open.hub.watchedInboxes,
    pollIntervalMs: open.hub.pollIntervalMs,
    windowSeconds: round2(seconds),
    pollsPerSecond: round2(polls / seconds),
    batchGetItemsPerSecond: round2((end.store.batchGetItems - start.store.batchGetItems) / seconds),
    idsPerPoll: polls > 0 ? round2((end.store.inboxHeadsIds - start.store.inboxHeadsIds) / polls) : 0,
    streamQueriesPerSecond: round2(streamQueries / seconds),
  };
}
