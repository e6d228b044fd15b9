import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { WakeupEngine } from '../../core/adapters/valkey-wakeups';
import { readRuntimeConfig } from '../../core/adapters/runtime-config';

// A real pub/sub engine for tests and benches: redis-server (the Debian package; `.ci/run`
// installs it) on a free loopback port, nothing persisted, stopped at the end. It can be killed
// mid-run (the engine lost) and started again on the same port (the engine back).

const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';

export interface TestRedis {
  port: number;
  /** redis://127.0.0.1:<port> (VALKEY_URL). */
  url: string;
  /** What the runtime configuration makes of `url` (runtime-config.ts). */
  engine: WakeupEngine;
  /** Whether the server runs now. */
  running(): boolean;
  /** SIGKILL: connections drop at once, nothing is said to clients. */
  kill(): Promise<void>;
  /** Starts it again on the same port (after `kill`). */
  restart(): Promise<void>;
  /**
   * SIGSTOP: a hung engine. Connections stay open (the kernel even accepts new ones); nothing is answered until
   * `resume`.
   */
  pause(): void;
  /** SIGCONT: it answers again, commands written meanwhile included. */
  resume(): void;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** Resolves once the server accepts connections; rejects with its output if it exits first. */
function launch(port: number, extra: string[]): Promise<ChildProcess> {
  const child = spawn(
    REDIS_SERVER,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server did not start within 10 s:\n${output}`));
    }, 10_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}):\n${output}`));
    });
  });
}

/** `extra`: more redis-server arguments (e.g. `--requirepass`, `--user`). */
export async function startRedis(options: { extra?: string[] } = {}): Promise<TestRedis> {
  const extra = options.extra ?? [];
  const port = await freePort();
  let child: ChildProcess | undefined = await launch(port, extra);
  const url = `redis://127.0.0.1:${port}`;
  const killed = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = once(running, 'exit');
    running.kill('SIGKILL');
    await exited;
  };
  return {
    port,
    url,
    engine: readRuntimeConfig('local', { VALKEY_URL: url }).service.wakeupEngine!,
    running: () => child !== undefined,
    kill: killed,
    async restart() {
      if (child) return;
      child = await launch(port, extra);
    },
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    stop: killed,
  };
}
