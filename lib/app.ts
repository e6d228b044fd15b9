import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Annotations, App, Validations, type AppProps } from 'aws-cdk-lib';
import { BUNDLING_STACKS } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { environmentNames, type EnvironmentConfig, type EnvironmentName } from './config';
import { ServiceStack } from './service-stack';
import { resolveConfigs, SETTINGS_CONTEXT_KEY } from './settings';
import { repoRoot } from './util';

/** The feature flags of cdk.json: the CLI and the tests synthesize with the same ones. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(join(repoRoot, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  return cdkJson.context ?? {};
}

export interface ServiceAppOptions extends AppProps {
  /**
   * Configuration per environment (tests). Without it, the settings file that the context key
   * `settings` names (lib/settings.ts), read and validated before any construct exists.
   */
  readonly configs?: Partial<Record<EnvironmentName, EnvironmentConfig>>;
  /** Run the cdk-nag AwsSolutions pack (default true). */
  readonly nag?: boolean;
  /** Which stacks to build (default: those with a configuration). */
  readonly environments?: readonly EnvironmentName[];
}

/**
 * The context key of a first deploy (`-c firstDeploy=true`): deletion protection of the tables and
 * the NLB and the stack's termination protection stay off, so that a create that fails can roll
 * back completely and be tried again (protected resources cannot be deleted by the rollback). The
 * next deploy without it switches them on (docs/deploying.md, "First deploy").
 */
export const FIRST_DEPLOY_CONTEXT_KEY = 'firstDeploy';

/** The CDK app: one stack per configured environment, `svcnum-sandbox` and `svcnum-production`. */
export function createServiceApp(options: ServiceAppOptions = {}) {
  const { configs: given, nag = true, environments, ...appProps } = options;
  const app = new App({ ...appProps, context: { ...cdkJsonContext(), ...appProps.context } });
  let configs = given;
  if (!configs) {
    const selection = app.node.tryGetContext(BUNDLING_STACKS) as string[] | undefined;
    const resolved = resolveConfigs(app.node.tryGetContext(SETTINGS_CONTEXT_KEY) as string | undefined, selection);
    for (const line of resolved.skipped) process.stderr.write(`${line}\n`);
    configs = resolved.configs;
  }
  const firstDeploy = String(app.node.tryGetContext(FIRST_DEPLOY_CONTEXT_KEY)) === 'true';
  const stacks = {} as Record<EnvironmentName, ServiceStack>;
  for (const name of environments ?? environmentNames.filter((environment) => configs[environment])) {
    const configured = configs[name];
    if (!configured) throw new Error(`no configuration for ${name}`);
    const config = firstDeploy ? { ...configured, deletionProtection: false } : configured;
    stacks[name] = new ServiceStack(app, { config });
    if (firstDeploy && configured.deletionProtection) {
      Annotations.of(stacks[name]).addWarningV2(
        'svcnum:first-deploy',
        `first deploy of ${name}: deletion and termination protection stay off until you deploy again without -c ` +
          `${FIRST_DEPLOY_CONTEXT_KEY}=true`,
      );
    }
  }
  // cdk-nag 3: a policy validation plugin; any unacknowledged finding fails the synth.
  if (nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { app, stacks };
}
