import { BatchGetCommand, DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { User } from '../kernel/model';
import type { AliasRecord, CapabilityEntry, DirectoryStore } from '../directory/store';
import type { TableNames } from '../tables';
import { conditional, dynamoOps, record } from './dynamo-ops';
import type { StoreDb } from './dynamo-schema';

/** The string set on an entity (users table) that lists its live alias claims. */
const ALIAS_CLAIMS = 'aliasClaims';

/** BatchGetItem takes at most 100 keys. */
const BATCH_GET_MAX = 100;

/** An entity as the rest of the core sees it, and its alias claims apart (a DynamoDB string set). */
function split(item: Record<string, unknown> | undefined) {
  if (!item) return undefined;
  const { [ALIAS_CLAIMS]: claims, ...rest } = item;
  const aliasClaims =
    claims instanceof Set ? [...(claims as Set<string>)] : Array.isArray(claims) ? (claims as string[]) : [];
  return { entity: record<User>(rest)!, aliasClaims };
}

/** Aliases: the claims in the aliases table. */
function aliasRecordStore(
  db: StoreDb,
  tables: TableNames,
): Pick<DirectoryStore, 'claimAlias' | 'takeOverAlias' | 'getAlias' | 'deleteAlias'> {
  const { get } = dynamoOps(db);
  return {
    claimAlias: (alias) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.aliases,
            Item: alias,
            ConditionExpression: 'attribute_not_exists(alias)',
          }),
        ),
      ),
    takeOverAlias: (alias, previous) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.aliases,
            Item: alias,
            ConditionExpression: 'svcnumId = :previous AND claim = :claim',
            ExpressionAttributeValues: { ':previous': previous.svcnumId, ':claim': previous.claim },
          }),
        ),
      ),
    getAlias: (alias) => get<AliasRecord>(tables.aliases, { alias }, true),
    deleteAlias: (alias, claim) =>
      conditional(
        db.send(
          new DeleteCommand({
            TableName: tables.aliases,
            Key: { alias },
            ConditionExpression: 'claim = :claim',
            ExpressionAttributeValues: { ':claim': claim },
          }),
        ),
      ),
  };
}

/** The list of live alias claims on each entity (users table). */
function aliasClaimsStore(
  db: StoreDb,
  tables: TableNames,
): Pick<DirectoryStore, 'addAliasClaim' | 'removeAliasClaims' | 'getAliasedEntity'> {
  return {
    addAliasClaim: (svcnumId, member, max) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.users,
            Key: { svcnumId },
            UpdateExpression: 'ADD #claims :member',
            // Counting on the entity record makes the limit exact: concurrent commits serialise here.
            ConditionExpression:
              'attribute_exists(svcnumId) AND ' +
              '(attribute_not_exists(#claims) OR size(#claims) < :max OR contains(#claims, :one))',
            ExpressionAttributeNames: { '#claims': ALIAS_CLAIMS },
            ExpressionAttributeValues: { ':member': new Set([member]), ':max': max, ':one': member },
          }),
        ),
      ),
    async removeAliasClaims(svcnumId, members) {
      if (members.length === 0) return;
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.users,
            Key: { svcnumId },
            UpdateExpression: 'DELETE #claims :members',
            ConditionExpression: 'attribute_exists(svcnumId)',
            ExpressionAttributeNames: { '#claims': ALIAS_CLAIMS },
            ExpressionAttributeValues: { ':members': new Set(members) },
          }),
        ),
      );
    },
    async getAliasedEntity(svcnumId) {
      const { Item } = await db.send(
        new GetCommand({
          TableName: tables.users,
          Key: { svcnumId },
          ConsistentRead: true,
        }),
      );
      return split(Item);
    },
  };
}

/** The discover index: agents by capability, and the entities it names read in batches. */
function discoverIndexStore(
  db: StoreDb,
  tables: TableNames,
): Pick<DirectoryStore, 'indexCapabilities' | 'listCapability' | 'getEntities'> {
  const { queryPage } = dynamoOps(db);
  return {
    async indexCapabilities(svcnumId, capabilities, now) {
      await Promise.all(
        capabilities.map((capability) =>
          db.send(
            new PutCommand({
              TableName: tables.capabilities,
              Item: { capability, svcnumId, createdAt: now } satisfies CapabilityEntry,
            }),
          ),
        ),
      );
    },
    listCapability: (capability, limit, startKey) =>
      queryPage<CapabilityEntry>(
        {
          TableName: tables.capabilities,
          KeyConditionExpression: 'capability = :capability',
          ExpressionAttributeValues: { ':capability': capability },
        },
        limit,
        startKey,
      ),
    async getEntities(svcnumIds) {
      const found: User[] = [];
      const unique = [...new Set(svcnumIds)];
      for (let start = 0; start < unique.length; start += BATCH_GET_MAX) {
        let keys: Array<Record<string, unknown>> = unique
          .slice(start, start + BATCH_GET_MAX)
          .map((svcnumId) => ({ svcnumId }));
        // Unprocessed keys (throttling) are retried a few times with a short back-off.
        for (let attempt = 0; keys.length > 0; attempt++) {
          if (attempt > 0) {
            if (attempt > 4) throw new Error('BatchGetItem left keys unprocessed');
            await new Promise((resolve) => setTimeout(resolve, 20 * 2 ** attempt));
          }
          const out = await db.send(new BatchGetCommand({ RequestItems: { [tables.users]: { Keys: keys } } }));
          for (const item of out.Responses?.[tables.users] ?? []) found.push(split(item)!.entity);
          keys = out.UnprocessedKeys?.[tables.users]?.Keys ?? [];
        }
      }
      return found;
    },
  };
}

export function createDynamoDirectoryStore(db: StoreDb, tables: TableNames): DirectoryStore {
  return { ...aliasRecordStore(db, tables), ...aliasClaimsStore(db, tables), ...discoverIndexStore(db, tables) };
}
