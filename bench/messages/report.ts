// The message flow as `npm run bench` runs it: a fresh runner publishing to a redis-server, the four
// scenarios (run.ts), bench/results/messages.json and the printed tables.
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { grpcImageNodeOptions } from '../../test/support/grpc-image';
import { startRedis } from '../../test/support/redis';
import { onCleanup } from '../cleanup';
import { errorLines, fmt, type machine, table, writeJson } from '../report';
import { startBenchServer } from '../server-process';
import { messageBenchmarks } from './run';
import { round2, WARMUP_MESSAGES } from './tracking';
import type {
  Distribution,
  IdleReadsMode,
  IdleReadsResult,
  LatencyResult,
  MessagesResult,
  StreamsResult,
  ThroughputResult,
} from './types';

export const MESSAGES_RESULT_FILE = fileURLToPath(new URL('../results/messages.json', import.meta.url));
/**
 * Pool numbers for the messages runner: ProvisionNumber (1) and CreateAgent (number + fallback), with room to spare.
 */
const MESSAGES_POOL_NUMBERS = 10;
const mb = (bytes: number) => fmt(bytes / 1048576, 1);

/** The BENCH_… settings the message flow reads (bench/run.ts). */
export interface MessageFlowSettings {
  seconds: number;
  warmupSeconds: number;
  concurrency: number;
  messages: number;
  messageIntervalMs: number;
  streams: number[];
  streamChannels: number;
  idleInboxes: number;
  idleSeconds: number;
  idleMessages: number;
  idleScale: number;
}

export interface RunContext {
  date: string;
  host: ReturnType<typeof machine>;
  loadAverageAtStart: number;
  log: (message: string) => void;
}

const POLL_DESIGN =
  'each process with open streams runs one MessageHub: one strongly consistent BatchGetItem per 100 distinct watched' +
  ' inboxes every 250 ms (4 per second per 100 inboxes, 1 read unit per inbox per poll), whatever the number of ' +
  'streams' +
  ' or messages; a message wakes only the streams watching its inbox, and each woken stream reads each of its inboxes' +
  ' from its cursor (one Query per inbox)';
const CLOCKS =
  'send → receipt is measured in the bench process on one monotonic clock (performance.now(): the POST start and the' +
  " stream's data event), so no clocks are compared; create_time → receipt compares the accepting process's " +
  'Date.now()' +
  ' (ms, taken before the DynamoDB put) with performance.timeOrigin + performance.now() here: the same system ' +
  'clock of' +
  ' one machine';

/**
 * The message flow on a fresh runner and redis-server: writes messages.json, returns its lines of the printed report.
 */
export async function messageFlow(settings: MessageFlowSettings, context: RunContext): Promise<string[]> {
  const { log } = context;
  // The pub/sub engine: the runner publishes every message to it (its own streams are woken
  // in-process all the same; P2 subscribes to it; P2b and P3 have no engine and poll).
  const redis = await startRedis();
  onCleanup(() => redis.stop());
  log(`starting a fresh local runner for the message flow, publishing wake-ups to ${redis.url}`);
  const poolNumbers = MESSAGES_POOL_NUMBERS + settings.idleInboxes;
  const server = await startBenchServer({ poolNumbers, engineUrl: redis.url });
  log(`server ${server.info.issuer}, gRPC port ${server.info.grpcPort} (pid ${server.info.pid})`);
  const messages = await messageBenchmarks(server, {
    ...settings,
    intervalMs: settings.messageIntervalMs,
    engineUrl: redis.url,
    log,
    signal: server.died,
  });
  await server.stop();
  await redis.stop();
  await writeJson(MESSAGES_RESULT_FILE, messagesJson(settings, messages, context));
  return [
    "Message flow: POST /api/messages on the runner (P1) → StreamAllMessages; P2 (subscribed to P1's engine)," +
      " P2b (no engine, polls), P3: gRPC server processes on P1's DynamoDB; one owner, one programmable number," +
      ' one sending agent',
    ...latencyLines(settings, messages.latency),
    '',
    ...rateLines(settings, messages.throughput),
    '',
    ...streamsLines(messages.streams),
    ...(messages.idleReads ? ['', ...idleLines(settings, messages.idleReads)] : []),
    ...problemLines(messages),
  ];
}

