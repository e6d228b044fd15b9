// Lambda bundles: each route group's entry bundled exactly as the stack bundles it (lib/bundling.ts,
// the options NodejsFunction passes to esbuild), then its size and its cold module-load time in
// Node: a fresh `node` process imports the bundle, BENCH_COLD_LOADS times (default 15), and the
// median and p90 of the import alone are reported (Node's own start-up is not counted). Beside
// them, in the same run, the peer: bench/sdk-floor.ts, the AWS SDK's DynamoDB and KMS clients alone
// (what a group cannot go below while it uses them).
//
// Writes bench/results/lambda-bundles.json. Runs on its own: `npx tsx bench/lambda-bundles.ts`.

import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import type { Metafile } from 'esbuild';
import { routeManifest, wakeupRelayManifest, type RouteGroup } from '../lambdas/manifest';
import { buildLambdaBundle } from '../lib/build-lambda';
import { lambdaBundle } from '../lib/bundling';
import { fmt, machine, numberFromEnv, table, writeJson } from './report';
import { benchLog, runAsScript } from './cleanup';

const RESULT_FILE = fileURLToPath(new URL('./results/lambda-bundles.json', import.meta.url));
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
/**
 * Issue 10's targets: every bundle at most 300 KB minified (test/deployed-artifacts.test.ts checks it) and a cold load
 * of at most 50 ms.
 */
const TARGET_BYTES = 300_000;
const TARGET_LOAD_MS = 50;

/** The peer row: bench/sdk-floor.ts, a bundle of the SDK clients alone. */
const SDK_FLOOR = 'sdk floor';
/** The wake-up relay (lambdas/wakeup-relay.ts): not a route group, bundled the same way. */
const WAKEUP_RELAY = 'wakeup-relay';

export interface BundleResult {
  group: RouteGroup | typeof WAKEUP_RELAY | typeof SDK_FLOOR;
  bytes: number;
  gzipBytes: number;
  /** Median and p90 of the import in a fresh process, milliseconds. */
  loadMsMedian: number;
  loadMsP90: number;
  loads: number;
  /** The packages that take the most room in the bundle (bytes in the output). */
  largest: Array<{ name: string; bytes: number }>;
}

const run = promisify(execFile);

/** The package a bundled file belongs to (`@aws-sdk/client-dynamodb`), or `(our code)`. */
function packageOf(input: string): string {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(
    input.split('node_modules/').length > 2 ? input.slice(input.lastIndexOf('node_modules/')) : input,
  );
  return match ? match[1]! : '(our code)';
}

function largestPackages(metafile: Metafile, outfile: string, count = 3) {
  const output = Object.entries(metafile.outputs).find(([path]) => path.endsWith(outfile))?.[1];
  const sizes = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output?.inputs ?? {})) {
    const name = packageOf(input);
    sizes.set(name, (sizes.get(name) ?? 0) + bytesInOutput);
  }
  return [...sizes.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, bytes]) => ({ name, bytes }));
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/** One cold import of the bundle in a fresh Node process; the import's own duration in ms. */
async function coldLoad(file: string): Promise<number> {
  const url = JSON.stringify(pathToFileURL(file).href);
  const script = `const started = performance.now(); const module = await import(${url});
if (typeof module.handler !== 'function') throw new Error('no handler export');
process.stdout.write(String(performance.now() - started));`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, LOG_LEVEL: 'SILENT', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  return Number(stdout);
}

export async function lambdaBundleBenchmarks(
  options: { loads?: number; log?: (message: string) => void } = {},
): Promise<BundleResult[]> {
  const loads = options.loads ?? numberFromEnv('BENCH_COLD_LOADS', 15, { integer: true });
  const log = options.log ?? (() => undefined);
  const directory = await mkdtemp(join(tmpdir(), 'svcnum-bundles-'));
  const results: BundleResult[] = [];
  try {
    // Every route group, the wake-up relay, and the floor (bench/sdk-floor.ts: the SDK clients
    // alone), built with the options the stack gives NodejsFunction (lib/build-lambda.ts).
    const entries: Array<{ group: BundleResult['group']; entry: string }> = [
      ...(Object.keys(routeManifest) as RouteGroup[]).map((group) => ({
        group,
        entry: join(repoRoot, routeManifest[group].entry),
      })),
      { group: WAKEUP_RELAY, entry: join(repoRoot, wakeupRelayManifest.entry) },
      { group: SDK_FLOOR, entry: join(repoRoot, 'bench/sdk-floor.ts') },
    ];
    const built = [];
    for (const { group, entry } of entries) {
      const { outfile, metafile } = await buildLambdaBundle(entry, join(directory, group));
      built.push({ group, outfile, metafile, times: [] as number[] });
    }
    // Loads interleaved across bundles, so that a busy moment of the machine weighs on all alike.
    log(`lambda bundles: ${built.length} bundles × ${loads} cold loads`);
    for (let index = 0; index < loads; index++)
      for (const bundle of built) bundle.times.push(await coldLoad(bundle.outfile));
    for (const { group, outfile, metafile, times } of built) {
      const bytes = (await stat(outfile)).size;
      const gzipBytes = gzipSync(await readFile(outfile)).length;
      times.sort((a, b) => a - b);
      results.push({
        group,
        bytes,
        gzipBytes,
        loads,
        loadMsMedian: Math.round(percentile(times, 50) * 10) / 10,
        loadMsP90: Math.round(percentile(times, 90) * 10) / 10,
        largest: largestPackages(metafile, join(group, lambdaBundle.outputFile)),
      });
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }

  const kib = (value: number) => fmt(value / 1024);
  const verdict = (ok: boolean) => (ok ? 'yes' : 'NO');
  process.stdout.write(
    `\nLambda bundles (esbuild ${lambdaBundle.format}, ${lambdaBundle.target}, minified; cold import in a fresh ` +
      `node ${process.version}, ${loads} runs)\n`,
  );
  process.stdout.write(
    `targets (issue 10): at most ${fmt(TARGET_BYTES / 1000)} KB minified, cold module load p50 at most ` +
      `${TARGET_LOAD_MS} ms\n`,
  );
  process.stdout.write(
    `${table(
      ['function', 'KB', 'KiB', 'gzip KiB', 'load p50 ms', 'load p90 ms', 'within targets', 'largest packages (KiB)'],
      results.map((result) => [
        result.group,
        fmt(result.bytes / 1000, 1),
        kib(result.bytes),
        kib(result.gzipBytes),
        fmt(result.loadMsMedian, 1),
        fmt(result.loadMsP90, 1),
        result.group === SDK_FLOOR
          ? '(the peer)'
          : verdict(result.bytes <= TARGET_BYTES && result.loadMsMedian <= TARGET_LOAD_MS),
        result.largest.map((entry) => `${entry.name} ${kib(entry.bytes)}`).join(', '),
      ]),
    )}\n`,
  );
  await writeJson(RESULT_FILE, {
    date: new Date().toISOString(),
    machine: machine(),
    bundle: lambdaBundle,
    targets: { bytes: TARGET_BYTES, loadMsMedian: TARGET_LOAD_MS },
    results,
  });
  return results;
}

await runAsScript(import.meta.url, async () => {
  await lambdaBundleBenchmarks({ log: benchLog });
});
