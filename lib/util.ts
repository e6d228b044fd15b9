import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type { IRole } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { OutputFormat, type BundlingOptions, type NodejsFunctionProps } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { lambdaBundle } from './bundling';
import type { EnvironmentConfig, LogRetentionDays } from './config';

/** The repository root: Lambda entries, package-lock.json and the Docker build context. */
export const repoRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/**
 * What becomes of a stateful resource (table, KMS key, log group, bucket) when the stack or the
 * resource goes. Retained ones survive updates and deletes but not a failed create
 * (CloudFormation `RetainExceptOnCreate`): a first deploy that rolls back leaves nothing behind
 * whose fixed name would make the retry fail with "already exists". The rest is deleted.
 */
export const statefulRemovalPolicy = (retain: boolean) =>
  retain ? RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE : RemovalPolicy.DESTROY;

/** RetentionDays' values are the day counts themselves; config.ts only allows valid ones. */
export const logRetention = (days: LogRetentionDays) => days as unknown as RetentionDays;

/** The log group of a function of ours (`name`), made before the function so that it owns it. */
export const functionLogGroup = (
  scope: Construct,
  id: string,
  name: string,
  config: Pick<EnvironmentConfig, 'logRetentionDays' | 'retainData'>,
) =>
  new LogGroup(scope, id, {
    logGroupName: `/aws/lambda/${name}`,
    retention: logRetention(config.logRetentionDays),
    removalPolicy: statefulRemovalPolicy(config.retainData),
  });

/**
 * What every Node.js function of ours shares: Node 22 on arm64, bundled as lib/bundling.ts says, with its own role and
 * log group.
 */
export function nodejsFunctionProps(p: {
  entry: string;
  memoryMiB: number;
  timeoutSeconds: number;
  role: IRole;
  logGroup: LogGroup;
}): NodejsFunctionProps {
  return {
    entry: join(repoRoot, p.entry),
    handler: 'handler',
    projectRoot: repoRoot,
    depsLockFilePath: join(repoRoot, 'package-lock.json'),
    runtime: Runtime.NODEJS_22_X,
    architecture: Architecture.ARM_64,
    memorySize: p.memoryMiB,
    timeout: Duration.seconds(p.timeoutSeconds),
    role: p.role,
    logGroup: p.logGroup,
    bundling: nodejsBundling(),
  };
}

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
    esbuildArgs: {
      '--alias': Object.entries(lambdaBundle.alias).map(
        ([module, replacement]) => `${module}=${join(repoRoot, replacement)}`,
      ),
    },
  };
}
