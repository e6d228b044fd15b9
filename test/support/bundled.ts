import { basename, join } from 'node:path';
import { repoRoot } from '../../lib/util';
import { adminBundle } from '../../local/admin-bundle.mjs';

// Our service processes in tests run from an esbuild bundle on plain node, as the admin CLI runs
// (local/admin-bundle.mjs, packages bundled), not through tsx. A start then costs about a quarter of tsx's CPU
// (which compiles every source again in each process), and the suite starts dozens. Each entry's
// bundle is built once and kept until one of its sources changes (local/admin-bundle.mjs).

/** The path of the current bundle of `entry` (a path from the repository's root), built first if needed. */
export async function bundledScript(entry: string): Promise<string> {
  const name = basename(entry, '.ts');
  const cache = join(repoRoot, 'node_modules', '.cache', 'svcnum-tests', entry.replaceAll('/', '+'));
  // grpc-health-check reads its .proto from its own folder: it stays a package.
  return join(await adminBundle({ entry, name, cache, external: ['grpc-health-check'] }), `${name}.mjs`);
}
