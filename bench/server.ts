// The service under load, in its own process (spawned by bench/run.ts through bench/server-process.ts):
// a load generator sharing the event loop with the server would measure itself.
//
// Starts the local runner on free ports in DATA_DIR (created and removed by the parent), creates
// one login client and one user, and prints a single JSON line on stdout:
//   {"ready":true,"issuer":…,"clientId":…,"redirectUri":…,"scope":…,"email":…,"password":…}
// It stops on SIGTERM/SIGINT, and also when its stdin closes, so it never outlives the bench
// (then it removes DATA_DIR itself, since the parent is gone).

process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { BenchServerInfo } from './server-process';

const REDIRECT_URI = 'https://client.example/callback';
const SCOPE = 'openid profile email';

async function main() {
  const dataDir = process.env.DATA_DIR;
  if (!dataDir) throw new Error('DATA_DIR is required');
  // Imported after the environment is set: the handlers build their logger at load time.
  const { startLocal } = await import('../local/runner');
  const service = await startLocal({ dataDir, port: 0, dynamoPort: 0, grpcPort: 0 });

  let stopping = false;
  /** `orphaned`: the parent is gone (stdin closed), so nobody else will remove DATA_DIR. */
  const stop = (orphaned: boolean) => {
    if (stopping) return;
    stopping = true;
    const timer = setTimeout(() => process.exit(1), 3000);
    timer.unref();
    service.close()
      .then(() => (orphaned ? rm(dataDir, { recursive: true, force: true }) : undefined))
      .then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGTERM', () => stop(false));
  process.on('SIGINT', () => stop(false));
  process.stdin.on('end', () => stop(true));
  process.stdin.on('close', () => stop(true));
  process.stdin.resume();

  const { client } = await service.core.accounts.createLoginClient({ name: 'Bench app', scope: SCOPE, redirectUris: [REDIRECT_URI] });
  const email = `bench-${Date.now()}@example.com`;
  const password = randomBytes(12).toString('base64url');
  await service.core.accounts.createUser({ email, password });

  const info: BenchServerInfo = { ready: true, pid: process.pid, issuer: service.issuer, clientId: client.clientId, redirectUri: REDIRECT_URI, scope: SCOPE, email, password };
  process.stdout.write(`${JSON.stringify(info)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench server failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
