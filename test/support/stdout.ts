import { vi } from 'vitest';

/**
 * Holds back what is written to stdout (log and metric lines) from now until `restore`; `written` reads it meanwhile.
 */
export function stdoutCapture() {
  const written: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  });
  return {
    written: () => written.join(''),
    restore: () => spy.mockRestore(),
  };
}

/** Everything written to stdout while `run` runs (log and metric lines), held back from the test output. */
export async function capturedStdout(run: () => unknown): Promise<string> {
  const capture = stdoutCapture();
  try {
    await run();
  } finally {
    capture.restore();
  }
  return capture.written();
}
