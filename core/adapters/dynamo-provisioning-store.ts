import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { IdempotencyRecord, Mask, NumberRecord, QuotaSlot, User } from '../kernel/model';
import type { ProvisioningStore, RequestClaim } from '../provisioning/store';
import type { TableNames } from '../tables';
import { conditional, dynamoOps, record, ttlSeconds } from './dynamo-ops';
import type { StoreDb } from './dynamo-schema';

/** Sort key of the pool index: epoch ms, zero-padded so string order is time order. */
export const poolTime = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(15, '0');

/** Mask records outlive their expiry this long, so an owner can still read an expired mask. */
const MASK_RETENTION_MS = 30 * 86_400_000;

/** SET/REMOVE clauses and placeholders for a partial update of named attributes. */
function assignments(changes: Record<string, unknown>, prefix: string) {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const set: string[] = [];
  const remove: string[] = [];
  Object.entries(changes).forEach(([name, value], index) => {
    names[`#${prefix}${index}`] = name;
    if (value === undefined) {
      remove.push(`#${prefix}${index}`);
    } else {
      values[`:${prefix}${index}`] = value;
      set.push(`#${prefix}${index} = :${prefix}${index}`);
    }
  });
  return { names, values, set, remove };
}

/** What each part of the store below works with: the client, the table names and the shared operations. */
interface StoreContext {
  db: StoreDb;
  tables: TableNames;
  ops: ReturnType<typeof dynamoOps>;
}

/**
 * Sets (or, for undefined values, removes) attributes; `expected` values must hold, and so must
 * `also` (a further condition with its own placeholders).
 */
function updateEntity(
  { tables, ops }: StoreContext,
  svcnumId: string,
  changes: Partial<User>,
  expected: Partial<User> = {},
  also?: { condition: string; values: Record<string, unknown> },
) {
  const update = assignments(changes as Record<string, unknown>, 'c');
  const condition = assignments(expected as Record<string, unknown>, 'e');
  const clauses = [
    update.set.length ? `SET ${update.set.join(', ')}` : '',
    update.remove.length ? `REMOVE ${update.remove.join(', ')}` : '',
  ].filter(Boolean);
  const values = { ...update.values, ...condition.values, ...also?.values };
  return ops.updateReturning<User>({
    TableName: tables.users,
    Key: { svcnumId },
    UpdateExpression: clauses.join(' '),
    ConditionExpression: [
      'attribute_exists(svcnumId)',
      ...condition.set,
      ...(also ? [`(${also.condition})`] : []),
    ].join(' AND '),
    ExpressionAttributeNames: { ...update.names, ...condition.names },
    ...(Object.keys(values).length ? { ExpressionAttributeValues: values } : {}),
  });
}

/** The number pool: seeding, the free-number query, and leasing a free number. */
function numberPoolStore({
  db,
  tables,
  ops,
}: StoreContext): Pick<ProvisioningStore, 'seedNumber' | 'freeNumbers' | 'leaseNumber'> {
  return {
    seedNumber: (svcnum, now) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.numbers,
            Item: { svcnum, state: 'available', poolKey: 'free', availableAt: poolTime(0), updatedAt: now },
            ConditionExpression: 'attribute_not_exists(svcnum)',
          }),
        ),
      ),

    async freeNumbers(now, limit) {
      const page = await ops.queryPage<NumberRecord>(
        {
          TableName: tables.numbers,
          IndexName: 'pool',
          KeyConditionExpression: 'poolKey = :free AND availableAt <= :now',
          ExpressionAttributeValues: { ':free': 'free', ':now': poolTime(now) },
        },
        limit,
      );
      return page.items;
    },

    leaseNumber: (number, holder, entityType, leaseUntil, now) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.numbers,
            Key: { svcnum: number.svcnum },
            UpdateExpression:
              'SET #state = :leased, svcnumId = :holder, entityType = :type, leaseUntil = :lease, ' +
              'availableAt = :leaseAt, updatedAt = :now REMOVE quarantinedUntil',
            // Optimistic: availableAt changes with every transition, so an unchanged value means nobody
            // else got here first.
            ConditionExpression: 'poolKey = :free AND availableAt = :seen AND availableAt <= :nowAt',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: {
              ':leased': 'leased',
              ':holder': holder,
              ':type': entityType,
              ':lease': leaseUntil,
              ':leaseAt': poolTime(leaseUntil),
              ':now': now,
              ':free': 'free',
              ':seen': number.availableAt ?? '',
              ':nowAt': poolTime(now),
            },
          }),
        ),
      ),
  };
}

