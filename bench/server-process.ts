import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { onCleanup } from './cleanup';

// Parent side of bench/server.ts: a fresh data folder, the child process, its ready line, and a
// stop that always ends the child (SIGTERM, then SIGKILL) and removes the folder.

/** The JSON line bench/server.ts prints once it is serving. */
export interface BenchServerInfo {
  ready: true;
  pid: number;
  issuer: string;
  clientId: string;
  redirectUri: string;
  scope: string;
  email: string;
  password: string;
  /** Port of the gRPC provisioning API (127.0.0.1). */
  grpcPort: number;
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

export interface BenchServerOptions {
  /** Numbers to seed into the pool before the server reports ready (default 0). */
  poolNumbers?: number;
}

export interface BenchServer {
  info: BenchServerInfo;
  /** Aborted if the server exits before stop() is called; pass it to runLoad. */
  died: AbortSignal;
  stop(): Promise<void>;
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER_ENTRY = fileURLToPath(new URL('./server.ts', import.meta.url));
const START_TIMEOUT_MS = 60_000;
/** Extra start-up time allowed per seeded number (seeding runs before the ready line). */
const SEED_TIMEOUT_MS_PER_NUMBER = 5;
const STOP_GRACE_MS = 5_000;

const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

export async function startBenchServer(options: BenchServerOptions = {}): Promise<BenchServer> {
  const poolNumbers = options.poolNumbers ?? 0;
  const startTimeoutMs = START_TIMEOUT_MS + poolNumbers * SEED_TIMEOUT_MS_PER_NUMBER;
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-bench-'));
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
        await Promise.race([exited, new Promise<void>((resolve) => { timer = setTimeout(resolve, STOP_GRACE_MS); })]);
        clearTimeout(timer);
        if (running(child)) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      process.off('exit', killOnExit);
      await rm(dataDir, { recursive: true, force: true });
    })();
    return stopped;
  };
  onCleanup(stop);

  try {
    child = spawn(process.execPath, ['--import', 'tsx', SERVER_ENTRY], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATA_DIR: dataDir,
        BENCH_POOL_NUMBERS: String(poolNumbers),
        // BENCH_SERVER_LOG_LEVEL=ERROR shows why requests fail: the child's log lines are then copied to stderr.
        POWERTOOLS_LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL || 'SILENT',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      },
      // stdin stays open: the child exits when it closes, so it cannot outlive a killed parent.
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    // stdout is read line by line for as long as the child runs, so it never blocks on a full pipe.
    const forwardLogs = Boolean(process.env.BENCH_SERVER_LOG_LEVEL);
    const spawned = child;
    exited = new Promise<void>((resolve) => spawned.once('exit', () => resolve()));
    spawned.once('exit', (code, signal) => {
      if (!stopping) death.abort(new Error(`bench server exited unexpectedly (code ${code}, signal ${signal})`));
    });

    const info = await new Promise<BenchServerInfo>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`bench server did not start within ${startTimeoutMs / 1000} s`)), startTimeoutMs);
      const lines = createInterface({ input: spawned.stdout! });
      lines.on('line', (line) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          // not our line
        }
        if (parsed && typeof parsed === 'object' && (parsed as { ready?: unknown }).ready === true) {
          clearTimeout(timer);
          resolve(parsed as BenchServerInfo);
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
    return { info, died: death.signal, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
