// `npm start` as a new user runs it, beside node-oidc-provider (issue 25, item 9): the command
// itself (`npm start`: gRPC code generation, the esbuild bundle, the service on plain node) with the
// default log level (INFO: one JSON line per request on its stdout, which the bench reads as a
// terminal would), an External API client made with `npm run --silent admin -- api-client create`,
// and client_credentials (client_secret_basic) under autocannon, 16 connections, 10 s, against it
// and the peer (bench/peer-server.ts, on plain node). Beside them the way `npm start` ran before:
// local/start.ts through tsx, same settings. The three take turns in slices of
// BENCH_START_SLICE_SECONDS (default 1: other work on this shared machine then weighs on all three
// alike) within one run (load.ts runLoadAlternating); the run is repeated BENCH_START_RUNS times
// (default 3), and each run's ratio compares figures of that run only.
//
// Writes bench/results/start-vs-peer.json. `BENCH_ONLY=start-vs-peer npm run bench`, or on its own
// `npx tsx bench/start-vs-peer.ts` (BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_CONCURRENCY apply).

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { benchLog, onCleanup, runAsScript } from './cleanup';
import { checkedTokenRequest } from './hot-paths';
import { FIXED_REQUEST_CLIENT, runLoadAlternating, type LoadOptions, type LoadResult } from './load';
import { errorLines, fmt, machine, numberFromEnv, table, writeJson } from './report';
import { startBenchPeer } from './server-process';

