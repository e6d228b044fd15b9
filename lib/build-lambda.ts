import { join } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { lambdaBundle } from './bundling';

// Builds one Lambda bundle with the options NodejsFunction is given (lib/bundling.ts), through
// esbuild's API instead of its CLI: the bundle benchmark and the deployed-artifacts test run
// what the stack ships.

/** lambdaBundle, with the fields it may gain (an alias map). */
type BundleOptions = typeof lambdaBundle & { readonly alias?: Readonly<Record<string, string>> };

export interface BuiltLambdaBundle {
  /** `<outdir>/index.mjs`: the file NodejsFunction writes. */
  outfile: string;
  metafile: Metafile;
}

export async function buildLambdaBundle(entry: string, outdir: string): Promise<BuiltLambdaBundle> {
  const {
    format, platform, target, minify, keepNames, sourceMap, mainFields, banner, externalModules, outputFile, alias, ...unhandled
  } = lambdaBundle as BundleOptions;
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
    ...(alias ? { alias: { ...alias } } : {}),
    outfile,
    metafile: true,
    logLevel: 'silent',
  });
  return { outfile, metafile };
}
