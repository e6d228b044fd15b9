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
  /** Class and function names survive minification: readable logs and error names. */
  keepNames: true,
  sourceMap: false,
  mainFields: ['module', 'main'],
  banner: "import { createRequire as svcnumCreateRequire } from 'node:module'; const require = svcnumCreateRequire(import.meta.url);",
  /**
   * Nothing is external: the AWS SDK is bundled at the version the tests run (package-lock.json),
   * not whatever version the Lambda runtime happens to carry.
   */
  externalModules: [] as string[],
  /** The file NodejsFunction writes for ESM output. */
  outputFile: 'index.mjs',
} as const;
