import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminBundle } from '../local/admin-bundle.mjs';
import { runAdmin, runScript } from './support/processes';

// How `npm run admin` starts: a bundle of local/admin.ts that is rebuilt whenever a source it
// holds changes (local/admin-bundle.mjs), and commands that load only what they use.

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'svcnum-admin-launch-'));
});
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe('the admin CLI bundle', () => {
  it('is rebuilt when a source it bundles changes, and reused while none does', async () => {
    // A project of its own: an entry that imports a second file, and a packages lock file.
    const root = join(scratch, 'project');
    const cache = join(scratch, 'cache');
    await mkdir(join(root, 'local'), { recursive: true });
    await mkdir(join(root, 'node_modules'), { recursive: true });
    await writeFile(join(root, 'node_modules', '.package-lock.json'), '{"lockfileVersion":3}\n');
    // It sees its own location, not the bundle's.
    await writeFile(
      join(root, 'local', 'admin.ts'),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source of a module, with its own template literal
      "import { word } from './word';\nexport const main = (): string => `${word} ${import.meta.url}`;\n",
    );
    const setWord = (word: string) =>
      writeFile(join(root, 'local', 'word.ts'), `export const word: string = '${word}';\n`);
    const say = async (folder: string) =>
      ((await import(pathToFileURL(join(folder, 'admin.mjs')).href)) as { main: () => string }).main();

    await setWord('one');
    const first = await adminBundle({ root, cache });
    expect(await say(first)).toBe(`one ${pathToFileURL(join(root, 'local', 'admin.ts')).href}`);
    const built = (await stat(join(first, 'admin.mjs'))).mtimeMs;
    expect(JSON.parse(await readFile(join(cache, 'inputs.json'), 'utf8'))).toEqual(['local/admin.ts', 'local/word.ts']);

    expect(await adminBundle({ root, cache })).toBe(first);
    expect((await stat(join(first, 'admin.mjs'))).mtimeMs).toBe(built);

    // An imported file, not only the entry, decides.
    await setWord('two');
    const second = await adminBundle({ root, cache });
    expect(second).not.toBe(first);
    expect(await say(second)).toMatch(/^two file:/);
    // So does the installed packages' lock file.
    await writeFile(join(root, 'node_modules', '.package-lock.json'), '{"lockfileVersion":3,"packages":{}}\n');
    expect(await adminBundle({ root, cache })).not.toBe(second);
  });
});

describe('--env from the bundle', () => {
  it('loads the CloudFormation client from its chunk and reaches the endpoint it is given (a closed loopback port here, never AWS)', async () => {
    const outcome = await runAdmin(['user', 'grants', 'ops@example.com', '--env', 'sandbox'], {
      AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_MAX_ATTEMPTS: '1',
      AWS_EC2_METADATA_DISABLED: 'true',
    });
    expect({ code: outcome.code, stdout: outcome.stdout, stderr: outcome.stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: 'connect ECONNREFUSED 127.0.0.1:9\n',
    });
  }, 60_000);
});

describe('what a command loads', () => {
  /** Every module URL or path a run of the CLI loaded (test/support/module-log.mjs). */
  async function modulesLoaded(
    name: string,
    run: (env: Record<string, string>) => Promise<{ code: number; stderr: string }>,
  ) {
    const log = join(scratch, `${name}.log`);
    const dataDir = join(scratch, `${name}-data`);
    const outcome = await run({ DATA_DIR: dataDir, MODULE_LOG_FILE: log });
    expect(outcome.code, outcome.stderr).toBe(0);
    return (await readFile(log, 'utf8')).split('\n').filter(Boolean);
  }
  const preload = ['--import', join(process.cwd(), 'test/support/module-log.mjs')];

  it('help loads no AWS SDK; a local command loads neither KMS, CloudFormation nor the service (gRPC, Valkey, the registry)', async () => {
    const help = await modulesLoaded('help', (env) =>
      runScript('local/admin.ts', ['help'], { ...env, NODE_OPTIONS: preload.join(' ') }),
    );
    expect(help.some((module) => module.includes('local/admin.ts'))).toBe(true);
    expect(help.filter((module) => module.includes('@aws-sdk') || module.includes('/core/accounts/'))).toEqual([]);

    const show = await modulesLoaded('list', (env) =>
      runScript('local/admin.ts', ['user', 'list'], { ...env, NODE_OPTIONS: preload.join(' ') }),
    );
    expect(show.some((module) => module.includes('@aws-sdk/client-dynamodb'))).toBe(true);
    const unneeded =
      /@aws-sdk\/client-kms|@aws-sdk\/client-cloudformation|@grpc\/grpc-js|ioredis|\/local\/runner\.ts|\/local\/deployed\.ts|\/core\/registry\.ts/;
    expect(show.filter((module) => unneeded.test(module))).toEqual([]);
  }, 60_000);

  it("through npm run admin's launcher: the bundle's chunks for --env and for numbers and aliases stay unloaded", async () => {
    const loaded = await modulesLoaded('bundle', (env) =>
      runAdmin(['user', 'list'], { ...env, NODE_OPTIONS: preload.join(' ') }),
    );
    const chunks = loaded.filter((module) => module.includes('/node_modules/.cache/svcnum-admin/'));
    expect(chunks.some((module) => module.endsWith('/admin.mjs'))).toBe(true);
    expect(chunks.filter((module) => /\/(deployed|registry)-[A-Z0-9]+\.mjs$/.test(module))).toEqual([]);
  }, 60_000);
});
