// `npm run bench`: the token endpoint side by side with node-oidc-provider and the cost of our hot
// paths (hot-paths.ts), sign-in throughput of the local runner, the gRPC provisioning API, the
// message flow (delivery latency, sustained rate into one stream, many open streams), and the
// signing primitives under them.
//
//   BENCH_SECONDS         measured seconds per HTTP run (default 10)
//   BENCH_WARMUP_SECONDS  warm-up seconds before each HTTP run (default 2)
//   BENCH_CONCURRENCY     requests (HTTP) / calls (gRPC) in flight (default 16)
//   BENCH_CRYPTO_SECONDS  seconds per in-process crypto measurement (default 3)
//   BENCH_HTTP_CLIENT     http (node:http keep-alive Agent, default) or fetch (undici)
//   BENCH_MAX_CODES       cap on authorization codes minted for the exchange run (default 200000)
//   BENCH_POOL_NUMBERS    numbers seeded into the pool for CreateMask (default: sized from
//                         BENCH_SECONDS + BENCH_WARMUP_SECONDS, see provisioning.ts poolNumbersFor)
//   BENCH_MESSAGES        messages per delivery-latency run (default 300)
//   BENCH_MESSAGE_INTERVAL_MS  one latency message every this many ms (default 20)
//   BENCH_STREAMS         streams held open on one gRPC server process, comma-separated counts, each on a
//                         fresh process (default 1000,10000)
//   BENCH_STREAM_CHANNELS gRPC channels those streams are spread over (default 4; more where a channel
//                         would hold over 100, the server's limit per connection)
//   BENCH_IDLE_INBOXES    numbers watched in the idle-reads phase (default 200)
//   BENCH_IDLE_SCALE      the engine's process in that phase runs with every interval divided by this
//                         (default 10: a 9 s safety-net poll, a 90 s re-list); its reads per minute are
//                         divided by it again, to give them at the default intervals (1-30)
//   BENCH_IDLE_SECONDS    its idle window (default: one scaled re-list period, 900 s / BENCH_IDLE_SCALE)
//   BENCH_IDLE_MESSAGES   messages delivered after it (default 50)
//   BENCH_ONLY            messages: only the message flow (its tables and messages.json);
//                         provisioning: only the gRPC provisioning API (its table and provisioning.json);
//                         hung-engine: only sends and ProvisionNumber with the engine healthy, then
//                         SIGSTOPped (hung-engine.ts; hung-engine.json);
//                         start-vs-peer: only `npm start` (default log level) beside node-oidc-provider,
//                         client_credentials, BENCH_START_RUNS runs (start-vs-peer.ts; start-vs-peer.json);
//                         edge-overhead: only the Lambda edge's cost per request, in process (edge-overhead.ts)
//   REDIS_SERVER          the pub/sub engine's binary (default redis-server: the Debian package)
//
// Prints tables on stdout (progress on stderr) and writes bench/results/hot-paths.json, signin.json,
// provisioning.json and messages.json. Hot paths with sign-in (one runner, beside the peer),
// provisioning and messages each get a fresh server process: the provisioning one seeds its pool first, which the
// sign-in numbers should not pay for; the messages one gets second gRPC server processes on its
// DynamoDB (see messages.ts).
// To add a benchmark: a module that returns plain results (see load.ts `runLoad`, crypto.ts
// `measureSync`/`measureAsync`), called below, with its rows added to the tables and the JSON.

process.env.LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { cleanupOnSignals, onCleanup, runCleanup } from './cleanup';
import { cryptoBenchmarks } from './crypto';
import { lambdaBundleBenchmarks } from './lambda-bundles';
import { messageBenchmarks, scaledEngineIntervals, WARMUP_MESSAGES, type Distribution } from './messages';
import type { HttpClientKind } from './http-client';
import type { LoadResult } from './load';
import { poolNumbersFor, provisioningBenchmarks, SETUP_NUMBERS, type RpcLoadResult } from './provisioning';
import { errorLines, fmt, loadHeaders, loadRow, machine, numberFromEnv, opsHeaders, opsRow, rpcHeaders, table, writeJson } from './report';
import { hotPathBenchmarks } from './hot-paths';
import { startBenchServer } from './server-process';
import { edgeOverheadBenchmark, edgeOverheadSettingsFromEnv } from './edge-overhead';
import { startVsPeerBenchmark, startVsPeerSettingsFromEnv } from './start-vs-peer';
import { hungEngineBenchmarks, hungEngineLines, hungEnginePoolNumbers } from './hung-engine';
import { startRedis } from '../test/support/redis';
import { grpcImageNodeOptions } from '../test/support/grpc-image';