function messagesJson(settings: MessageFlowSettings, messages: MessagesResult, context: RunContext) {
  const { latency, throughput: rate, streams, idleReads: idle, setup } = messages;
  const paced = `${settings.messages} messages, one every ${settings.messageIntervalMs} ms (open loop)`;
  const closedLoop = `${settings.concurrency} senders in a closed loop into ONE stream for ${settings.seconds} s`;
  return {
    benchmark: 'messages',
    date: context.date,
    ...context.host,
    settings: {
      seconds: settings.seconds,
      warmupSeconds: settings.warmupSeconds,
      concurrency: settings.concurrency,
      messages: settings.messages,
      messageIntervalMs: settings.messageIntervalMs,
      streams: settings.streams,
      streamChannels: settings.streamChannels,
    },
    loadAverage: { start: round2(context.loadAverageAtStart), end: round2(loadavg()[0]!) },
    processes: processDescriptions(messages),
    clocks: CLOCKS,
    setup,
    latency: {
      description:
        `${paced}, POST start → receipt on StreamAllMessages, after ${WARMUP_MESSAGES} unmeasured messages;` +
        " the stream resumes from the previous run's last cursor",
      sameProcess: {
        description: "stream on P1, messages accepted by P1: woken by P1's in-process notifier",
        ...latency.sameProcess,
      },
      crossProcess: {
        description: 'stream on P2, messages accepted by P1: woken through the engine (P1 publishes, P2 subscribes)',
        ...latency.crossProcess,
      },
      crossProcessPolling: {
        description: "stream on P2b, messages accepted by P1: woken by P2b's poll of the inbox counters (250 ms)",
        ...latency.crossProcessPolling,
      },
    },
    throughput: {
      description:
        `${closedLoop} after ${settings.warmupSeconds} s warm-up;` +
        ' received/s counts receipts up to the end of the ingress window',
      sameProcess: { description: 'stream on P1, ingress P1', ...rate.sameProcess },
      crossProcess: { description: 'stream on P2 (engine), ingress P1', ...rate.crossProcess },
      crossProcessPolling: { description: 'stream on P2b (polling), ingress P1', ...rate.crossProcessPolling },
    },
    streams: streams.map((run) => ({
      description:
        `${run.streams} concurrent StreamAllMessages calls (one owner, one programmable number) from the bench over` +
        ` ${run.channels} channels to a fresh P3; memory of P3 after a full GC (child runs with --expose-gc and the` +
        " gRPC image's NODE_OPTIONS)",
      ...run,
      polling: { design: POLL_DESIGN, ...run.polling },
    })),
    ...(idle ? { idleReads: { description: idleDescription(settings, idle), ...idle } } : {}),
    strayMessages: messages.strayMessages,
  };
}

function processDescriptions(messages: MessagesResult) {
  const { setup, streams } = messages;
  return {
    p1:
      'local runner (local/runner.ts) in a child process, fresh for these runs: HTTP ingress (POST /api/messages),' +
      ' embedded dynalite, local Ed25519 key, its own gRPC server',
    p2:
      `gRPC server process (pid ${setup.p2Pid}): core against P1's dynalite, P1's keys and issuer,` +
      ' startGrpcServer(core, { port: 0 }), subscribed to the redis-server P1 publishes to — the cross-process stream',
    p2b:
      `the same without the engine (pid ${setup.p2bPid}): it polls the inbox counters every 250 ms —` +
      ' the cross-process stream as it was before the engine',
    p3:
      `a fresh process of the same kind for each count of streams (pids ${setup.p3Pids.join(', ')}) —` +
      ` the ${streams.map((run) => run.streams).join(' and ')} streams`,
  };
}

