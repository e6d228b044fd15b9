// `npm run bench`: sign-in throughput of the local runner, the gRPC provisioning API, and the
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
//
// Prints tables on stdout (progress on stderr) and writes bench/results/signin.json and
// bench/results/provisioning.json. Sign-in and provisioning each get a fresh server process:
// the provisioning one seeds its pool first, which the sign-in numbers should not pay for.
// To add a benchmark: a module that returns plain results (see load.ts `runLoad`, crypto.ts
// `measureSync`/`measureAsync`), called below, with its rows added to the tables and the JSON.

process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { cleanupOnSignals, runCleanup } from './cleanup';
import { cryptoBenchmarks } from './crypto';
import type { HttpClientKind } from './http-client';
import type { LoadResult } from './load';
import { poolNumbersFor, provisioningBenchmarks, SETUP_NUMBERS, type RpcLoadResult } from './provisioning';
import { errorLines, loadHeaders, loadRow, machine, numberFromEnv, opsHeaders, opsRow, rpcHeaders, table, writeJson } from './report';
import { startBenchServer } from './server-process';
import { signInBenchmarks } from './signin';

const RESULT_FILE = fileURLToPath(new URL('./results/signin.json', import.meta.url));
const PROVISIONING_RESULT_FILE = fileURLToPath(new URL('./results/provisioning.json', import.meta.url));
const round2 = (value: number) => Math.round(value * 100) / 100;
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

async function main() {
  const settings = {
    seconds: numberFromEnv('BENCH_SECONDS', 10),
    warmupSeconds: numberFromEnv('BENCH_WARMUP_SECONDS', 2),
    concurrency: numberFromEnv('BENCH_CONCURRENCY', 16, { integer: true }),
    cryptoSeconds: numberFromEnv('BENCH_CRYPTO_SECONDS', 3),
    maxCodes: numberFromEnv('BENCH_MAX_CODES', 200_000, { integer: true }),
    httpClient: (process.env.BENCH_HTTP_CLIENT?.trim() || 'http') as HttpClientKind,
  };
  const poolNumbers = numberFromEnv('BENCH_POOL_NUMBERS', poolNumbersFor(settings.seconds, settings.warmupSeconds), { integer: true, min: SETUP_NUMBERS });
  if (settings.httpClient !== 'http' && settings.httpClient !== 'fetch') throw new Error(`BENCH_HTTP_CLIENT must be http or fetch, got '${settings.httpClient}'`);
  const date = new Date().toISOString();
  const host = machine();
  // Other work on the machine skews everything here; the 1-minute load average shows it.
  const loadAverageAtStart = loadavg()[0]!;

  // Crypto first, while nothing else runs on the machine.
  const crypto = await cryptoBenchmarks(settings.cryptoSeconds, log);

  log('starting the local runner in a child process');
  const server = await startBenchServer();
  log(`server ${server.info.issuer} (pid ${server.info.pid})`);
  const signin = await signInBenchmarks(server.info, { ...settings, log, signal: server.died });
  await server.stop();

  log(`starting a fresh local runner for the provisioning API; seeding ${poolNumbers} numbers into the pool before it is ready`);
  const grpcServer = await startBenchServer({ poolNumbers });
  const seeded = grpcServer.info.provisioning.pool;
  log(`server ${grpcServer.info.issuer}, gRPC port ${grpcServer.info.grpcPort} (pid ${grpcServer.info.pid}); seeded ${seeded.added} numbers in ${seeded.seconds} s`);
  const provisioning = await provisioningBenchmarks(grpcServer.info, { concurrency: settings.concurrency, seconds: settings.seconds, warmupSeconds: settings.warmupSeconds, log, signal: grpcServer.died });
  await grpcServer.stop();

  const runs: Array<[string, LoadResult]> = [
    ['POST /oauth/token (authorization_code)', signin.codeExchange],
    ['POST /oauth/token (refresh_token)', signin.refresh],
    ['GET /oauth/userinfo', signin.userinfo],
    ['GET /oauth/authorize (session → code)*', signin.authorizeWithSession],
  ];
  const loadAverage = { start: round2(loadAverageAtStart), end: round2(loadavg()[0]!) };
  const failedRequests = runs.reduce((sum, [, run]) => sum + run.errors + run.warmupErrors, 0);
  const rpcRuns: Array<[string, RpcLoadResult]> = [
    ['MaskService.CreateMask', provisioning.createMask],
    ['AgentService.IssueAgentToken', provisioning.issueAgentToken],
    ['AgentService.ExchangeToken', provisioning.exchangeToken],
  ];
  const failedCalls = rpcRuns.reduce((sum, [, run]) => sum + run.errors + run.warmupErrors, 0);
  const pool = provisioning.pool;

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

  await writeJson(PROVISIONING_RESULT_FILE, {
    benchmark: 'provisioning',
    date,
    ...host,
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

  const exchange = signin.codeExchange;
  const out = [
    '',
    `Sign-in and provisioning benchmark, ${date}`,
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
    `gRPC provisioning API: a fresh local runner in a child process; ${settings.concurrency} unary calls in flight over ONE shared grpc-js channel per service client`
      + ` (one HTTP/2 connection each, calls multiplexed as streams); ${settings.seconds} s per run after ${settings.warmupSeconds} s warm-up`,
    table(rpcHeaders, rpcRuns.map(([name, run]) => loadRow(name, run))),
    `  pool: ${seeded.added.toLocaleString('en-US')} numbers seeded through the core before the server was ready, in ${seeded.seconds} s`
      + ` (${seeded.numbersPerSecond.toLocaleString('en-US')}/s, ${seeded.concurrency} ranges at once${seeded.skipped ? `, ${seeded.skipped} already there` : ''})`,
    `  pool use: ${pool.usedSetup} at setup + ${pool.usedWarmup.toLocaleString('en-US')} in CreateMask warm-up + ${pool.usedTimed.toLocaleString('en-US')} timed; ${pool.left.toLocaleString('en-US')} left`
      + (pool.ranDry ? ' — RAN DRY: CreateMask failed with an empty pool (raise BENCH_POOL_NUMBERS)' : ' (never ran dry)'),
    '  errors: calls that ended in a non-OK gRPC status, by status name',
    ...(failedCalls > 0 ? [
      `  WARNING: ${failedCalls} calls failed (included in the counts and latencies above):`,
      ...errorLines(rpcRuns),
      ...rpcRuns.flatMap(([name, run]) => Object.entries(run.errorSamples).map(([code, details]) => `    ${name} ${code}: "${details}"`)),
    ] : []),
    '',
    `In-process crypto (bench process, sequential, ${settings.cryptoSeconds} s each; message = access token signing input, ${crypto.messageBytes} bytes)`,
    table(opsHeaders, [
      opsRow('Ed25519 sign (node:crypto)', crypto.ed25519Sign),
      opsRow('Ed25519 verify (node:crypto)', crypto.ed25519Verify),
      opsRow('JWT sign (core/tokens.ts createTokenIssuer, local keys)', crypto.jwtSign),
      opsRow('JWT verify (jose jwtVerify, local JWKS)', crypto.joseJwtVerify),
      opsRow('JWT verify (core/tokens.ts createAccessTokenVerifier)', crypto.accessTokenVerifier),
    ]),
    '',
    `Written to ${RESULT_FILE} and ${PROVISIONING_RESULT_FILE}`,
    '',
  ];
  process.stdout.write(out.join('\n'));
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