const RESULT_FILE = fileURLToPath(new URL('./results/signin.json', import.meta.url));
const PROVISIONING_RESULT_FILE = fileURLToPath(new URL('./results/provisioning.json', import.meta.url));
const MESSAGES_RESULT_FILE = fileURLToPath(new URL('./results/messages.json', import.meta.url));
const HUNG_ENGINE_RESULT_FILE = fileURLToPath(new URL('./results/hung-engine.json', import.meta.url));
/** Pool numbers for the messages runner: ProvisionNumber (1) and CreateAgent (number + fallback), with room to spare. */
const MESSAGES_POOL_NUMBERS = 10;
const mb = (bytes: number) => fmt(bytes / 1048576, 1);
const round2 = (value: number) => Math.round(value * 100) / 100;
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

/** Every BENCH_… setting (see the top), checked before anything runs. */
function readSettings() {
  const idleScale = numberFromEnv('BENCH_IDLE_SCALE', 10, { integer: true });
  // MESSAGE_RELIST_MS may not go below 1000 ms (30000 ÷ 30).
  if (idleScale > 30) throw new Error(`BENCH_IDLE_SCALE must be a whole number 1-30, got '${idleScale}'`);
  const settings = {
    seconds: numberFromEnv('BENCH_SECONDS', 10),
    warmupSeconds: numberFromEnv('BENCH_WARMUP_SECONDS', 2),
    concurrency: numberFromEnv('BENCH_CONCURRENCY', 16, { integer: true }),
    cryptoSeconds: numberFromEnv('BENCH_CRYPTO_SECONDS', 3),
    maxCodes: numberFromEnv('BENCH_MAX_CODES', 200_000, { integer: true }),
    httpClient: (process.env.BENCH_HTTP_CLIENT?.trim() || 'http') as HttpClientKind,
    messages: numberFromEnv('BENCH_MESSAGES', 300, { integer: true }),
    messageIntervalMs: numberFromEnv('BENCH_MESSAGE_INTERVAL_MS', 20),
    streams: streamCounts(process.env.BENCH_STREAMS),
    streamChannels: numberFromEnv('BENCH_STREAM_CHANNELS', 4, { integer: true }),
    idleInboxes: numberFromEnv('BENCH_IDLE_INBOXES', 200, { integer: true }),
    idleSeconds: numberFromEnv('BENCH_IDLE_SECONDS', scaledEngineIntervals(idleScale).readyRelistMs / 1000),
    idleMessages: numberFromEnv('BENCH_IDLE_MESSAGES', 50, { integer: true }),
    idleScale,
    only: process.env.BENCH_ONLY?.trim() || undefined,
  };
  if (settings.only !== undefined && !['messages', 'provisioning', 'hung-engine', 'start-vs-peer', 'edge-overhead'].includes(settings.only)) {
    throw new Error(`BENCH_ONLY must be messages, provisioning, hung-engine, start-vs-peer or edge-overhead (or unset), got '${settings.only}'`);
  }
  if (settings.httpClient !== 'http' && settings.httpClient !== 'fetch') throw new Error(`BENCH_HTTP_CLIENT must be http or fetch, got '${settings.httpClient}'`);
  return settings;
}

type Settings = ReturnType<typeof readSettings>;

/** BENCH_STREAMS: whole numbers above 0, comma-separated (default 1000,10000). */
function streamCounts(raw: string | undefined): number[] {
  if (raw === undefined || raw.trim() === '') return [1000, 10_000];
  const counts = raw.split(',').map((part) => Number(part.trim()));
  if (counts.some((count) => !Number.isInteger(count) || count <= 0)) throw new Error(`BENCH_STREAMS must be whole numbers above 0, comma-separated, got '${raw}'`);
  return counts;
}

