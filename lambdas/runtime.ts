import type { Context } from 'aws-lambda';
import { modulesFromEnvironment, type StoreOption } from '../core/adapters/aws-environment';
import { readLambdaConfig, type AwsRuntimeConfig, type MacKeyVariable } from '../core/adapters/runtime-config';
import type { AnyModuleDefinition, ModulesOf } from '../core/registry';
import type { HttpEvent, HttpResult } from './http';

type Handler = (event: HttpEvent, context: Context) => Promise<HttpResult>;

/**
 * The exported Lambda handler of a route group, given the modules its routes use (their
 * definitions, so the bundle holds only their code): on the first invocation the function's
 * configuration is read from its environment (once; a problem fails that invocation with every
 * problem named), those modules built from it, and the handler; then reused. Options: `store`,
 * the DynamoDB slices that serve those modules (checked at compile time; none where they read no
 * store); `macKeys`, the MAC-key variables its routes use, so a missing one fails the first
 * invocation, not the first request using it.
 */
export function lambdaHandler<const D extends readonly AnyModuleDefinition[]>(
  definitions: D,
  create: (modules: ModulesOf<D>, config: AwsRuntimeConfig) => Handler,
  options: StoreOption<D> & { macKeys?: readonly MacKeyVariable[] },
): Handler {
  let built: Handler | undefined;
  return (event, context) => {
    if (!built) {
      const config = readLambdaConfig(process.env, options.macKeys);
      built = create(modulesFromEnvironment(config, definitions, options), config);
    }
    return built(event, context);
  };
}
