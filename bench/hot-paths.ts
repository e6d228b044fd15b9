// The token endpoint and UserInfo, side by side with node-oidc-provider (issue 11), and what each of
// our hot paths costs the server process per request.
//
// 1. client_credentials with client_secret_basic (Basic header; form body grant_type + scope) against
//    the peer, node-oidc-provider with its memory adapter (bench/peer-server.ts), and against our
//    local runner (bench/server.ts): each in its own process, both EdDSA RFC 9068 access tokens
//    (checked once on each side before the runs: a verified JWT, typ at+jwt, alg EdDSA, or the bench
//    fails), the same load generator (autocannon: every grant request is the same, and it leaves
//    more of the two shared cores to the servers than a node:http client) and settings, taking turns
//    in ~2 s slices in the same run (load.ts runLoadAlternating); grants/s, non-2xx and the ratio.
// 2. Our refresh, UserInfo and code exchange runs (signin.ts) on the same runner (node:http or
//    fetch client: codes and refresh tokens differ per request; UserInfo, one token each time,
//    stays on the same client so its figures compare with the earlier ones).
// For every run the server process is asked for its stats at each phase edge (bench/child.ts,
// bench/server-meter.ts): store calls per request (every store method call, bench/store-counters.ts),
// main-thread µs per request (event-loop utilisation) and whole-process CPU µs per request, for the
// warm-up (caches filling) and the measured phase (steady state).
//
// Writes bench/results/hot-paths.json. Part of `npm run bench` (which also takes its sign-in results
// for signin.json); runs on its own with `npx tsx bench/hot-paths.ts` (same BENCH_… settings).

process.env.LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { benchLog, runAsScript } from './cleanup';
import { formBody, FORM_HEADERS, type HttpClientKind } from './http-client';
import { FIXED_REQUEST_CLIENT, runLoadAlternating, type FixedRequest, type LoadResult } from './load';
import { errorLines, fmt, machine, numberFromEnv, table, writeJson } from './report';
import { serverMeter, type PhaseCost, type RunCost } from './server-meter';
import { startBenchPeer, startBenchServer } from './server-process';
import { signInBenchmarks, type SignInResult } from './signin';

const RESULT_FILE = fileURLToPath(new URL('./results/hot-paths.json', import.meta.url));
/** The side-by-side run takes turns in slices of about this many seconds. */
const SLICE_SECONDS = 2;

export interface HotPathSettings {
  seconds: number;
  warmupSeconds: number;
  concurrency: number;
  httpClient: HttpClientKind;
  maxCodes: number;
}

/** A confidential client's client_credentials request, as a relying party sends it (RFC 6749 §2.3.1, §4.4.2). */
type ClientCredentials = FixedRequest & { method: 'POST'; body: string };

function clientCredentials(
  tokenEndpoint: string,
  client: { clientId: string; clientSecret: string; scope: string },
): ClientCredentials {
  // Basic: the form-urlencoded id and secret, joined by a colon, in base64.
  const basic = Buffer.from(
    `${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`,
  ).toString('base64');
  return {
    url: tokenEndpoint,
    method: 'POST',
    headers: { ...FORM_HEADERS, Authorization: `Basic ${basic}` },
    body: formBody({ grant_type: 'client_credentials', scope: client.scope }),
    // Each answer must carry an access token, as signin.ts checks its runs' answers.
    verifyBody: { test: (body) => body.includes('"access_token"'), mismatch: 'Error: 200 without "access_token"' },
  };
}

/**
 * The provider's token endpoint from its discovery document, after one grant whose access token
 * must be an RFC 9068 JWT signed EdDSA that verifies against the provider's JWKS: otherwise the
 * comparison would not be like for like, and the bench stops.
 */
