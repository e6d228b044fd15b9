import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_SETTINGS_FILE, SETTINGS_CONTEXT_KEY } from '../../lib/settings';
import { repoRoot } from '../../lib/util';

// `cdk synth` loads the CDK app and nothing of the service it deploys: lib/ reads the data-only
// route manifest (lambdas/manifest.ts) and the table definitions, never a handler, the domain
// core or a runtime dependency (jose, the AWS SDK, …) but zod, which validates the settings file. Checked in a fresh
// process
// that runs bin/app.ts as cdk.json does (`tsx bin/app.ts`, CDK_OUTDIR and CDK_CONTEXT_JSON set
// the way the CLI sets them), with test/support/module-log.mjs recording every module it loads.
// Lambda bundling is skipped (aws:cdk:bundling-stacks: []): it runs esbuild in a child process,
// so it adds nothing to this process's modules, only time.

const run = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'svcnum-synth-modules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every module a fresh `node --import tsx` process loads running `script`: files or package names. */
async function modulesLoadedBy(script: string, name: string, env: Record<string, string> = {}) {
  const log = join(scratch, `${name}.log`);
  await run(process.execPath, ['--import', 'tsx', '--import', join(repoRoot, 'test/support/module-log.mjs'), script], {
    cwd: repoRoot,
    env: { ...process.env, ...env, MODULE_LOG_FILE: log, LOG_LEVEL: 'SILENT' },
    maxBuffer: 16 * 1024 * 1024,
  });
  const paths = [
    ...new Set(
      readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .filter((entry) => entry.startsWith('/') || entry.startsWith('file:'))
        .map((entry) => (entry.startsWith('file:') ? fileURLToPath(entry) : entry)),
    ),
  ];
  const inPackage = (path: string) => path.includes(`${sep}node_modules${sep}`);
  return {
    /** Our own files, repo-relative. */
    files: paths
      .filter((path) => !inPackage(path))
      .map((path) => relative(repoRoot, path))
      .sort(),
    /** Packages by name (the innermost node_modules folder decides). */
    packages: [
      ...new Set(
        paths.filter(inPackage).map((path) => {
          const [scopeOrName, name] = path
            .slice(path.lastIndexOf(`node_modules${sep}`) + 'node_modules/'.length)
            .split(sep);
          return scopeOrName!.startsWith('@') ? `${scopeOrName}/${name}` : scopeOrName!;
        }),
      ),
    ].sort(),
  };
}

/** What the deployed code needs at run time: nothing synth may load. */
const runtimeDependencies = Object.keys(
  (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> })
    .dependencies,
);

describe('cdk synth', () => {
  it('loads no handler code, no domain core and no runtime dependency of the service', async () => {
    const outdir = join(scratch, 'cdk.out');
    const loaded = await modulesLoadedBy('bin/app.ts', 'synth', {
      CDK_OUTDIR: outdir,
      CDK_CONTEXT_JSON: JSON.stringify({
        'aws:cdk:bundling-stacks': [],
        [SETTINGS_CONTEXT_KEY]: EXAMPLE_SETTINGS_FILE,
      }),
    });
    // The app really was synthesized, through the modules that build it.
    expect(existsSync(join(outdir, 'svcnum-sandbox.template.json'))).toBe(true);
    expect(existsSync(join(outdir, 'svcnum-production.template.json'))).toBe(true);
    expect(loaded.files).toEqual(
      expect.arrayContaining(['bin/app.ts', 'lib/http-api.ts', 'lib/waf.ts', 'lib/nag.ts', 'lambdas/manifest.ts']),
    );
    expect(loaded.packages).toEqual(expect.arrayContaining(['aws-cdk-lib', 'cdk-nag', 'constructs']));

    // Of lambdas/ the manifest only; of core/ the table definitions only (plain data); nothing
    // of the gRPC service or the local runner.
    expect(loaded.files.filter((file) => !/^(bin|lib)\//.test(file))).toStrictEqual([
      'core/tables.ts',
      'lambdas/manifest.ts',
    ]);
    // zod only: it validates the operator's settings file (lib/settings.ts), as it validates input at run time.
    expect(loaded.packages.filter((name) => runtimeDependencies.includes(name))).toStrictEqual(['zod']);
  }, 120_000);

  it('is checked by a recorder that does see handler code where it is loaded', async () => {
    // The control: the local runner's route table (lambdas/routes.ts) loads every handler.
    const loaded = await modulesLoadedBy('lambdas/routes.ts', 'routes');
    expect(loaded.files).toEqual(
      expect.arrayContaining(['lambdas/routes.ts', 'lambdas/browser.ts', 'lambdas/token.ts', 'core/registry.ts']),
    );
    expect(loaded.packages).toEqual(expect.arrayContaining(['jose', '@aws-sdk/client-dynamodb']));
  }, 120_000);
});
