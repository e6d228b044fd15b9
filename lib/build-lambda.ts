import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { lambdaBundle } from './bundling';

// Builds one Lambda bundle with the options NodejsFunction is given (lib/bundling.ts), through
// esbuild's API instead of its CLI: the bundle benchmark and the deployed-artifacts test run
// what the stack ships.

/** The repository root (lib/util.ts has it too, but loads aws-cdk-lib). */
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export interface BuiltLambdaBundle {
  /** `<outdir>/index.mjs`: the file NodejsFunction writes. */
  outfile: string;
  metafile: Metafile;
}

export async function buildLambdaBundle(entry: string, outdir: string): Promise<BuiltLambdaBundle> {
  const {
    format,
    platform,
    target,
    minify,
    keepNames,
    sourceMap,
    mainFields,
    banner,
    externalModules,
    outputFile,
    alias,
    ...unhandled
  } = lambdaBundle;
  // A new field of lambdaBundle fails to compile here until it is passed on below.
  const none: Record<string, never> = unhandled;
  void none;
  const outfile = join(outdir, outputFile);
  const { metafile } = await build({
    entryPoints: [entry],
    bundle: true,
    platform,
    format,
    target,
    minify,
    keepNames,
    sourcemap: sourceMap,
    mainFields: [...mainFields],
    banner: { js: banner },
    external: [...externalModules],
    // Repository-relative replacements, made absolute as lib/http-api.ts does for the CLI.
    alias: Object.fromEntries(
      Object.entries(alias).map(([module, replacement]) => [module, join(repoRoot, replacement)]),
    ),
    outfile,
    metafile: true,
    logLevel: 'silent',
  });
  return { outfile, metafile };
}
