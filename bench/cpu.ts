import { readFileSync } from 'node:fs';

// CPU used during a run, in percent of one core: this process (the load generator) through
// process.cpuUsage, another process (the server) through /proc/<pid>/stat (Linux; null elsewhere).
// Near 100 % for the server means the numbers are the server's single-thread limit; a load
// generator near 100 % would mean the client is the bottleneck.

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ, 100 on Linux

/** utime + stime of a /proc stat file (a process's, or one thread's under /proc/<pid>/task/<tid>/), seconds. */
function statSeconds(path: string): number | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    // Fields after "(comm) ": state is field 3, utime 14 and stime 15 (1-based).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

const processSeconds = (pid: number) => statSeconds(`/proc/${pid}/stat`);

/**
 * CPU time of this process's main thread (the JavaScript thread; its thread id is the pid), seconds,
 * in 10 ms ticks; undefined where /proc is not there.
 */
export const mainThreadSeconds = () => statSeconds(`/proc/self/task/${process.pid}/stat`);

export interface CpuUse {
  /** This process. */
  loadGeneratorPercent: number;
  /** The watched process, when it could be read. */
  serverPercent: number | null;
}

export function startCpuMeter(pid?: number): () => CpuUse {
  const started = performance.now();
  const ownStart = process.cpuUsage();
  const otherStart = pid === undefined ? undefined : processSeconds(pid);
  return () => {
    const wall = (performance.now() - started) / 1000;
    const own = process.cpuUsage(ownStart);
    const otherEnd = pid === undefined ? undefined : processSeconds(pid);
    return {
      loadGeneratorPercent: Math.round(((own.user + own.system) / 1e6 / wall) * 100),
      serverPercent:
        otherStart !== undefined && otherEnd !== undefined ? Math.round(((otherEnd - otherStart) / wall) * 100) : null,
    };
  };
}
