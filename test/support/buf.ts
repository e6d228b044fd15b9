import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// The real `buf curl` (devDependency @bufbuild/buf), as a person runs it against the gRPC port:
// schema from server reflection alone.

const buf = fileURLToPath(new URL('../../node_modules/.bin/buf', import.meta.url));

export interface BufResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** `buf curl` over plaintext HTTP/2 (asynchronous: the service may run in the test's own process). */
export function bufCurl(args: string[]): Promise<BufResult> {
  return new Promise((resolve) => {
    execFile(
      buf,
      ['curl', '--protocol', 'grpc', '--http2-prior-knowledge', ...args],
      { encoding: 'utf8', timeout: 20_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? -1) : 0, stdout, stderr });
      },
    );
  });
}
