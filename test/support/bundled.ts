import { basename, join } from 'node:path';
import { repoRoot } from '../../lib/util';
import { adminBundle } from '../../local/admin-bundle.mjs';

// Our service processes in tests run as `npm start` and `npm run admin` run our code: from an
// esbuild bundle on plain node, not through tsx. A start then costs about a quarter of tsx's CPU
// (which compiles every source again in each process), and the suite starts dozens. Each entry's
// bundle is built once and kept until one of its sources changes (local/admin-bundle.mjs).

/** The path of the current bundle of `entry` (a path from the repository's root), built first if needed. */
export async function bundledScript(entry: string): Promise<string> {
  const name = basename(entry, '.ts');
  const cache = join(repoRoot, 'node_modules', '.cache', 'svcnum-tests', entry.replaceAll('/', '+'));
  return join(await adminBundle({ entry, name, cache }), `${name}.mjs`);
}
