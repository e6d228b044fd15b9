import {
  CreateTableCommand, DescribeTableCommand, ResourceInUseException, type CreateTableCommandInput,
  type DynamoDBClient,
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
export async function ensureTables(client: DynamoDBClient, names: TableNames, only?: readonly TableKey[]): Promise<void> {
  for (const key of only ?? Object.keys(tableDefinitions) as TableKey[]) {
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

export function documentClient(client: DynamoDBClient): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
  });
}
