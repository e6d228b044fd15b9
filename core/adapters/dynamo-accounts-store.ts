import { DeleteCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { AccountsStore } from '../accounts/store';
import type { Client, Mask, NumberRecord, User } from '../kernel/model';
import type { SharedStore } from '../kernel/store';
import type { TableNames } from '../tables';
import { conditional, dynamoOps } from './dynamo-ops';
import type { StoreDb } from './dynamo-schema';

/** What each part of the store below works with: the client, the table names and the shared operations. */
interface StoreContext {
  db: StoreDb;
  tables: TableNames;
  ops: ReturnType<typeof dynamoOps>;
}

/** Clients: registration, secret rotation, disabling, and removal as compensation. */
function clientStore({
  db,
  tables,
  ops,
}: StoreContext): Pick<
  AccountsStore,
  'createClient' | 'setClientSecret' | 'deleteClient' | 'getClient' | 'listClients' | 'setClientDisabled'
> {
  return {
    async createClient(client) {
      const created = await conditional(
        db.send(
          new PutCommand({
            TableName: tables.clients,
            Item: client,
            ConditionExpression: 'attribute_not_exists(clientId)',
          }),
        ),
      );
      if (!created) throw new Error(`client ${client.clientId} already exists`);
    },
    setClientSecret: (clientId, secretHash) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.clients,
            Key: { clientId },
            UpdateExpression: 'SET secretHash = :hash',
            ConditionExpression: 'attribute_exists(secretHash)',
            ExpressionAttributeValues: { ':hash': secretHash },
          }),
        ),
      ),
    async deleteClient(clientId) {
      await db.send(new DeleteCommand({ TableName: tables.clients, Key: { clientId } }));
    },
    getClient: (clientId) => ops.get<Client>(tables.clients, { clientId }),
    listClients: () => ops.scanAll<Client>(tables.clients),
    setClientDisabled: (clientId, disabled) =>
      ops.updateReturning<Client>({
        TableName: tables.clients,
        Key: { clientId },
        UpdateExpression: 'SET disabled = :disabled',
        ConditionExpression: 'attribute_exists(clientId)',
        ExpressionAttributeValues: { ':disabled': disabled },
      }),
  };
}

/** Unique identifiers (emails, numbers), each claimed by one user, and the mask a number may resolve to. */
function identifierStore({
  db,
  tables,
  ops,
}: StoreContext): Pick<
  AccountsStore,
  'claimEmail' | 'releaseEmail' | 'findSvcnumIdByEmail' | 'claimNumber' | 'releaseNumber' | 'getNumber'
> &
  Pick<SharedStore, 'getMask'> {
  return {
    claimEmail: (email, svcnumId) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.emails,
            Item: { email, svcnumId },
            ConditionExpression: 'attribute_not_exists(email)',
          }),
        ),
      ),
    async releaseEmail(email, svcnumId) {
      await conditional(
        db.send(
          new DeleteCommand({
            TableName: tables.emails,
            Key: { email },
            ConditionExpression: 'svcnumId = :svcnumId',
            ExpressionAttributeValues: { ':svcnumId': svcnumId },
          }),
        ),
      );
    },
    findSvcnumIdByEmail: async (email) => (await ops.get<{ svcnumId: string }>(tables.emails, { email }))?.svcnumId,
    claimNumber: (number) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.numbers,
            Item: number,
            ConditionExpression: 'attribute_not_exists(svcnum)',
          }),
        ),
      ),
    async releaseNumber(svcnum, svcnumId) {
      await conditional(
        db.send(
          new DeleteCommand({
            TableName: tables.numbers,
            Key: { svcnum },
            ConditionExpression: 'svcnumId = :svcnumId',
            ExpressionAttributeValues: { ':svcnumId': svcnumId },
          }),
        ),
      );
    },
    getNumber: (svcnum) => ops.get<NumberRecord>(tables.numbers, { svcnum }),
    getMask: (maskId) => ops.get<Mask>(tables.masks, { maskId }, true),
  };
}

/** User records: creation, reads and the account status. */
function userStore({
  db,
  tables,
  ops,
}: StoreContext): Pick<AccountsStore, 'createUser' | 'getUser' | 'listUsers' | 'setUserStatus'> {
  return {
    async createUser(user) {
      const created = await conditional(
        db.send(
          new PutCommand({
            TableName: tables.users,
            Item: user,
            ConditionExpression: 'attribute_not_exists(svcnumId)',
          }),
        ),
      );
      if (!created) throw new Error(`user ${user.svcnumId} already exists`);
    },
    // Strongly consistent: a disabled account must be seen as disabled at once.
    getUser: (svcnumId) => ops.get<User>(tables.users, { svcnumId }, true),
    listUsers: () => ops.scanAll<User>(tables.users),
    setUserStatus: (svcnumId, status) =>
      ops.updateReturning<User>({
        TableName: tables.users,
        Key: { svcnumId },
        UpdateExpression: 'SET #status = :status',
        ConditionExpression: 'attribute_exists(svcnumId)',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':status': status },
      }),
  };
}

/**
 * The accounts tables (clients, users, emails, numbers' ownership) in DynamoDB, and a mask by id:
 * the records a number resolves to, which several modules read.
 */
export function createDynamoAccountsStore(
  db: StoreDb,
  tables: TableNames,
): AccountsStore & Pick<SharedStore, 'getMask'> {
  const context: StoreContext = { db, tables, ops: dynamoOps(db) };
  return { ...clientStore(context), ...identifierStore(context), ...userStore(context) };
}
