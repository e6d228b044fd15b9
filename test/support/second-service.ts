import { credentials } from '@grpc/grpc-js';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { NumberServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { bundledScript } from './bundled';
import type { TestService } from './service';

// The parent side of test/support/second-process.ts: another service process against a running
// test service's embedded DynamoDB and keys (another Fargate task and messages Lambda).

const REPO = fileURLToPath(new URL('../..', import.meta.url));

export interface SecondProcess {
  child: ChildProcessWithoutNullStreams;
  grpcPort: number;
  httpPort: number;
  numbers: NumberServiceClient;
  /** Its stdout lines after the ready line (its log lines, when `env` sets a LOG_LEVEL). */
  lines: string[];
  /** SIGTERM: drains and exits. */
  stop(): Promise<void>;
}

/** Starts it with `env` added (LOG_LEVEL SILENT unless given); resolves once it listens. */
export async function startSecondProcess(
  service: TestService,
  env: Record<string, string> = {},
): Promise<SecondProcess> {
  const child = spawn(process.execPath, [await bundledScript('test/support/second-process.ts')], {
    cwd: REPO,
    env: {
      ...process.env,
      DYNAMO_ENDPOINT: service.dynamoEndpoint,
      DATA_DIR: service.dataDir,
      ISSUER: service.issuer,
      LOG_LEVEL: 'SILENT',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines: string[] = [];
  const ports = await new Promise<{ grpcPort: number; httpPort: number }>((resolve, reject) => {
    let ready = false;
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (ready) return void lines.push(line);
      try {
        const parsed = JSON.parse(line) as { grpcPort?: number; httpPort?: number };
        if (parsed.grpcPort && parsed.httpPort) {
          ready = true;
          resolve({ grpcPort: parsed.grpcPort, httpPort: parsed.httpPort });
        }
      } catch {
        // not the ready line
      }
    });
    child.once('exit', (code) => reject(new Error(`second process exited (${code}): ${stderr}`)));
  });
  const numbers = new NumberServiceClient(`127.0.0.1:${ports.grpcPort}`, credentials.createInsecure());
  return {
    child,
    ...ports,
    numbers,
    lines,
    async stop() {
      numbers.close();
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}