export async function checkedTokenRequest(
  name: string,
  issuer: string,
  client: { clientId: string; clientSecret: string; scope: string },
): Promise<ClientCredentials & { header: Record<string, unknown> }> {
  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as {
    token_endpoint?: string;
    jwks_uri?: string;
  };
  if (!discovery.token_endpoint || !discovery.jwks_uri)
    throw new Error(`${name}: no token_endpoint or jwks_uri in its discovery document`);
  const request = clientCredentials(discovery.token_endpoint, client);
  const response = await fetch(request.url, { method: 'POST', headers: request.headers, body: request.body });
  const text = await response.text();
  if (response.status !== 200)
    throw new Error(`${name}: client_credentials answered ${response.status}: ${text.slice(0, 300)}`);
  const token = (JSON.parse(text) as { access_token?: unknown }).access_token;
  if (typeof token !== 'string') throw new Error(`${name}: no access_token in ${text.slice(0, 300)}`);
  const header = decodeProtectedHeader(token);
  if (header.alg !== 'EdDSA' || header.typ !== 'at+jwt')
    throw new Error(`${name}: the access token is not an EdDSA RFC 9068 JWT (header ${JSON.stringify(header)})`);
  await jwtVerify(token, createRemoteJWKSet(new URL(discovery.jwks_uri)), {
    issuer,
    algorithms: ['EdDSA'],
    typ: 'at+jwt',
  });
  return { ...request, header: header as Record<string, unknown> };
}

export interface MeasuredRun extends LoadResult {
  description: string;
  cost: RunCost;
}

export interface HotPathResult {
  peer: {
    server: string;
    version: string;
    warnings: string[];
    accessTokenHeader: Record<string, unknown>;
    clientCredentials: MeasuredRun;
  };
  ours: {
    server: string;
    accessTokenHeader: Record<string, unknown>;
    clientCredentials: MeasuredRun;
    refresh: MeasuredRun;
    userinfo: MeasuredRun;
    codeExchange: MeasuredRun;
    dpopClientCredentials: MeasuredRun;
    dpopUserinfo: MeasuredRun;
  };
  /** Grants/s, ours over the peer's, in the same run. */
  clientCredentialsRatio: number;
  /** Slices the side-by-side run took turns in (each server's measured seconds split evenly). */
  rounds: number;
}

const round2 = (value: number) => Math.round(value * 100) / 100;

/**
 * Runs everything above; returns the sign-in results too (run.ts writes them to signin.json) and the printed report.
 */
