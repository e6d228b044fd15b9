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
// DynamoDB (see messages/run.ts).
// To add a benchmark: a module that returns plain results (see load.ts `runLoad`, crypto.ts
// `measureSync`/`measureAsync`), called below, with its rows added to the tables and the JSON.

process.env.LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { benchLog, onCleanup, runAsScript } from './cleanup';
import { cryptoBenchmarks } from './crypto';
import { lambdaBundleBenchmarks } from './lambda-bundles';
import { scaledEngineIntervals } from './messages/idle-reads';
import { MESSAGES_RESULT_FILE, messageFlow } from './messages/report';
import type { HttpClientKind } from './http-client';
import type { LoadResult } from './load';
import { poolNumbersFor, provisioningBenchmarks, SETUP_NUMBERS, type RpcLoadResult } from './provisioning';
import {
  errorLines,
  loadHeaders,
  loadRow,
  machine,
  numberFromEnv,
  opsHeaders,
  opsRow,
  rpcHeaders,
  table,
  writeJson,
} from './report';
import { hotPathBenchmarks } from './hot-paths';
import { startBenchServer } from './server-process';
import { edgeOverheadBenchmark, edgeOverheadSettingsFromEnv } from './edge-overhead';
import { startVsPeerBenchmark, startVsPeerSettingsFromEnv } from './start-vs-peer';
import { hungEngineBenchmarks, hungEngineLines, hungEnginePoolNumbers } from './hung-engine';
import { startRedis } from '../test/support/redis';

const RESULT_FILE = fileURLToPath(new URL('./results/signin.json', import.meta.url));
const PROVISIONING_RESULT_FILE = fileURLToPath(new URL('./results/provisioning.json', import.meta.url));
const HUNG_ENGINE_RESULT_FILE = fileURLToPath(new URL('./results/hung-engine.json', import.meta.url));
const round2 = (value: number) => Math.round(value * 100) / 100;
const log = benchLog;

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
  if (
    settings.only !== undefined &&
    !['messages', 'provisioning', 'hung-engine', 'start-vs-peer', 'edge-overhead'].includes(settings.only)
  ) {
    throw new Error(
      `BENCH_ONLY must be messages, provisioning, hung-engine, start-vs-peer or edge-overhead (or unset), got ` +
        `'${settings.only}'`,
    );
  }
  if (settings.httpClient !== 'http' && settings.httpClient !== 'fetch')
    throw new Error(`BENCH_HTTP_CLIENT must be http or fetch, got '${settings.httpClient}'`);
  return settings;
}

type Settings = ReturnType<typeof readSettings>;

/** BENCH_STREAMS: whole numbers above 0, comma-separated (default 1000,10000). */
function streamCounts(raw: string | undefined): number[] {
  if (raw === undefined || raw.trim() === '') return [1000, 10_000];
  const counts = raw.split(',').map((part) => Number(part.trim()));
  if (counts.some((count) => !Number.isInteger(count) || count <= 0))
    throw new Error(`BENCH_STREAMS must be whole numbers above 0, comma-separated, got '${raw}'`);
  return counts;
}

type RunContext = { date: string; host: ReturnType<typeof machine>; loadAverageAtStart: number };

/** The header every printed report starts with: what ran, when, on which machine, under which load. */
function reportHeader(title: string, context: RunContext): string[] {
  const { host } = context;
  const load = `1-min load average ${round2(context.loadAverageAtStart)} at start, ${round2(loadavg()[0]!)} at end`;
  return [
    '',
    `${title}, ${context.date}`,
    `node ${host.node}, ${host.platform}, ${host.cpuModel}, ${host.cores} cores; ${load}`,
    '',
  ];
}