function idleDescription(settings: MessageFlowSettings, idle: IdleReadsResult): string {
  return (
    'store items read by a stream process (bench/store-counters.ts itemsRead: keys a BatchGetItem asks for, items a' +
    ` Query or get returns, 1 for one that finds none) with one stream of the owner watching ${idle.inboxes} inboxes,` +
    ` over ${idle.withEngine.windowSeconds} s with nothing arriving, per watched inbox per minute;` +
    ` then ${settings.idleMessages} messages one every ${settings.messageIntervalMs} ms to one inbox: items read per` +
    ' delivered message. P4: no engine, default intervals (polls every MESSAGE_POLL_INTERVAL_MS, re-lists every' +
    ' MESSAGE_RELIST_MS); P5: VALKEY_URL (a redis-server on loopback, the runner publishes to it) with' +
    ` MESSAGE_SAFETY_POLL_MS, MESSAGE_RELIST_MS and MESSAGE_ENGINE_LOST_POLL_MS at their defaults ÷ ` +
    `${settings.idleScale}` +
    ` (BENCH_IDLE_SCALE): its per-minute figures are measured ÷ ${settings.idleScale}, i.e. at the default intervals` +
    " (every idle read is a timer's: the safety-net poll and the re-list); measuredItemReadsPerIdleInboxPerMinute is" +
    ' the figure as measured'
  );
}

const dist = (value: Distribution) => `${fmt(value.p50, 1)} / ${fmt(value.p99, 1)}`;

function latencyLines(settings: MessageFlowSettings, latency: MessagesResult['latency']): string[] {
  const runs = [latency.sameProcess, latency.crossProcess, latency.crossProcessPolling];
  const achieved = runs.map((run) => `${fmt(run.sendRatePerSecond, 1)}/s`).join(', ');
  const row = (name: string, run: LatencyResult) => [
    name,
    fmt(run.received),
    fmt(run.sendToReceipt.p50, 1),
    fmt(run.sendToReceipt.p90, 1),
    fmt(run.sendToReceipt.p99, 1),
    fmt(run.sendToReceipt.max, 1),
    dist(run.sendToAccepted),
    dist(run.createTimeToReceipt),
    fmt(run.streamProcess.streamQueriesPerMessage, 2),
    fmt(run.missing),
    fmt(run.duplicates),
    `${run.cpu.ingressPercent ?? '?'}% / ${run.cpu.streamPercent ?? '?'}% / ${run.cpu.benchPercent}%`,
  ];
  const headers = ['path', 'received', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'POST→202 p50/p99'];
  headers.push('created→recv p50/p99', 'reads/msg', 'missing', 'dup', 'CPU in/stream/gen');
  const early = runs.map((run) => run.receivedBeforeResponse);
  return [
    `Delivery latency: ${settings.messages} messages, one every ${settings.messageIntervalMs} ms (achieved` +
      ` ${achieved}), POST start → receipt on the stream, ms`,
    table(headers, [
      row('same process (P1 notifier)', latency.sameProcess),
      row('across processes (P2 engine)', latency.crossProcess),
      row('across processes (P2b polls)', latency.crossProcessPolling),
    ]),
    `  clocks: ${CLOCKS}`,
    '  reads/msg: inbox Queries the streaming process made per message (store counters in the child);' +
      ' CPU in/stream/gen: P1 / streaming process / bench, percent of one core',
    `  received before their own 202: ${early[0]} (same process), ${early[1]} (across processes),` +
      ` ${early[2]} (polling)`,
  ];
}

