import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
  type CreateTableCommandInput,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { tableDefinitions, type TableDefinition, type TableKey, type TableNames } from '../tables';

/** The CreateTable request for one of our tables (used by the local bootstrap and tests). */
export function createTableInput(definition: TableDefinition, tableName: string): CreateTableCommandInput {
  const attributes = new Set<string>([definition.partitionKey]);
  if (definition.sortKey) attributes.add(definition.sortKey);
  for (const index of definition.indexes ?? []) {
    attributes.add(index.partitionKey);
    if (index.sortKey) attributes.add(index.sortKey);
  }
  const keySchema = (partitionKey: string, sortKey?: string) => [
    { AttributeName: partitionKey, KeyType: 'HASH' as const },
    ...(sortKey ? [{ AttributeName: sortKey, KeyType: 'RANGE' as const }] : []),
  ];
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [...attributes].map((AttributeName) => ({ AttributeName, AttributeType: 'S' })),
    KeySchema: keySchema(definition.partitionKey, definition.sortKey),
    GlobalSecondaryIndexes: definition.indexes?.map((index) => ({
      IndexName: index.name,
      KeySchema: keySchema(index.partitionKey, index.sortKey),
      Projection: { ProjectionType: 'ALL' },
    })),
  };
}

/** Creates any missing table (idempotent) and waits until each is ACTIVE; all of them, or those of `only`. */
export async function ensureTables(
  client: DynamoDBClient,
  names: TableNames,
  only?: readonly TableKey[],
): Promise<void> {
  for (const key of only ?? (Object.keys(tableDefinitions) as TableKey[])) {
    try {
      await client.send(new CreateTableCommand(createTableInput(tableDefinitions[key], names[key])));
    } catch (error) {
      if (!(error instanceof ResourceInUseException)) throw error;
    }
    for (;;) {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: names[key] }));
      if (Table?.TableStatus === 'ACTIVE') break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * As ensureTables, but asks once which tables exist and creates only the others: one round trip
 * when all are there (the admin CLI's every command), instead of two per table.
 */
export async function ensureMissingTables(client: DynamoDBClient, names: TableNames): Promise<void> {
  const listed = new Set<string>();
  let start: string | undefined;
  do {
    const page = await client.send(new ListTablesCommand(start ? { ExclusiveStartTableName: start } : {}));
    for (const name of page.TableNames ?? []) listed.add(name);
    start = page.LastEvaluatedTableName;
  } while (start);
  const missing = (Object.keys(tableDefinitions) as TableKey[]).filter((key) => !listed.has(names[key]));
  if (missing.length > 0) await ensureTables(client, names, missing);
}

/**
 * The store's DynamoDB client: the Document client, plus `reads`, a plain client for the reads
 * every token, UserInfo and page request makes (GetItem, BatchGetItem; dynamo-ops.ts).
 */
export type StoreDb = DynamoDBDocumentClient & { readonly reads: DynamoDBClient };

/**
 * The store's client over `client` (same settings and sockets for `reads`).
 *
 * Two per-call costs of the SDK are left out, measured at about a third of a read's CPU:
 * - the SDK's logger middleware builds a sensitive-data-filtered copy of every input and output
 *   even for its no-op logger; our own log (core/adapters/log.ts) records what we need, so it is
 *   removed from `client` (which the Document client shares) and from `reads`;
 * - the middleware stack is rebuilt on every call unless `cacheMiddleware` is on, and the Document
 *   client refuses that option (its commands close over their first input), so `reads` is a plain
 *   client with it on, marshalling keys and unmarshalling items itself (@aws-sdk/util-dynamodb).
 * So a logger given to `client` goes silent, and middleware added to `client` does not reach
 * `reads` (add it to both, before their first call: `reads` caches its stack per command).
 */
export function documentClient(client: DynamoDBClient): StoreDb {
  client.middlewareStack.remove('loggerMiddleware');
  // The resolved settings of `client` (providers, so credentials are resolved once for both).
  const {
    region,
    credentials,
    maxAttempts,
    retryMode,
    useFipsEndpoint,
    useDualstackEndpoint,
    requestHandler,
    endpoint,
    isCustomEndpoint,
  } = client.config;
  const reads = new DynamoDBClient({
    region,
    credentials,
    maxAttempts,
    retryMode,
    useFipsEndpoint,
    useDualstackEndpoint,
    requestHandler,
    ...(isCustomEndpoint ? { endpoint } : {}),
    cacheMiddleware: true,
  });
  reads.middlewareStack.remove('loggerMiddleware');
  const doc = DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
  });
  return Object.assign(doc, { reads });
}
