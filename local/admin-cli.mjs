// `npm run admin`: runs local/admin.ts from a bundle that esbuild builds on demand, instead of
// through tsx (which compiles the TypeScript and resolves hundreds of package files on every run).
//
// The bundle lives in node_modules/.cache/svcnum-admin/<key>/, where <key> is a hash of all it was
// built from: the contents of every source file it bundles (esbuild's metafile lists them), the
// installed packages (node_modules/.package-lock.json, which npm rewrites on every install) and
// this file. Each run recomputes the key from those files, so an edited source builds a new bundle
// before the command runs: it never runs stale code. Plain JavaScript: nothing to compile here.

import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// Lambda runs Node 22; the SDK's notice about Node 20 is noise on a laptop and in CI.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const root = fileURLToPath(new URL('..', import.meta.url));
const cache = join(root, 'node_modules', '.cache', 'svcnum-admin');
const inputsFile = join(cache, 'inputs.json');
const ENTRY = 'local/admin.ts';

/** The key of a bundle of `inputs` (paths relative to the root; packages are covered by the lock file). */
function keyOf(inputs) {
  const hash = createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url)));
  for (const file of ['node_modules/.package-lock.json', ...inputs]) hash.update(`\0${file}\0`).update(readFileSync(join(root, file)));
  return hash.digest('hex').slice(0, 20);
}

/** The current bundle's folder, if the last build's inputs are unchanged. */
function current() {
  try {
    const key = keyOf(JSON.parse(readFileSync(inputsFile, 'utf8')));
    statSync(join(cache, key, 'admin.mjs'));
    return join(cache, key);
  } catch {
    return undefined; // no build yet, an input gone, or its bundle removed: build
  }
}

async function build() {
  const { build: esbuild } = await import('esbuild');
  const staging = join(cache, `building-${randomUUID()}`);
  const result = await esbuild({
    absWorkingDir: root,
    entryPoints: { admin: ENTRY },
    bundle: true,
    // Each command's imports (local/admin.ts imports them when it runs) stay separate chunks.
    splitting: true,
    platform: 'node',
    // The packages' ES module builds, which esbuild can tree-shake (the AWS SDK's CommonJS builds are whole).
    mainFields: ['module', 'main'],
    target: 'node20',
    format: 'esm',
    outdir: staging,
    outExtension: { '.js': '.mjs' },
    // level loads a native addon from its own folder; dynalite runs in a worker by its path.
    external: ['level', 'dynalite'],
    // Bundled CommonJS packages require Node's built-ins.
    banner: { js: "import { createRequire as __adminRequire } from 'node:module'; const require = __adminRequire(import.meta.url);" },
    metafile: true,
    logLevel: 'error',
  });
  const inputs = Object.keys(result.metafile.inputs).filter((file) => !file.startsWith('node_modules/')).sort();
  const key = keyOf(inputs);
  const folder = join(cache, key);
  try {
    renameSync(staging, folder);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another run built the same key first
  }
  const note = join(cache, `inputs-${randomUUID()}.json`);
  writeFileSync(note, JSON.stringify(inputs));
  renameSync(note, inputsFile);
  // Older bundles: removed once nothing can still be loading their chunks.
  for (const name of readdirSync(cache)) {
    const path = join(cache, name);
    if (name !== key && name !== 'inputs.json' && Date.now() - statSync(path).mtimeMs > 10 * 60_000) rmSync(path, { recursive: true, force: true });
  }
  return folder;
}

mkdirSync(cache, { recursive: true });
const folder = current() ?? await build();
const { main } = await import(pathToFileURL(join(folder, 'admin.mjs')).href);
await main(process.argv.slice(2));
