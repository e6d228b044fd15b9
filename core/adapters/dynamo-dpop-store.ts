import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { DpopProofStore } from '../oauth/store';
import type { TableNames } from '../tables';
import { conditional, ttlSeconds } from './dynamo-ops';
import type { StoreDb } from './dynamo-schema';

/**
 * DPoP proofs seen (core/oauth/dpop.ts): a slice of its own, so that each unit that accepts DPoP
 * (token, userinfo, messages, the gRPC task) carries only this one write. The condition admits an
 * expired record still on the table (TTL deletes late): expiry is checked on every write.
 */
export function createDynamoDpopStore(db: StoreDb, tables: TableNames): DpopProofStore {
  return {
    claimDpopProof: (proofKey, expiresAt, now) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.dpopProofs,
            Item: { proofKey, expiresAt, ttl: ttlSeconds(expiresAt) },
            ConditionExpression: 'attribute_not_exists(proofKey) OR expiresAt <= :now',
            ExpressionAttributeValues: { ':now': now },
          }),
        ),
      ),
  };
}