/** BENCH_ONLY: one phase, its lines and the file it wrote. */
async function onePhase(settings: Settings, poolNumbers: number, context: RunContext): Promise<void> {
  // These two print their own reports and write their own files.
  if (settings.only === 'edge-overhead') {
    process.stdout.write((await edgeOverheadBenchmark(edgeOverheadSettingsFromEnv(), log)).report);
    return;
  }
  if (settings.only === 'start-vs-peer') {
    process.stdout.write((await startVsPeerBenchmark(startVsPeerSettingsFromEnv(), log)).report);
    return;
  }
  const phases = {
    messages: async () => ({
      title: 'Message flow benchmark (BENCH_ONLY=messages)',
      lines: await messageFlow(settings, { ...context, log }),
      file: MESSAGES_RESULT_FILE,
    }),
    'hung-engine': async () => ({
      title: 'A hung engine (BENCH_ONLY=hung-engine)',
      lines: await hungEngineFlow(settings, context),
      file: HUNG_ENGINE_RESULT_FILE,
    }),
    provisioning: async () => ({
      title: 'gRPC provisioning benchmark (BENCH_ONLY=provisioning)',
      lines: (await provisioningFlow(settings, poolNumbers, context)).lines,
      file: PROVISIONING_RESULT_FILE,
    }),
  };
  const { title, lines, file } = await phases[settings.only as keyof typeof phases]();
  process.stdout.write([...reportHeader(title, context), ...lines, '', `Written to ${file}`, ''].join('\n'));
}

async function main() {
  const settings = readSettings();
  const poolNumbers = numberFromEnv('BENCH_POOL_NUMBERS', poolNumbersFor(settings.seconds, settings.warmupSeconds), {
    integer: true,
    min: SETUP_NUMBERS,
  });
  // Other work on the machine skews everything here; the 1-minute load average shows it.
  const context: RunContext = { date: new Date().toISOString(), host: machine(), loadAverageAtStart: loadavg()[0]! };
  if (settings.only) return onePhase(settings, poolNumbers, context);

  // Crypto first, while nothing else runs on the machine.
  const crypto = await cryptoBenchmarks(settings.cryptoSeconds, log);
  // Lambda bundles: size and cold module-load time (prints its own table, writes lambda-bundles.json).
  await lambdaBundleBenchmarks({ log });
  // The token endpoint beside node-oidc-provider, then the sign-in runs on the same runner (hot-paths.ts).
  const hotPaths = await hotPathBenchmarks(settings, log);
  const provisioningRun = await provisioningFlow(settings, poolNumbers, context);
  const messageLines = await messageFlow(settings, { ...context, log });
  const signinLines = await signinReport(settings, hotPaths.signin, crypto, context);
  process.stdout.write(hotPaths.report);
  process.stdout.write(
    [
      ...reportHeader('Sign-in, provisioning and message flow benchmark', context),
      ...signinLines.http,
      '',
      ...provisioningRun.lines,
      '',
      ...messageLines,
      '',
      ...signinLines.crypto,
      '',
      `Written to ${RESULT_FILE}, ${PROVISIONING_RESULT_FILE} and ${MESSAGES_RESULT_FILE}`,
      '',
    ].join('\n'),
  );
}

type HotPaths = Awaited<ReturnType<typeof hotPathBenchmarks>>;

