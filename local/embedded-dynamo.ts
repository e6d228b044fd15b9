import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { Level } from 'level';
import { explainListenError, LocalStartError } from './start-errors';

// The embedded DynamoDB: dynalite speaks DynamoDB's wire protocol, keeping its data under
// DATA_DIR/dynamodb. Only one process may open that folder, so everything else (the admin CLI
// while the runner is up) talks to it over DYNAMODB_PORT.
//
// It runs on a worker thread of its own: the database is another service, as DynamoDB is in AWS,
// so its work (request parsing, LevelDB, response building) neither waits behind the service's
// requests nor counts in the main thread's cost per request that the benchmarks measure.

export interface EmbeddedDynamo {
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

/** Another process holds DATA_DIR's embedded database (only one may open it). */
export class DataInUseError extends LocalStartError {}

/**
 * dynalite opens its LevelDB lazily and throws from inside a request when another process holds
 * the folder's lock ("Database is closed", uncaught). Opening it once here first turns that into
 * a clear error before anything depends on it.
 */
async function ensureNotInUse(dataDir: string, path: string): Promise<void> {
  const db = new Level(path);
  try {
    await db.open();
  } catch (error) {
    if ((error as { cause?: { code?: string } }).cause?.code === 'LEVEL_LOCKED') {
      throw new DataInUseError(
        `the data in ${dataDir} is in use by another process (is \`npm start\` running with this DATA_DIR?); stop ` +
          `it or set DATA_DIR to another folder`,
      );
    }
    throw error;
  } finally {
    await db.close();
  }
}

/** What the worker says: listening on a port, failed to listen, or closed. */
type WorkerReport =
  | { listening: number }
  | { failed: { code?: string; errno?: number; syscall?: string; message: string } }
  | { closed: true };

/**
 * The worker's code (plain CommonJS, so it runs the same under tsx, vitest and node): dynalite on
 * 127.0.0.1, closed on request. SDK clients keep connections alive; closing drops them so shutdown
 * does not wait for their timeout.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const dynalite = require(workerData.dynalite);
const server = dynalite({ path: workerData.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.once('error', ({ code, errno, syscall, message }) => {
  parentPort.postMessage({ failed: { code, errno, syscall, message } });
});
server.listen(workerData.port, '127.0.0.1', () => parentPort.postMessage({ listening: server.address().port }));
parentPort.on('message', () => {
  server.close(() => parentPort.postMessage({ closed: true }));
  server.closeAllConnections();
});
`;

const dynalitePath = createRequire(import.meta.url).resolve('dynalite');

export async function startEmbeddedDynamo(dataDir: string, port: number): Promise<EmbeddedDynamo> {
  const path = join(dataDir, 'dynamodb');
  await mkdir(path, { recursive: true });
  await ensureNotInUse(dataDir, path);
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { dynalite: dynalitePath, path, port } });
  let exited = false;
  worker.once('exit', () => {
    exited = true;
  });
  /** The worker's next report; an error or exit meanwhile ends the wait (an exited worker says nothing more). */
  const next = () =>
    new Promise<WorkerReport>((resolve, reject) => {
      if (exited) return reject(new Error('the embedded DynamoDB stopped'));
      const settle = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const onError = (error: Error) => {
        settle();
        reject(error);
      };
      const onExit = () => {
        settle();
        reject(new Error('the embedded DynamoDB stopped'));
      };
      const onMessage = (report: WorkerReport) => {
        settle();
        resolve(report);
      };
      worker.once('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
    });
  const started = await next().catch(async (error: unknown) => {
    await worker.terminate();
    throw error;
  });
  if (!('listening' in started)) {
    await worker.terminate();
    const failure = 'failed' in started ? started.failed : { message: 'the embedded DynamoDB did not start' };
    throw explainListenError(
      Object.assign(new Error(failure.message), failure) as NodeJS.ErrnoException,
      'DYNAMODB_PORT',
      '127.0.0.1',
      port,
    );
  }
  let closing: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${started.listening}`,
    port: started.listening,
    close: () =>
      (closing ??= (async () => {
        const closed = next();
        worker.postMessage('close');
        await closed.catch(() => undefined);
        await worker.terminate();
      })()),
  };
}

/** A DynamoDB client for the embedded server: fixed dummy credentials, never AWS. */
export function localDynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
  });
}
