// Cleanup that must run however the bench ends: normal end, a thrown error, Ctrl-C or SIGTERM.
// Tasks run newest first (a child process is stopped before the folder it writes to is removed).

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
