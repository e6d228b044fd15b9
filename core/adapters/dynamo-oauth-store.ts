import { setTimeout as sleep } from 'node:timers/promises';
import {
  BatchGetItemCommand,
  type BatchGetItemCommandInput,
  type BatchGetItemCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { DeleteCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { AuthorizationCode, AuthRequest, Consent, Grant, Session, SignInThrottle, User } from '../kernel/model';
import type { CodeBinding, OAuthStore, RedeemResult } from '../oauth/store';
import type { TableNames } from '../tables';
import { conditional, dynamoOps, itemOf, record, ttlSeconds } from './dynamo-ops';
import { passkeyItems } from './dynamo-passkeys-store';
import type { StoreDb } from './dynamo-schema';

const DAY_MS = 86_400_000;
/** BatchGetItem may return some keys unprocessed (throttling): retried with backoff this many times. */
const BATCH_GET_ATTEMPTS = 5;
const BATCH_GET_BACKOFF_MS = 25;

/** What each slice of the OAuth store works with. */
interface OAuthTables {
  db: StoreDb;
  tables: TableNames;
  ops: ReturnType<typeof dynamoOps>;
}

/** Authorization requests parked during sign-in and consent, and the codes they end in. */
function authorizationFlowItems({ db, tables, ops: { get, updateReturning } }: OAuthTables) {
  return {
    async putAuthRequest(request) {
      await db.send(
        new PutCommand({
          TableName: tables.authRequests,
          Item: { ...request, ttl: ttlSeconds(request.expiresAt) },
        }),
      );
    },
    async getAuthRequest(requestId, now) {
      const request = await get<AuthRequest>(tables.authRequests, { requestId });
      return request && request.expiresAt > now ? request : undefined;
    },
    async markAuthRequestSignedIn(requestId, at) {
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.authRequests,
            Key: { requestId },
            UpdateExpression: 'SET signedInAt = :at',
            ConditionExpression: 'attribute_exists(requestId)',
            ExpressionAttributeValues: { ':at': at },
          }),
        ),
      );
    },
    async deleteAuthRequest(requestId) {
      await db.send(new DeleteCommand({ TableName: tables.authRequests, Key: { requestId } }));
    },
    async putCode(code) {
      await db.send(
        new PutCommand({
          TableName: tables.codes,
          Item: { ...code, ttl: ttlSeconds(code.expiresAt) },
          ConditionExpression: 'attribute_not_exists(codeHash)',
        }),
      );
    },
    async redeemCode(codeHash: string, binding: CodeBinding, now: number): Promise<RedeemResult> {
      const redeemed = await updateReturning<AuthorizationCode>({
        TableName: tables.codes,
        Key: { codeHash },
        UpdateExpression: 'SET redeemedAt = :now',
        ConditionExpression:
          'attribute_exists(codeHash) AND attribute_not_exists(redeemedAt) AND expiresAt > :now' +
          ' AND clientId = :clientId AND redirectUri = :redirectUri AND codeChallenge = :codeChallenge',
        ExpressionAttributeValues: {
          ':now': now,
          ':clientId': binding.clientId,
          ':redirectUri': binding.redirectUri,
          ':codeChallenge': binding.codeChallenge,
        },
      });
      if (redeemed) return { outcome: 'redeemed', code: redeemed };
      // The error path only: find out which condition failed.
      const code = await get<AuthorizationCode>(tables.codes, { codeHash }, true);
      if (!code) return { outcome: 'unknown' };
      if (code.redeemedAt !== undefined) return { outcome: 'replayed', grantId: code.grantId };
      if (code.expiresAt <= now) return { outcome: 'expired' };
      return { outcome: 'mismatch' };
    },
  } satisfies Partial<OAuthStore>;
}

/**
 * The account and the grant a user token names, in one BatchGetItem (unprocessed keys retried with
 * backoff). Strongly consistent both: a disabled account or a revoked grant is refused at once.
 * Every UserInfo request makes it: through the read client (dynamo-schema.ts).
 */
async function getUserAndGrant(
  { db, tables }: OAuthTables,
  svcnumId: string,
  grantId: string,
): Promise<{ user?: User; grant?: Grant }> {
  let request: BatchGetItemCommandInput['RequestItems'] = {
    [tables.users]: { Keys: [marshall({ svcnumId })], ConsistentRead: true },
    [tables.grants]: { Keys: [marshall({ grantId })], ConsistentRead: true },
  };
  const found: { user?: User; grant?: Grant } = {};
  for (let attempt = 1; ; attempt++) {
    const out: BatchGetItemCommandOutput = await db.reads.send(new BatchGetItemCommand({ RequestItems: request }));
    const user = itemOf(out.Responses?.[tables.users]?.[0]);
    const grant = itemOf(out.Responses?.[tables.grants]?.[0]);
    if (user) found.user = record<User>(user);
    // A tombstone left by revokeGrant has no secret: it is not a usable grant.
    if (grant?.secretHash) found.grant = record<Grant>(grant);
    request = out.UnprocessedKeys;
    if (!request || Object.keys(request).length === 0) return found;
    if (attempt === BATCH_GET_ATTEMPTS) throw new Error('BatchGetItem left keys unprocessed after retries');
    await sleep(BATCH_GET_BACKOFF_MS * 2 ** (attempt - 1));
  }
}

