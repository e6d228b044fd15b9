import type { Reporter, TestCase } from 'vitest/node';

/**
 * Lists, at the end of a run, every test skipped with a reason (`ctx.skip('why')`), whatever the
 * reporter: the default one counts skipped tests but names none, so a test that cannot run on this
 * machine would otherwise pass by unseen.
 */
export default class SkippedReporter implements Reporter {
  private readonly skipped: string[] = [];

  onTestCaseResult(testCase: TestCase) {
    const result = testCase.result();
    if (result.state === 'skipped' && result.note)
      this.skipped.push(
        `  ${testCase.module.moduleId.replace(`${process.cwd()}/`, '')} > ${testCase.fullName}: ${result.note}`,
      );
  }

  onTestRunEnd() {
    if (this.skipped.length === 0) return;
    process.stdout.write(`\nSkipped, and why:\n${this.skipped.join('\n')}\n`);
  }
}
