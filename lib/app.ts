import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Validations, type AppProps } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { environmentConfig, environmentNames, type EnvironmentConfig, type EnvironmentName } from './config';
import { ServiceStack } from './service-stack';
import { repoRoot } from './util';

/** The feature flags of cdk.json: the CLI and the tests synthesize with the same ones. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(join(repoRoot, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  return cdkJson.context ?? {};
}

export interface ServiceAppOptions extends AppProps {
  /** Configuration per environment (default: lib/config.ts for the process environment). */
  readonly configs?: Partial<Record<EnvironmentName, EnvironmentConfig>>;
  /** Run the cdk-nag AwsSolutions pack (default true). */
  readonly nag?: boolean;
  /** Which stacks to build (default: both). */
  readonly environments?: readonly EnvironmentName[];
}

/** The CDK app: one stack per environment, `svcnum-sandbox` and `svcnum-production`. */
export function createServiceApp(options: ServiceAppOptions = {}) {
  const { configs = {}, nag = true, environments = environmentNames, ...appProps } = options;
  const app = new App({ ...appProps, context: { ...cdkJsonContext(), ...appProps.context } });
  const stacks = {} as Record<EnvironmentName, ServiceStack>;
  for (const name of environments) {
    stacks[name] = new ServiceStack(app, { config: configs[name] ?? environmentConfig(name) });
  }
  // cdk-nag 3: a policy validation plugin; any unacknowledged finding fails the synth.
  if (nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { app, stacks };
}
