import { credentials, Metadata, status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { AgentServiceClient, CreateAgentRequest, IssueAgentTokenRequest, type CreateAgentResponse } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import type { AccessToken } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import { MAX_STREAMS_PER_CONNECTION } from '../grpc-service/server';
import {
  NumberServiceClient, ProvisionNumberRequest, StreamAllMessagesRequest, type IncomingMessage, type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { startCpuMeter } from './cpu';
import { createHttpClient, type HttpClient } from './http-client';
import { percentile, runLoad, type LoadResult } from './load';
import { CHANNEL_OPTIONS, grpcVersion, provisioningToken, setupCall } from './provisioning';
import { startBenchGrpcServer, type BenchChildStats, type BenchGrpcServer, type BenchServer, type BenchServerInfo } from './server-process';
import { methodCalls } from './store-counters';
import { ENGINE_LOST_POLL_INTERVAL_MS, INBOX_REFRESH_MS, RELIST_SAFETY_POLLS, SAFETY_POLL_INTERVAL_MS } from '../core/messaging/stream';

// The message flow: POST /api/messages (ingress, on the runner) → the recipient's inbox in
// DynamoDB → NumberService.StreamAllMessages (a server stream of the number's owner).
//
//   P1  the local runner (child): HTTP ingress, embedded DynamoDB, its own gRPC server
//   P2  a second gRPC server process (child) against P1's DynamoDB, keys and issuer, subscribed
//       to the pub/sub engine P1 publishes to (when the bench has one: redis-server)
//   P2b the same without the engine: it polls, as every process did before the engine
//   P3  a fresh gRPC server process of the same kind, for the 1,000 streams
//
// 1. Delivery latency, send (the POST starts) → receipt on the stream, for messages paced one
//    every BENCH_MESSAGE_INTERVAL_MS: (a) "same process": stream on P1, which accepts the
//    message and wakes its streams through its in-process notifier; (b) "across processes":
//    stream on P2, woken by P1's publish through the engine; (c) "across processes without an
//    engine": stream on P2b, which only learns of the message by polling the inbox counters (250 ms).
//    Both ends are timed in this process on one monotonic clock (performance.now()).
// 2. Sustained rate into ONE stream: BENCH_CONCURRENCY senders in a closed loop for BENCH_SECONDS
//    (after a BENCH_WARMUP_SECONDS warm-up); accepted/s at the ingress, received/s at the stream,
//    lag (send → receipt) and backlog (accepted, not yet received), and P1's store calls per
//    message, for each path.
// 3. BENCH_STREAMS concurrent streams on P3 over BENCH_STREAM_CHANNELS channels: P3's memory
//    before, with them open and after they close (each after a full GC), the fan-out of one
//    message to all of them, and what P3's hub polls while they are idle.
// 4. Store reads of idle watched inboxes, without and with the pub/sub engine: the owner gets
//    BENCH_IDLE_INBOXES more numbers; one stream on P4 (no engine: polls every 250 ms, re-lists
//    every 30 s, the defaults) and one on P5 (VALKEY_URL: a real redis-server; P1 publishes to it)
//    watch them all. Every item the two processes read while nothing arrives (BENCH_IDLE_SECONDS)
//    is counted, per watched inbox per minute; then a few paced messages give the items read per
//    delivered message on each. With the engine ready the defaults poll every 90 s and re-list
//    every 15 min, too rare for a window of a minute or two: P5 runs with every interval divided
//    by BENCH_IDLE_SCALE (10: a 9 s poll, a 90 s re-list), the window defaults to one such re-list
//    period, and its reads per minute are divided by the same factor, which gives them at the
//    default intervals (every idle read is one of those timers'; the output says so).
//
// Setup (over the real APIs): the runner's provisioning client gets a client_credentials token,
// provisions one programmable number (the inbox) and creates one agent (the sender), whose
// IssueAgentToken token (scope includes `messaging`) sends every message, to the number.
// Every stream is the owner's, resumed from the cursor of the last message already received, so
// no run replays another's messages. A message's text names its run and index.

export interface MessagesOptions {
  /** Measured seconds of each sustained-rate run. */
  seconds: number;
  /** Unmeasured sustained-rate run before each measured one. */
  warmupSeconds: number;
  /** Senders in flight in the sustained-rate runs. */
  concurrency: number;
  /** Messages per latency run, sent one every `intervalMs`. */
  messages: number;
  intervalMs: number;
  /** Concurrent streams held open on P3: one fresh P3 for each count. */
  streams: number[];
  /** gRPC channels (HTTP/2 connections) those streams are spread over. */
  streamChannels: number;
  log: (message: string) => void;
  /** Aborts the runs (the runner died). */
  signal?: AbortSignal;
  /** The runner's pub/sub engine (VALKEY_URL), for the idle-reads phase; without, that phase is skipped. */
  engineUrl?: string;
  /** Numbers the owner gets for the idle-reads phase (every one watched), its idle window, and the messages delivered after it. */
  idleInboxes: number;
  idleSeconds: number;
  idleMessages: number;
  /** P5's hub intervals are the defaults divided by this (1-30; see the top). */
  idleScale: number;
}

/** Milliseconds. */
export interface Distribution { count: number; p50: number; p90: number; p99: number; max: number; mean: number }

export interface LatencyResult {
  /** POSTs made, answered 202, and of those received on the stream (once or more). */
  sent: number;
  accepted: number;
  received: number;
  /** Accepted and never received within the delivery timeout. */
  missing: number;
  /** Receipts of a message already received (at-least-once redelivery). */
  duplicates: number;
  /** POSTs that did not answer 202, by status or error. */
  errorKinds: Record<string, number>;
  /** Rate the POSTs actually went out at. */
  sendRatePerSecond: number;
  /** The measurement: POST start → the stream's 'data' event, in this process. */
  sendToReceipt: Distribution;
  /** POST start → its 202 (the ingress's own latency). */
  sendToAccepted: Distribution;
  /** The message's create_time (accepting process's Date.now(), ms) → receipt (this process's performance.timeOrigin + now()). */
  createTimeToReceipt: Distribution;
  /** Messages that reached the stream before their POST had its 202. */
  receivedBeforeResponse: number;
  /** The streaming process's store calls during the run: stream reads (one Query per wake and inbox) and hub polls. */
  streamProcess: StreamProcessCalls;
  /** CPU, percent of one core: the accepting process, the streaming process (same for "same process"), this process. */
  cpu: { ingressPercent: number | null; streamPercent: number | null; benchPercent: number };
}

export interface ThroughputResult {
  /** The POSTs (closed loop, `concurrency` in flight); `cpu.serverPercent` is the accepting process. */
  ingress: LoadResult;
  accepted: number;
  acceptedPerSecond: number;
  /** Messages of the run received by the end of the ingress window, per second of it. */
  receivedInWindow: number;
  receivedPerSecond: number;
  /** Received in all (after the drain), missing, duplicates. */
  received: number;
  missing: number;
  duplicates: number;
  /** From the end of the ingress window until the stream had the last message. */
  drainMs: number;
  /** POST start → receipt, over every message of the run. */
  lag: Distribution;
  /** 202 → receipt: how far the stream trails the ingress (negative: received before the 202 arrived). */
  lagAfterAccepted: Distribution;
  streamProcess: StreamProcessCalls;
  /** Most messages accepted (202) but not yet received at any moment. */
  maxBacklog: number;
  /** CPU of the streaming process during the window (percent of one core). */
  streamCpuPercent: number | null;
  /** Store calls of the accepting process (P1) per accepted message, by method (on the same-process path, its stream's too). */
  ingressCallsPerMessage: Record<string, number>;
}

export interface StreamProcessCalls {
  /** store.readInbox calls (one DynamoDB Query each), in all and per message of the run. */
  streamQueries: number;
  streamQueriesPerMessage: number;
  /** store.inboxHeads calls (the hub's polls) and the BatchGetItem requests they made. */
  polls: number;
  batchGetItems: number;
}

function streamProcessCalls(before: BenchChildStats, after: BenchChildStats, messages: number): StreamProcessCalls {
  const streamQueries = methodCalls(after.store, 'readInbox') - methodCalls(before.store, 'readInbox');
  return {
    streamQueries,
    streamQueriesPerMessage: messages > 0 ? round2(streamQueries / messages) : 0,
    polls: methodCalls(after.store, 'inboxHeads') - methodCalls(before.store, 'inboxHeads'),
    batchGetItems: after.store.batchGetItems - before.store.batchGetItems,
  };
}

/** Store calls per message by method between two stats of one process (methods it did not call left out). */
function callsPerMessage(before: BenchChildStats, after: BenchChildStats, messages: number): Record<string, number> {
  return Object.fromEntries(Object.keys(after.store.byMethod).sort()
    .map((method) => [method, messages > 0 ? round2(((after.store.byMethod[method] ?? 0) - (before.store.byMethod[method] ?? 0)) / messages) : 0] as const)
    .filter(([, perMessage]) => perMessage > 0));
}

interface MemoryFigures { rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number }

export interface StreamsResult {
  streams: number;
  channels: number;
  /** Streams that failed (an error status) instead of staying open. */
  streamErrors: Record<string, number>;
  /** Seconds from opening the first stream until every stream had received the readiness probe. */
  openSeconds: number;
  /** Streams that received the readiness probe (all, unless some failed). */
  live: number;
  memory: {
    before: MemoryFigures;
    open: MemoryFigures;
    closed: MemoryFigures;
    /** (open − before) / streams, bytes. */
    perStream: MemoryFigures;
  };
  /** One message, sent to P1 while every stream on P3 is idle: send → receipt per stream. */
  fanOut: Distribution & { streamQueries: number };
  /** P3's hub with the streams open and idle. */
  polling: {
    watchedInboxes: number;
    pollIntervalMs: number;
    windowSeconds: number;
    pollsPerSecond: number;
    batchGetItemsPerSecond: number;
    idsPerPoll: number;
    /** Stream reads while nothing arrives (should be 0: idle streams only cost the poll). */
    streamQueriesPerSecond: number;
  };
}

/** Store item reads of one stream process in the idle-reads phase (bench/store-counters.ts `itemsRead`). */
export interface IdleReadsMode {
  pid: number;
  /** Distinct inboxes its hub watched. */
  watchedInboxes: number;
  /** Its hub's poll interval while idle, and its streams' re-list interval (ms), as run (scaled). */
  pollIntervalMs: number;
  relistIntervalMs: number;
  /** Its intervals were the defaults divided by this (1: the defaults); the per-minute figures below are scaled back by it. */
  intervalScale: number;
  windowSeconds: number;
  /** In the window: the hub's counter polls (store.inboxHeads calls) and the stream's listings of the owner's numbers (store.listOwned pages). */
  polls: number;
  listingPages: number;
  /** Items read while nothing arrived, per watched inbox per minute at the default intervals (measured ÷ intervalScale): in all, and by store method. */
  itemReadsPerIdleInboxPerMinute: number;
  byMethodPerIdleInboxPerMinute: Record<string, number>;
  /** The same as measured, at the scaled intervals. */
  measuredItemReadsPerIdleInboxPerMinute: number;
  /**
   * The paced messages after the idle window: delivered to its stream; items read per delivered
   * message, in all and without the hub's counter polls (timer-driven: the idle cost, counted
   * above; with the engine one may fall in the run or not); inbox Queries per delivered message.
   */
  delivered: number;
  itemReadsPerDeliveredMessage: number;
  itemReadsPerDeliveredMessageWithoutPolls: number;
  /** Items read per delivered message by store method. */
  deliveredByMethod: Record<string, number>;
  streamQueriesPerDeliveredMessage: number;
}

export interface IdleReadsResult {
  inboxes: number;
  /** Streams per process (all of the one owner). */
  streamsPerProcess: number;
  withoutEngine: IdleReadsMode;
  withEngine: IdleReadsMode;
}

export interface MessagesResult {
  setup: { numberSvcnum: string; agentSvcnum: string; channel: string; p2Pid: number; p2bPid: number; p3Pids: number[] };
  /** crossProcess: P2 woken through the engine (when the bench has one); crossProcessPolling: P2b without one, polling (the design before the engine). */
  latency: { sameProcess: LatencyResult; crossProcess: LatencyResult; crossProcessPolling: LatencyResult };
  throughput: { sameProcess: ThroughputResult; crossProcess: ThroughputResult; crossProcessPolling: ThroughputResult };
  /** One per count of `options.streams`, each on a fresh P3. */
  streams: StreamsResult[];
  /** Without an engine URL: not measured. */
  idleReads?: IdleReadsResult;
  /** Stream messages no run was waiting for (should be 0). */
  strayMessages: number;
}

/** Receipts a latency run waits for after its last POST before it counts the rest missing. */
const DELIVERY_TIMEOUT_MS = 30_000;
/** Time allowed for every one of the many streams to get a probe. */
const FAN_OUT_TIMEOUT_MS = 120_000;
/** Paced messages before each latency run (JIT, connections, the stream's first reads); not measured. */
export const WARMUP_MESSAGES = 20;
/** Idle window over which P3's polling is counted. */
const POLL_WINDOW_SECONDS = 5;
/** Pause before a memory reading, so that work triggered by the last step has settled. */
const SETTLE_MS = 1_000;

const round2 = (value: number) => Math.round(value * 100) / 100;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const TEXT = /^bench (\S+) #(\d+)$/;

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

/** One sent message, all times performance.now() of this process. */
interface Sample {
  sendStart: number;
  responseAt?: number;
  status?: number;
  receivedAt?: number;
  /** create_time of the message (the accepting process's wall clock, ms). */
  createTime?: number;
}

/** The messages of one run, and what happened to them. */
class Run {
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
class Runs {
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

interface Follower {
  /** Cursor of the last message received (the resume point for the next stream). */
  cursor: string;
  received: number;
  error?: ServiceError;
  ended: boolean;
  cancel(): void;
}

/** Opens StreamAllMessages from `cursor` and hands every message to `onMessage` with its receipt time. */
function follow(client: NumberServiceClient, token: string, cursor: string, onMessage: (message: IncomingMessage, at: number) => void): Follower {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  const call: ClientReadableStream<IncomingMessage> = client.streamAllMessages(StreamAllMessagesRequest.fromPartial({ resumeCursor: cursor }), metadata);
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
async function until(done: () => boolean, timeoutMs: number, options: { signal?: AbortSignal; failed?: () => string | undefined } = {}): Promise<boolean> {
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

const streamFailure = (follower: Follower) => () =>
  follower.error ? `the stream failed: ${status[follower.error.code]}: ${follower.error.details}` : follower.ended ? 'the stream ended' : undefined;

function memoryFigures(stats: BenchChildStats): MemoryFigures {
  const { rss, heapUsed, heapTotal, external, arrayBuffers } = stats.memory;
  return { rss, heapUsed, heapTotal, external, arrayBuffers };
}

type PathName = 'same' | 'cross' | 'polled';
const PATH_NAMES: Record<PathName, string> = {
  same: 'same process', cross: 'across processes', polled: 'across processes without an engine',
};

export async function messageBenchmarks(runner: BenchServer, options: MessagesOptions): Promise<MessagesResult> {
  const { log, signal } = options;
  const server = runner.info;
  const insecure = credentials.createInsecure();
  const p1Address = `127.0.0.1:${server.grpcPort}`;
  const numbers = new NumberServiceClient(p1Address, insecure, CHANNEL_OPTIONS);
  const agents = new AgentServiceClient(p1Address, insecure, CHANNEL_OPTIONS);
  const http: HttpClient = createHttpClient('http', server.issuer, Math.max(options.concurrency, 16));
  const runs = new Runs();
  const children: BenchGrpcServer[] = [];
  try {
    log('messages setup: client_credentials token, a programmable number (the inbox), an agent (the sender) and its token');
    const token = await provisioningToken(server);
    const number = await setupCall<ProvisionNumberRequest, ProgrammableNumber>('ProvisionNumber', numbers.provisionNumber.bind(numbers), ProvisionNumberRequest.fromPartial({ displayName: 'Bench inbox' }), token);
    const created = await setupCall<CreateAgentRequest, CreateAgentResponse>('CreateAgent', agents.createAgent.bind(agents), CreateAgentRequest.fromPartial({ displayName: 'Bench sender' }), token);
    const agent = created.agent!;
    /** A fresh agent token per phase, so none can expire mid-run. */
    const senderToken = async () => (await setupCall<IssueAgentTokenRequest, AccessToken>('IssueAgentToken', agents.issueAgentToken.bind(agents), IssueAgentTokenRequest.fromPartial({ svcnumId: agent.svcnumId }), token)).accessToken;
    let cursor = '';

    const send = (run: Run, index: number, bearer: string): Promise<number> => {
      const sample: Sample = { sendStart: performance.now() };
      run.samples[index] = sample;
      return http.request('POST', '/api/messages', { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' }, JSON.stringify({ to: number.svcnum, text: run.text(index) }))
        .then((response) => {
          run.responded(sample, response.status);
          return response.status;
        }, (error: unknown) => {
          run.error(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
          throw error;
        });
    };

    /** `count` messages, one every intervalMs (open loop: a slow POST does not delay the next). */
    async function paced(run: Run, count: number, bearer: string): Promise<number> {
      const started = performance.now();
      const inFlight: Array<Promise<unknown>> = [];
      for (let index = 0; index < count; index++) {
        signal?.throwIfAborted();
        const wait = started + index * options.intervalMs - performance.now();
        if (wait > 0) await sleep(wait);
        inFlight.push(send(run, index, bearer).catch(() => undefined));
      }
      await Promise.all(inFlight);
      return (performance.now() - started) / 1000;
    }

    /** Latency and sustained rate into one stream opened on `streamClient` (process `streamPid`). */
    async function path(name: PathName, streamClient: NumberServiceClient, streamProcess: { pid: number; stats: () => Promise<BenchChildStats> }) {
      const streamPid = streamProcess.pid;
      const bearer = await senderToken();
      const stream = follow(streamClient, token, cursor, runs.dispatch);
      const failed = streamFailure(stream);
      try {
        const warmup = runs.create(`${name}-warmup`);
        await paced(warmup, WARMUP_MESSAGES, bearer);
        if (!(await until(() => warmup.outstanding() === 0 && warmup.accepted === WARMUP_MESSAGES, DELIVERY_TIMEOUT_MS, { signal, failed }))) {
          throw new Error(`${name}: warm-up: ${warmup.accepted} of ${WARMUP_MESSAGES} accepted (${JSON.stringify(warmup.errorKinds)}), ${warmup.received} received`);
        }

        log(`${PATH_NAMES[name]}: latency, ${options.messages} messages one every ${options.intervalMs} ms`);
        const latencyRun = runs.create(`${name}-latency`);
        const latencyCallsBefore = await streamProcess.stats();
        const cpuIngress = startCpuMeter(server.pid);
        const cpuStream = startCpuMeter(streamPid);
        const sendSeconds = await paced(latencyRun, options.messages, bearer);
        await until(() => latencyRun.outstanding() === 0, DELIVERY_TIMEOUT_MS, { signal, failed });
        const ingressCpu = cpuIngress();
        const streamCpu = cpuStream();
        const latencyCallsAfter = await streamProcess.stats();
        const received = latencyRun.samples.filter((sample) => sample.receivedAt !== undefined);
        const latency: LatencyResult = {
          sent: latencyRun.samples.length,
          accepted: latencyRun.accepted,
          received: latencyRun.received,
          missing: latencyRun.outstanding(),
          duplicates: latencyRun.duplicates,
          errorKinds: latencyRun.errorKinds,
          sendRatePerSecond: round2(latencyRun.samples.length / sendSeconds),
          sendToReceipt: distribution(received.map((sample) => sample.receivedAt! - sample.sendStart)),
          sendToAccepted: distribution(latencyRun.samples.filter((sample) => sample.status === 202).map((sample) => sample.responseAt! - sample.sendStart)),
          createTimeToReceipt: distribution(received.filter((sample) => sample.createTime !== undefined).map((sample) => performance.timeOrigin + sample.receivedAt! - sample.createTime!)),
          receivedBeforeResponse: latencyRun.receivedBeforeResponse,
          streamProcess: streamProcessCalls(latencyCallsBefore, latencyCallsAfter, latencyRun.accepted),
          cpu: { ingressPercent: ingressCpu.serverPercent, streamPercent: streamCpu.serverPercent, benchPercent: ingressCpu.loadGeneratorPercent },
        };

        log(`${PATH_NAMES[name]}: sustained rate into one stream, ${options.concurrency} senders (${options.warmupSeconds} s warm-up + ${options.seconds} s)`);
        const load = { concurrency: options.concurrency, serverPid: server.pid, signal, ok: (code: number) => code === 202 };
        if (options.warmupSeconds > 0) {
          const warm = runs.create(`${name}-rate-warmup`);
          let next = 0;
          await runLoad({ ...load, seconds: options.warmupSeconds, request: () => send(warm, next++, bearer) });
          await until(() => warm.outstanding() === 0, DELIVERY_TIMEOUT_MS, { signal, failed });
        }
        const rate = runs.create(`${name}-rate`);
        let next = 0;
        const rateCallsBefore = await streamProcess.stats();
        const ingressBefore = await runner.stats();
        const cpuRateStream = startCpuMeter(streamPid);
        const started = performance.now();
        const ingress = await runLoad({ ...load, seconds: options.seconds, request: () => send(rate, next++, bearer) });
        const ended = performance.now();
        const rateStreamCpu = cpuRateStream();
        await until(() => rate.outstanding() === 0, DELIVERY_TIMEOUT_MS, { signal, failed });
        const rateCallsAfter = await streamProcess.stats();
        const ingressAfter = await runner.stats();
        const windowSeconds = (ended - started) / 1000;
        const receipts = rate.samples.filter((sample) => sample.receivedAt !== undefined);
        const receivedInWindow = receipts.filter((sample) => sample.receivedAt! <= ended).length;
        const lastReceipt = receipts.reduce((last, sample) => Math.max(last, sample.receivedAt!), ended);
        const throughput: ThroughputResult = {
          ingress,
          accepted: rate.accepted,
          acceptedPerSecond: round2(rate.accepted / windowSeconds),
          receivedInWindow,
          receivedPerSecond: round2(receivedInWindow / windowSeconds),
          received: rate.received,
          missing: rate.outstanding(),
          duplicates: rate.duplicates,
          drainMs: round2(Math.max(0, lastReceipt - ended)),
          lag: distribution(receipts.map((sample) => sample.receivedAt! - sample.sendStart)),
          lagAfterAccepted: distribution(receipts.filter((sample) => sample.responseAt !== undefined).map((sample) => sample.receivedAt! - sample.responseAt!)),
          streamProcess: streamProcessCalls(rateCallsBefore, rateCallsAfter, rate.accepted),
          maxBacklog: rate.maxBacklog,
          streamCpuPercent: rateStreamCpu.serverPercent,
          ingressCallsPerMessage: callsPerMessage(ingressBefore, ingressAfter, rate.accepted),
        };
        return { latency, throughput };
      } finally {
        stream.cancel();
        cursor = stream.cursor;
      }
    }

    log(`same process: stream on the runner (pid ${server.pid}), messages to the runner`);
    const same = await path('same', numbers, { pid: server.pid, stats: () => runner.stats() });

    /** A stream on a second gRPC server process (with or without the engine) and messages to the runner. */
    async function acrossProcesses(name: 'cross' | 'polled', engineUrl: string | undefined) {
      log(`${PATH_NAMES[name]}: starting a second gRPC server process on the runner's DynamoDB${engineUrl ? `, subscribed to ${engineUrl}` : ' (no engine)'}`);
      const child = await startBenchGrpcServer(server, { engineUrl });
      children.push(child);
      log(`${PATH_NAMES[name]}: stream on pid ${child.info.pid} (gRPC port ${child.info.grpcPort}), messages to the runner (pid ${server.pid})`);
      const client = new NumberServiceClient(`127.0.0.1:${child.info.grpcPort}`, insecure, CHANNEL_OPTIONS);
      try {
        return { pid: child.info.pid, ...(await path(name, client, { pid: child.info.pid, stats: () => child.stats() })) };
      } finally {
        client.close();
        await child.stop();
      }
    }
    const cross = await acrossProcesses('cross', options.engineUrl);
    const polled = await acrossProcesses('polled', undefined);

    const streams: StreamsResult[] = [];
    const p3Pids: number[] = [];
    for (const count of options.streams) {
      log(`${count} streams: starting a fresh gRPC server process on the runner's DynamoDB`);
      const p3 = await startBenchGrpcServer(server);
      children.push(p3);
      p3Pids.push(p3.info.pid);
      streams.push(await manyStreams(p3, count, token, cursor, await senderToken(), send, runs, options));
      await p3.stop();
    }

    let idleReads: IdleReadsResult | undefined;
    if (options.engineUrl) {
      idleReads = await idleReadsPhase({
        runner: server, numbers, token, cursor, bearer: await senderToken(), send, runs, engineUrl: options.engineUrl, children, options,
      });
    }

    return {
      setup: {
        numberSvcnum: number.svcnum, agentSvcnum: agent.svcnum, p2Pid: cross.pid, p2bPid: polled.pid, p3Pids,
        channel: `grpc-js ${grpcVersion()}, insecure loopback; latency/rate streams: one channel; ${options.streams.join(' and ')} streams over ${options.streamChannels} channels or more, at most ${MAX_STREAMS_PER_CONNECTION} streams each (own subchannel pools: one HTTP/2 connection each)`,
      },
      latency: { sameProcess: same.latency, crossProcess: cross.latency, crossProcessPolling: polled.latency },
      throughput: { sameProcess: same.throughput, crossProcess: cross.throughput, crossProcessPolling: polled.throughput },
      streams,
      ...(idleReads ? { idleReads } : {}),
      strayMessages: runs.strays,
    };
  } finally {
    numbers.close();
    agents.close();
    http.close();
    for (const child of children) await child.stop();
  }
}

/** `count` streams on P3: memory, fan-out of one message, idle polling. */
async function manyStreams(
  p3: BenchGrpcServer, count: number, token: string, cursor: string, bearer: string,
  send: (run: Run, index: number, bearer: string) => Promise<number>, runs: Runs, options: MessagesOptions,
): Promise<StreamsResult> {
  const { log, signal } = options;
  const insecure = credentials.createInsecure();
  const address = `127.0.0.1:${p3.info.grpcPort}`;
  // The server takes at most MAX_STREAMS_PER_CONNECTION streams per connection: more channels when needed.
  const channels = Math.max(options.streamChannels, Math.ceil(count / MAX_STREAMS_PER_CONNECTION));
  const clients = Array.from({ length: channels }, () => new NumberServiceClient(address, insecure, CHANNEL_OPTIONS));
  // Per stream: when it got each probe (by probe run tag).
  const got = new Map<string, Float64Array>();
  const followers: Follower[] = [];
  const errors = () => {
    const kinds: Record<string, number> = {};
    for (const follower of followers) {
      if (!follower.error) continue;
      const kind = status[follower.error.code] ?? String(follower.error.code);
      kinds[kind] = (kinds[kind] ?? 0) + 1;
    }
    return kinds;
  };
  const failedCount = () => followers.reduce((sum, follower) => sum + (follower.error || follower.ended ? 1 : 0), 0);
  /** Sends one probe message to the runner and waits until every live stream has it. */
  async function probe(tag: string): Promise<{ sentAt: number; times: Float64Array; complete: boolean }> {
    const times = new Float64Array(count).fill(Number.NaN);
    got.set(tag, times);
    const run = runs.create(tag);
    const sentAt = performance.now();
    const code = await send(run, 0, bearer);
    if (code !== 202) throw new Error(`probe ${tag}: POST answered ${code}`);
    let have = 0;
    const complete = await until(() => {
      have = 0;
      for (const time of times) if (!Number.isNaN(time)) have++;
      return have + failedCount() >= count;
    }, FAN_OUT_TIMEOUT_MS, { signal });
    return { sentAt, times, complete };
  }

  try {
    const before = await p3.stats({ gc: true });
    log(`opening ${count} streams over ${options.streamChannels} channels on pid ${p3.info.pid}`);
    const opened = performance.now();
    for (let index = 0; index < count; index++) {
      followers.push(follow(clients[index % clients.length]!, token, cursor, (message, at) => {
        const match = TEXT.exec(message.text);
        const times = match ? got.get(match[1]!) : undefined;
        if (times && Number.isNaN(times[index]!)) times[index] = at;
        else if (!times) runs.dispatch(message, at);
      }));
    }
    // Every stream that gets a message sent after it was opened is authenticated, listed and watching.
    const ready = await probe('streams-ready');
    const live = ready.times.filter((time) => !Number.isNaN(time)).length;
    const openSeconds = round2((performance.now() - opened) / 1000);
    log(`${live} of ${count} streams live after ${openSeconds} s${failedCount() ? `; ${failedCount()} failed: ${JSON.stringify(errors())}` : ''}`);
    await sleep(SETTLE_MS);
    const open = await p3.stats({ gc: true });

    log('fan-out: one message to every open stream');
    const fanBefore = await p3.stats();
    const fan = await probe('streams-fanout');
    const fanAfter = await p3.stats();
    const fanTimes = Array.from(fan.times).filter((time) => !Number.isNaN(time)).map((time) => time - fan.sentAt);

    log(`polling: ${POLL_WINDOW_SECONDS} s with every stream idle`);
    await sleep(SETTLE_MS);
    const idleStart = await p3.stats();
    const idleStarted = performance.now();
    await sleep(POLL_WINDOW_SECONDS * 1000);
    const idleEnd = await p3.stats();
    const idleSeconds = (performance.now() - idleStarted) / 1000;
    const polls = methodCalls(idleEnd.store, 'inboxHeads') - methodCalls(idleStart.store, 'inboxHeads');

    for (const follower of followers) follower.cancel();
    await sleep(SETTLE_MS);
    const closed = await p3.stats({ gc: true });

    const figures = { before: memoryFigures(before), open: memoryFigures(open), closed: memoryFigures(closed) };
    const perStream = Object.fromEntries(Object.entries(figures.open).map(([key, value]) => [key, Math.round((value - figures.before[key as keyof MemoryFigures]) / count)])) as unknown as MemoryFigures;
    return {
      streams: count,
      channels: clients.length,
      streamErrors: errors(),
      openSeconds,
      live,
      memory: { ...figures, perStream },
      fanOut: { ...distribution(fanTimes), streamQueries: methodCalls(fanAfter.store, 'readInbox') - methodCalls(fanBefore.store, 'readInbox') },
      polling: {
        watchedInboxes: open.hub.watchedInboxes,
        pollIntervalMs: open.hub.pollIntervalMs,
        windowSeconds: round2(idleSeconds),
        pollsPerSecond: round2(polls / idleSeconds),
        batchGetItemsPerSecond: round2((idleEnd.store.batchGetItems - idleStart.store.batchGetItems) / idleSeconds),
        idsPerPoll: polls > 0 ? round2((idleEnd.store.inboxHeadsIds - idleStart.store.inboxHeadsIds) / polls) : 0,
        streamQueriesPerSecond: round2((methodCalls(idleEnd.store, 'readInbox') - methodCalls(idleStart.store, 'readInbox')) / idleSeconds),
      },
    };
  } finally {
    for (const follower of followers) follower.cancel();
    for (const client of clients) client.close();
  }
}

/** Provisions `count` numbers for the owner, `concurrency` calls at once. */
async function provisionNumbers(numbers: NumberServiceClient, token: string, count: number, concurrency: number): Promise<ProgrammableNumber[]> {
  const provisioned: ProgrammableNumber[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      next++;
      provisioned.push(await setupCall<ProvisionNumberRequest, ProgrammableNumber>('ProvisionNumber', numbers.provisionNumber.bind(numbers),
        ProvisionNumberRequest.fromPartial({ displayName: `Idle inbox ${next}` }), token));
    }
  }));
  return provisioned;
}

/** The intervals of the engine's hub divided by `scale` (P5 of the idle-reads phase), and its re-list period with the engine ready. */
export function scaledEngineIntervals(scale: number) {
  const safetyPollMs = Math.round(SAFETY_POLL_INTERVAL_MS / scale);
  const relistMs = Math.round(INBOX_REFRESH_MS / scale);
  return {
    safetyPollMs, relistMs, engineLostPollMs: Math.round(ENGINE_LOST_POLL_INTERVAL_MS / scale),
    /** As core/messaging/stream.ts relistIntervalMs with the engine ready. */
    readyRelistMs: Math.max(relistMs, RELIST_SAFETY_POLLS * safetyPollMs),
  };
}

/**
 * Items read per watched inbox per minute between two stats of one process, in all and by method:
 * as measured, and divided by `scale` (the process ran with its intervals divided by it).
 */
function idleFigures(before: BenchChildStats, after: BenchChildStats, watched: number, seconds: number, scale: number) {
  const perInboxPerMinute = (items: number) => items / watched / (seconds / 60);
  const byMethod: Record<string, number> = {};
  for (const [method, items] of Object.entries(after.store.itemsReadByMethod)) {
    const delta = items - (before.store.itemsReadByMethod[method] ?? 0);
    if (delta > 0) byMethod[method] = round2(perInboxPerMinute(delta) / scale);
  }
  const measured = perInboxPerMinute(after.store.itemsRead - before.store.itemsRead);
  return {
    itemReadsPerIdleInboxPerMinute: round2(measured / scale), byMethodPerIdleInboxPerMinute: byMethod, measuredItemReadsPerIdleInboxPerMinute: round2(measured),
    polls: methodCalls(after.store, 'inboxHeads') - methodCalls(before.store, 'inboxHeads'),
    listingPages: methodCalls(after.store, 'listOwned') - methodCalls(before.store, 'listOwned'),
  };
}

/** Phase 4 (see the top): store reads of idle watched inboxes, without (P4) and with (P5) the engine. */
async function idleReadsPhase(deps: {
  runner: BenchServerInfo; numbers: NumberServiceClient; token: string; cursor: string; bearer: string; engineUrl: string;
  send: (run: Run, index: number, bearer: string) => Promise<number>; runs: Runs; children: BenchGrpcServer[]; options: MessagesOptions;
}): Promise<IdleReadsResult> {
  const { options, token } = deps;
  const { log, signal } = options;
  log(`idle reads: provisioning ${options.idleInboxes} more numbers for the owner`);
  await provisionNumbers(deps.numbers, token, options.idleInboxes, options.concurrency);
  const watched = options.idleInboxes + 1;
  const scaled = scaledEngineIntervals(options.idleScale);
  const [p4, p5] = await Promise.all([startBenchGrpcServer(deps.runner), startBenchGrpcServer(deps.runner, {
    engineUrl: deps.engineUrl,
    messageIntervals: {
      MESSAGE_SAFETY_POLL_MS: String(scaled.safetyPollMs), MESSAGE_RELIST_MS: String(scaled.relistMs), MESSAGE_ENGINE_LOST_POLL_MS: String(scaled.engineLostPollMs),
    },
  })]);
  deps.children.push(p4, p5);
  const insecure = credentials.createInsecure();
  const clients = [p4, p5].map((child) => new NumberServiceClient(`127.0.0.1:${child.info.grpcPort}`, insecure, CHANNEL_OPTIONS));
  const tag = 'idle-delivery';
  const got = [0, 0];
  const followers = clients.map((client, index) => follow(client, token, deps.cursor, (message) => {
    if (TEXT.exec(message.text)?.[1] === tag) got[index]!++;
  }));
  try {
    log(`idle reads: one stream on pid ${p4.info.pid} (no engine) and one on pid ${p5.info.pid} (engine ${deps.engineUrl}, intervals ÷${options.idleScale}:`
      + ` safety poll ${scaled.safetyPollMs} ms, re-list ${scaled.readyRelistMs} ms), each watching ${watched} inboxes`);
    const deadline = performance.now() + FAN_OUT_TIMEOUT_MS;
    for (;;) {
      const [a, b] = await Promise.all([p4.stats(), p5.stats()]);
      if (a.hub.watchedInboxes === watched && b.hub.watchedInboxes === watched && b.hub.engineReady) break;
      const failure = followers.map((follower) => streamFailure(follower)()).find(Boolean);
      if (failure) throw new Error(`idle reads: ${failure}`);
      if (performance.now() > deadline) throw new Error(`idle reads: the streams did not watch ${watched} inboxes (${a.hub.watchedInboxes}, ${b.hub.watchedInboxes}; engine ready: ${b.hub.engineReady})`);
      signal?.throwIfAborted();
      await sleep(100);
    }
    // Each stream's first read of every inbox (one Query each), the engine's catch-up poll and the
    // re-list that follows settle: no store call but the hub's polls for SETTLE_MS. Then half a
    // safety-net poll more, so that P5's timers (the poll, and the re-list one period after the
    // last) fall inside the window, not on its edges.
    const quietCalls = (stats: BenchChildStats) => stats.store.calls - methodCalls(stats.store, 'inboxHeads');
    for (let last = [-1, -1]; ;) {
      const now = (await Promise.all([p4.stats(), p5.stats()])).map(quietCalls);
      if (now.every((calls, index) => calls === last[index])) break;
      if (performance.now() > deadline) throw new Error('idle reads: the streams did not settle');
      last = now;
      signal?.throwIfAborted();
      await sleep(SETTLE_MS);
    }
    await sleep(scaled.safetyPollMs / 2);

    log(`idle reads: ${options.idleSeconds} s with both streams idle`);
    const idleBefore = await Promise.all([p4.stats(), p5.stats()]);
    const idleStarted = performance.now();
    await sleep(options.idleSeconds * 1000);
    const idleAfter = await Promise.all([p4.stats(), p5.stats()]);
    const idleSeconds = (performance.now() - idleStarted) / 1000;

    log(`idle reads: ${options.idleMessages} messages, one every ${options.intervalMs} ms, delivered to both streams`);
    const run = deps.runs.create(tag);
    for (let index = 0; index < options.idleMessages; index++) {
      await deps.send(run, index, deps.bearer).catch(() => undefined);
      await sleep(options.intervalMs);
    }
    await until(() => got.every((count) => count >= run.accepted), DELIVERY_TIMEOUT_MS, { signal });
    const deliveryAfter = await Promise.all([p4.stats(), p5.stats()]);

    const mode = (index: 0 | 1, child: BenchGrpcServer, scale: number, relistIntervalMs: number): IdleReadsMode => {
      const delivered = got[index]!;
      const per = (value: number) => (delivered > 0 ? round2(value / delivered) : 0);
      const [idle, after] = [idleAfter[index]!.store, deliveryAfter[index]!.store];
      const items = after.itemsRead - idle.itemsRead;
      const pollItems = (after.itemsReadByMethod.inboxHeads ?? 0) - (idle.itemsReadByMethod.inboxHeads ?? 0);
      const deliveredByMethod: Record<string, number> = {};
      for (const [method, count] of Object.entries(after.itemsReadByMethod)) {
        const delta = count - (idle.itemsReadByMethod[method] ?? 0);
        if (delta > 0) deliveredByMethod[method] = per(delta);
      }
      return {
        pid: child.info.pid,
        watchedInboxes: idleAfter[index]!.hub.watchedInboxes,
        pollIntervalMs: idleAfter[index]!.hub.pollIntervalMs,
        relistIntervalMs,
        intervalScale: scale,
        windowSeconds: round2(idleSeconds),
        ...idleFigures(idleBefore[index]!, idleAfter[index]!, watched, idleSeconds, scale),
        delivered,
        itemReadsPerDeliveredMessage: per(items),
        itemReadsPerDeliveredMessageWithoutPolls: per(items - pollItems),
        deliveredByMethod,
        streamQueriesPerDeliveredMessage: per(methodCalls(after, 'readInbox') - methodCalls(idle, 'readInbox')),
      };
    };
    return { inboxes: watched, streamsPerProcess: 1, withoutEngine: mode(0, p4, 1, INBOX_REFRESH_MS), withEngine: mode(1, p5, options.idleScale, scaled.readyRelistMs) };
  } finally {
    for (const follower of followers) follower.cancel();
    for (const client of clients) client.close();
    await Promise.all([p4.stop(), p5.stop()]);
  }
}