async function main() {
  const settings = readSettings();
  const poolNumbers = numberFromEnv('BENCH_POOL_NUMBERS', poolNumbersFor(settings.seconds, settings.warmupSeconds), { integer: true, min: SETUP_NUMBERS });
  const date = new Date().toISOString();
  const host = machine();
  // Other work on the machine skews everything here; the 1-minute load average shows it.
  const loadAverageAtStart = loadavg()[0]!;

  if (settings.only === 'messages') {
    const lines = await messageFlow(settings, { date, host, loadAverageAtStart });
    process.stdout.write(['', `Message flow benchmark (BENCH_ONLY=messages), ${date}`,
      `node ${host.node}, ${host.platform}, ${host.cpuModel}, ${host.cores} cores; 1-min load average ${round2(loadAverageAtStart)} at start, ${round2(loadavg()[0]!)} at end`,
      '', ...lines, '', `Written to ${MESSAGES_RESULT_FILE}`, ''].join('\n'));
    return;
  }
  if (settings.only === 'hung-engine') {
    const lines = await hungEngineFlow(settings, { date, host, loadAverageAtStart });
    process.stdout.write(['', `A hung engine (BENCH_ONLY=hung-engine), ${date}`,
      `node ${host.node}, ${host.platform}, ${host.cpuModel}, ${host.cores} cores; 1-min load average ${round2(loadAverageAtStart)} at start, ${round2(loadavg()[0]!)} at end`,
      '', ...lines, '', `Written to ${HUNG_ENGINE_RESULT_FILE}`, ''].join('\n'));
    return;
  }
  if (settings.only === 'edge-overhead') {
    process.stdout.write((await edgeOverheadBenchmark(edgeOverheadSettingsFromEnv(), log)).report);
    return;
  }
  if (settings.only === 'start-vs-peer') {
    process.stdout.write((await startVsPeerBenchmark(startVsPeerSettingsFromEnv(), log)).report);
    return;
  }
  if (settings.only === 'provisioning') {
    const { lines } = await provisioningFlow(settings, poolNumbers, { date, host, loadAverageAtStart });
    process.stdout.write(['', `gRPC provisioning benchmark (BENCH_ONLY=provisioning), ${date}`,
      `node ${host.node}, ${host.platform}, ${host.cpuModel}, ${host.cores} cores; 1-min load average ${round2(loadAverageAtStart)} at start, ${round2(loadavg()[0]!)} at end`,
      '', ...lines, '', `Written to ${PROVISIONING_RESULT_FILE}`, ''].join('\n'));
    return;
  }

  // Crypto first, while nothing else runs on the machine.
  const crypto = await cryptoBenchmarks(settings.cryptoSeconds, log);
  // Lambda bundles: size and cold module-load time (prints its own table, writes lambda-bundles.json).
  await lambdaBundleBenchmarks({ log });

  // The token endpoint beside node-oidc-provider, then the sign-in runs on the same runner (hot-paths.ts).
  const hotPaths = await hotPathBenchmarks(settings, log);
  const signin = hotPaths.signin;

  const provisioningRun = await provisioningFlow(settings, poolNumbers, { date, host, loadAverageAtStart });
  const messageLines = await messageFlow(settings, { date, host, loadAverageAtStart });

  const runs: Array<[string, LoadResult]> = [
    ['POST /oauth/token (authorization_code)', signin.codeExchange],
    ['POST /oauth/token (refresh_token)', signin.refresh],
    ['GET /oauth/userinfo', signin.userinfo],
    ['GET /oauth/authorize (session → code)*', signin.authorizeWithSession],
  ];
  const loadAverage = { start: round2(loadAverageAtStart), end: round2(loadavg()[0]!) };
  const failedRequests = runs.reduce((sum, [, run]) => sum + run.errors + run.warmupErrors, 0);

  const result = {
    benchmark: 'signin',
    date,
    ...host,
    settings: { ...settings, httpClient: signin.httpClient },
    loadAverage,
    /** Failed requests over all HTTP runs, warm-ups included (each run has its own count). */
    failedRequests,
    http: {
      server: 'local runner (local/runner.ts) in a separate process: embedded dynalite, local Ed25519 key',
      authorizeWithSession: { description: 'GET /oauth/authorize, signed-in session, consent remembered → 302 with code (minting the code pool; runs until the pool is full)', ...signin.authorizeWithSession },
      codeExchange: { description: 'POST /oauth/token grant_type=authorization_code, one fresh code per request', ...signin.codeExchange },
      refresh: { description: 'POST /oauth/token grant_type=refresh_token, tokens reused round-robin', ...signin.refresh },
      userinfo: { description: 'GET /oauth/userinfo with one Bearer access token', ...signin.userinfo },
    },
    crypto: { description: 'in-process, one operation at a time, on the bench process', ...crypto },
  };
  await writeJson(RESULT_FILE, result);

  const exchange = signin.codeExchange;
  const out = [
    '',
    `Sign-in, provisioning and message flow benchmark, ${date}`,
    `node ${host.node}, ${host.platform}, ${host.cpuModel}, ${host.cores} cores; 1-min load average ${loadAverage.start} at start, ${loadAverage.end} at end`,
    '',
    `HTTP: local runner in a child process; concurrency ${settings.concurrency}, ${settings.seconds} s per run after ${settings.warmupSeconds} s warm-up; client ${signin.httpClient}`,
    table(loadHeaders, runs.map(([name, run]) => loadRow(name, run))),
    `  codes: ${exchange.codes.generated} minted; used ${exchange.codes.usedWarmup} in warm-up + ${exchange.codes.usedTimed} timed`
      + `${exchange.exhausted ? ` (pool ran out after ${exchange.seconds} s)` : ' (pool not exhausted)'}; timed pool minted ${exchange.codes.poolAgeSeconds} s before the run`,
    `  refresh: ${signin.refresh.refreshTokens} refresh tokens reused round-robin`,
    `  * authorize: minting the code pool (${signin.authorizeWithSession.count} requests until full, not a fixed duration)`,
    '  CPU srv/gen: server process (runner + dynalite) / load generator, percent of one core during the measured run',
    ...(failedRequests > 0 ? [`  WARNING: ${failedRequests} requests failed (included in the counts and latencies above):`, ...errorLines(runs)] : []),
    '',
    ...provisioningRun.lines,
    '',
    ...messageLines,
    '',
    `In-process crypto (bench process, sequential, ${settings.cryptoSeconds} s each; message = access token signing input, ${crypto.messageBytes} bytes)`,
    table(opsHeaders, [
      opsRow('Ed25519 sign (node:crypto)', crypto.ed25519Sign),
      opsRow('Ed25519 verify (node:crypto)', crypto.ed25519Verify),
      opsRow('JWT sign (core/oauth/tokens.ts createTokenIssuer, local keys)', crypto.jwtSign),
      opsRow('JWT verify (jose jwtVerify, local JWKS)', crypto.joseJwtVerify),
      opsRow('access token verifier (core/oauth/tokens.ts), first use of a token', crypto.accessTokenFirstUse),
      opsRow('access token verifier, a token it verified before (kept)', crypto.accessTokenRepeatUse),
    ]),
    '',
    `Written to ${RESULT_FILE}, ${PROVISIONING_RESULT_FILE} and ${MESSAGES_RESULT_FILE}`,
    '',
  ];
  process.stdout.write(hotPaths.report);
  process.stdout.write(out.join('\n'));
}

