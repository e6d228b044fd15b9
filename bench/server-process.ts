import { spawn, type ChildProcess } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { onCleanup } from './cleanup';
import type { ChildProcessStats } from './child';
import type { StoreCounters } from './store-counters';
import { grpcImageNodeOptions } from '../test/support/grpc-image';

// Parent side of bench/server.ts and bench/peer-server.ts: a fresh data folder, the child process,
// its ready line, stats requests over its stdin, and a stop that always ends the child (SIGTERM,
// then SIGKILL) and removes the folder. A grpc child (startBenchGrpcServer) shares a runner's
// folder and never removes it.

/** The JSON line bench/server.ts prints once it is serving (runner role). */
export interface BenchServerInfo {
  ready: true;
  role: 'runner';
  pid: number;
  issuer: string;
  clientId: string;
  redirectUri: string;
  scope: string;
  email: string;
  password: string;
  /** An External API client with no owner: client_credentials with client_secret_basic. */
  apiClient: { clientId: string; clientSecret: string; scope: string };
  /** Port of the gRPC provisioning API (127.0.0.1). */
  grpcPort: number;
  /**
   * The runner's embedded DynamoDB (dynalite, in the runner process), its table prefix and data folder (signing keys in
   * keys/).
   */
  dynamoEndpoint: string;
  tablePrefix: string;
  dataDir: string;
  /** A business owner's provisioning client, the mask participants and the seeded pool. */
  provisioning: {
    clientId: string;
    clientSecret: string;
    scope: string;
    ownerId: string;
    /** svcnum_ids of person accounts, for CreateMask. */
    participants: string[];
    pool: BenchPoolInfo;
  };
}

/** The numbers bench/server.ts seeded into the pool before it was ready. */
export interface BenchPoolInfo {
  first: string;
  /** Numbers asked for (BENCH_POOL_NUMBERS); added + skipped (already there). */
  requested: number;
  added: number;
  skipped: number;
  /** Ranges seeded side by side. */
  concurrency: number;
  /** Wall time of the seeding. */
  seconds: number;
  numbersPerSecond: number;
}

/** The ready line of a grpc child: a gRPC server sharing a runner's tables, keys and issuer. */
export interface BenchGrpcInfo {
  ready: true;
  role: 'grpc';
  pid: number;
  grpcPort: number;
}

/** The ready line of the peer (bench/peer-server.ts): node-oidc-provider with one client_credentials client. */
export interface BenchPeerInfo {
  ready: true;
  role: 'peer';
  pid: number;
  issuer: string;
  /**
   * node-oidc-provider's version, and the warnings it printed (held back: Node 20 rather than 22, the memory adapter).
   */
  version: string;
  warnings: string[];
  clientId: string;
  clientSecret: string;
  scope: string;
  /** The resource server its access tokens are for (features.resourceIndicators defaultResource). */
  resource: string;
}

/** A runner's or grpc child's answer to a stats request (bench/server.ts answerRunnerStats). */
export interface BenchChildStats extends ChildProcessStats {
  /**
   * The child's MessageHub: distinct inboxes its open streams watch, its poll interval of the moment, and whether the
   * engine's subscriptions are in force.
   */
  hub: { watchedInboxes: number; pollIntervalMs: number; engineReady: boolean };
  /** Every store call since the child started (bench/store-counters.ts). */
  store: StoreCounters;
}

export interface BenchServerOptions {
  /** Numbers to seed into the pool before the server reports ready (default 0). */
  poolNumbers?: number;
  /** VALKEY_URL: a pub/sub engine for inbox wake-ups (default none: in-process wake-ups). */
  engineUrl?: string;
}

/** The hub's intervals a grpc child reads as a task does (core/adapters/runtime-config.ts); unset, the defaults. */
export type MessageIntervals = Partial<
  Record<
    | 'MESSAGE_POLL_INTERVAL_MS'
    | 'MESSAGE_SAFETY_POLL_MS'
    | 'MESSAGE_ENGINE_LOST_POLL_MS'
    | 'MESSAGE_ENGINE_CHECK_MS'
    | 'MESSAGE_RELIST_MS',
    string
  >
>;

export interface BenchChild<Info, Stats extends ChildProcessStats = BenchChildStats> {
  info: Info;
  /** Aborted if the server exits before stop() is called; pass it to runLoad. */
  died: AbortSignal;
  /** The child's memory, CPU and (runner, grpc) hub and store counters; `gc`: after a full GC. */
  stats(options?: { gc?: boolean }): Promise<Stats>;
  stop(): Promise<void>;
}

