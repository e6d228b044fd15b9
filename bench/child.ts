import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { mainThreadSeconds } from './cpu';

// The child side of every bench server process (bench/server.ts, bench/peer-server.ts): it
// answers stats requests on stdin and ends with its parent. The parent side is
// bench/server-process.ts.

/** What every bench child reports: memory, main-thread busy time and whole-process CPU, since it started. */
export interface ChildProcessStats {
  pid: number;
  /** A full GC ran first (asked for, and the child runs with --expose-gc). */
  gcRun: boolean;
  memory: NodeJS.MemoryUsage;
  /**
   * performance.eventLoopUtilization(): milliseconds the main thread ran JavaScript and native
   * callbacks (active) or waited for I/O (idle). Work on other threads (libuv pool, WebCrypto) is not in it.
   */
  eventLoop: { activeMs: number; idleMs: number };
  /**
   * CPU time of the main thread alone (Linux /proc, 10 ms ticks; null elsewhere). Unlike the
   * event loop's active time, it leaves out time the thread was ready but another process had the core.
   */
  mainThreadCpuMicros: number | null;
  /** process.cpuUsage(): CPU of all the process's threads, microseconds. */
  cpu: { userMicros: number; systemMicros: number };
}

/**
 * Answers {"id":n,"cmd":"stats","gc":bool} lines on stdin with {"reply":n,"stats":…} on stdout:
 * the common figures plus whatever `extra` adds (a copy, taken when the request is answered).
 */
export function answerStats<Extra extends object>(extra: () => Extra) {
  const gc = (globalThis as { gc?: () => void }).gc;
  createInterface({ input: process.stdin }).on('line', (line) => {
    let request: { id?: unknown; cmd?: unknown; gc?: unknown };
    try {
      request = JSON.parse(line) as typeof request;
    } catch {
      return;
    }
    if (request.cmd !== 'stats') return;
    void (async () => {
      if (request.gc && gc) {
        // Two full collections with a turn of the event loop between them (finalizers, weak refs).
        gc();
        await new Promise((resolve) => setImmediate(resolve));
        gc();
      }
      const { active, idle } = performance.eventLoopUtilization();
      const cpu = process.cpuUsage();
      const mainThread = mainThreadSeconds();
      const stats: ChildProcessStats & Extra = {
        pid: process.pid,
        gcRun: Boolean(request.gc && gc),
        memory: process.memoryUsage(),
        eventLoop: { activeMs: active, idleMs: idle },
        mainThreadCpuMicros: mainThread === undefined ? null : Math.round(mainThread * 1e6),
        cpu: { userMicros: cpu.user, systemMicros: cpu.system },
        ...extra(),
      };
      process.stdout.write(`${JSON.stringify({ reply: request.id, stats })}\n`);
    })();
  });
}

/** Stops on SIGTERM/SIGINT or when stdin closes (the parent is gone): `close`, then `onOrphaned` in the latter case. */
export function lifetime(close: () => Promise<void>, onOrphaned: () => Promise<void> = async () => undefined) {
  let stopping = false;
  const stop = (orphaned: boolean) => {
    if (stopping) return;
    stopping = true;
    const timer = setTimeout(() => process.exit(1), 3000);
    timer.unref();
    close()
      .then(() => (orphaned ? onOrphaned() : undefined))
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on('SIGTERM', () => stop(false));
  process.on('SIGINT', () => stop(false));
  process.stdin.on('end', () => stop(true));
  process.stdin.on('close', () => stop(true));
  process.stdin.resume();
}