/** The gRPC provisioning API (provisioning.ts) on a fresh runner with a seeded pool: writes provisioning.json, returns its lines of the printed report. */
async function provisioningFlow(settings: Settings, poolNumbers: number, context: { date: string; host: ReturnType<typeof machine>; loadAverageAtStart: number }) {
  log(`starting a fresh local runner for the provisioning API; seeding ${poolNumbers} numbers into the pool before it is ready`);
  const grpcServer = await startBenchServer({ poolNumbers });
  const seeded = grpcServer.info.provisioning.pool;
  log(`server ${grpcServer.info.issuer}, gRPC port ${grpcServer.info.grpcPort} (pid ${grpcServer.info.pid}); seeded ${seeded.added} numbers in ${seeded.seconds} s`);
  const provisioning = await provisioningBenchmarks(grpcServer.info, {
    concurrency: settings.concurrency, seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, log, signal: grpcServer.died,
    storeCounters: async () => (await grpcServer.stats()).store,
  });
  await grpcServer.stop();
  const rpcRuns: Array<[string, RpcLoadResult]> = [
    ['MaskService.CreateMask', provisioning.createMask],
    ['AgentService.IssueAgentToken', provisioning.issueAgentToken],
    ['AgentService.ExchangeToken', provisioning.exchangeToken],
  ];
  const failedCalls = rpcRuns.reduce((sum, [, run]) => sum + run.errors + run.warmupErrors, 0);
  const pool = provisioning.pool;
  const loadAverage = { start: round2(context.loadAverageAtStart), end: round2(loadavg()[0]!) };
  await writeJson(PROVISIONING_RESULT_FILE, {
    benchmark: 'provisioning',
    date: context.date,
    ...context.host,
    settings: { seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, concurrency: settings.concurrency, poolNumbers },
    loadAverage,
    /** Calls that ended in a non-OK status (or failed otherwise) over all runs, warm-ups included. */
    failedCalls,
    grpc: {
      server: 'local runner (local/runner.ts) in a separate process, fresh for these runs: embedded dynalite, local Ed25519 key; gRPC on 127.0.0.1',
      channel: provisioning.channel,
      pool: { description: 'numbers seeded through the core (provisioning.lifecycle.seed) before the server reported ready; CreateMask takes one per OK call', ...pool },
      createMask: { description: 'MaskService.CreateMask, ttl 3600 s, participant pairs round-robin; each OK call leases a number from the pool', ...provisioning.createMask },
      issueAgentToken: { description: 'AgentService.IssueAgentToken for one independent agent created at setup', ...provisioning.issueAgentToken },
      exchangeToken: { description: 'AgentService.ExchangeToken (RFC 8693): subject = a programmable number (svcnum-id token type), actor = the agent\'s access token from IssueAgentToken', ...provisioning.exchangeToken },
    },
  });
  const lines = [
    `gRPC provisioning API: a fresh local runner in a child process; ${settings.concurrency} unary calls in flight over ONE shared grpc-js channel per service client`
      + ` (one HTTP/2 connection each, calls multiplexed as streams); ${settings.seconds} s per run after ${settings.warmupSeconds} s warm-up`,
    table(rpcHeaders, rpcRuns.map(([name, run]) => loadRow(name, run))),
    `  pool: ${seeded.added.toLocaleString('en-US')} numbers seeded through the core before the server was ready, in ${seeded.seconds} s`
      + ` (${seeded.numbersPerSecond.toLocaleString('en-US')}/s, ${seeded.concurrency} ranges at once${seeded.skipped ? `, ${seeded.skipped} already there` : ''})`,
    `  pool use: ${pool.usedSetup} at setup + ${pool.usedWarmup.toLocaleString('en-US')} in CreateMask warm-up + ${pool.usedTimed.toLocaleString('en-US')} timed; ${pool.left.toLocaleString('en-US')} left`
      + (pool.ranDry ? ' — RAN DRY: CreateMask failed with an empty pool (raise BENCH_POOL_NUMBERS)' : ' (never ran dry)'),
    ...(provisioning.createMask.storeCallsPerCall ? [
      `  store round trips per OK CreateMask (timed run): ${provisioning.createMask.storeCallsPerCall.calls} (${Object.entries(provisioning.createMask.storeCallsPerCall.byMethod).map(([method, calls]) => `${method} ${calls}`).join(', ')})`,
    ] : []),
    '  errors: calls that ended in a non-OK gRPC status, by status name',
    ...(failedCalls > 0 ? [
      `  WARNING: ${failedCalls} calls failed (included in the counts and latencies above):`,
      ...errorLines(rpcRuns),
      ...rpcRuns.flatMap(([name, run]) => Object.entries(run.errorSamples).map(([code, details]) => `    ${name} ${code}: "${details}"`)),
    ] : []),
  ];
  return { lines, failedCalls };
}

