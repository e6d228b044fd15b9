// The Fargate task's entry point: the gRPC server on GRPC_PORT (default 50051), the core built
// from the task's environment (see core/adapters/aws-environment.ts). TLS ends at the NLB.
// On SIGTERM (ECS stopping the task) health turns NOT_SERVING, calls in flight get up to
// DRAIN_SECONDS (default 25, below ECS's 30 s stop timeout) to finish, then the process exits.

import { coreFromEnvironment } from '../core/adapters/aws-environment';
import { logger } from './calls';
import { startGrpcServer } from './server';

const port = Number(process.env.GRPC_PORT ?? 50051);
const drainSeconds = Number(process.env.DRAIN_SECONDS ?? 25);
const running = await startGrpcServer(coreFromEnvironment(), { port });
logger.info('listening', { port: running.port });

process.once('SIGTERM', () => {
  logger.info('SIGTERM: draining', { drainSeconds });
  running.drain(drainSeconds * 1000).then(() => process.exit(0));
});