function rateLines(settings: MessageFlowSettings, rate: MessagesResult['throughput']): string[] {
  const row = (name: string, run: ThroughputResult) => [
    name,
    fmt(run.accepted),
    fmt(run.acceptedPerSecond, 1),
    fmt(run.receivedPerSecond, 1),
    `${fmt(run.ingress.p50, 1)} / ${fmt(run.ingress.p99, 1)}`,
    dist(run.lag),
    fmt(run.lag.max, 1),
    `${dist(run.lagAfterAccepted)} / ${fmt(run.lagAfterAccepted.max, 1)}`,
    fmt(run.maxBacklog),
    fmt(run.drainMs, 0),
    fmt(run.streamProcess.streamQueriesPerMessage, 2),
    fmt(run.ingress.errors + run.missing),
    `${run.ingress.cpu.serverPercent ?? '?'}% / ${run.streamCpuPercent ?? '?'}% / ` +
      `${run.ingress.cpu.loadGeneratorPercent}%`,
  ];
  const headers = ['path', 'accepted', 'accepted/s', 'received/s', 'POST p50/p99 ms', 'lag p50/p99 ms', 'max lag ms'];
  headers.push('202→recv p50/p99/max', 'max backlog', 'drain ms', 'reads/msg', 'errors', 'CPU in/stream/gen');
  const named: Array<[string, ThroughputResult]> = [
    ['same process', rate.sameProcess],
    ['across processes (engine)', rate.crossProcess],
    ['across processes (polls)', rate.crossProcessPolling],
  ];
  const calls = (run: ThroughputResult) =>
    Object.entries(run.ingressCallsPerMessage)
      .map(([method, perMessage]) => `${method} ${fmt(perMessage, 2)}`)
      .join(', ');
  return [
    `Sustained rate into ONE stream: ${settings.concurrency} senders, closed loop, ${settings.seconds} s after` +
      ` ${settings.warmupSeconds} s warm-up; lag = POST start → receipt`,
    table(headers, [
      row('same process', rate.sameProcess),
      row('across (engine)', rate.crossProcess),
      row('across (polls)', rate.crossProcessPolling),
    ]),
    '  received/s: receipts up to the end of the ingress window; drain: from its end until the last message arrived;' +
      ' backlog: accepted (202) but not yet received;',
    "  202→recv: how far the stream trails the ingress (negative: received before the POST's 202 reached the bench)",
    ...named.map(([name, run]) => `  store calls of P1 per accepted message, ${name}: ${calls(run)}`),
  ];
}

function streamsLines(runs: StreamsResult[]): string[] {
  const many = runs[0]!;
  const row = (run: StreamsResult) => [
    fmt(run.streams),
    `${fmt(run.live)} in ${fmt(run.openSeconds, 1)} s`,
    mb(run.memory.before.rss),
    mb(run.memory.open.rss),
    mb(run.memory.closed.rss),
    `${mb(run.memory.open.heapUsed)} / ${mb(run.memory.open.heapTotal)}`,
    fmt(run.memory.perStream.rss / 1024, 1),
    fmt(run.memory.perStream.heapUsed / 1024, 1),
    `${fmt(run.fanOut.p50, 1)} / ${fmt(run.fanOut.p99, 1)} / ${fmt(run.fanOut.max, 1)}`,
    fmt(run.fanOut.streamQueries),
  ];
  const headers = ['streams', 'live after', 'RSS none MB', 'RSS open MB', 'RSS closed MB', 'heap used/total MB'];
  headers.push('RSS/stream KB', 'heap/stream KB', 'fan-out p50/p99/last ms', 'Queries');
  const polling = many.polling;
  return [
    `Open streams on one gRPC server process (P3, a fresh one per row, with the gRPC image's NODE_OPTIONS` +
      ` ${grpcImageNodeOptions() || '(none)'}), from the bench over ${many.channels} channels; memory after a full GC`,
    table(headers, runs.map(row)),
    '  none/open/closed: P3 before the streams, with all open, after all closed; per stream: (open − none) / streams;' +
      ' fan-out: one message (polling path) to every open stream, POST start → receipt; Queries: inbox Queries P3' +
      ' made for it (one per stream)',
    `  polling while idle (${fmt(many.streams)} streams): the hub watches ${polling.watchedInboxes} inbox(es);` +
      ` measured ${fmt(polling.pollsPerSecond, 2)} polls/s = ${fmt(polling.batchGetItemsPerSecond, 2)} BatchGetItem/s` +
      ` (${fmt(polling.idsPerPoll, 1)} ids each), ${fmt(polling.streamQueriesPerSecond, 2)} stream Queries/s`,
    `  design: ${POLL_DESIGN}`,
  ];
}