/** Sends and ProvisionNumber with the engine healthy, then SIGSTOPped (hung-engine.ts), on a fresh runner and redis-server: writes hung-engine.json. */
async function hungEngineFlow(settings: Settings, context: { date: string; host: ReturnType<typeof machine>; loadAverageAtStart: number }): Promise<string[]> {
  const redis = await startRedis();
  onCleanup(() => redis.stop());
  log(`starting a fresh local runner publishing wake-ups to ${redis.url}`);
  const server = await startBenchServer({ poolNumbers: hungEnginePoolNumbers(settings.seconds, settings.warmupSeconds), engineUrl: redis.url });
  const result = await hungEngineBenchmarks(server.info, redis, { seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, concurrency: settings.concurrency, log, signal: server.died });
  await server.stop();
  await redis.stop();
  await writeJson(HUNG_ENGINE_RESULT_FILE, {
    benchmark: 'hung-engine', date: context.date, ...context.host,
    settings: { seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, concurrency: settings.concurrency },
    loadAverage: { start: round2(context.loadAverageAtStart), end: round2(loadavg()[0]!) },
    server: 'local runner (local/runner.ts) in a child process, publishing wake-ups to a redis-server that is stopped with SIGSTOP for the second half',
    ...result,
  });
  return hungEngineLines(result);
}

