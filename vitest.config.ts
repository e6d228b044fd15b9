import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longest-first';

/** Files that mock AWS clients or stub the environment a process reads once (see `projects`). */
const PROCESS_STATE_FILES = [
  'test/deployed-artifacts.test.ts',
  'test/infra/admin-env.test.ts',
  'test/kms-signer.test.ts',
  'test/kms-throttling.test.ts',
  'test/lambda-metrics.test.ts',
  'test/logging.test.ts',
  'test/mac-key.test.ts',
  'test/messages-derived-failures.test.ts',
  'test/public-keys-handler.test.ts',
  'test/runtime-config.test.ts',
  'test/token-endpoint.test.ts',
];

export default defineConfig({
  test: {
    // Each file starts its own service (embedded DynamoDB on a free port, temporary data folder).
    pool: 'forks',
    // Vitest's default is one worker less than the cores: on a 2-core CI machine, one file at a
    // time. Most files wait on child processes, sockets and Chromium, so three share two cores
    // well (about 5.5 instead of 9 minutes here) and no test asserts a timing.
    maxWorkers: 3,
    // A guard against hangs, not a measure: the slowest tests (admin CLI processes, runs of scrypt
    // checks) take 15-25 s when three files share the two cores, and several times that when the
    // machine is loaded further (load average 20 here: timeouts of 60 s failed, and a test that
    // times out goes on in the background and fails the next ones of its file).
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // The longest files first, also on a clean clone (test/support/longest-first.ts).
    sequence: { sequencer: LongestFirst },
    // The default output, then every test skipped with a reason (`ctx.skip('why')`) and its reason:
    // a test that cannot run on this machine says so instead of passing by unseen.
    reporters: ['default', './test/support/skipped-reporter.ts'],
    env: {
      LOG_LEVEL: 'SILENT',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    // Most files share each worker's module cache (isolate: false): the AWS SDK, grpc-js and the
    // service load once per worker instead of once per file, about a quarter of the suite's CPU.
    // The files that change what a process holds (mocked AWS clients, stubbed environment variables
    // read once per process, the Lambda edge's cold start) keep a fresh module cache each.
    projects: [
      {
        extends: true,
        test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: PROCESS_STATE_FILES, isolate: false },
      },
      { extends: true, test: { name: 'isolated', include: PROCESS_STATE_FILES } },
    ],
  },
});