/** The sign-in runs and the in-process crypto: writes signin.json, returns their lines of the printed report. */
async function signinReport(
  settings: Settings,
  signin: HotPaths['signin'],
  crypto: Awaited<ReturnType<typeof cryptoBenchmarks>>,
  context: RunContext,
) {
  const runs: Array<[string, LoadResult]> = [
    ['POST /oauth/token (authorization_code)', signin.codeExchange],
    ['POST /oauth/token (refresh_token)', signin.refresh],
    ['GET /oauth/userinfo', signin.userinfo],
    ['GET /oauth/authorize (session → code)*', signin.authorizeWithSession],
  ];
  const failedRequests = runs.reduce((sum, [, run]) => sum + run.errors + run.warmupErrors, 0);
  await writeJson(RESULT_FILE, {
    benchmark: 'signin',
    date: context.date,
    ...context.host,
    settings: { ...settings, httpClient: signin.httpClient },
    loadAverage: { start: round2(context.loadAverageAtStart), end: round2(loadavg()[0]!) },
    /** Failed requests over all HTTP runs, warm-ups included (each run has its own count). */
    failedRequests,
    http: {
      server: 'local runner (local/runner.ts) in a separate process: embedded dynalite, local Ed25519 key',
      authorizeWithSession: {
        description:
          'GET /oauth/authorize, signed-in session, consent remembered → 302 with code (minting the code pool; ' +
          'runs until the pool is full)',
        ...signin.authorizeWithSession,
      },
      codeExchange: {
        description: 'POST /oauth/token grant_type=authorization_code, one fresh code per request',
        ...signin.codeExchange,
      },
      refresh: {
        description: 'POST /oauth/token grant_type=refresh_token, tokens reused round-robin',
        ...signin.refresh,
      },
      userinfo: { description: 'GET /oauth/userinfo with one Bearer access token', ...signin.userinfo },
    },
    crypto: { description: 'in-process, one operation at a time, on the bench process', ...crypto },
  });
  const exchange = signin.codeExchange;
  const { codes } = exchange;
  const exhausted = exchange.exhausted ? ` (pool ran out after ${exchange.seconds} s)` : ' (pool not exhausted)';
  const http = [
    `HTTP: local runner in a child process; concurrency ${settings.concurrency}, ${settings.seconds} s per run after` +
      ` ${settings.warmupSeconds} s warm-up; client ${signin.httpClient}`,
    table(
      loadHeaders,
      runs.map(([name, run]) => loadRow(name, run)),
    ),
    `  codes: ${codes.generated} minted; used ${codes.usedWarmup} in warm-up + ${codes.usedTimed} timed${exhausted};` +
      ` timed pool minted ${codes.poolAgeSeconds} s before the run`,
    `  refresh: ${signin.refresh.refreshTokens} refresh tokens reused round-robin`,
    `  * authorize: minting the code pool (${signin.authorizeWithSession.count} requests until full, not a fixed ` +
      `duration)`,
    '  CPU srv/gen: server process (runner + dynalite) / load generator, percent of one core during the measured run',
    ...(failedRequests > 0
      ? [
          `  WARNING: ${failedRequests} requests failed (included in the counts and latencies above):`,
          ...errorLines(runs),
        ]
      : []),
  ];
  const cryptoLines = [
    `In-process crypto (bench process, sequential, ${settings.cryptoSeconds} s each; message = access token signing` +
      ` input, ${crypto.messageBytes} bytes)`,
    table(opsHeaders, [
      opsRow('Ed25519 sign (node:crypto)', crypto.ed25519Sign),
      opsRow('Ed25519 verify (node:crypto)', crypto.ed25519Verify),
      opsRow('JWT sign (core/oauth/tokens.ts createTokenIssuer, local keys)', crypto.jwtSign),
      opsRow('JWT verify (jose jwtVerify, local JWKS)', crypto.joseJwtVerify),
      opsRow('access token verifier (core/oauth/tokens.ts), first use of a token', crypto.accessTokenFirstUse),
      opsRow('access token verifier, a token it verified before (kept)', crypto.accessTokenRepeatUse),
    ]),
  ];
  return { http, crypto: cryptoLines };
}

/**
 * The gRPC provisioning API (provisioning.ts) on a fresh runner with a seeded pool: writes provisioning.json, returns
 * its lines of the printed report.
 */