/** Grants (refresh tokens), and the tombstones revocation leaves. */
function grantItems(context: OAuthTables) {
  const {
    db,
    tables,
    ops: { get, queryAll },
  } = context;
  return {
    createGrant: (grant, expiresAt) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.grants,
            Item: { ...grant, ttl: ttlSeconds(expiresAt) },
            ConditionExpression: 'attribute_not_exists(grantId)',
          }),
        ),
      ),
    async getGrant(grantId) {
      // Strongly consistent: a revocation must stop the very next refresh (same one round trip).
      const grant = await get<Grant>(tables.grants, { grantId }, true);
      // A tombstone left by revokeGrant has no secret: it is not a usable grant.
      return grant?.secretHash ? grant : undefined;
    },
    getUserAndGrant: (svcnumId, grantId) => getUserAndGrant(context, svcnumId, grantId),
    async touchGrant(grantId, now, expiresAt) {
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.grants,
            Key: { grantId },
            UpdateExpression: 'SET lastUsedAt = :now, #ttl = :ttl',
            ConditionExpression: 'attribute_exists(grantId) AND attribute_not_exists(revokedAt) AND lastUsedAt < :now',
            ExpressionAttributeNames: { '#ttl': 'ttl' },
            ExpressionAttributeValues: { ':now': now, ':ttl': ttlSeconds(expiresAt) },
          }),
        ),
      );
    },
    async revokeGrant(grantId, now) {
      await db.send(
        new UpdateCommand({
          TableName: tables.grants,
          Key: { grantId },
          // A tombstone only needs to outlive the 5-minute code that could still create the grant.
          UpdateExpression: 'SET revokedAt = if_not_exists(revokedAt, :now), #ttl = if_not_exists(#ttl, :ttl)',
          ExpressionAttributeNames: { '#ttl': 'ttl' },
          ExpressionAttributeValues: { ':now': now, ':ttl': ttlSeconds(now + DAY_MS) },
        }),
      );
    },
    listGrants: (svcnumId, clientId) =>
      queryAll<Grant>({
        TableName: tables.grants,
        IndexName: 'bySubject',
        KeyConditionExpression: clientId ? 'svcnumId = :svcnumId AND clientId = :clientId' : 'svcnumId = :svcnumId',
        ExpressionAttributeValues: clientId
          ? { ':svcnumId': svcnumId, ':clientId': clientId }
          : { ':svcnumId': svcnumId },
      }),
  } satisfies Partial<OAuthStore>;
}

/** What a browser leaves: consent per client, sign-in throttle counts, sessions. */
function browserItems({ db, tables, ops: { get, queryAll } }: OAuthTables) {
  return {
    // consent
    getConsent: (svcnumId, clientId) => get<Consent>(tables.consents, { svcnumId, clientId }),
    async putConsent(consent) {
      await db.send(new PutCommand({ TableName: tables.consents, Item: consent }));
    },
    listConsents: (svcnumId) =>
      queryAll<Consent>({
        TableName: tables.consents,
        KeyConditionExpression: 'svcnumId = :svcnumId',
        ExpressionAttributeValues: { ':svcnumId': svcnumId },
      }),
    async deleteConsent(svcnumId, clientId) {
      await db.send(new DeleteCommand({ TableName: tables.consents, Key: { svcnumId, clientId } }));
    },

    // sign-in throttle
    async getSignInThrottle(key, now) {
      const state = await get<SignInThrottle>(tables.signInThrottle, { key }, true);
      return state && state.expiresAt > now ? state : undefined;
    },
    putSignInThrottle: (next, seenFailures, now) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.signInThrottle,
            Item: { ...next, ttl: ttlSeconds(next.expiresAt) },
            ...(seenFailures === undefined
              ? // Nothing live: no item, or one whose count has expired (the TTL sweeper is late).
                {
                  ConditionExpression: 'attribute_not_exists(#key) OR expiresAt <= :now',
                  ExpressionAttributeNames: { '#key': 'key' },
                  ExpressionAttributeValues: { ':now': now },
                }
              : { ConditionExpression: 'failures = :seen', ExpressionAttributeValues: { ':seen': seenFailures } }),
          }),
        ),
      ),
    async deleteSignInThrottle(key) {
      await db.send(new DeleteCommand({ TableName: tables.signInThrottle, Key: { key } }));
    },

    // sessions
    async putSession(session) {
      await db.send(
        new PutCommand({
          TableName: tables.sessions,
          Item: { ...session, ttl: ttlSeconds(session.expiresAt) },
        }),
      );
    },
    async getSession(sessionHash, now) {
      const session = await get<Session>(tables.sessions, { sessionHash });
      return session && session.expiresAt > now ? session : undefined;
    },
    async deleteSession(sessionHash) {
      await db.send(new DeleteCommand({ TableName: tables.sessions, Key: { sessionHash } }));
    },
  } satisfies Partial<OAuthStore>;
}

/**
 * The OAuth tables (authorization requests, codes, grants, consent, sign-in throttle, sessions,
 * passkeys and their challenges) in DynamoDB.
 */
export function createDynamoOAuthStore(db: StoreDb, tables: TableNames): OAuthStore {
  const context: OAuthTables = { db, tables, ops: dynamoOps(db) };
  return {
    ...authorizationFlowItems(context),
    ...grantItems(context),
    ...browserItems(context),
    ...passkeyItems(db, tables),
  };
}
