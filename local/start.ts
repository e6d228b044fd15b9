// Lambda runs Node 22; the SDK's notice about Node 20 is noise on a laptop and in CI.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { resolve } from 'node:path';
import { ensureDemo, demoClient } from './demo';
import { localEnvironment, withinThreadPool } from './environment';
import { startLocal, type LocalService } from './runner';
import { hostPort, LocalStartError } from './start-errors';
import { batchStdoutWrites } from './stdout-batching';
import { DomainError } from '../core/kernel/errors';

// `npm start`: the whole service on this machine, no AWS account, no Docker.

async function start(): Promise<LocalService> {
  const env = localEnvironment();
  let demoExtra: ReturnType<typeof demoClient> | undefined;
  const service = await startLocal({
    dataDir: env.dataDir,
    host: env.host,
    port: env.port,
    dynamoPort: env.dynamoPort,
    grpcPort: env.grpcPort,
    grpcReflection: env.grpcReflection,
    ...env.service,
    signIn: withinThreadPool(env.service.signIn),
    ...(env.issuer ? { issuer: env.issuer } : {}),
    extra: () => (request, url, response) => (demoExtra ? demoExtra(request, url, response) : Promise.resolve(false)),
  });
  // The demo client needs a redirect URI we accept for login clients: https, or http on a
  // loopback host. An issuer like http://192.0.2.2:3000 (HOST=0.0.0.0) gets no demo, but starts.
  let demo: Awaited<ReturnType<typeof ensureDemo>> | undefined;
  try {
    demo = await ensureDemo(service.core, env.dataDir, service.issuer);
    demoExtra = demoClient(service.issuer, demo.clientId);
  } catch (error) {
    if (!(error instanceof DomainError && error.kind === 'invalid_argument')) {
      await service.close();
      throw error;
    }
    process.stderr.write(`demo app not available: ${error.message}\n`);
  }

  const lines = [
    '',
    `svcnum identity service is running (data in ${resolve(env.dataDir)})`,
    `  issuer            ${service.issuer}   (HTTP listens on ${hostPort(service.host, service.port)})`,
    `  discovery         ${service.issuer}/.well-known/openid-configuration`,
    `  gRPC provisioning ${hostPort(service.host, service.grpcPort)} (plaintext; health, ` +
      `reflection${env.grpcReflection === 'token' ? ' with a provisioning token' : ''})`,
    `  embedded DynamoDB ${service.dynamoEndpoint}`,
    '',
    ...(demo
      ? [
          'Try a sign-in:',
          `  1. open ${service.issuer}/demo`,
          `  2. sign in as ${demo.email} with password ${demo.password}`,
          '  3. press Allow: the demo app swaps the code for tokens and shows UserInfo',
          `  demo login client_id: ${demo.clientId} (redirect ${service.issuer}/demo/callback)`,
          '',
        ]
      : []),
    'Register clients and users with: npm run --silent admin -- help',
    '',
  ];
  process.stderr.write(lines.join('\n'));
  return service;
}

// The request log's lines leave one write per turn of the event loop, not one each.
batchStdoutWrites();

let service: LocalService;
try {
  service = await start();
} catch (error) {
  // Something a person can fix gets one line; anything else its stack as well.
  process.stderr.write(
    error instanceof LocalStartError
      ? `npm start: ${error.message}\n`
      : `npm start failed: ${(error as Error).stack ?? String(error)}\n`,
  );
  process.exit(1);
}

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\n${signal}: shutting down\n`);
    service.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
