import {
  BatchGetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type BatchGetCommandOutput,
  type QueryCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import type { InboxEntry, MessagingStore } from '../messaging/store';
import type { TableNames } from '../tables';
import { conditional, record, ttlSeconds } from './dynamo-ops';
import type { StoreDb } from './dynamo-schema';

/** Sort key of messages: the sequence, zero-padded so string order is numeric order. */
export const seqKey = (seq: number) => String(seq).padStart(12, '0');

const BATCH_GET_LIMIT = 100;
/** Entries per page of `lastSeqBefore` (an idle inbox answers from its newest entry). */
const LAST_SEQ_PAGE = 25;

export function createDynamoMessagingStore(db: StoreDb, tables: TableNames): MessagingStore {
  return {
    async nextSeq(inboxId, count = 1) {
      const out = await db.send(
        new UpdateCommand({
          TableName: tables.inboxes,
          Key: { svcnumId: inboxId },
          UpdateExpression: 'ADD lastSeq :count',
          ExpressionAttributeValues: { ':count': count },
          ReturnValues: 'UPDATED_NEW',
        }),
      );
      return Number(out.Attributes?.lastSeq) - count + 1;
    },

    appendMessage: (message, retainUntil) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.messages,
            Item: { ...message, seq: seqKey(message.seq), ttl: ttlSeconds(retainUntil) },
            ConditionExpression: 'attribute_not_exists(seq)',
          }),
        ),
      ),

    tombstone: (inboxId, seq, retainUntil) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.messages,
            Item: { inboxId, seq: seqKey(seq), tombstone: true, ttl: ttlSeconds(retainUntil) },
            ConditionExpression: 'attribute_not_exists(seq)',
          }),
        ),
      ),

    readInbox: (inboxId, afterSeq, limit) => readInbox(db, tables, inboxId, afterSeq, limit),
    lastSeqBefore: (inboxId, acceptedBefore) => lastSeqBefore(db, tables, inboxId, acceptedBefore),
    inboxHeads: (inboxIds) => inboxHeads(db, tables, inboxIds),
  };
}

async function readInbox(db: StoreDb, tables: TableNames, inboxId: string, afterSeq: number, limit: number) {
  const page = await db.send(
    new QueryCommand({
      TableName: tables.messages,
      KeyConditionExpression: 'inboxId = :inbox AND seq > :after',
      ExpressionAttributeValues: { ':inbox': inboxId, ':after': seqKey(afterSeq) },
      ConsistentRead: true,
      Limit: limit,
    }),
  );
  return (page.Items ?? []).map((item) => {
    const entry = record<Record<string, unknown>>(item)!;
    return { ...entry, seq: Number(entry.seq) } as unknown as InboxEntry;
  });
}

async function lastSeqBefore(db: StoreDb, tables: TableNames, inboxId: string, acceptedBefore: number) {
  let startKey: Record<string, unknown> | undefined;
  do {
    const page: QueryCommandOutput = await db.send(
      new QueryCommand({
        TableName: tables.messages,
        KeyConditionExpression: 'inboxId = :inbox',
        ExpressionAttributeValues: { ':inbox': inboxId },
        ProjectionExpression: 'seq, acceptedAt',
        ScanIndexForward: false,
        ConsistentRead: true,
        Limit: LAST_SEQ_PAGE,
        ...(startKey ? { ExclusiveStartKey: startKey } : {}),
      }),
    );
    // Tombstones carry no time: passed over.
    const found = (page.Items ?? []).find(
      (item) => typeof item.acceptedAt === 'number' && item.acceptedAt < acceptedBefore,
    );
    if (found) return Number(found.seq);
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return 0;
}

async function inboxHeads(db: StoreDb, tables: TableNames, inboxIds: readonly string[]) {
  // BatchGetItem refuses a request that names a key twice: each inbox is asked for once.
  const unique = [...new Set(inboxIds)];
  const heads = new Map<string, number>(unique.map((id) => [id, 0]));
  for (let start = 0; start < unique.length; start += BATCH_GET_LIMIT) {
    let keys: Array<Record<string, unknown>> | undefined = unique
      .slice(start, start + BATCH_GET_LIMIT)
      .map((svcnumId) => ({ svcnumId }));
    // Unprocessed keys (throttling) are retried until none are left.
    while (keys && keys.length > 0) {
      const out: BatchGetCommandOutput = await db.send(
        new BatchGetCommand({
          RequestItems: { [tables.inboxes]: { Keys: keys, ConsistentRead: true } },
        }),
      );
      for (const item of out.Responses?.[tables.inboxes] ?? []) {
        heads.set(String(item.svcnumId), Number(item.lastSeq ?? 0));
      }
      keys = out.UnprocessedKeys?.[tables.inboxes]?.Keys;
    }
  }
  return heads;
}
