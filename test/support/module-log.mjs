// Records every module a Node process loads, for test/infra/synth-modules.test.ts. Preload it
// after tsx (`node --import tsx --import ./test/support/module-log.mjs …`) with MODULE_LOG_FILE
// set: each ES module (ours through tsx, and packages' ESM entries) is appended as it loads, from
// the module hooks thread; at exit the main thread appends every CommonJS module in require's
// cache (aws-cdk-lib and cdk-nag load their internals with require, which bypasses ESM hooks on
// Node 20). One absolute path or file URL per line.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  const file = process.env.MODULE_LOG_FILE;
  if (!file) throw new Error('module-log.mjs: set MODULE_LOG_FILE');
  register(import.meta.url, { data: { file } });
  process.on('exit', () => {
    appendFileSync(
      file,
      Object.keys(createRequire(import.meta.url).cache)
        .map((path) => `${path}\n`)
        .join(''),
    );
  });
}

let logFile;

/** Hooks thread: the file to append to. */
export function initialize(data) {
  logFile = data.file;
}

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  appendFileSync(logFile, `${url}\n`);
  return result;
}