export async function hotPathBenchmarks(
  settings: HotPathSettings,
  log: (message: string) => void,
): Promise<{ result: HotPathResult; signin: SignInResult; report: string }> {
  const date = new Date().toISOString();
  const loadAverageAtStart = loadavg()[0]!;
  log('hot paths: starting node-oidc-provider (the peer) and the local runner, each in a child process');
  const [peer, ours] = await Promise.all([startBenchPeer(), startBenchServer()]);
  const { concurrency, seconds, warmupSeconds } = settings;
  let result: HotPathResult;
  let signin: SignInResult;
  try {
    log(
      `peer: node-oidc-provider ${peer.info.version} ${peer.info.issuer} (pid ${peer.info.pid}); ours: ` +
        `${ours.info.issuer} (pid ${ours.info.pid})`,
    );
    const peerRequest = await checkedTokenRequest('node-oidc-provider', peer.info.issuer, peer.info);
    const ourRequest = await checkedTokenRequest('local runner', ours.info.issuer, ours.info.apiClient);

    // Both under the same load generator, taking turns in slices (load.ts runLoadAlternating).
    const rounds = Math.max(1, Math.round(seconds / SLICE_SECONDS));
    const peerMeter = serverMeter(() => peer.stats());
    const ourMeter = serverMeter(() => ours.stats());
    log(
      `client_credentials: ${warmupSeconds} s warm-up each, then ${seconds} s each in ${rounds} alternating slices ` +
        `(node-oidc-provider first)`,
    );
    const common = { concurrency, seconds, warmupSeconds };
    const [peerLoad, ourLoad] = (await runLoadAlternating(
      [
        { ...common, serverPid: peer.info.pid, signal: peer.died, request: peerRequest, onPhase: peerMeter.onPhase },
        { ...common, serverPid: ours.info.pid, signal: ours.died, request: ourRequest, onPhase: ourMeter.onPhase },
      ],
      rounds,
    )) as [LoadResult, LoadResult];
    const path = (request: ClientCredentials) => new URL(request.url).pathname;
    const peerGrants: MeasuredRun = {
      description:
        `POST ${path(peerRequest)} grant_type=client_credentials scope=${peer.info.scope}, client_secret_basic;` +
        ` EdDSA JWT access token for resource ${peer.info.resource}`,
      ...peerLoad,
      cost: peerMeter.cost(peerLoad),
    };
    const ourGrants: MeasuredRun = {
      description:
        `POST ${path(ourRequest)} grant_type=client_credentials scope=${ours.info.apiClient.scope},` +
        ' client_secret_basic (External API client, no owner); EdDSA JWT access token',
      ...ourLoad,
      cost: ourMeter.cost(ourLoad),
    };
    await peer.stop();

    const meters = {
      codeExchange: serverMeter(() => ours.stats()),
      refresh: serverMeter(() => ours.stats()),
      userinfo: serverMeter(() => ours.stats()),
      dpopClientCredentials: serverMeter(() => ours.stats()),
      dpopUserinfo: serverMeter(() => ours.stats()),
    };
    signin = await signInBenchmarks(ours.info, {
      concurrency,
      seconds,
      warmupSeconds,
      httpClient: settings.httpClient,
      maxCodes: settings.maxCodes,
      log,
      signal: ours.died,
      meters,
    });
    result = {
      peer: {
        server:
          'node-oidc-provider in a child process (bench/peer-server.ts): memory adapter, one client ' +
          '(client_credentials, client_secret_basic), Ed25519 key, resourceIndicators → jwt access tokens signed ' +
          'EdDSA',
        version: peer.info.version,
        warnings: peer.info.warnings,
        accessTokenHeader: peerRequest.header,
        clientCredentials: peerGrants,
      },
      ours: {
        server:
          'local runner (local/runner.ts) in a child process (bench/server.ts): embedded dynalite in the same ' +
          'process, local Ed25519 key, every store call counted',
        accessTokenHeader: ourRequest.header,
        clientCredentials: ourGrants,
        refresh: {
          description:
            'POST /oauth/token grant_type=refresh_token, 8 refresh tokens reused round-robin (public login client)',
          ...signin.refresh,
          cost: meters.refresh.cost(signin.refresh),
        },
        userinfo: {
          description: 'GET /oauth/userinfo with one Bearer access token',
          ...signin.userinfo,
          cost: meters.userinfo.cost(signin.userinfo),
        },
        codeExchange: {
          description:
            'POST /oauth/token grant_type=authorization_code with PKCE, one fresh code per request (warm-up: a ' +
            'separate probe run on its own pool)',
          ...signin.codeExchange,
          cost: meters.codeExchange.cost(signin.codeExchange),
        },
        dpopClientCredentials: {
          description:
            'POST /oauth/token grant_type=client_credentials as above, with a fresh EdDSA DPoP proof per request ' +
            '(signed by the load generator; client ' +
            signin.httpClient +
            ')',
          ...signin.dpopClientCredentials,
          cost: meters.dpopClientCredentials.cost(signin.dpopClientCredentials),
        },
        dpopUserinfo: {
          description: 'GET /oauth/userinfo with one DPoP-bound access token and a fresh proof per request',
          ...signin.dpopUserinfo,
          cost: meters.dpopUserinfo.cost(signin.dpopUserinfo),
        },
      },
      clientCredentialsRatio: peerGrants.rps > 0 ? round2(ourGrants.rps / peerGrants.rps) : Number.NaN,
      rounds,
    };
  } finally {
    await Promise.all([peer.stop(), ours.stop()]);
  }

  const loadAverage = { start: round2(loadAverageAtStart), end: round2(loadavg()[0]!) };
  const host = machine();
  await writeJson(RESULT_FILE, {
    benchmark: 'hot-paths',
    date,
    ...host,
    settings: { ...settings, httpClient: signin.httpClient, clientCredentialsClient: FIXED_REQUEST_CLIENT },
    loadAverage,
    notes: {
      storeCalls:
        'every store method call in the server process (one DynamoDB round trip each; a BatchGetItem counts once), ' +
        'per request of the phase',
      mainThread:
        'performance.eventLoopUtilization() active time of the server process over the phase, per request (µs); ' +
        'includes dynalite, which runs in the same process; wall time, so on a busy machine it includes moments the ' +
        'thread waited for a core',
      mainThreadCpu:
        'CPU time of the main thread alone (/proc/<pid>/task/<pid>/stat, 10 ms ticks) over the phase, per request (µs)',
      processCpu: 'process.cpuUsage() (all threads) of the server process over the phase, per request (µs)',
      phases:
        'warm-up: caches filling, JIT; measured: steady state. Stats are read at each phase edge with no request in ' +
        'flight.',
      sideBySide:
        "client_credentials: the peer and ours take turns in slices (A B B A …); a server idles during the other's " +
        'slices, so its mainThreadBusyPercent counts those gaps too',
    },
    ...result,
  });
  return {
    result,
    signin,
    report: hotPathReport(result, {
      date,
      host,
      loadAverage,
      settings: { ...settings, httpClient: signin.httpClient },
    }),
  };
}

