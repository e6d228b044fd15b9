// Environment of the local runner and admin CLI (design brief §5): PORT, GRPC_PORT, DYNAMODB_PORT,
// DATA_DIR, ISSUER, HOST and the service's settings, read and validated by
// core/adapters/runtime-config.ts. A problem is something a person can fix: one line, no stack.

import { readRuntimeConfig, type Environment, type LocalRuntimeConfig } from '../core/adapters/runtime-config';
import { LocalStartError } from './start-errors';

export function localEnvironment(env: Environment = process.env): LocalRuntimeConfig {
  try {
    return readRuntimeConfig('local', env);
  } catch (error) {
    throw new LocalStartError((error as Error).message);
  }
}
