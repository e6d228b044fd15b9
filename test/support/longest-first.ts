import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files that take longest (measured on a 2-core machine, `npx vitest run --reporter=json`):
 * started first, so that the workers finish together instead of one starting a long file last.
 * Longest first.
 */
const SLOWEST = [
  'test/sign-in-abuse.test.ts',
  'test/messages.test.ts',
  'test/provisioning-crash.test.ts',
  'test/infra/stacks.test.ts',
  'test/messages-cursor.test.ts',
  'test/browser-security.test.ts',
  'test/provisioning-pool.test.ts',
  'test/browser-pages.test.ts',
  'test/local-start.test.ts',
  'test/readme.test.ts',
];

/**
 * Vitest orders by the durations of the last run it remembers (node_modules/.vite), and without
 * them by file size. A clean clone (CI) has none: there the files above go first, then the rest
 * by size.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const key = (file: TestSpecification) => `${file.project.name}:${relative(this.ctx.config.root, file.moduleId)}`;
    const remembered = sorted.filter((file) => this.ctx.cache.getFileTestResults(key(file))).length;
    if (remembered >= sorted.length / 2) return sorted;
    const rank = (file: TestSpecification) => {
      const index = SLOWEST.indexOf(relative(this.ctx.config.root, file.moduleId));
      return index === -1 ? SLOWEST.length : index;
    };
    return sorted
      .map((file, order) => ({ file, order }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.order - b.order)
      .map(({ file }) => file);
  }
}