function hotPathReport(
  result: HotPathResult,
  context: {
    date: string;
    host: ReturnType<typeof machine>;
    loadAverage: { start: number; end: number };
    settings: Omit<HotPathSettings, 'httpClient'> & { httpClient: string };
  },
): string {
  const { peer, ours } = result;
  const { settings, host, loadAverage } = context;
  const fmtOrDash = (value: number | null) => (value === null ? '-' : fmt(value));
  const storeColumn = (cost: PhaseCost | null) =>
    cost?.storeCallsPerRequest == null ? '-' : fmt(cost.storeCallsPerRequest, 2);
  const sideBySide = (label: string, value: (run: MeasuredRun) => string, ratio?: (run: MeasuredRun) => number) => [
    label,
    value(peer.clientCredentials),
    value(ours.clientCredentials),
    ratio ? `${fmt(ratio(ours.clientCredentials) / ratio(peer.clientCredentials), 2)}×` : '',
  ];
  const endpoints: Array<[string, MeasuredRun]> = [
    ['POST /oauth/token client_credentials', ours.clientCredentials],
    ['POST /oauth/token refresh_token', ours.refresh],
    ['GET /oauth/userinfo', ours.userinfo],
    ['POST /oauth/token authorization_code', ours.codeExchange],
    ['POST /oauth/token client_credentials + DPoP', ours.dpopClientCredentials],
    ['GET /oauth/userinfo + DPoP', ours.dpopUserinfo],
  ];
  const byMethod = (cost: PhaseCost) =>
    Object.entries(cost.storeCalls ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([method, calls]) => `${method} ${fmt(calls / Math.max(cost.requests, 1), 3)}`)
      .join(', ') || 'none';
  const failed = [['peer client_credentials', peer.clientCredentials], ...endpoints] as Array<[string, LoadResult]>;
  const problems = errorLines(failed);
  return [
    '',
    `Token endpoint side by side (issue 11), ${context.date}`,
    `node ${host.node}, ${host.platform}, ${host.cpuModel}, ${host.cores} cores; 1-min load average ` +
      `${loadAverage.start} at start, ${loadAverage.end} at end`,
    `concurrency ${settings.concurrency}, ${settings.seconds} s per server (measured: ` +
      `${fmt(peer.clientCredentials.seconds, 1)} / ${fmt(ours.clientCredentials.seconds, 1)} s) after ` +
      `${settings.warmupSeconds} s warm-up; client ${FIXED_REQUEST_CLIENT} (${settings.concurrency} keep-alive ` +
      `connections)`,
    `each server in its own process; one at a time under load, taking turns in ${result.rounds} slices (A B B A …) ` +
      `so that other work on the machine weighs on both alike`,
    `client_credentials, client_secret_basic, EdDSA RFC 9068 access tokens on both sides (checked: alg ` +
      `${String(peer.accessTokenHeader.alg)}/${String(ours.accessTokenHeader.alg)}, typ ` +
      `${String(peer.accessTokenHeader.typ)}/${String(ours.accessTokenHeader.typ)}, verified against each JWKS)`,
    table(
      ['', `node-oidc-provider ${peer.version} (memory adapter)`, 'ours (local runner)', 'ours/peer'],
      [
        sideBySide(
          'grants/s',
          (run) => fmt(run.rps, 1),
          (run) => run.rps,
        ),
        sideBySide('non-2xx (timed + warm-up)', (run) => `${fmt(run.errors)} + ${fmt(run.warmupErrors)}`),
        sideBySide('p50 / p99 ms', (run) => `${fmt(run.p50, 2)} / ${fmt(run.p99, 2)}`),
        sideBySide(
          'main-thread µs/grant (event loop active)',
          (run) => fmt(run.cost.measured.mainThreadMicrosPerRequest),
          (run) => run.cost.measured.mainThreadMicrosPerRequest,
        ),
        sideBySide(
          'main-thread CPU µs/grant',
          (run) => fmtOrDash(run.cost.measured.mainThreadCpuMicrosPerRequest),
          (run) => run.cost.measured.mainThreadCpuMicrosPerRequest ?? Number.NaN,
        ),
        sideBySide(
          'process CPU µs/grant',
          (run) => fmt(run.cost.measured.processCpuMicrosPerRequest),
          (run) => run.cost.measured.processCpuMicrosPerRequest,
        ),
        sideBySide('CPU srv/gen %', (run) => `${run.cpu.serverPercent ?? '?'} / ${run.cpu.loadGeneratorPercent}`),
      ],
    ),
    `  ratio ours/peer, grants/s: ${fmt(result.clientCredentialsRatio, 2)}× (target ≥ 2×)`,
    `  the peer's warnings, held back: ` +
      `${peer.warnings.map((warning) => warning.replace('oidc-provider WARNING: ', '')).join(' | ') || 'none'}`,
    '',
    `Our hot paths, per request of the measured phase (steady state); store calls in the warm-up beside them; ` +
      `client: client_credentials as above, the others ${settings.httpClient}`,
    table(
      [
        'endpoint',
        'req/s',
        'non-2xx',
        'store calls/req',
        'warm-up store/req',
        'main-thread µs/req',
        'main-thread CPU µs/req',
        'process CPU µs/req',
      ],
      endpoints.map(([name, run]) => [
        name,
        fmt(run.rps, 1),
        fmt(run.errors),
        storeColumn(run.cost.measured),
        storeColumn(run.cost.warmup),
        fmt(run.cost.measured.mainThreadMicrosPerRequest),
        fmtOrDash(run.cost.measured.mainThreadCpuMicrosPerRequest),
        fmt(run.cost.measured.processCpuMicrosPerRequest),
      ]),
    ),
    ...endpoints.map(([name, run]) => `  ${name}: ${byMethod(run.cost.measured)}`),
    '  store calls: every store method call in the server process (one DynamoDB round trip each; a BatchGetItem ' +
      'counts once)',
    '  main-thread µs: event-loop active time of the server process (dynalite runs on a worker thread of it: in ' +
      'process CPU only), wall time: on a busy machine it also counts moments the thread waited for a core;',
    "  main-thread CPU: that thread's CPU time alone (/proc, 10 ms ticks); process CPU: all its threads " +
      '(process.cpuUsage)',
    ...(problems.length ? ['  WARNING: requests failed:', ...problems] : []),
    '',
    `Written to ${RESULT_FILE}`,
    '',
  ].join('\n');
}

/** The settings from the environment (the same variables as `npm run bench`). */
export function hotPathSettingsFromEnv(): HotPathSettings {
  const httpClient = (process.env.BENCH_HTTP_CLIENT?.trim() || 'http') as HttpClientKind;
  if (httpClient !== 'http' && httpClient !== 'fetch')
    throw new Error(`BENCH_HTTP_CLIENT must be http or fetch, got '${httpClient}'`);
  return {
    seconds: numberFromEnv('BENCH_SECONDS', 10),
    warmupSeconds: numberFromEnv('BENCH_WARMUP_SECONDS', 2),
    concurrency: numberFromEnv('BENCH_CONCURRENCY', 16, { integer: true }),
    httpClient,
    maxCodes: numberFromEnv('BENCH_MAX_CODES', 200_000, { integer: true }),
  };
}

await runAsScript(import.meta.url, async () => {
  process.stdout.write((await hotPathBenchmarks(hotPathSettingsFromEnv(), benchLog)).report);
});
