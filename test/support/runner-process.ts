import { spawn, type ChildProcess } from 'node:child_process';
import { bundledScript } from './bundled';

// The service as `npm start` serves it: local/start.ts in its own process, from an esbuild bundle on
// plain node (./bundled.ts; `npm start` bundles it with the task's options instead, and
// test/local-start-bundled.test.ts runs that launcher itself).

export interface RunnerProcess {
  child: ChildProcess;
  output: string;
  issuer: string;
  grpcPort: number;
  dynamoPort: number;
  stop(): Promise<void>;
}

/** Starts the runner with `env` added to ours; resolves once it prints that it is running. */
export async function startRunnerProcess(env: Record<string, string>): Promise<RunnerProcess> {
  const child = spawn(process.execPath, [await bundledScript('local/start.ts')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no start within 30 s:\n${output}`));
    }, 30_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const issuer = /issuer\s+(\S+)/.exec(output)?.[1];
      const grpc = /gRPC provisioning \S+:(\d+)/.exec(output)?.[1];
      const dynamo = /embedded DynamoDB http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1];
      if (issuer && grpc && dynamo && output.includes('Register clients')) {
        clearTimeout(timer);
        resolve({ child, output, issuer, grpcPort: Number(grpc), dynamoPort: Number(dynamo), stop });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}:\n${output}`));
    });
  });
}