async function provisioningFlow(settings: Settings, poolNumbers: number, context: RunContext) {
  log(
    `starting a fresh local runner for the provisioning API; seeding ${poolNumbers} numbers into the pool before it ` +
      `is ready`,
  );
  const grpcServer = await startBenchServer({ poolNumbers });
  const seeded = grpcServer.info.provisioning.pool;
  log(
    `server ${grpcServer.info.issuer}, gRPC port ${grpcServer.info.grpcPort} (pid ${grpcServer.info.pid}); seeded ` +
      `${seeded.added} numbers in ${seeded.seconds} s`,
  );
  const provisioning = await provisioningBenchmarks(grpcServer.info, {
    concurrency: settings.concurrency,
    seconds: settings.seconds,
    warmupSeconds: settings.warmupSeconds,
    log,
    signal: grpcServer.died,
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
    settings: {
      seconds: settings.seconds,
      warmupSeconds: settings.warmupSeconds,
      concurrency: settings.concurrency,
      poolNumbers,
    },
    loadAverage,
    /** Calls that ended in a non-OK status (or failed otherwise) over all runs, warm-ups included. */
    failedCalls,
    grpc: {
      server:
        'local runner (local/runner.ts) in a separate process, fresh for these runs: embedded dynalite, local ' +
        'Ed25519 key; gRPC on 127.0.0.1',
      channel: provisioning.channel,
      pool: {
        description:
          'numbers seeded through the core (provisioning.lifecycle.seed) before the server reported ready; ' +
          'CreateMask takes one per OK call',
        ...pool,
      },
      createMask: {
        description:
          'MaskService.CreateMask, ttl 3600 s, participant pairs round-robin; each OK call leases a number from the ' +
          'pool',
        ...provisioning.createMask,
      },
      issueAgentToken: {
        description: 'AgentService.IssueAgentToken for one independent agent created at setup',
        ...provisioning.issueAgentToken,
      },
      exchangeToken: {
        description:
          'AgentService.ExchangeToken (RFC 8693): subject = a programmable number (svcnum-id token type), actor = ' +
          "the agent's access token from IssueAgentToken",
        ...provisioning.exchangeToken,
      },
    },
  });
  const lines = [
    `gRPC provisioning API: a fresh local runner in a child process; ${settings.concurrency} unary calls in flight ` +
      `over ONE shared grpc-js channel per service client` +
      ` (one HTTP/2 connection each, calls multiplexed as streams); ${settings.seconds} s per run after ` +
      `${settings.warmupSeconds} s warm-up`,
    table(
      rpcHeaders,
      rpcRuns.map(([name, run]) => loadRow(name, run)),
    ),
    `  pool: ${seeded.added.toLocaleString('en-US')} numbers seeded through the core before the server was ready, ` +
      `in ${seeded.seconds} s` +
      ` (${seeded.numbersPerSecond.toLocaleString('en-US')}/s, ${seeded.concurrency} ranges at once` +
      `${seeded.skipped ? `, ${seeded.skipped} already there` : ''})`,
    `  pool use: ${pool.usedSetup} at setup + ${pool.usedWarmup.toLocaleString('en-US')} in CreateMask warm-up + ` +
      `${pool.usedTimed.toLocaleString('en-US')} timed; ${pool.left.toLocaleString('en-US')} left` +
      (pool.ranDry
        ? ' — RAN DRY: CreateMask failed with an empty pool (raise BENCH_POOL_NUMBERS)'
        : ' (never ran dry)'),
    ...(provisioning.createMask.storeCallsPerCall
      ? [
          `  store round trips per OK CreateMask (timed run): ${provisioning.createMask.storeCallsPerCall.calls} (` +
            `${Object.entries(provisioning.createMask.storeCallsPerCall.byMethod)
              .map(([method, calls]) => `${method} ${calls}`)
              .join(', ')})`,
        ]
      : []),
    '  errors: calls that ended in a non-OK gRPC status, by status name',
    ...(failedCalls > 0
      ? [
          `  WARNING: ${failedCalls} calls failed (included in the counts and latencies above):`,
          ...errorLines(rpcRuns),
          ...rpcRuns.flatMap(([name, run]) =>
            Object.entries(run.errorSamples).map(([code, details]) => `    ${name} ${code}: "${details}"`),
          ),
        ]
      : []),
  ];
  return { lines, failedCalls };
}

/**
 * Sends and ProvisionNumber with the engine healthy, then SIGSTOPped (hung-engine.ts), on a fresh runner and
 * redis-server: writes hung-engine.json.
 */
async function hungEngineFlow(settings: Settings, context: RunContext): Promise<string[]> {
  const redis = await startRedis();
  onCleanup(() => redis.stop());
  log(`starting a fresh local runner publishing wake-ups to ${redis.url}`);
  const server = await startBenchServer({
    poolNumbers: hungEnginePoolNumbers(settings.seconds, settings.warmupSeconds),
    engineUrl: redis.url,
  });
  const result = await hungEngineBenchmarks(server.info, redis, {
    seconds: settings.seconds,
    warmupSeconds: settings.warmupSeconds,
    concurrency: settings.concurrency,
    log,
    signal: server.died,
  });
  await server.stop();
  await redis.stop();
  await writeJson(HUNG_ENGINE_RESULT_FILE, {
    benchmark: 'hung-engine',
    date: context.date,
    ...context.host,
    settings: { seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, concurrency: settings.concurrency },
    loadAverage: { start: round2(context.loadAverageAtStart), end: round2(loadavg()[0]!) },
    server:
      'local runner (local/runner.ts) in a child process, publishing wake-ups to a redis-server that is stopped ' +
      'with SIGSTOP for the second half',
    ...result,
  });
  return hungEngineLines(result);
}

await runAsScript(import.meta.url, main);
