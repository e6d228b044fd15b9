// Scenarios 1 and 2 (see run.ts): delivery latency and the sustained rate into ONE stream, on one
// of three paths (the stream on the accepting process, on another process woken through the engine,
// on another process that polls).
import type { NumberServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { startCpuMeter } from '../cpu';
import { runLoad } from '../load';
import type { BenchChildStats, BenchServer } from '../server-process';
import {
  callsPerMessage,
  DELIVERY_TIMEOUT_MS,
  distribution,
  follow,
  round2,
  streamFailure,
  streamProcessCalls,
  until,
  WARMUP_MESSAGES,
  type Run,
  type Runs,
  type Sender,
} from './tracking';
import type { LatencyResult, MessagesOptions, ThroughputResult } from './types';

export type PathName = 'same' | 'cross' | 'polled';
export const PATH_NAMES: Record<PathName, string> = {
  same: 'same process',
  cross: 'across processes',
  polled: 'across processes without an engine',
};

/** What the scenarios of one message flow share; `cursor` moves on as each stream ends. */
export interface FlowContext {
  runner: BenchServer;
  /** The owner's provisioning token (streams), and a fresh sender token per phase (none expires mid-run). */
  token: string;
  senderToken: () => Promise<string>;
  sender: Sender;
  runs: Runs;
  options: MessagesOptions;
  /** Cursor of the last message received: each stream resumes from it, so no run replays another's. */
  cursor: string;
}

/** The process a stream runs on: its pid and its counters. */
export interface StreamProcess {
  pid: number;
  stats: () => Promise<BenchChildStats>;
}

/** Latency and sustained rate into one stream opened on `streamClient` (process `streamProcess`). */
export async function oneStream(
  context: FlowContext,
  name: PathName,
  streamClient: NumberServiceClient,
  streamProcess: StreamProcess,
): Promise<{ latency: LatencyResult; throughput: ThroughputResult }> {
  const bearer = await context.senderToken();
  const stream = follow(streamClient, context.token, context.cursor, context.runs.dispatch);
  const failed = streamFailure(stream);
  try {
    await warmUp(context, name, bearer, failed);
    const latency = await latencyRun(context, name, bearer, streamProcess, failed);
    const throughput = await rateRun(context, name, bearer, streamProcess, failed);
    return { latency, throughput };
  } finally {
    stream.cancel();
    context.cursor = stream.cursor;
  }
}

type Failed = () => string | undefined;

/** Paced messages before the measured runs (JIT, connections, the stream's first reads); all must arrive. */
async function warmUp(context: FlowContext, name: PathName, bearer: string, failed: Failed): Promise<void> {
  const warmup = context.runs.create(`${name}-warmup`);
  await context.sender.paced(warmup, WARMUP_MESSAGES, bearer);
  const done = () => warmup.outstanding() === 0 && warmup.accepted === WARMUP_MESSAGES;
  if (!(await until(done, DELIVERY_TIMEOUT_MS, { signal: context.options.signal, failed }))) {
    const accepted = `${warmup.accepted} of ${WARMUP_MESSAGES} accepted (${JSON.stringify(warmup.errorKinds)})`;
    throw new Error(`${name}: warm-up: ${accepted}, ${warmup.received} received`);
  }
}

/** Scenario 1: `options.messages` messages one every `intervalMs`, POST start → receipt. */
async function latencyRun(
  context: FlowContext,
  name: PathName,
  bearer: string,
  streamProcess: StreamProcess,
  failed: Failed,
): Promise<LatencyResult> {
  const { options, runner } = context;
  context.options.log(`${PATH_NAMES[name]}: latency, ${options.messages} messages one every ${options.intervalMs} ms`);
  const run = context.runs.create(`${name}-latency`);
  const callsBefore = await streamProcess.stats();
  const cpuIngress = startCpuMeter(runner.info.pid);
  const cpuStream = startCpuMeter(streamProcess.pid);
  const sendSeconds = await context.sender.paced(run, options.messages, bearer);
  await until(() => run.outstanding() === 0, DELIVERY_TIMEOUT_MS, { signal: options.signal, failed });
  const ingressCpu = cpuIngress();
  const streamCpu = cpuStream();
  const callsAfter = await streamProcess.stats();
  const received = run.samples.filter((sample) => sample.receivedAt !== undefined);
  const accepted = run.samples.filter((sample) => sample.status === 202);
  const created = received.filter((sample) => sample.createTime !== undefined);
  return {
    sent: run.samples.length,
    accepted: run.accepted,
    received: run.received,
    missing: run.outstanding(),
    duplicates: run.duplicates,
    errorKinds: run.errorKinds,
    sendRatePerSecond: round2(run.samples.length / sendSeconds),
    sendToReceipt: distribution(received.map((sample) => sample.receivedAt! - sample.sendStart)),
    sendToAccepted: distribution(accepted.map((sample) => sample.responseAt! - sample.sendStart)),
    createTimeToReceipt: distribution(
      created.map((sample) => performance.timeOrigin + sample.receivedAt! - sample.createTime!),
    ),
    receivedBeforeResponse: run.receivedBeforeResponse,
    streamProcess: streamProcessCalls(callsBefore, callsAfter, run.accepted),
    cpu: {
      ingressPercent: ingressCpu.serverPercent,
      streamPercent: streamCpu.serverPercent,
      benchPercent: ingressCpu.loadGeneratorPercent,
    },
  };
}

/** Scenario 2: `options.concurrency` senders in a closed loop for `options.seconds`, after a warm-up run. */
async function rateRun(
  context: FlowContext,
  name: PathName,
  bearer: string,
  streamProcess: StreamProcess,
  failed: Failed,
): Promise<ThroughputResult> {
  const { options, runner, sender } = context;
  const { signal } = options;
  const senders = `${options.concurrency} senders (${options.warmupSeconds} s warm-up + ${options.seconds} s)`;
  options.log(`${PATH_NAMES[name]}: sustained rate into one stream, ${senders}`);
  const load = {
    concurrency: options.concurrency,
    serverPid: runner.info.pid,
    signal,
    ok: (code: number) => code === 202,
  };
  if (options.warmupSeconds > 0) {
    const warm = context.runs.create(`${name}-rate-warmup`);
    let next = 0;
    await runLoad({ ...load, seconds: options.warmupSeconds, request: () => sender.send(warm, next++, bearer) });
    await until(() => warm.outstanding() === 0, DELIVERY_TIMEOUT_MS, { signal, failed });
  }
  const rate = context.runs.create(`${name}-rate`);
  let next = 0;
  const callsBefore = await streamProcess.stats();
  const ingressBefore = await runner.stats();
  const cpuStream = startCpuMeter(streamProcess.pid);
  const started = performance.now();
  const ingress = await runLoad({
    ...load,
    seconds: options.seconds,
    request: () => sender.send(rate, next++, bearer),
  });
  const ended = performance.now();
  const streamCpu = cpuStream();
  await until(() => rate.outstanding() === 0, DELIVERY_TIMEOUT_MS, { signal, failed });
  const callsAfter = await streamProcess.stats();
  const ingressAfter = await runner.stats();
  return {
    ingress,
    ...rateFigures(rate, started, ended),
    streamProcess: streamProcessCalls(callsBefore, callsAfter, rate.accepted),
    streamCpuPercent: streamCpu.serverPercent,
    ingressCallsPerMessage: callsPerMessage(ingressBefore, ingressAfter, rate.accepted),
  };
}

/** What the samples of a rate run say about the window `started`..`ended` and the drain after it. */
function rateFigures(rate: Run, started: number, ended: number) {
  const windowSeconds = (ended - started) / 1000;
  const receipts = rate.samples.filter((sample) => sample.receivedAt !== undefined);
  const receivedInWindow = receipts.filter((sample) => sample.receivedAt! <= ended).length;
  const lastReceipt = receipts.reduce((last, sample) => Math.max(last, sample.receivedAt!), ended);
  const answered = receipts.filter((sample) => sample.responseAt !== undefined);
  return {
    accepted: rate.accepted,
    acceptedPerSecond: round2(rate.accepted / windowSeconds),
    receivedInWindow,
    receivedPerSecond: round2(receivedInWindow / windowSeconds),
    received: rate.received,
    missing: rate.outstanding(),
    duplicates: rate.duplicates,
    drainMs: round2(Math.max(0, lastReceipt - ended)),
    lag: distribution(receipts.map((sample) => sample.receivedAt! - sample.sendStart)),
    lagAfterAccepted: distribution(answered.map((sample) => sample.receivedAt! - sample.responseAt!)),
    maxBacklog: rate.maxBacklog,
  };
}
