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
import { credentials } from '@grpc/grpc-js';
import { AgentServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { NumberServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { MAX_STREAMS_PER_CONNECTION } from '../../grpc-service/server';
import { createHttpClient } from '../http-client';
import { CHANNEL_OPTIONS, grpcVersion, messageParties, provisioningToken } from '../provisioning';
import { startBenchGrpcServer, type BenchGrpcServer, type BenchServer } from '../server-process';
import { idleReads } from './idle-reads';
import { manyStreams } from './many-streams';
import { oneStream, PATH_NAMES, type FlowContext } from './one-stream';
import { createSender, Runs } from './tracking';
import type { IdleReadsResult, MessagesOptions, MessagesResult, StreamsResult } from './types';

export async function messageBenchmarks(runner: BenchServer, options: MessagesOptions): Promise<MessagesResult> {
  const { log } = options;
  const server = runner.info;
  const insecure = credentials.createInsecure();
  const p1Address = `127.0.0.1:${server.grpcPort}`;
  const numbers = new NumberServiceClient(p1Address, insecure, CHANNEL_OPTIONS);
  const agents = new AgentServiceClient(p1Address, insecure, CHANNEL_OPTIONS);
  const http = createHttpClient('http', server.issuer, Math.max(options.concurrency, 16));
  const children: BenchGrpcServer[] = [];
  try {
    log(
      'messages setup: client_credentials token, a programmable number (the inbox), an agent (the sender) and its ' +
        'token',
    );
    const token = await provisioningToken(server);
    const { inbox, agentSvcnum, senderToken } = await messageParties(numbers, agents, token, 'Bench');
    const context: FlowContext = {
      runner,
      token,
      senderToken,
      sender: createSender(http, inbox.svcnum, options.intervalMs, options.signal),
      runs: new Runs(),
      options,
      cursor: '',
    };

    log(`same process: stream on the runner (pid ${server.pid}), messages to the runner`);
    const same = await oneStream(context, 'same', numbers, { pid: server.pid, stats: () => runner.stats() });
    const cross = await acrossProcesses(context, 'cross', options.engineUrl, children);
    const polled = await acrossProcesses(context, 'polled', undefined, children);
    const { streams, p3Pids } = await streamCrowds(context, children);
    let idle: IdleReadsResult | undefined;
    if (options.engineUrl) idle = await idleReads(context, options.engineUrl, children);

    const channel =
      `grpc-js ${grpcVersion()}, insecure loopback; latency/rate streams: one channel; ` +
      `${options.streams.join(' and ')}` +
      ` streams over ${options.streamChannels} channels or more, at most ${MAX_STREAMS_PER_CONNECTION} streams each` +
      ' (own subchannel pools: one HTTP/2 connection each)';
    return {
      setup: {
        numberSvcnum: inbox.svcnum,
        agentSvcnum,
        p2Pid: cross.pid,
        p2bPid: polled.pid,
        p3Pids,
        channel,
      },
      latency: { sameProcess: same.latency, crossProcess: cross.latency, crossProcessPolling: polled.latency },
      throughput: {
        sameProcess: same.throughput,
        crossProcess: cross.throughput,
        crossProcessPolling: polled.throughput,
      },
      streams,
      ...(idle ? { idleReads: idle } : {}),
      strayMessages: context.runs.strays,
    };
  } finally {
    numbers.close();
    agents.close();
    http.close();
    for (const child of children) await child.stop();
  }
}

/** A stream on a second gRPC server process (with or without the engine) and messages to the runner. */
async function acrossProcesses(
  context: FlowContext,
  name: 'cross' | 'polled',
  engineUrl: string | undefined,
  children: BenchGrpcServer[],
) {
  const { log } = context.options;
  const server = context.runner.info;
  const subscribed = engineUrl ? `, subscribed to ${engineUrl}` : ' (no engine)';
  log(`${PATH_NAMES[name]}: starting a second gRPC server process on the runner's DynamoDB${subscribed}`);
  const child = await startBenchGrpcServer(server, { engineUrl });
  children.push(child);
  const { pid, grpcPort } = child.info;
  log(`${PATH_NAMES[name]}: stream on pid ${pid} (gRPC port ${grpcPort}), messages to the runner (pid ${server.pid})`);
  const client = new NumberServiceClient(`127.0.0.1:${grpcPort}`, credentials.createInsecure(), CHANNEL_OPTIONS);
  try {
    return { pid, ...(await oneStream(context, name, client, { pid, stats: () => child.stats() })) };
  } finally {
    client.close();
    await child.stop();
  }
}

/** Scenario 3 once per count of `options.streams`, each on a fresh P3. */
async function streamCrowds(context: FlowContext, children: BenchGrpcServer[]) {
  const streams: StreamsResult[] = [];
  const p3Pids: number[] = [];
  for (const count of context.options.streams) {
    context.options.log(`${count} streams: starting a fresh gRPC server process on the runner's DynamoDB`);
    const p3 = await startBenchGrpcServer(context.runner.info);
    children.push(p3);
    p3Pids.push(p3.info.pid);
    streams.push(await manyStreams(context, p3, count, await context.senderToken()));
    await p3.stop();
  }
  return { streams, p3Pids };
}