/** A lease's two ends: confirmed (the number is kept) or returned to the pool. */
function numberLeaseEndStore({ db, tables }: StoreContext): Pick<ProvisioningStore, 'confirmNumber' | 'returnNumber'> {
  return {
    confirmNumber: (svcnum, holder, state, now, poolFrom) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.numbers,
            Key: { svcnum },
            UpdateExpression:
              poolFrom === undefined
                ? 'SET #state = :state, updatedAt = :now REMOVE poolKey, availableAt, leaseUntil'
                : 'SET #state = :state, updatedAt = :now, availableAt = :from, quarantinedUntil = :until ' +
                  'REMOVE leaseUntil',
            // Confirming twice is harmless (a retried step).
            ConditionExpression: 'svcnumId = :holder AND (#state = :leased OR #state = :state)',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: {
              ':state': state,
              ':now': now,
              ':holder': holder,
              ':leased': 'leased',
              ...(poolFrom === undefined ? {} : { ':from': poolTime(poolFrom), ':until': poolFrom }),
            },
          }),
        ),
      ),

    async returnNumber(svcnum, holder, now) {
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.numbers,
            Key: { svcnum },
            UpdateExpression:
              'SET #state = :available, poolKey = :free, availableAt = :nowAt, updatedAt = :now ' +
              'REMOVE svcnumId, entityType, leaseUntil',
            ConditionExpression: 'svcnumId = :holder AND #state = :leased',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: {
              ':available': 'available',
              ':free': 'free',
              ':nowAt': poolTime(now),
              ':now': now,
              ':holder': holder,
              ':leased': 'leased',
            },
          }),
        ),
      );
    },
  };
}

/** A held number's lifecycle: retired to quarantine (and back, as compensation), state transitions. */
function numberLifecycleStore({
  db,
  tables,
  ops,
}: StoreContext): Pick<ProvisioningStore, 'quarantineNumber' | 'restoreNumber' | 'transitionNumber'> {
  return {
    quarantineNumber: (svcnum, holder, until, now) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.numbers,
            Key: { svcnum },
            UpdateExpression:
              'SET #state = :quarantined, poolKey = :free, availableAt = :untilAt, ' +
              'quarantinedUntil = :until, previousSvcnumId = :holder, updatedAt = :now REMOVE svcnumId, leaseUntil',
            ConditionExpression: 'svcnumId = :holder AND #state IN (:active, :suspended, :deactivated, :reserved)',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: {
              ':quarantined': 'quarantined',
              ':free': 'free',
              ':untilAt': poolTime(until),
              ':until': until,
              ':holder': holder,
              ':now': now,
              ':active': 'active',
              ':suspended': 'suspended',
              ':deactivated': 'deactivated',
              ':reserved': 'reserved',
            },
          }),
        ),
      ),

    restoreNumber: (svcnum, holder, state, now) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.numbers,
            Key: { svcnum },
            UpdateExpression:
              'SET #state = :state, svcnumId = :holder, updatedAt = :now ' +
              'REMOVE poolKey, availableAt, quarantinedUntil, previousSvcnumId',
            ConditionExpression: '#state = :quarantined AND previousSvcnumId = :holder',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: {
              ':state': state,
              ':holder': holder,
              ':now': now,
              ':quarantined': 'quarantined',
            },
          }),
        ),
      ),

    transitionNumber: (svcnum, from, to, now, holder) => {
      const placeholders = from.map((_, index) => `:from${index}`);
      return ops.updateReturning<NumberRecord>({
        TableName: tables.numbers,
        Key: { svcnum },
        UpdateExpression: 'SET #state = :to, updatedAt = :now',
        ConditionExpression: `#state IN (${placeholders.join(', ')})${holder ? ' AND svcnumId = :holder' : ''}`,
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':to': to,
          ':now': now,
          ...(holder ? { ':holder': holder } : {}),
          ...Object.fromEntries(from.map((state, index) => [`:from${index}`, state])),
        },
      });
    },
  };
}

/** Provisioned entities (programmable numbers, agents) in the users table. */
function entityStore(
  context: StoreContext,
): Pick<
  ProvisioningStore,
  'listOwned' | 'updateEntity' | 'claimRotation' | 'clearEntityFields' | 'deleteEntity' | 'setQuotaOverrides'