const RESULT_FILE = fileURLToPath(new URL('./results/start-vs-peer.json', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const START_TIMEOUT_MS = 120_000;
const API_SCOPE = 'messaging';
const run = promisify(execFile);

/** How our service is started: `npm start` today, and local/start.ts through tsx as `npm start` ran it before. */
const WAYS = {
  'npm start': { command: 'npm', args: ['start'] },
  'tsx local/start.ts': { command: process.execPath, args: ['--import', 'tsx', 'local/start.ts'] },
} as const;
type Way = keyof typeof WAYS;

interface StartedService {
  way: Way;
  issuer: string;
  /** The service process (from DATA_DIR/runner.json; under `npm start` a grandchild of npm): its CPU is measured. */
  pid: number;
  /** From spawning the command to its "Register clients" line. */
  startSeconds: number;
  /** Lines the service wrote on stdout (its request log at the default level). */
  logLines: () => number;
  apiClient: { clientId: string; clientSecret: string; scope: string };
  died: AbortSignal;
}

/** Starts one way in a process group of its own (stopped as Ctrl-C would stop it), with a fresh DATA_DIR. */
async function startService(way: Way): Promise<StartedService> {
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-bench-start-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: '0',
    GRPC_PORT: '0',
    DYNAMODB_PORT: '0',
    ISSUER: '',
  };
  // The default level, as a new user has it (run.ts sets SILENT for its own children).
  delete env.LOG_LEVEL;
  const started = performance.now();
  const child: ChildProcess = spawn(WAYS[way].command, [...WAYS[way].args], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const died = new AbortController();
  let stopping = false;
  child.once('exit', (code, signal) => {
    if (!stopping) died.abort(new Error(`${way} exited (code ${code}, signal ${signal})`));
  });
  onCleanup(async () => {
    stopping = true;
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        /* gone */
      }
      await exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  });
  let lines = 0;
  child.stdout!.on('data', (chunk: Buffer) => {
    for (const byte of chunk) if (byte === 10) lines++;
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${way} did not start within ${START_TIMEOUT_MS / 1000} s:\n${output}`)),
      START_TIMEOUT_MS,
    );
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Register clients')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`${way} exited before it was ready:\n${output}`));
    });
  });
  const startSeconds = (performance.now() - started) / 1000;
  const issuer = /issuer\s+(\S+)/.exec(output)![1]!;
  const { pid } = JSON.parse(await readFile(join(dataDir, 'runner.json'), 'utf8')) as { pid: number };
  // As the README has a new user register an API client.
  const admin = await run(
    'npm',
    ['run', '--silent', 'admin', '--', 'api-client', 'create', '--name', 'bench', '--scope', API_SCOPE],
    { cwd: ROOT, env },
  );
  const created = JSON.parse(admin.stdout) as { client_id: string; client_secret: string };
  return {
    way,
    issuer,
    pid,
    startSeconds,
    logLines: () => lines,
    died: died.signal,
    apiClient: { clientId: created.client_id, clientSecret: created.client_secret, scope: API_SCOPE },
  };
}

export interface StartVsPeerRun {
  peer: LoadResult;
  ours: Record<Way, LoadResult & { logLinesPerRequest: number; processCpuMicrosPerGrant: number | null }>;
  /** Grants/s of each way over the peer's, this run. */
  ratio: Record<Way, number>;
  loadAverage: { start: number; end: number };
}

const round2 = (value: number) => Math.round(value * 100) / 100;
/** CPU µs per request of the watched process, from its share of a core over the run. */
const cpuMicros = (result: LoadResult) =>
  result.cpu.serverPercent === null || result.rps === 0
    ? null
    : Math.round((result.cpu.serverPercent * 10_000) / result.rps);

export interface StartVsPeerSettings {
  seconds: number;
  warmupSeconds: number;
  concurrency: number;
  runs: number;
  /** Length of each turn: short, so that other work on a shared machine weighs on all three alike. */
  sliceSeconds: number;
}

export interface StartVsPeerResult extends ReturnType<typeof machine> {
  benchmark: 'start-vs-peer';
  date: string;
  settings: StartVsPeerSettings & { client: string };
  peer: { server: string; version: string };
  ways: Record<Way, { command: string; startSeconds: number }>;
  notes: string;
  runs: StartVsPeerRun[];
}

export async function startVsPeerBenchmark(
  settings: StartVsPeerSettings,
  log: (message: string) => void,
): Promise<{ result: StartVsPeerResult; report: string }> {
  log('start vs peer: node-oidc-provider, `npm start` and tsx local/start.ts, each in its own process');
  const peer = await startBenchPeer();
  onCleanup(() => peer.stop());
  const services = [];
  for (const way of Object.keys(WAYS) as Way[]) services.push(await startService(way));
  for (const service of services)
    log(
      `${service.way}: ${service.issuer} (service pid ${service.pid})` +
        ` ready ${fmt(service.startSeconds, 1)} s after the command`,
    );
  const peerRequest = await checkedTokenRequest('node-oidc-provider', peer.info.issuer, peer.info);
  const requests = await Promise.all(
    services.map((service) => checkedTokenRequest(service.way, service.issuer, service.apiClient)),
  );
  const common = {
    concurrency: settings.concurrency,
    seconds: settings.seconds,
    warmupSeconds: settings.warmupSeconds,
  };
  const rounds = Math.max(1, Math.round(settings.seconds / settings.sliceSeconds));
  const runs: StartVsPeerRun[] = [];
  for (let index = 0; index < settings.runs; index++) {
    const loadStart = loadavg()[0]!;
    const linesBefore = services.map((service) => service.logLines());
    const options: LoadOptions[] = [
      { ...common, serverPid: peer.info.pid, signal: peer.died, request: peerRequest },
      ...services.map((service, at) => ({
        ...common,
        serverPid: service.pid,
        signal: service.died,
        request: requests[at]!,
      })),
    ];
    log(
      `run ${index + 1}/${settings.runs}: ${settings.warmupSeconds} s warm-up each,` +
        ` then ${settings.seconds} s each in ${rounds} alternating slices`,
    );
    const [peerLoad, ...ourLoads] = await runLoadAlternating(options, rounds);
    const ours = Object.fromEntries(
      services.map((service, at) => {
        const load = ourLoads[at]!;
        const lines = service.logLines() - linesBefore[at]!;
        return [
          service.way,
          {
            ...load,
            logLinesPerRequest: round2(lines / Math.max(1, load.count + load.warmupCount)),
            processCpuMicrosPerGrant: cpuMicros(load),
          },
        ];
      }),
    ) as StartVsPeerRun['ours'];
    const ratio = Object.fromEntries(
      services.map((service) => [service.way, round2(ours[service.way].rps / peerLoad!.rps)]),
    ) as Record<Way, number>;
    runs.push({ peer: peerLoad!, ours, ratio, loadAverage: { start: round2(loadStart), end: round2(loadavg()[0]!) } });
    log(
      `run ${index + 1}: peer ${fmt(peerLoad!.rps, 1)}/s; ${services
        .map((service) => `${service.way} ${fmt(ours[service.way].rps, 1)}/s (${ratio[service.way]}×)`)
        .join('; ')}`,
    );
  }
  const result: StartVsPeerResult = {
    benchmark: 'start-vs-peer',
    date: new Date().toISOString(),
    ...machine(),
    settings: { ...settings, client: FIXED_REQUEST_CLIENT },
    peer: {
      server: 'node-oidc-provider (bench/peer-server.ts, bundled, plain node): memory adapter, EdDSA JWT access tokens',
      version: peer.info.version,
    },
    ways: Object.fromEntries(
      services.map((service) => [
        service.way,
        {
          command: [WAYS[service.way].command, ...WAYS[service.way].args].join(' '),
          startSeconds: round2(service.startSeconds),
        },
      ]),
    ) as StartVsPeerResult['ways'],
    notes:
      "LOG_LEVEL unset (INFO); the service's stdout is read by the bench;" +
      " CPU: /proc of the service process (all its threads, dynalite's worker included)",
    runs,
  };
  await writeJson(RESULT_FILE, result);
  return { result, report: startVsPeerReport(result) };
}

/** One figure of each run, `a / b / c`. */
const perRun = (result: StartVsPeerResult, figure: (run: StartVsPeerRun) => number | null, digits = 0) =>
  result.runs.map((one) => fmt(figure(one) ?? Number.NaN, digits)).join(' / ');

function startVsPeerReport(result: StartVsPeerResult): string {
  const ways = Object.keys(result.ways) as Way[];
  const rows = result.runs.map((one, index) => [
    `run ${index + 1} (load ${one.loadAverage.start}→${one.loadAverage.end})`,
    fmt(one.peer.rps, 1),
    ...ways.flatMap((way) => [fmt(one.ours[way].rps, 1), `${fmt(one.ratio[way], 2)}×`]),
  ]);
  const failures = result.runs.flatMap((one, index) =>
    errorLines([
      [`run ${index + 1} peer`, one.peer],
      ...ways.map((way) => [`run ${index + 1} ${way}`, one.ours[way]] as [string, LoadResult]),
    ]),
  );
  return [
    '',
    `npm start beside node-oidc-provider ${result.peer.version}, client_credentials, ${result.date}`,
    `node ${result.node}, ${result.platform}, ${result.cpuModel}, ${result.cores} cores; ${result.settings.client},` +
      ` ${result.settings.concurrency} connections, ${result.settings.seconds} s each after` +
      ` ${result.settings.warmupSeconds} s warm-up, in ${result.settings.sliceSeconds} s slices taking turns`,
    `started: ${ways
      .map((way) => `${result.ways[way].command} ready in ${fmt(result.ways[way].startSeconds, 1)} s`)
      .join('; ')}`,
    table(['', 'peer grants/s', ...ways.flatMap((way) => [`${way} grants/s`, 'ratio'])], rows),
    `  log lines per request (default level): ${ways
      .map((way) => `${way} ${perRun(result, (one) => one.ours[way].logLinesPerRequest, 2)}`)
      .join('; ')}`,
    `  service CPU µs/grant: peer ${perRun(result, (one) => cpuMicros(one.peer))}; ${ways
      .map((way) => `${way} ${perRun(result, (one) => one.ours[way].processCpuMicrosPerGrant)}`)
      .join('; ')}`,
    ...(failures.length ? ['  WARNING: requests failed:', ...failures] : []),
    '',
    `Written to ${RESULT_FILE}`,
    '',
  ].join('\n');
}

export const startVsPeerSettingsFromEnv = (): StartVsPeerSettings => ({
  seconds: numberFromEnv('BENCH_SECONDS', 10),
  warmupSeconds: numberFromEnv('BENCH_WARMUP_SECONDS', 2),
  concurrency: numberFromEnv('BENCH_CONCURRENCY', 16, { integer: true }),
  runs: numberFromEnv('BENCH_START_RUNS', 3, { integer: true }),
  sliceSeconds: numberFromEnv('BENCH_START_SLICE_SECONDS', 1),
});

await runAsScript(import.meta.url, async () => {
  process.stdout.write((await startVsPeerBenchmark(startVsPeerSettingsFromEnv(), benchLog)).report);
});
