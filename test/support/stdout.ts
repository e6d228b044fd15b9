import { vi } from 'vitest';

/** Everything written to stdout while `run` runs (log and metric lines), held back from the test output. */
export async function capturedStdout(run: () => unknown): Promise<string> {
  const written: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  });
  try {
    await run();
  } finally {
    spy.mockRestore();
  }
  return written.join('');
}