function idleLines(settings: MessageFlowSettings, idle: IdleReadsResult): string[] {
  const byMethod = (values: Record<string, number>) =>
    Object.entries(values)
      .map(([method, value]) => `${method} ${fmt(value, 2)}`)
      .join(', ') || '-';
  const row = (name: string, mode: IdleReadsMode) => [
    name,
    fmt(mode.watchedInboxes),
    `${fmt(mode.pollIntervalMs)} / ${fmt(mode.relistIntervalMs)}`,
    mode.intervalScale === 1 ? 'defaults' : `defaults ÷ ${mode.intervalScale}`,
    `${fmt(mode.polls)} / ${fmt(mode.listingPages)}`,
    fmt(mode.itemReadsPerIdleInboxPerMinute, 2),
    byMethod(mode.byMethodPerIdleInboxPerMinute),
    fmt(mode.itemReadsPerDeliveredMessage, 2),
    fmt(mode.itemReadsPerDeliveredMessageWithoutPolls, 2),
    fmt(mode.streamQueriesPerDeliveredMessage, 2),
    fmt(mode.delivered),
  ];
  const headers = ['stream process', 'watched', 'poll / re-list ms', 'intervals', 'polls / listing pages'];
  headers.push('item reads / idle inbox / min', 'of which (by store method)', 'item reads / delivered msg');
  headers.push('without polls', 'inbox Queries / delivered msg', 'delivered');
  const engine = idle.withEngine;
  const scale = settings.idleScale;
  const held = fmt((engine.windowSeconds * scale) / 60, 1);
  return [
    `Store item reads of idle watched inboxes: one owner, ${idle.inboxes} numbers, one stream per process watching ` +
      `all` +
      ` of them; idle ${fmt(engine.windowSeconds, 1)} s, then ${settings.idleMessages} messages to one inbox`,
    table(headers, [
      row('without engine (P4 polls)', idle.withoutEngine),
      row('with engine (P5, redis-server)', engine),
    ]),
    `  SCALED: P5 ran with every interval divided by ${scale} (BENCH_IDLE_SCALE; safety-net poll` +
      ` ${fmt(engine.pollIntervalMs)} ms, re-list ${fmt(engine.relistIntervalMs)} ms), so its window holds what` +
      ` ${held} min hold at the defaults; its reads per minute are the measured` +
      ` ${fmt(engine.measuredItemReadsPerIdleInboxPerMinute, 2)} ÷ ${scale}, at the default intervals (90 s, 15 min)`,
    ...(engine.windowSeconds * 1000 < engine.relistIntervalMs
      ? [
          `  WARNING: the window (${fmt(engine.windowSeconds, 1)} s) is shorter than P5's re-list period:` +
            " the listing's share may be missing (raise BENCH_IDLE_SECONDS)",
        ]
      : []),
    `  item reads per delivered message by store method: P4 ${byMethod(idle.withoutEngine.deliveredByMethod)};` +
      ` P5 ${byMethod(engine.deliveredByMethod)}`,
    '  P4 ran at the default intervals (250 ms poll, 30 s re-list), unscaled. Items read: keys a BatchGetItem asks' +
      ' for, items a Query or get returns (1 for one that finds none);',
    "  inboxHeads = the hub's polls, listOwned = the stream's re-list of the owner's numbers, readInbox = the " +
      "stream's" +
      ' reads; "without polls": the hub\'s counter polls left out (timer-driven, the idle cost above)',
  ];
}

function problemLines(messages: MessagesResult): string[] {
  const { latency, throughput: rate, streams } = messages;
  const latencyRuns: Array<[string, LatencyResult]> = [
    ['same process', latency.sameProcess],
    ['across processes', latency.crossProcess],
    ['across processes, polling', latency.crossProcessPolling],
  ];
  const streamErrors = streams.flatMap((run) =>
    Object.entries(run.streamErrors).map(([kind, count]) => `${kind} (of ${fmt(run.streams)}) ×${count}`),
  );
  return [
    ...latencyRuns.flatMap(([name, run]) =>
      Object.keys(run.errorKinds).length
        ? [`  WARNING: latency ${name}: POSTs failed: ${JSON.stringify(run.errorKinds)}`]
        : [],
    ),
    ...errorLines([
      ['rate, same process', rate.sameProcess.ingress],
      ['rate, across processes', rate.crossProcess.ingress],
      ['rate, across processes, polling', rate.crossProcessPolling.ingress],
    ]),
    ...(streamErrors.length ? [`  WARNING: streams failed: ${streamErrors.join(', ')}`] : []),
    ...streams
      .filter((run) => run.live < run.streams)
      .map((run) => `  WARNING: only ${run.live} of ${run.streams} streams received the readiness probe`),
    ...(messages.strayMessages ? [`  WARNING: ${messages.strayMessages} stream messages belonged to no run`] : []),
  ];
}
