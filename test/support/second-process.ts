// A second service process for the multiprocess tests, run from its bundle (./bundled.ts)
// with DYNAMO_ENDPOINT, DATA_DIR and ISSUER of a running test service. It builds its own core
// against the same embedded DynamoDB and the same key folder (so tokens verify here too) and
// serves the gRPC API plus the message ingress (what another Fargate task and a Lambda would be).
// Prints one JSON line {"grpcPort", "httpPort"} once listening; SIGTERM drains and exits. With
// VALKEY_URL it wakes and is woken through that engine (test/support/process-core.ts); GRPC_REFLECTION
// applies as in the task.

import { readRuntimeConfig } from '../../core/adapters/runtime-config';
import { startGrpcServer } from '../../grpc-service/server';
import { modulesOf, routeGroups } from '../../lambdas/routes';
import { startHttpServer, type LambdaHandler, type LocalRoute } from '../../local/http-server';
import { processCore } from './process-core';

const { modules, client, inboxWakeups } = await processCore();
const { grpcReflection } = readRuntimeConfig('local', { GRPC_REFLECTION: process.env.GRPC_REFLECTION });
const grpc = await startGrpcServer(modules, { port: 0, host: '127.0.0.1', reflection: grpcReflection });
const messages = routeGroups.messages;
const handler = messages.create(modulesOf('messages', modules)) as LambdaHandler;
const routes = new Map<string, LocalRoute>(
  Object.keys(messages.routes).map((path) => [path, { handler, functionName: 'second-messages' }]),
);
const http = await startHttpServer(routes, { port: 0, host: '127.0.0.1' }, () => Promise.resolve(false));
process.stdout.write(`${JSON.stringify({ grpcPort: grpc.port, httpPort: http.port })}\n`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await grpc.drain(2_000);
  http.server.close();
  http.server.closeAllConnections();
  await inboxWakeups?.close();
  client.destroy();
  process.exit(0);
}
process.once('SIGTERM', () => void stop());
// The parent going away (its stdin pipe closing) also ends this process.
process.stdin.on('end', () => void stop());
process.stdin.resume();
