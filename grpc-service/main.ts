// The Fargate task's entry point: the gRPC server on GRPC_PORT (default 50051), its modules built
// from the task's environment (core/adapters/runtime-config.ts, aws-environment.ts). TLS ends at the NLB.
// Its health also answers over HTTP on HEALTH_PORT (default 8081) for the NLB and the container
// health check (health-endpoint.ts). On SIGTERM (ECS stopping the task) health turns NOT_SERVING
// (503 there), calls in flight get up to DRAIN_SECONDS (default 25, below ECS's 30 s stop timeout)
// to finish, then the process exits.

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { modulesFromEnvironment } from '../core/adapters/aws-environment';
import { wholeDynamoStore } from '../core/adapters/dynamo-store';
import { readRuntimeConfig } from '../core/adapters/runtime-config';
import { engineWakeups } from '../core/adapters/valkey-wakeups';
import { logger } from './calls';
import { startHealthEndpoint } from './health-endpoint';
import { grpcModules, startGrpcServer } from './server';

// Read and validated once; a problem stops the task at start with every problem named.
const config = readRuntimeConfig('task');
const { drainSeconds } = config;
// Streams here are woken through the pub/sub engine (VALKEY_URL) by every writer, in any process.
// Signed in by IAM (VALKEY_IAM_AUTH) with the task role's credentials, as the SDK's default chain
// resolves and refreshes them (container credentials).
const iam = config.service.wakeupEngine?.iam !== undefined;
const inboxWakeups = engineWakeups(
  config.service,
  iam ? { credentials: new DynamoDBClient({}).config.credentials } : {},
);
const running = await startGrpcServer(
  modulesFromEnvironment(config, grpcModules, { store: wholeDynamoStore }, inboxWakeups),
  { port: config.grpcPort, reflection: config.grpcReflection },
);
const health = await startHealthEndpoint(running.healthStatus, { port: config.healthPort });
logger.info('listening', { port: running.port, healthPort: health.port, reflection: config.grpcReflection });

process.once('SIGTERM', () => {
  logger.info('SIGTERM: draining', { drainSeconds });
  running
    .drain(drainSeconds * 1000)
    .then(() => inboxWakeups?.close())
    .then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('drain failed', { error: error as Error });
        process.exit(1);
      },
    );
});
