// Cleanup that must run however the bench ends: normal end, a thrown error, Ctrl-C or SIGTERM.
// Tasks run newest first (a child process is stopped before the folder it writes to is removed).

import { fileURLToPath } from 'node:url';

type Task = () => Promise<void> | void;

const tasks: Task[] = [];
let running: Promise<void> | undefined;

export function onCleanup(task: Task): void {
  tasks.push(task);
}

export function runCleanup(): Promise<void> {
  running ??= (async () => {
    while (tasks.length > 0) {
      const task = tasks.pop()!;
      try {
        await task();
      } catch (error) {
        process.stderr.write(`cleanup failed: ${error instanceof Error ? error.message : String(error)}\n`);
      }
    }
  })();
  return running;
}

/** Ctrl-C / SIGTERM: clean up, then exit with the conventional 128+signal code. */
export function cleanupOnSignals(): void {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    process.once(signal, () => {
      process.stderr.write(`\n${signal}: cleaning up\n`);
      void runCleanup().finally(() => process.exit(code));
    });
  }
}

/** A bench's progress line, on stderr (stdout holds its report). */
export function benchLog(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/**
 * Runs `main` when the module at `moduleUrl` is the script node was started with (a bench run on its
 * own): cleanup however it ends, a failure on stderr with exit code 1.
 */
export async function runAsScript(moduleUrl: string, main: () => Promise<void>): Promise<void> {
  if (!process.argv[1] || fileURLToPath(moduleUrl) !== process.argv[1]) return;
  cleanupOnSignals();
  try {
    await main();
  } catch (error) {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  } finally {
    await runCleanup();
  }
}
