import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longest-first';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
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
  },
});
