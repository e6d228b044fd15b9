import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import dynalite from 'dynalite';

// The embedded DynamoDB: dynalite speaks DynamoDB's wire protocol, keeping its data under
// DATA_DIR/dynamodb. Only one process may open that folder, so everything else (the admin CLI
// while the runner is up) talks to it over DYNAMODB_PORT.

export interface EmbeddedDynamo { endpoint: string; port: number; close(): Promise<void> }

export async function startEmbeddedDynamo(dataDir: string, port: number): Promise<EmbeddedDynamo> {
  const path = join(dataDir, 'dynamodb');
  await mkdir(path, { recursive: true });
  const server = dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
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
