import { DeleteCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Passkey, PasskeyChallenge } from '../kernel/model';
import type { OAuthStore } from '../oauth/store';
import type { TableNames } from '../tables';
import { conditional, dynamoOps, isConditionFailure, record, ttlSeconds } from './dynamo-ops';
import type { StoreDb } from './dynamo-schema';

// Passkeys and their WebAuthn challenges in DynamoDB: part of the OAuth slice
// (./dynamo-oauth-store.ts). Every write is one conditional single-item operation.

type PasskeyItems = Pick<
  OAuthStore,
  | 'putPasskey'
  | 'getPasskey'
  | 'listPasskeys'
  | 'recordPasskeyUse'
  | 'renamePasskey'
  | 'deletePasskey'
  | 'putPasskeyChallenge'
  | 'takePasskeyChallenge'
>;

export const passkeyItems = (db: StoreDb, tables: TableNames): PasskeyItems => ({
  ...passkeyRecords(db, tables),
  ...challengeItems(db, tables),
});

function passkeyRecords(db: StoreDb, tables: TableNames): Omit<PasskeyItems, keyof ReturnType<typeof challengeItems>> {
  const { get, queryAll } = dynamoOps(db);
  const exists = 'attribute_exists(credentialId)';
  return {
    putPasskey: (passkey) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.passkeys,
            Item: passkey,
            ConditionExpression: 'attribute_not_exists(credentialId)',
          }),
        ),
      ),
    getPasskey: (svcnumId, credentialId) => get<Passkey>(tables.passkeys, { svcnumId, credentialId }, true),
    listPasskeys: (svcnumId) =>
      queryAll<Passkey>({
        TableName: tables.passkeys,
        KeyConditionExpression: 'svcnumId = :id',
        ExpressionAttributeValues: { ':id': svcnumId },
        ConsistentRead: true,
      }),
    recordPasskeyUse: ({ svcnumId, credentialId }, seenCounter, use) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.passkeys,
            Key: { svcnumId, credentialId },
            UpdateExpression: 'SET #counter = :counter, backedUp = :backedUp, lastUsedAt = :at',
            ConditionExpression: `${exists} AND #counter = :seen`,
            ExpressionAttributeNames: { '#counter': 'counter' },
            ExpressionAttributeValues: {
              ':counter': use.counter,
              ':backedUp': use.backedUp,
              ':at': use.lastUsedAt,
              ':seen': seenCounter,
            },
          }),
        ),
      ),
    renamePasskey: (svcnumId, credentialId, name) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.passkeys,
            Key: { svcnumId, credentialId },
            UpdateExpression: 'SET #name = :name',
            ConditionExpression: exists,
            ExpressionAttributeNames: { '#name': 'name' },
            ExpressionAttributeValues: { ':name': name },
          }),
        ),
      ),
    async deletePasskey(svcnumId, credentialId) {
      const out = await db.send(
        new DeleteCommand({ TableName: tables.passkeys, Key: { svcnumId, credentialId }, ReturnValues: 'ALL_OLD' }),
      );
      return record<Passkey>(out.Attributes);
    },
  };
}

function challengeItems(
  db: StoreDb,
  tables: TableNames,
): Pick<PasskeyItems, 'putPasskeyChallenge' | 'takePasskeyChallenge'> {
  return {
    async putPasskeyChallenge(challenge) {
      await db.send(
        new PutCommand({
          TableName: tables.passkeyChallenges,
          Item: { ...challenge, ttl: ttlSeconds(challenge.expiresAt) },
          ConditionExpression: 'attribute_not_exists(challenge)',
        }),
      );
    },
    async takePasskeyChallenge(challenge, now) {
      // The conditional delete is the single use: of two answers to one challenge, one gets the item.
      try {
        const out = await db.send(
          new DeleteCommand({
            TableName: tables.passkeyChallenges,
            Key: { challenge },
            ConditionExpression: 'attribute_exists(challenge)',
            ReturnValues: 'ALL_OLD',
          }),
        );
        const taken = record<PasskeyChallenge>(out.Attributes);
        return taken && taken.expiresAt > now ? taken : undefined;
      } catch (error) {
        if (isConditionFailure(error)) return undefined;
        throw error;
      }
    },
  };
}
