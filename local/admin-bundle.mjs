// The admin CLI's bundle (`npm run admin` runs it through local/admin-cli.mjs): local/admin.ts
// built by esbuild on demand instead of run through tsx, which compiles the TypeScript and
// resolves hundreds of package files on every run.
//
// A bundle lives in <cache>/<key>/, where <key> is a hash of all it was built from: the contents
// of every source file it bundles (esbuild's metafile lists them), the installed packages
// (package-lock.json and node_modules/.package-lock.json, which npm rewrites on every install)
// and this file. Each run
// recomputes the key from those files, so an edited source builds a new bundle before the command
// runs: it never runs stale code. Plain JavaScript: nothing to compile before it runs.

import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
/** Older bundles are removed this long after their last use, once nothing can still be loading their chunks. */
const KEEP_OLD_MS = 10 * 60_000;

/** What the installed packages are: the lock files npm writes (the one in node_modules on every install). */
const LOCK_FILES = ['node_modules/.package-lock.json', 'package-lock.json'];

/**
 * The key of a bundle of `inputs` (paths relative to `root`; packages are covered by the lock files).
 * `loaded` holds what the build read of some of them: a file saved while esbuild ran is keyed by the
 * contents that went into the bundle, so the next run sees the change and builds again.
 */
function keyOf(root, inputs, loaded = new Map()) {
  const hash = createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url)));
  for (const file of LOCK_FILES) {
    try {
      hash.update(`\0${file}\0`).update(readFileSync(join(root, file)));
    } catch {
      hash.update('\0(none)\0'); // installed by another tool: the sources still decide
    }
  }
  for (const file of inputs) hash.update(`\0${file}\0`).update(loaded.get(file) ?? readFileSync(join(root, file)));
  return hash.digest('hex').slice(0, 20);
}

/**
 * Our sources keep their own location in `import.meta.url`, as under tsx, rather than the bundle's
 * in the cache: what they find next to them (lib/util.ts's repoRoot, dynalite's path) stays right.
 * `npm start`'s bundle (local/start-bundled.mjs) too, whose watch mode is told of each file read here.
 */
export const sourceLocations = (root, loaded) => ({
  name: 'source-locations',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
      if (path.includes('/node_modules/')) return undefined;
      const bytes = await readFile(path);
      loaded.set(relative(root, path), bytes);
      const contents = bytes.toString('utf8').replaceAll('import.meta.url', JSON.stringify(pathToFileURL(path).href));
      return { contents, loader: 'ts', watchFiles: [path] };
    });
  },
});

/**
 * The folder of the current bundle of `entry` (its `<name>.mjs` exports what the entry does),
 * built first if any of its inputs changed since the last build. The tests run their service
 * processes from such bundles too (test/support/bundled.ts), each entry in a cache of its own.
 */
export async function adminBundle({
  root = repoRoot,
  entry = 'local/admin.ts',
  name = 'admin',
  cache = join(root, 'node_modules', '.cache', 'svcnum-admin'),
  external = [],
} = {}) {
  const inputsFile = join(cache, 'inputs.json');
  try {
    const folder = join(cache, keyOf(root, JSON.parse(readFileSync(inputsFile, 'utf8'))));
    statSync(join(folder, `${name}.mjs`));
    // In use: the clean-up of another run's build leaves it (and the chunks a command loads late) alone.
    const now = new Date();
    utimesSync(folder, now, now);
    return folder;
  } catch {
    // no build yet, an input gone, or its bundle removed: build
  }
  mkdirSync(cache, { recursive: true });
  const { build } = await import('esbuild');
  const staging = join(cache, `building-${randomUUID()}`);
  const loaded = new Map();
  const result = await build({
    absWorkingDir: root,
    entryPoints: { [name]: entry },
    bundle: true,
    // What a command imports when it runs (local/admin.ts) stays in chunks of its own.
    splitting: true,
    platform: 'node',
    // The packages' ES module builds, which esbuild can tree-shake (the AWS SDK's CommonJS builds are whole).
    mainFields: ['module', 'main'],
    target: 'node20',
    format: 'esm',
    outdir: staging,
    outExtension: { '.js': '.mjs' },
    // classic-level (under level) loads a native addon from its own folder; dynalite runs in a worker by its path.
    external: ['classic-level', 'dynalite', ...external],
    // Bundled CommonJS packages require Node's built-ins.
    banner: {
      js:
        "import { createRequire as __adminRequire } from 'node:module'; " +
        'const require = __adminRequire(import.meta.url);',
    },
    plugins: [sourceLocations(root, loaded)],
    metafile: true,
    logLevel: 'error',
  });
  const inputs = Object.keys(result.metafile.inputs)
    .filter((file) => !file.startsWith('node_modules/'))
    .sort();
  const key = keyOf(root, inputs, loaded);
  const folder = join(cache, key);
  try {
    renameSync(staging, folder);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another run built the same key first
  }
  const note = join(cache, `inputs-${randomUUID()}.json`);
  writeFileSync(note, JSON.stringify(inputs));
  renameSync(note, inputsFile);
  for (const entry of readdirSync(cache)) {
    const path = join(cache, entry);
    // Another run may be cleaning up at the same time: a folder already gone is skipped.
    const modified = statSync(path, { throwIfNoEntry: false })?.mtimeMs;
    if (entry !== key && entry !== 'inputs.json' && modified !== undefined && Date.now() - modified > KEEP_OLD_MS)
      rmSync(path, { recursive: true, force: true });
  }
  return folder;
}
