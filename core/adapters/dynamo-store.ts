import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Store } from '../store';
import { tableNames, type TableNames } from '../tables';
import { createDynamoAccountsStore } from './dynamo-accounts-store';
import { createDynamoDirectoryStore } from './dynamo-directory-store';
import { createDynamoDpopStore } from './dynamo-dpop-store';
import { createDynamoMessagingStore } from './dynamo-messaging-store';
import { createDynamoOAuthStore } from './dynamo-oauth-store';
import { createDynamoProvisioningStore } from './dynamo-provisioning-store';
import { documentClient, type StoreDb } from './dynamo-schema';

/**
 * The store's DynamoDB adapter: one slice per area, each over its own tables. A process serving
 * every module (the local runner, the gRPC task) takes them all; a Lambda takes only the slices
 * its modules' ports need (its entry names them), so its bundle carries no other.
 */
export function createDynamoStore(db: StoreDb, tables: TableNames): Store {
  return {
    ...createDynamoProvisioningStore(db, tables),
    ...createDynamoDirectoryStore(db, tables),
    ...createDynamoMessagingStore(db, tables),
    ...createDynamoAccountsStore(db, tables),
    ...createDynamoOAuthStore(db, tables),
    ...createDynamoDpopStore(db, tables),
  };
}

/** One slice of the DynamoDB adapter (the functions above). */
type StoreSlice = (db: StoreDb, tables: TableNames) => object;
type Intersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;

/** A process's store, from its table prefix (aws-environment.ts `modulesFromEnvironment`). */
export type StoreFactory<S> = (tablePrefix: string) => S;

/**
 * A Lambda's store: only `slices`, over the SDK's DynamoDB client. The Lambda entry names the
 * slices and lambdas/runtime.ts checks, at compile time, that they serve its modules' ports.
 */
export function dynamoStore<const S extends readonly StoreSlice[]>(
  ...slices: S
): StoreFactory<Intersection<ReturnType<S[number]>>> {
  return (tablePrefix) => {
    const db = documentClient(new DynamoDBClient({}));
    const tables = tableNames(tablePrefix);
    return Object.assign({}, ...slices.map((slice) => slice(db, tables)));
  };
}

/** The whole store (the gRPC task serves every module). */
export const wholeDynamoStore: StoreFactory<Store> = (tablePrefix) =>
  createDynamoStore(documentClient(new DynamoDBClient({})), tableNames(tablePrefix));
