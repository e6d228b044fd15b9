import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import dynalite from 'dynalite';
import { Level } from 'level';
import { listenOrExplain, LocalStartError } from './start-errors';

// The embedded DynamoDB: dynalite speaks DynamoDB's wire protocol, keeping its data under
// DATA_DIR/dynamodb. Only one process may open that folder, so everything else (the admin CLI
// while the runner is up) talks to it over DYNAMODB_PORT.

export interface EmbeddedDynamo { endpoint: string; port: number; close(): Promise<void> }

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
      throw new DataInUseError(`the data in ${dataDir} is in use by another process (is \`npm start\` running with this DATA_DIR?); stop it or set DATA_DIR to another folder`);
    }
    throw error;
  } finally {
    await db.close();
  }
}

export async function startEmbeddedDynamo(dataDir: string, port: number): Promise<EmbeddedDynamo> {
  const path = join(dataDir, 'dynamodb');
  await mkdir(path, { recursive: true });
  await ensureNotInUse(dataDir, path);
  const server = dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await listenOrExplain(server, port, '127.0.0.1', 'DYNAMODB_PORT');
  const actualPort = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${actualPort}`,
    port: actualPort,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      // SDK clients keep connections alive; close them so shutdown does not wait for their timeout.
      server.closeAllConnections();
    }),
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
