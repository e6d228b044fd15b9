import { readFileSync } from 'node:fs';

// CPU used during a run, in percent of one core: this process (the load generator) through
// process.cpuUsage, another process (the server) through /proc/<pid>/stat (Linux; null elsewhere).
// Near 100 % for the server means the numbers are the server's single-thread limit; a load
// generator near 100 % would mean the client is the bottleneck.

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ, 100 on Linux

function processSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm) ": state is field 3, utime 14 and stime 15 (1-based).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

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
      serverPercent: otherStart !== undefined && otherEnd !== undefined ? Math.round(((otherEnd - otherStart) / wall) * 100) : null,
    };
  };
}