/** The message flow (messages.ts) on a fresh runner and redis-server: writes messages.json, returns its lines of the printed report. */
async function messageFlow(settings: Settings, context: { date: string; host: ReturnType<typeof machine>; loadAverageAtStart: number }): Promise<string[]> {
  // The pub/sub engine of the idle-reads phase: the runner publishes every message to it (its own
  // streams are woken in-process all the same; P2 subscribes to it; P2b and P3 have no engine and poll).
  const redis = await startRedis();
  onCleanup(() => redis.stop());
  log(`starting a fresh local runner for the message flow, publishing wake-ups to ${redis.url}`);
  const messagesServer = await startBenchServer({ poolNumbers: MESSAGES_POOL_NUMBERS + settings.idleInboxes, engineUrl: redis.url });
  log(`server ${messagesServer.info.issuer}, gRPC port ${messagesServer.info.grpcPort} (pid ${messagesServer.info.pid})`);
  const messages = await messageBenchmarks(messagesServer, {
    seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, concurrency: settings.concurrency,
    messages: settings.messages, intervalMs: settings.messageIntervalMs, streams: settings.streams, streamChannels: settings.streamChannels,
    engineUrl: redis.url, idleInboxes: settings.idleInboxes, idleSeconds: settings.idleSeconds, idleMessages: settings.idleMessages,
    idleScale: settings.idleScale, log, signal: messagesServer.died,
  });
  await messagesServer.stop();
  await redis.stop();

  const latency = messages.latency;
  const rate = messages.throughput;
  const manyRuns = messages.streams;
  const many = manyRuns[0]!;
  const idle = messages.idleReads;
  const pollDesign = 'each process with open streams runs one MessageHub: one strongly consistent BatchGetItem per 100 distinct watched inboxes every 250 ms'
    + ' (4 per second per 100 inboxes, 1 read unit per inbox per poll), whatever the number of streams or messages; a message wakes only the streams watching its inbox,'
    + ' and each woken stream reads each of its inboxes from its cursor (one Query per inbox)';
  const clocks = 'send → receipt is measured in the bench process on one monotonic clock (performance.now(): the POST start and the stream\'s data event), so no clocks are compared;'
    + ' create_time → receipt compares the accepting process\'s Date.now() (ms, taken before the DynamoDB put) with performance.timeOrigin + performance.now() here: the same system clock of one machine';
  const loadAverage = { start: round2(context.loadAverageAtStart), end: round2(loadavg()[0]!) };
  await writeJson(MESSAGES_RESULT_FILE, {
    benchmark: 'messages',
    date: context.date,
    ...context.host,
    settings: {
      seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, concurrency: settings.concurrency,
      messages: settings.messages, messageIntervalMs: settings.messageIntervalMs, streams: settings.streams, streamChannels: settings.streamChannels,
    },
    loadAverage,
    processes: {
      p1: 'local runner (local/runner.ts) in a child process, fresh for these runs: HTTP ingress (POST /api/messages), embedded dynalite, local Ed25519 key, its own gRPC server',
      p2: `gRPC server process (pid ${messages.setup.p2Pid}): core against P1's dynalite, P1's keys and issuer, startGrpcServer(core, { port: 0 }), subscribed to the redis-server P1 publishes to — the cross-process stream`,
      p2b: `the same without the engine (pid ${messages.setup.p2bPid}): it polls the inbox counters every 250 ms — the cross-process stream as it was before the engine`,
      p3: `a fresh process of the same kind for each count of streams (pids ${messages.setup.p3Pids.join(', ')}) — the ${manyRuns.map((run) => run.streams).join(' and ')} streams`,
    },
    clocks,
    setup: messages.setup,
    latency: {
      description: `${settings.messages} messages, one every ${settings.messageIntervalMs} ms (open loop), POST start → receipt on StreamAllMessages, after ${WARMUP_MESSAGES} unmeasured messages; the stream resumes from the previous run's last cursor`,
      sameProcess: { description: 'stream on P1, messages accepted by P1: woken by P1\'s in-process notifier', ...latency.sameProcess },
      crossProcess: { description: 'stream on P2, messages accepted by P1: woken through the engine (P1 publishes, P2 subscribes)', ...latency.crossProcess },
      crossProcessPolling: { description: 'stream on P2b, messages accepted by P1: woken by P2b\'s poll of the inbox counters (250 ms)', ...latency.crossProcessPolling },
    },
    throughput: {
      description: `${settings.concurrency} senders in a closed loop into ONE stream for ${settings.seconds} s after ${settings.warmupSeconds} s warm-up; received/s counts receipts up to the end of the ingress window`,
      sameProcess: { description: 'stream on P1, ingress P1', ...rate.sameProcess },
      crossProcess: { description: 'stream on P2 (engine), ingress P1', ...rate.crossProcess },
      crossProcessPolling: { description: 'stream on P2b (polling), ingress P1', ...rate.crossProcessPolling },
    },
    streams: manyRuns.map((run) => ({
      description: `${run.streams} concurrent StreamAllMessages calls (one owner, one programmable number) from the bench over ${run.channels} channels to a fresh P3; memory of P3 after a full GC (child runs with --expose-gc and the gRPC image's NODE_OPTIONS)`,
      ...run,
      polling: { design: pollDesign, ...run.polling },
    })),
    ...(idle ? {
      idleReads: {
        description: `store items read by a stream process (bench/store-counters.ts itemsRead: keys a BatchGetItem asks for, items a Query or get returns, 1 for one that finds none)`
          + ` with one stream of the owner watching ${idle.inboxes} inboxes, over ${idle.withEngine.windowSeconds} s with nothing arriving, per watched inbox per minute;`
          + ` then ${settings.idleMessages} messages one every ${settings.messageIntervalMs} ms to one inbox: items read per delivered message.`
          + ' P4: no engine, default intervals (polls every MESSAGE_POLL_INTERVAL_MS, re-lists every MESSAGE_RELIST_MS); P5: VALKEY_URL (a redis-server on loopback, the runner publishes to it)'
          + ` with MESSAGE_SAFETY_POLL_MS, MESSAGE_RELIST_MS and MESSAGE_ENGINE_LOST_POLL_MS at their defaults ÷ ${settings.idleScale} (BENCH_IDLE_SCALE): its per-minute figures are measured ÷ ${settings.idleScale},`
          + ' i.e. at the default intervals (every idle read is a timer\'s: the safety-net poll and the re-list); measuredItemReadsPerIdleInboxPerMinute is the figure as measured',
        ...idle,
      },
    } : {}),
    strayMessages: messages.strayMessages,
  });

  const dist = (value: Distribution) => `${fmt(value.p50, 1)} / ${fmt(value.p99, 1)}`;
  const latencyRow = (name: string, run: typeof latency.sameProcess) => [
    name, fmt(run.received), fmt(run.sendToReceipt.p50, 1), fmt(run.sendToReceipt.p90, 1), fmt(run.sendToReceipt.p99, 1), fmt(run.sendToReceipt.max, 1),
    dist(run.sendToAccepted), dist(run.createTimeToReceipt), fmt(run.streamProcess.streamQueriesPerMessage, 2), fmt(run.missing), fmt(run.duplicates),
    `${run.cpu.ingressPercent ?? '?'}% / ${run.cpu.streamPercent ?? '?'}% / ${run.cpu.benchPercent}%`,
  ];
  const rateRow = (name: string, run: typeof rate.sameProcess) => [
    name, fmt(run.accepted), fmt(run.acceptedPerSecond, 1), fmt(run.receivedPerSecond, 1), `${fmt(run.ingress.p50, 1)} / ${fmt(run.ingress.p99, 1)}`,
    dist(run.lag), fmt(run.lag.max, 1), `${dist(run.lagAfterAccepted)} / ${fmt(run.lagAfterAccepted.max, 1)}`, fmt(run.maxBacklog), fmt(run.drainMs, 0),
    fmt(run.streamProcess.streamQueriesPerMessage, 2), fmt(run.ingress.errors + run.missing),
    `${run.ingress.cpu.serverPercent ?? '?'}% / ${run.streamCpuPercent ?? '?'}% / ${run.ingress.cpu.loadGeneratorPercent}%`,
  ];
  const streamsRow = (run: typeof many) => [
    fmt(run.streams), `${fmt(run.live)} in ${fmt(run.openSeconds, 1)} s`, mb(run.memory.before.rss), mb(run.memory.open.rss), mb(run.memory.closed.rss),
    `${mb(run.memory.open.heapUsed)} / ${mb(run.memory.open.heapTotal)}`, fmt(run.memory.perStream.rss / 1024, 1), fmt(run.memory.perStream.heapUsed / 1024, 1),
    `${fmt(run.fanOut.p50, 1)} / ${fmt(run.fanOut.p99, 1)} / ${fmt(run.fanOut.max, 1)}`, fmt(run.fanOut.streamQueries),
  ];
  const streamErrors = manyRuns.flatMap((run) => Object.entries(run.streamErrors).map(([kind, count]) => [`${kind} (of ${fmt(run.streams)})`, count] as const));
  const messageProblems = [
    ...[['same process', latency.sameProcess], ['across processes', latency.crossProcess], ['across processes, polling', latency.crossProcessPolling]].flatMap(([name, run]) => {
      const result = run as typeof latency.sameProcess;
      return Object.keys(result.errorKinds).length ? [`  WARNING: latency ${name as string}: POSTs failed: ${JSON.stringify(result.errorKinds)}`] : [];
    }),
    ...errorLines([['rate, same process', rate.sameProcess.ingress], ['rate, across processes', rate.crossProcess.ingress], ['rate, across processes, polling', rate.crossProcessPolling.ingress]]),
    ...(streamErrors.length ? [`  WARNING: streams failed: ${streamErrors.map(([kind, count]) => `${kind} ×${count}`).join(', ')}`] : []),
    ...manyRuns.filter((run) => run.live < run.streams).map((run) => `  WARNING: only ${run.live} of ${run.streams} streams received the readiness probe`),
    ...(messages.strayMessages ? [`  WARNING: ${messages.strayMessages} stream messages belonged to no run`] : []),
  ];

  return [
    `Message flow: POST /api/messages on the runner (P1) → StreamAllMessages; P2 (subscribed to P1's engine), P2b (no engine, polls), P3: gRPC server processes on P1's DynamoDB; one owner, one programmable number, one sending agent`,
    `Delivery latency: ${settings.messages} messages, one every ${settings.messageIntervalMs} ms (achieved ${[latency.sameProcess, latency.crossProcess, latency.crossProcessPolling].map((run) => `${fmt(run.sendRatePerSecond, 1)}/s`).join(', ')}), POST start → receipt on the stream, ms`,
    table(['path', 'received', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'POST→202 p50/p99', 'created→recv p50/p99', 'reads/msg', 'missing', 'dup', 'CPU in/stream/gen'], [
      latencyRow('same process (P1 notifier)', latency.sameProcess),
      latencyRow('across processes (P2 engine)', latency.crossProcess),
      latencyRow('across processes (P2b polls)', latency.crossProcessPolling),
    ]),
    `  clocks: ${clocks}`,
    '  reads/msg: inbox Queries the streaming process made per message (store counters in the child); CPU in/stream/gen: P1 / streaming process / bench, percent of one core',
    `  received before their own 202: ${latency.sameProcess.receivedBeforeResponse} (same process), ${latency.crossProcess.receivedBeforeResponse} (across processes), ${latency.crossProcessPolling.receivedBeforeResponse} (polling)`,
    '',
    `Sustained rate into ONE stream: ${settings.concurrency} senders, closed loop, ${settings.seconds} s after ${settings.warmupSeconds} s warm-up; lag = POST start → receipt`,
    table(['path', 'accepted', 'accepted/s', 'received/s', 'POST p50/p99 ms', 'lag p50/p99 ms', 'max lag ms', '202→recv p50/p99/max', 'max backlog', 'drain ms', 'reads/msg', 'errors', 'CPU in/stream/gen'], [
      rateRow('same process', rate.sameProcess),
      rateRow('across (engine)', rate.crossProcess),
      rateRow('across (polls)', rate.crossProcessPolling),
    ]),
    '  received/s: receipts up to the end of the ingress window; drain: from its end until the last message arrived; backlog: accepted (202) but not yet received;',
    '  202→recv: how far the stream trails the ingress (negative: received before the POST\'s 202 reached the bench)',
    ...[['same process', rate.sameProcess], ['across processes (engine)', rate.crossProcess], ['across processes (polls)', rate.crossProcessPolling]].map(([name, run]) =>
      `  store calls of P1 per accepted message, ${name as string}: ${Object.entries((run as typeof rate.sameProcess).ingressCallsPerMessage).map(([method, perMessage]) => `${method} ${fmt(perMessage, 2)}`).join(', ')}`),
    '',
    `Open streams on one gRPC server process (P3, a fresh one per row, with the gRPC image's NODE_OPTIONS ${grpcImageNodeOptions() || '(none)'}), from the bench over ${many.channels} channels; memory after a full GC`,
    table(['streams', 'live after', 'RSS none MB', 'RSS open MB', 'RSS closed MB', 'heap used/total MB', 'RSS/stream KB', 'heap/stream KB', 'fan-out p50/p99/last ms', 'Queries'], manyRuns.map(streamsRow)),
    '  none/open/closed: P3 before the streams, with all open, after all closed; per stream: (open − none) / streams; fan-out: one message (polling path) to every open stream,'
      + ' POST start → receipt; Queries: inbox Queries P3 made for it (one per stream)',
    `  polling while idle (${fmt(many.streams)} streams): the hub watches ${many.polling.watchedInboxes} inbox(es); measured ${fmt(many.polling.pollsPerSecond, 2)} polls/s = ${fmt(many.polling.batchGetItemsPerSecond, 2)} BatchGetItem/s`
      + ` (${fmt(many.polling.idsPerPoll, 1)} ids each), ${fmt(many.polling.streamQueriesPerSecond, 2)} stream Queries/s`,
    `  design: ${pollDesign}`,
    ...(idle ? [
      '',
      `Store item reads of idle watched inboxes: one owner, ${idle.inboxes} numbers, one stream per process watching all of them; idle ${fmt(idle.withEngine.windowSeconds, 1)} s, then ${settings.idleMessages} messages to one inbox`,
      table(['stream process', 'watched', 'poll / re-list ms', 'intervals', 'polls / listing pages', 'item reads / idle inbox / min', 'of which (by store method)', 'item reads / delivered msg', 'without polls', 'inbox Queries / delivered msg', 'delivered'], (
        [['without engine (P4 polls)', idle.withoutEngine], ['with engine (P5, redis-server)', idle.withEngine]] as const).map(([name, mode]) => [
        name, fmt(mode.watchedInboxes), `${fmt(mode.pollIntervalMs)} / ${fmt(mode.relistIntervalMs)}`, mode.intervalScale === 1 ? 'defaults' : `defaults ÷ ${mode.intervalScale}`,
        `${fmt(mode.polls)} / ${fmt(mode.listingPages)}`, fmt(mode.itemReadsPerIdleInboxPerMinute, 2),
        Object.entries(mode.byMethodPerIdleInboxPerMinute).map(([method, value]) => `${method} ${fmt(value, 2)}`).join(', ') || '-',
        fmt(mode.itemReadsPerDeliveredMessage, 2), fmt(mode.itemReadsPerDeliveredMessageWithoutPolls, 2), fmt(mode.streamQueriesPerDeliveredMessage, 2), fmt(mode.delivered),
      ])),
      `  SCALED: P5 ran with every interval divided by ${settings.idleScale} (BENCH_IDLE_SCALE; safety-net poll ${fmt(idle.withEngine.pollIntervalMs)} ms, re-list ${fmt(idle.withEngine.relistIntervalMs)} ms),`
        + ` so its window holds what ${fmt(idle.withEngine.windowSeconds * settings.idleScale / 60, 1)} min hold at the defaults; its reads per minute are the measured ${fmt(idle.withEngine.measuredItemReadsPerIdleInboxPerMinute, 2)} ÷ ${settings.idleScale}, at the default intervals (90 s, 15 min)`,
      ...(idle.withEngine.windowSeconds * 1000 < idle.withEngine.relistIntervalMs
        ? [`  WARNING: the window (${fmt(idle.withEngine.windowSeconds, 1)} s) is shorter than P5's re-list period: the listing's share may be missing (raise BENCH_IDLE_SECONDS)`] : []),
      `  item reads per delivered message by store method: ${([['P4', idle.withoutEngine], ['P5', idle.withEngine]] as const)
        .map(([name, mode]) => `${name} ${Object.entries(mode.deliveredByMethod).map(([method, value]) => `${method} ${fmt(value, 2)}`).join(', ') || '-'}`).join('; ')}`,
      '  P4 ran at the default intervals (250 ms poll, 30 s re-list), unscaled. Items read: keys a BatchGetItem asks for, items a Query or get returns (1 for one that finds none);',
      '  inboxHeads = the hub\'s polls, listOwned = the stream\'s re-list of the owner\'s numbers, readInbox = the stream\'s reads; "without polls": the hub\'s counter polls left out (timer-driven, the idle cost above)',
    ] : []),
    ...messageProblems,
  ];
}

cleanupOnSignals();
try {
  await main();
} catch (error) {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await runCleanup();
}
