// Runs one Lambda bundle as the nodejs22.x runtime does: imports <bundle dir>/<file>.mjs once
// (argv[2], argv[3]: the function's Handler setting, `index.handler`), then invokes the handler
// for each event the parent sends over IPC, with a Lambda context, and sends the result back.
// Plain JavaScript on purpose: nothing but Node and the bundle.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [directory, handlerSetting] = process.argv.slice(2);
const [file, exportName] = handlerSetting.split('.');

const startedAt = Date.now();
let handler;
try {
  const module = await import(pathToFileURL(join(directory, `${file}.mjs`)).href);
  handler = module[exportName];
  if (typeof handler !== 'function') throw new Error(`${file}.mjs exports no function ${exportName}`);
  process.send({ ready: true, loadMs: Date.now() - startedAt });
} catch (error) {
  process.send({ ready: false, error: { name: error.name, message: error.message, stack: error.stack } });
  process.exit(1);
}

process.on('message', async ({ id, event, context }) => {
  const deadline = Date.now() + 30_000;
  const lambdaContext = {
    ...context,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
  try {
    process.send({ id, result: await handler(event, lambdaContext) });
  } catch (error) {
    process.send({ id, error: { name: error?.name, message: error?.message, stack: error?.stack } });
  }
});
