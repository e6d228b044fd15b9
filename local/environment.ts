// Environment of the local runner and admin CLI (design brief §5): PORT, GRPC_PORT, DYNAMODB_PORT,
// DATA_DIR, ISSUER, HOST and the service's settings, read and validated by
// core/adapters/runtime-config.ts. A problem is something a person can fix: one line, no stack.

import { readRuntimeConfig, type Environment, type LocalRuntimeConfig } from '../core/adapters/runtime-config';
import type { SignInLimits } from '../core/oauth/sign-in-guard';
import { LocalStartError } from './start-errors';

export function localEnvironment(env: Environment = process.env): LocalRuntimeConfig {
  try {
    return readRuntimeConfig('local', env);
  } catch (error) {
    throw new LocalStartError((error as Error).message);
  }
}

/** The size of this process's libuv thread pool, read as libuv reads UV_THREADPOOL_SIZE (unset: 4; else 1 to 1024). */
export function threadPoolSize(env: Environment = process.env): number {
  const value = env.UV_THREADPOOL_SIZE;
  // libuv takes atoi() of any value that is set, an empty one too (0, so one thread).
  if (value === undefined) return 4;
  return Math.min(1024, Math.max(1, Number.parseInt(value, 10) || 0));
}

/**
 * Sign-in limits whose password checks (scrypt, ~0.3 s on the pool each) leave at least one thread
 * of the pool to everything else: the signature of every token and the embedded database's I/O
 * run there too, and would otherwise wait behind a burst of sign-ins.
 */
export const withinThreadPool = (limits: SignInLimits, pool: number = threadPoolSize()): SignInLimits => ({
  ...limits,
  concurrentChecks: Math.min(limits.concurrentChecks, Math.max(1, pool - 1)),
});