> {
  const { db, tables, ops } = context;
  return {
    listOwned: (ownerId, accountType, limit, startKey) =>
      ops.queryPage<User>(
        {
          TableName: tables.users,
          IndexName: 'byOwner',
          KeyConditionExpression: 'ownerId = :owner AND begins_with(ownerSort, :type)',
          ExpressionAttributeValues: { ':owner': ownerId, ':type': `${accountType}#` },
        },
        limit,
        startKey,
      ),

    updateEntity: (svcnumId, changes, expected) => updateEntity(context, svcnumId, changes, expected),
    claimRotation: async (svcnumId, expected, until, now) =>
      (await updateEntity(context, svcnumId, { rotationUntil: until }, expected, {
        condition: 'attribute_not_exists(rotationUntil) OR rotationUntil <= :rotationFreeAt',
        values: { ':rotationFreeAt': now },
      })) !== undefined,

    async clearEntityFields(svcnumId, fields) {
      if (fields.length === 0) return;
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.users,
            Key: { svcnumId },
            UpdateExpression: `REMOVE ${fields.map((_, index) => `#f${index}`).join(', ')}`,
            ConditionExpression: 'attribute_exists(svcnumId)',
            ExpressionAttributeNames: Object.fromEntries(fields.map((field, index) => [`#f${index}`, field])),
          }),
        ),
      );
    },

    async deleteEntity(svcnumId) {
      await db.send(new DeleteCommand({ TableName: tables.users, Key: { svcnumId } }));
    },

    setQuotaOverrides: (svcnumId, overrides) => updateEntity(context, svcnumId, overrides),
  };
}

function maskStore({
  db,
  tables,
  ops,
}: StoreContext): Pick<ProvisioningStore, 'createMask' | 'listMasks' | 'closeMask'> {
  return {
    async createMask(mask) {
      await db.send(
        new PutCommand({
          TableName: tables.masks,
          Item: { ...mask, ttl: ttlSeconds(mask.expiresAt + MASK_RETENTION_MS) },
          ConditionExpression: 'attribute_not_exists(maskId)',
        }),
      );
    },
    listMasks: (ownerId, limit, startKey) =>
      ops.queryPage<Mask>(
        {
          TableName: tables.masks,
          IndexName: 'byOwner',
          KeyConditionExpression: 'ownerId = :owner',
          ExpressionAttributeValues: { ':owner': ownerId },
        },
        limit,
        startKey,
      ),
    closeMask: (maskId, now) =>
      ops.updateReturning<Mask>({
        TableName: tables.masks,
        Key: { maskId },
        UpdateExpression: 'SET expiresAt = :now, #ttl = :ttl',
        ConditionExpression: 'attribute_exists(maskId) AND expiresAt > :now',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':now': now, ':ttl': ttlSeconds(now + MASK_RETENTION_MS) },
      }),
  };
}

/** Quota slots, claimed first under a lease: a new claim, or the takeover of a lapsed one. */
function quotaSlotClaimStore({ db, tables }: StoreContext): Pick<ProvisioningStore, 'claimSlot' | 'takeOverSlot'> {
  return {
    async claimSlot(slotKey, holder, leaseUntil, now) {
      const claimed = await conditional(
        db.send(
          new PutCommand({
            TableName: tables.quotaSlots,
            Item: { slotKey, holder, leaseUntil },
            ConditionExpression:
              'attribute_not_exists(slotKey) OR (holder = :holder AND attribute_exists(leaseUntil)) ' +
              'OR heldUntil <= :now',
            ExpressionAttributeValues: { ':holder': holder, ':now': now },
          }),
        ),
      );
      if (claimed) return { outcome: 'claimed' };
      const slot = record<QuotaSlot>(
        (
          await db.send(
            new GetCommand({
              TableName: tables.quotaSlots,
              Key: { slotKey },
              ConsistentRead: true,
            }),
          )
        ).Item,
      );
      if (slot?.leaseUntil !== undefined && slot.leaseUntil <= now) return { outcome: 'lapsed', slot };
      return { outcome: 'taken' };
    },
    takeOverSlot: (slot, holder, leaseUntil) =>
      conditional(
        db.send(
          new PutCommand({
            TableName: tables.quotaSlots,
            Item: { slotKey: slot.slotKey, holder, leaseUntil },
            ConditionExpression: 'holder = :previous AND leaseUntil = :previousLease',
            ExpressionAttributeValues: { ':previous': slot.holder, ':previousLease': slot.leaseUntil },
          }),
        ),
      ),
  };
}

