import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputFormat, type BundlingOptions } from 'aws-cdk-lib/aws-lambda-nodejs';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { lambdaBundle } from './bundling';
import type { LogRetentionDays } from './config';

/** The repository root: Lambda entries, package-lock.json and the Docker build context. */
export const repoRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/** RetentionDays' values are the day counts themselves; config.ts only allows valid ones. */
export const logRetention = (days: LogRetentionDays) => days as unknown as RetentionDays;

/** NodejsFunction's bundling of every function of ours, from lib/bundling.ts (what the bundle benchmark builds too). */
export function nodejsBundling(): BundlingOptions {
  return {
    // No Docker here or in CI: bundle with the esbuild installed in node_modules.
    forceDockerBundling: false,
    format: lambdaBundle.format === 'esm' ? OutputFormat.ESM : OutputFormat.CJS,
    target: lambdaBundle.target,
    minify: lambdaBundle.minify,
    keepNames: lambdaBundle.keepNames,
    sourceMap: lambdaBundle.sourceMap,
    mainFields: [...lambdaBundle.mainFields],
    banner: lambdaBundle.banner,
    externalModules: [...lambdaBundle.externalModules],
    // NodejsFunction has no alias option; its esbuild CLI runs with cwd projectRoot, and an
    // absolute replacement path does not depend on that.
    esbuildArgs: { '--alias': Object.entries(lambdaBundle.alias).map(([module, replacement]) => `${module}=${join(repoRoot, replacement)}`) },
  };
}
