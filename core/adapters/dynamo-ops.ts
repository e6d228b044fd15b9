import { ConditionalCheckFailedException, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { QueryCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { StoreDb } from './dynamo-schema';

// Small helpers shared by the DynamoDB adapters: conditional writes that report whether their
// condition held, reads that strip storage details, and paginated queries.

/** TTL attribute value: epoch seconds, rounded up so an item is never swept before it expires. */
export const ttlSeconds = (expiresAtMs: number) => Math.ceil(expiresAtMs / 1000);

export const isConditionFailure = (error: unknown) =>
  error instanceof ConditionalCheckFailedException ||
  (error as { name?: string } | null)?.name === 'ConditionalCheckFailedException';

/** Runs a conditional write; `false` when the condition did not hold, any other error rethrown. */
export async function conditional(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (error) {
    if (isConditionFailure(error)) return false;
    throw error;
  }
}

/** Strips the TTL attribute (storage detail) from an item read back. */
export function record<T>(item: Record<string, unknown> | undefined): T | undefined {
  if (!item) return undefined;
  const { ttl: _ttl, ...rest } = item;
  return rest as T;
}

export type QueryInput = ConstructorParameters<typeof QueryCommand>[0];
export type UpdateInput = ConstructorParameters<typeof UpdateCommand>[0];
export type StartKey = Record<string, unknown>;

/** An item as the Document client returns it (numbers as numbers, sets as Sets). */
export const itemOf = (item: Parameters<typeof unmarshall>[0] | undefined) => (item ? unmarshall(item) : undefined);

export function dynamoOps(db: StoreDb) {
  return {
    async get<T>(table: string, key: Record<string, string>, consistent = false) {
      const read = new GetItemCommand({ TableName: table, Key: marshall(key), ConsistentRead: consistent });
      return record<T>(itemOf((await db.reads.send(read)).Item));
    },

    async scanAll<T>(table: string): Promise<T[]> {
      const items: T[] = [];
      let startKey: StartKey | undefined;
      do {
        const page = await db.send(new ScanCommand({ TableName: table, ExclusiveStartKey: startKey }));
        for (const item of page.Items ?? []) items.push(record<T>(item)!);
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      return items;
    },

    async queryAll<T>(input: QueryInput): Promise<T[]> {
      const items: T[] = [];
      let startKey: StartKey | undefined;
      do {
        const page = await db.send(new QueryCommand({ ...input, ExclusiveStartKey: startKey }));
        for (const item of page.Items ?? []) items.push(record<T>(item)!);
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      return items;
    },

    /** One page of a query: up to `limit` items and the key to continue from. */
    async queryPage<T>(
      input: QueryInput,
      limit: number,
      startKey?: StartKey,
    ): Promise<{ items: T[]; nextKey?: StartKey }> {
      const page = await db.send(new QueryCommand({ ...input, Limit: limit, ExclusiveStartKey: startKey }));
      return {
        items: (page.Items ?? []).map((item) => record<T>(item)!),
        ...(page.LastEvaluatedKey ? { nextKey: page.LastEvaluatedKey } : {}),
      };
    },

    /** A conditional update returning the new item, or `undefined` when the condition did not hold. */
    async updateReturning<T>(input: UpdateInput): Promise<T | undefined> {
      try {
        const out = await db.send(new UpdateCommand({ ...input, ReturnValues: 'ALL_NEW' }));
        return record<T>(out.Attributes);
      } catch (error) {
        if (isConditionFailure(error)) return undefined;
        throw error;
      }
    },
  };
}
