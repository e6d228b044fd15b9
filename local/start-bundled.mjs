// `npm start`: local/start.ts served from an esbuild bundle, built with the gRPC task's options
// (package.json build:grpc, which grpc-service/Dockerfile runs), on plain node: what runs here is
// compiled as what is deployed, not through tsx. The bundle is built in well under a second; esbuild
// then watches every source it holds. A saved change rebuilds it and restarts the served process
// (its data stays in DATA_DIR); a change that does not compile leaves the running one serving.
// Plain JavaScript: nothing to compile before it runs.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceLocations } from './admin-bundle.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/** The esbuild flags of build:grpc that are build options, by API name (its entries, loaders, outputs are its own). */
const TASK_FLAGS = {
  '--bundle': 'bundle',
  '--packages': 'packages',
  '--platform': 'platform',
  '--target': 'target',
  '--format': 'format',
};
const TASK_OUTPUT_FLAGS = ['--loader:', '--outbase=', '--outdir=', '--out-extension:'];

/**
 * The gRPC task's build options, read from package.json's build:grpc esbuild command: one place
 * says how the service is compiled. A flag this does not know stops the start, so it is not dropped.
 */
export function taskBuildOptions(root = repoRoot) {
  const script = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts['build:grpc'];
  const [command, ...args] = script.split('&&').at(-1).trim().split(/\s+/);
  if (command !== 'esbuild') throw new Error(`build:grpc does not end in an esbuild command: ${script}`);
  const options = {};
  for (const arg of args.filter((arg) => arg.startsWith('--'))) {
    if (TASK_OUTPUT_FLAGS.some((flag) => arg.startsWith(flag))) continue;
    const [flag, value] = arg.split('=');
    const name = TASK_FLAGS[flag];
    if (!name) throw new Error(`build:grpc has an esbuild flag local/start-bundled.mjs does not pass on: ${arg}`);
    options[name] = value ?? true;
  }
  return options;
}

/** Bundles left by launchers that are gone (killed): removed at start. */
function removeStaleBundles(cacheRoot) {
  for (const name of readdirSync(cacheRoot, { withFileTypes: true })) {
    const pid = Number(name.name);
    if (!name.isDirectory() || !Number.isSafeInteger(pid) || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (error) {
      if (error.code === 'ESRCH') rmSync(join(cacheRoot, name.name), { recursive: true, force: true });
    }
  }
}

/**
 * The served process's libuv thread pool, where WebCrypto makes every token's signature: one
 * thread per core, at least two, at most libuv's default four. With four on two cores the threads
 * woke for each signature and fought over the cores and the pool's lock: 15-20 % of the
 * client_credentials throughput (docs/benchmarks.md). Password checks leave one thread free
 * (local/environment.ts withinThreadPool). A UV_THREADPOOL_SIZE of the caller's wins.
 */
export const servedEnvironment = (env = process.env) => ({
  UV_THREADPOOL_SIZE: String(Math.min(4, Math.max(2, availableParallelism()))),
  ...env,
});

/**
 * Serves bundles one after another: `serve(file)` starts the first, or stops the running one
 * (SIGTERM: it closes the embedded database, so the next can open DATA_DIR) and starts the next.
 * When a served process ends by itself (a start that failed, a crash, Ctrl-C), so does the launcher, with its code.
 */
function createServer(onEnd) {
  let child;
  let queue = Promise.resolve();
  const start = (file) => {
    const started = spawn(process.execPath, [file], { stdio: 'inherit', env: servedEnvironment() });
    started.exited = new Promise((resolve) => started.once('exit', (code, signal) => resolve({ code, signal })));
    started.exited.then(({ code, signal }) => {
      if (started === child) onEnd(code ?? (signal === 'SIGINT' || signal === 'SIGTERM' ? 0 : 1));
    });
    child = started;
  };
  const replace = async (file) => {
    const old = child;
    if (old) {
      child = undefined;
      old.kill('SIGTERM');
      await old.exited;
    }
    start(file);
  };
  return {
    serve: (file) => {
      queue = queue.then(() => replace(file));
      return queue;
    },
    /** Passes a signal on; without a served process (still building) there is nothing to wait for. */
    signal: (name) => (child ? child.kill(name) : onEnd(0)),
  };
}

/**
 * Builds `entry` of `root` (default local/start.ts of this repository), serves it and watches its
 * sources until the served process ends; then exits with its code.
 */
export async function startBundled({ root = repoRoot, entry = 'local/start.ts' } = {}) {
  const { context } = await import('esbuild');
  // Each launcher's bundles in a folder of its own (by pid): two `npm start`s with their own DATA_DIR never share one.
  const cacheRoot = join(root, 'node_modules', '.cache', 'svcnum-start');
  mkdirSync(cacheRoot, { recursive: true });
  removeStaleBundles(cacheRoot);
  const folder = join(cacheRoot, String(process.pid));
  mkdirSync(folder, { recursive: true });
  const end = (code) => {
    rmSync(folder, { recursive: true, force: true });
    process.exit(code);
  };
  const server = createServer(end);
  let served;
  let builds = 0;
  const restartOnBuild = {
    name: 'serve-each-build',
    setup(build) {
      build.onEnd(async (result) => {
        builds++;
        // A change that does not compile: esbuild has printed why; the running bundle keeps serving.
        if (result.errors.length > 0) {
          if (builds === 1) end(1);
          return;
        }
        const code = result.outputFiles[0].contents;
        const hash = createHash('sha256').update(code).digest('hex').slice(0, 16);
        if (hash === served) return; // saved without a change that reaches the bundle
        const file = join(folder, `start-${hash}.mjs`);
        writeFileSync(file, code);
        if (served) process.stderr.write('\nnpm start: a source changed; restarting from the new bundle (data kept)\n');
        served = hash;
        await server.serve(file);
      });
    },
  };
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => server.signal(signal));
  const build = await context({
    ...taskBuildOptions(root),
    absWorkingDir: root,
    entryPoints: [entry],
    outfile: join(folder, 'start.mjs'),
    write: false,
    // Our sources keep their own import.meta.url (grpc-service/reflection.ts reads its descriptor set beside it).
    plugins: [sourceLocations(root, new Map()), restartOnBuild],
    logLevel: 'error',
  });
  // The first build, then one after each saved change (each ends in restartOnBuild).
  await build.watch();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await startBundled();