export type BenchServer = BenchChild<BenchServerInfo>;
export type BenchGrpcServer = BenchChild<BenchGrpcInfo>;
export type BenchPeer = BenchChild<BenchPeerInfo, ChildProcessStats>;

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_SOURCE = fileURLToPath(new URL('./server.ts', import.meta.url));
/**
 * Where the server children run from: bench/server.ts bundled as the gRPC task's image is (package.json build:grpc).
 */
const SERVER_BUNDLE_DIR = join(ROOT, 'dist', 'bench');
const PEER_SOURCE = fileURLToPath(new URL('./peer-server.ts', import.meta.url));
const START_TIMEOUT_MS = 60_000;
/** Extra start-up time allowed per seeded number (seeding runs before the ready line). */
const SEED_TIMEOUT_MS_PER_NUMBER = 5;
const STOP_GRACE_MS = 5_000;
const STATS_TIMEOUT_MS = 30_000;

const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

export async function startBenchServer(options: BenchServerOptions = {}): Promise<BenchServer> {
  const poolNumbers = options.poolNumbers ?? 0;
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-bench-'));
  return spawnChild<BenchServerInfo>({
    entry: await serverEntry(),
    dataDir,
    ownsDataDir: true,
    env: {
      BENCH_ROLE: 'runner',
      BENCH_POOL_NUMBERS: String(poolNumbers),
      ...(options.engineUrl ? { VALKEY_URL: options.engineUrl } : {}),
    },
    startTimeoutMs: START_TIMEOUT_MS + poolNumbers * SEED_TIMEOUT_MS_PER_NUMBER,
  });
}

/**
 * A second gRPC server process against `runner`'s embedded DynamoDB, with its signing keys and
 * issuer: a message accepted by the runner reaches streams here only through the tables.
 */
export async function startBenchGrpcServer(
  runner: BenchServerInfo,
  options: { engineUrl?: string; messageIntervals?: MessageIntervals } = {},
): Promise<BenchGrpcServer> {
  return spawnChild<BenchGrpcInfo>({
    entry: await serverEntry(),
    dataDir: runner.dataDir,
    ownsDataDir: false,
    env: {
      BENCH_ROLE: 'grpc',
      BENCH_DYNAMO_ENDPOINT: runner.dynamoEndpoint,
      BENCH_ISSUER: runner.issuer,
      BENCH_TABLE_PREFIX: runner.tablePrefix,
      // Its V8 heap sized as the gRPC task's (grpc-service/Dockerfile), with any NODE_OPTIONS of the bench's own after.
      NODE_OPTIONS: [grpcImageNodeOptions(), process.env.NODE_OPTIONS ?? ''].join(' ').trim(),
      ...(options.engineUrl ? { VALKEY_URL: options.engineUrl } : {}),
      ...options.messageIntervals,
    },
    startTimeoutMs: START_TIMEOUT_MS,
  });
}

const bundles = new Map<string, Promise<string>>();

/**
 * Our server children run as the service ships: one esbuild bundle of our code (packages from
 * node_modules, as in the gRPC task's image and, minified, the Lambdas), on plain node. Under tsx
 * every module is compiled at load, source maps stay enabled for every stack trace, and the
 * memory figures would count the compiled sources. The peer runs the same way, so neither pays
 * for tsx. Each is built once per bench run into dist/bench (at the gRPC task bundle's depth, with
 * the descriptor set reflection reads beside it).
 */
function bundled(source: string): Promise<string> {
  let built = bundles.get(source);
  if (!built) {
    built = (async () => {
      const outfile = join(SERVER_BUNDLE_DIR, basename(source).replace(/\.ts$/, '.mjs'));
      await build({
        entryPoints: [source],
        outfile,
        bundle: true,
        packages: 'external',
        platform: 'node',
        target: 'node22',
        format: 'esm',
        logLevel: 'warning',
      });
      await mkdir(join(SERVER_BUNDLE_DIR, 'gen'), { recursive: true });
      await copyFile(
        join(ROOT, 'grpc-service', 'gen', 'descriptors.binpb'),
        join(SERVER_BUNDLE_DIR, 'gen', 'descriptors.binpb'),
      );
      return outfile;
    })();
    bundles.set(source, built);
  }
  return built;
}
const serverEntry = () => bundled(SERVER_SOURCE);

/**
 * node-oidc-provider in its own process (bench/peer-server.ts), memory adapter, nothing on disk but an empty folder.
 */
