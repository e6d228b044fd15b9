import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { threadPoolSize, withinThreadPool } from '../local/environment';
import { servedEnvironment, taskBuildOptions } from '../local/start-bundled.mjs';

// How `npm start` runs the service (local/start-bundled.mjs): local/start.ts bundled with the gRPC
// task's esbuild options, served on plain node, rebuilt and restarted when a source it holds changes.

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const launcher = join(repoRoot, 'local', 'start-bundled.mjs');

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'svcnum-start-bundled-'));
});
afterAll(() => rm(scratch, { recursive: true, force: true }));

/** A launched process whose stderr is collected; `until` waits for a pattern in it. */
function launch(args: string[], env: Record<string, string>, cwd = repoRoot) {
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const waiters: Array<() => void> = [];
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    for (const waiter of waiters.splice(0)) waiter();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const until = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(stderr);
        if (match) resolve(match);
        else if (child.exitCode !== null) reject(new Error(`exited (${child.exitCode}) before ${pattern}:\n${stderr}`));
        else waiters.push(check);
      };
      child.once('exit', check);
      check();
    });
  return { child, exited, until, output: () => stderr };
}

describe('the bundle npm start serves', () => {
  it('is built with the esbuild options of the gRPC task (package.json build:grpc)', () => {
    expect(taskBuildOptions()).toEqual({
      bundle: true,
      packages: 'external',
      platform: 'node',
      target: 'node22',
      format: 'esm',
    });
  });

  it("runs with libuv's pool sized for this machine: a thread per core, two to four; password checks leave one", () => {
    const pool = String(Math.min(4, Math.max(2, availableParallelism())));
    expect(servedEnvironment({}).UV_THREADPOOL_SIZE).toBe(pool);
    expect(servedEnvironment({ UV_THREADPOOL_SIZE: '8' }).UV_THREADPOOL_SIZE).toBe('8');
    expect(threadPoolSize({})).toBe(4);
    expect(threadPoolSize({ UV_THREADPOOL_SIZE: '2' })).toBe(2);
    expect(threadPoolSize({ UV_THREADPOOL_SIZE: 'lots' })).toBe(1);
    expect(threadPoolSize({ UV_THREADPOOL_SIZE: '5000' })).toBe(1024);
    const limits = { concurrentChecks: 2, queuedChecks: 8, perIp: { burst: 20, perMinute: 10 } };
    expect(withinThreadPool(limits, 2)).toEqual({ ...limits, concurrentChecks: 1 });
    expect(withinThreadPool(limits, 4)).toEqual(limits);
    expect(withinThreadPool({ ...limits, concurrentChecks: 6 }, 4).concurrentChecks).toBe(3);
    expect(withinThreadPool(limits, 1).concurrentChecks).toBe(1);
  });

  it('is restarted from a new bundle on a change; a change that does not compile keeps it serving', async () => {
    // A project of its own: an entry that imports a second file, serving until SIGTERM.
    const root = join(scratch, 'project');
    await mkdir(join(root, 'local'), { recursive: true });
    await mkdir(join(root, 'node_modules'), { recursive: true });
    await writeFile(join(root, 'package.json'), await readFile(join(repoRoot, 'package.json')));
    await symlink(join(repoRoot, 'node_modules', 'esbuild'), join(root, 'node_modules', 'esbuild'), 'dir');
    await writeFile(
      join(root, 'local', 'start.ts'),
      [
        "import { word } from './word';",
        "process.stderr.write('serving ' + word + ' as ' + process.pid + ' pool ' + process.env.UV_THREADPOOL_SIZE + '\\n');",
        'const alive = setInterval(() => undefined, 1_000);',
        "process.on('SIGTERM', () => {",
        '  clearInterval(alive);',
        "  process.stderr.write('stopped ' + process.pid + '\\n');",
        '});',
        '',
      ].join('\n'),
    );
    const setWord = (source: string) => writeFile(join(root, 'local', 'word.ts'), source);
    await setWord("export const word: string = 'one';\n");
    const script = `import { startBundled } from ${JSON.stringify(launcher)};
await startBundled({ root: ${JSON.stringify(root)} });`;
    const served = launch(['--input-type=module', '-e', script], {}, root);
    try {
      const [, firstPid, pool] = await served.until(/serving one as (\d+) pool (\S+)/);
      const first = Number(firstPid);
      expect(pool).toBe(servedEnvironment().UV_THREADPOOL_SIZE);
      await setWord("export const word: string = 'two';\n");
      const second = Number((await served.until(/serving two as (\d+)/))[1]);
      expect(second).not.toBe(first);
      // The first was stopped before the second started (it would hold DATA_DIR's database).
      expect(served.output().indexOf(`stopped ${first}`)).toBeLessThan(served.output().indexOf('serving two'));
      expect(served.output()).toContain('a source changed; restarting from the new bundle (data kept)');

      await setWord("export const word: string = 'three'\nexport const = ;\n");
      await served.until(/ERROR/);
      expect(served.child.exitCode).toBeNull();
      expect(served.output()).not.toContain('serving three');
      await setWord("export const word: string = 'four';\n");
      await served.until(/serving four as \d+/);
    } finally {
      served.child.kill('SIGTERM');
    }
    expect(await served.exited).toBe(0);
    // Its bundles go with it.
    expect(await readdir(join(root, 'node_modules', '.cache', 'svcnum-start'))).toEqual([]);
  }, 60_000);

  it('serves the service as npm start prints it, and ends with it on SIGTERM', async () => {
    const dataDir = await mkdtemp(join(scratch, 'data-'));
    const served = launch([launcher], { DATA_DIR: dataDir, PORT: '0', GRPC_PORT: '0', DYNAMODB_PORT: '0', ISSUER: '' });
    try {
      const issuer = (await served.until(/issuer\s+(\S+)/))[1]!;
      await served.until(/Register clients and users with: npm run --silent admin -- help/);
      const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as {
        issuer?: string;
      };
      expect(discovery.issuer).toBe(issuer);
    } finally {
      served.child.kill('SIGTERM');
    }
    expect(await served.exited).toBe(0);
    expect(served.output()).toContain('SIGTERM: shutting down');
  }, 60_000);

  it('says in one line what to change when the start fails, and exits with its code', async () => {
    const served = launch([launcher], { DATA_DIR: await mkdtemp(join(scratch, 'data-')), PORT: 'eighty' });
    expect(await served.exited).toBe(1);
    expect(served.output().trim()).toMatch(/^npm start: PORT must be a port number/);
    expect(served.output().trim().split('\n')).toHaveLength(1);
  }, 60_000);
});