/** A claimed quota slot's ends: confirmed (held, perhaps until a time), ended, or released unconfirmed. */
function quotaSlotEndStore({
  db,
  tables,
}: StoreContext): Pick<ProvisioningStore, 'confirmSlot' | 'endSlot' | 'releaseSlot'> {
  return {
    confirmSlot: (slotKey, holder, heldUntil) =>
      conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.quotaSlots,
            Key: { slotKey },
            UpdateExpression:
              heldUntil === undefined ? 'REMOVE leaseUntil' : 'SET heldUntil = :until REMOVE leaseUntil',
            ConditionExpression: 'holder = :holder',
            ExpressionAttributeValues: {
              ':holder': holder,
              ...(heldUntil === undefined ? {} : { ':until': heldUntil }),
            },
          }),
        ),
      ),
    async endSlot(slotKey, holder) {
      await conditional(
        db.send(
          new DeleteCommand({
            TableName: tables.quotaSlots,
            Key: { slotKey },
            ConditionExpression: 'holder = :holder',
            ExpressionAttributeValues: { ':holder': holder },
          }),
        ),
      );
    },
    async releaseSlot(slotKey, holder) {
      await conditional(
        db.send(
          new DeleteCommand({
            TableName: tables.quotaSlots,
            Key: { slotKey },
            ConditionExpression: 'holder = :holder AND attribute_exists(leaseUntil)',
            ExpressionAttributeValues: { ':holder': holder },
          }),
        ),
      );
    },
  };
}

/** The pending record of a create's first call, or the record already there. */
async function beginRequest(context: StoreContext, request: IdempotencyRecord): Promise<RequestClaim> {
  const { db, tables, ops } = context;
  const started = await conditional(
    db.send(
      new PutCommand({
        TableName: tables.requests,
        Item: { ...request, ttl: ttlSeconds(request.expiresAt) },
        ConditionExpression: 'attribute_not_exists(requestKey)',
      }),
    ),
  );
  if (started) return { outcome: 'started' };
  const existing = await ops.get<IdempotencyRecord>(tables.requests, { requestKey: request.requestKey }, true);
  // Deleted in between (its first call was refused): start again.
  return existing ? { outcome: 'exists', record: existing } : beginRequest(context, request);
}

/** Idempotency of creates: the request records. */
function requestStore(
  context: StoreContext,
): Pick<
  ProvisioningStore,
  'beginRequest' | 'takeOverRequest' | 'completeRequest' | 'releaseRequest' | 'abandonRequest'
> {
  const { db, tables, ops } = context;
  return {
    beginRequest: (request) => beginRequest(context, request),
    takeOverRequest: (seen, leaseUntil, resourceId) =>
      ops.updateReturning<IdempotencyRecord>({
        TableName: tables.requests,
        Key: { requestKey: seen.requestKey },
        UpdateExpression: 'SET leaseUntil = :lease, resourceId = if_not_exists(resourceId, :id)',
        // Exactly as read: of concurrent retries, one takes the record over.
        ConditionExpression: '#state = :pending AND leaseUntil = :seen',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':lease': leaseUntil,
          ':id': resourceId,
          ':pending': 'pending',
          ':seen': seen.leaseUntil,
        },
      }),
    async completeRequest(requestKey, resourceId) {
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.requests,
            Key: { requestKey },
            UpdateExpression: 'SET #state = :done',
            ConditionExpression: 'resourceId = :id',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: { ':done': 'done', ':id': resourceId },
          }),
        ),
      );
    },
    async releaseRequest(requestKey, leaseUntil, now) {
      await conditional(
        db.send(
          new UpdateCommand({
            TableName: tables.requests,
            Key: { requestKey },
            UpdateExpression: 'SET leaseUntil = :now',
            ConditionExpression: '#state = :pending AND leaseUntil = :lease',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: { ':now': now, ':pending': 'pending', ':lease': leaseUntil },
          }),
        ),
      );
    },
    async abandonRequest(requestKey, leaseUntil) {
      await conditional(
        db.send(
          new DeleteCommand({
            TableName: tables.requests,
            Key: { requestKey },
            ConditionExpression: '#state = :pending AND leaseUntil = :lease',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: { ':pending': 'pending', ':lease': leaseUntil },
          }),
        ),
      );
    },
  };
}

/** The provisioning store on DynamoDB, one part per concern (getMask is the shared store's). */
export function createDynamoProvisioningStore(db: StoreDb, tables: TableNames): Omit<ProvisioningStore, 'getMask'> {
  const context: StoreContext = { db, tables, ops: dynamoOps(db) };
  return {
    ...numberPoolStore(context),
    ...numberLeaseEndStore(context),
    ...numberLifecycleStore(context),
    ...entityStore(context),
    ...maskStore(context),
    ...quotaSlotClaimStore(context),
    ...quotaSlotEndStore(context),
    ...requestStore(context),
  };
}