export async function startBenchPeer(): Promise<BenchPeer> {
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-bench-peer-'));
  return spawnChild<BenchPeerInfo, ChildProcessStats>({
    entry: await bundled(PEER_SOURCE),
    dataDir,
    ownsDataDir: true,
    env: {},
    startTimeoutMs: START_TIMEOUT_MS,
  });
}

async function spawnChild<Info, Stats extends ChildProcessStats = BenchChildStats>(options: {
  /** A TypeScript source (run under tsx) or a built .mjs (run on plain node). */
  entry: string;
  dataDir: string;
  ownsDataDir: boolean;
  env: Record<string, string>;
  startTimeoutMs: number;
}): Promise<BenchChild<Info, Stats>> {
  const { dataDir, startTimeoutMs } = options;
  let child: ChildProcess | undefined;
  let stopping = false;
  let exited: Promise<void> = Promise.resolve();
  // Last resort if the parent exits without awaiting stop(): a synchronous kill.
  const killOnExit = () => {
    if (child && running(child)) child.kill('SIGKILL');
  };
  process.on('exit', killOnExit);

  const death = new AbortController();
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      stopping = true;
      if (child && running(child)) {
        child.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          exited,
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, STOP_GRACE_MS);
          }),
        ]);
        clearTimeout(timer);
        if (running(child)) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      process.off('exit', killOnExit);
      if (options.ownsDataDir) await rm(dataDir, { recursive: true, force: true });
    })();
    return stopped;
  };
  onCleanup(stop);

  // Stats requests in flight, by id; answered by {"reply":id,"stats":…} lines.
  const pending = new Map<
    number,
    { resolve: (stats: Stats) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }
  >();
  let nextId = 0;
  const failPending = (error: Error) => {
    for (const [id, waiter] of pending) {
      clearTimeout(waiter.timer);
      waiter.reject(error);
      pending.delete(id);
    }
  };

  try {
    // BENCH_SERVER_NODE_ARGS: node options for every server child, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'.
    const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.trim().split(/\s+/).filter(Boolean) ?? [];
    child = spawn(
      process.execPath,
      ['--expose-gc', ...nodeArgs, ...(options.entry.endsWith('.ts') ? ['--import', 'tsx'] : []), options.entry],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          ...options.env,
          DATA_DIR: dataDir,
          // BENCH_SERVER_LOG_LEVEL=ERROR shows why requests fail: the child's log lines are then copied to stderr.
          LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL || 'SILENT',
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        },
        // stdin stays open: the child exits when it closes, so it cannot outlive a killed parent.
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    // stdout is read line by line for as long as the child runs, so it never blocks on a full pipe.
    const forwardLogs = Boolean(process.env.BENCH_SERVER_LOG_LEVEL);
    const spawned = child;
    exited = new Promise<void>((resolve) => spawned.once('exit', () => resolve()));
    spawned.once('exit', (code, signal) => {
      const error = new Error(`bench server exited unexpectedly (code ${code}, signal ${signal})`);
      failPending(error);
      if (!stopping) death.abort(error);
    });
    // A write to the stdin of a child that just died must not crash the bench.
    spawned.stdin!.on('error', () => undefined);

    const info = await new Promise<Info>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`bench server did not start within ${startTimeoutMs / 1000} s`)),
        startTimeoutMs,
      );
      const lines = createInterface({ input: spawned.stdout! });
      lines.on('line', (line) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          // not our line
        }
        const object =
          parsed && typeof parsed === 'object'
            ? (parsed as { ready?: unknown; reply?: unknown; stats?: unknown })
            : undefined;
        if (object?.ready === true) {
          clearTimeout(timer);
          resolve(parsed as Info);
        } else if (typeof object?.reply === 'number' && pending.has(object.reply)) {
          const waiter = pending.get(object.reply)!;
          pending.delete(object.reply);
          clearTimeout(waiter.timer);
          waiter.resolve(object.stats as Stats);
        } else if (forwardLogs) {
          process.stderr.write(`[server] ${line}\n`);
        }
      });
      spawned.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      spawned.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`bench server exited before it was ready (code ${code}, signal ${signal})`));
      });
    });

    const stats = ({ gc = false } = {}) =>
      new Promise<Stats>((resolve, reject) => {
        if (!running(spawned)) {
          reject(new Error('bench server is not running'));
          return;
        }
        const id = ++nextId;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`bench server did not answer a stats request within ${STATS_TIMEOUT_MS / 1000} s`));
        }, STATS_TIMEOUT_MS);
        pending.set(id, { resolve, reject, timer });
        spawned.stdin!.write(`${JSON.stringify({ id, cmd: 'stats', gc })}\n`);
      });
    return { info, died: death.signal, stats, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
