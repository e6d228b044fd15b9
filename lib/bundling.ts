// How every Lambda route group is bundled: one place for the stack (NodejsFunction) and the
// bundle benchmark (bench/lambda-bundles.ts), so the benchmark measures what is deployed.
// Plain data: no aws-cdk-lib import.

/**
 * ESM output (our code is ESM with top-level imports). A bundled CommonJS dependency may still
 * call `require` for a Node built-in; esbuild's ESM output has no `require`, so one is made
 * from import.meta.url.
 */
export const lambdaBundle = {
  format: 'esm',
  platform: 'node',
  /** Lambda's nodejs22.x runtime. */
  target: 'node22',
  minify: true,
  /**
   * Names are not kept: keeping them cost about 26 KiB of every bundle, and what the logs show
   * needs none. Our one error class sets its `name` (DomainError), the SDK's errors set theirs, and
   * stack frames point into a minified file either way.
   */
  keepNames: false,
  sourceMap: false,
  mainFields: ['module', 'main'],
  banner:
    "import { createRequire as svcnumCreateRequire } from 'node:module'; const require = " +
    'svcnumCreateRequire(import.meta.url);',
  /**
   * The AWS SDK is bundled at the version the tests run (package-lock.json), not whatever version
   * the Lambda runtime happens to carry. One part of it is left out: the event-stream codec (about
   * 15 KiB), which the SDK loads with a dynamic import only for operations that stream events.
   * DynamoDB and KMS have none, so it is never loaded (the deployed-artifacts test runs every bundle).
   */
  externalModules: ['@smithy/core/event-streams'] as string[],
  /**
   * Module → repo-relative replacement. A Lambda function gets its credentials from environment
   * variables only, so the SDK's default credential chain (SSO, ini files, process, web identity,
   * IMDS, with nested STS/SSO clients: about 140 KiB of every minified bundle) becomes the environment
   * provider alone (lib/lambda-credentials.ts). Not for the gRPC image: ECS tasks get container
   * credentials. The DynamoDB client's endpoint cache gets a Map-based LRU (lib/lru-cache.ts, about
   * 6 KiB less).
   */
  alias: {
    '@aws-sdk/credential-provider-node': 'lib/lambda-credentials.ts',
    'mnemonist/lru-cache': 'lib/lru-cache.ts',
  } as Record<string, string>,
  /** The file NodejsFunction writes for ESM output. */
  outputFile: 'index.mjs',
} as const;
