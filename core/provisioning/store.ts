import type { IdempotencyRecord, Mask, NumberRecord, QuotaSlot, User } from '../model';

/** Where a page of a list continues (DynamoDB's LastEvaluatedKey, opaque to callers). */
export type PageKey = Record<string, unknown>;
export interface Page<T> { items: T[]; nextKey?: PageKey }

export type SlotClaim =
  | { outcome: 'claimed' }
  | { outcome: 'taken' }
  /** Held under a lease that has lapsed: the caller decides whether to take it over. */
  | { outcome: 'lapsed'; slot: QuotaSlot };

export type RequestClaim = { outcome: 'started' } | { outcome: 'exists'; record: IdempotencyRecord };

/**
 * The store port of the provisioning API. Every method is one single-item operation or a query;
 * the core composes them into steps that commit at one write and compensate on failure.
 */
export interface ProvisioningStore {
  // the number pool
  /** Adds a number to the pool; false if the number exists. */
  seedNumber(svcnum: string, now: number): Promise<boolean>;
  /** Up to `limit` pooled numbers allocatable at `now` (free, lapsed leases, ended cool-offs). */
  freeNumbers(now: number, limit: number): Promise<NumberRecord[]>;
  /** Claims a pooled number as read by freeNumbers, if nobody changed it since (optimistic). */
  leaseNumber(number: NumberRecord, holder: string, entityType: NonNullable<NumberRecord['entityType']>, leaseUntil: number, now: number): Promise<boolean>;
  /**
   * Makes a lease permanent for its holder: `state`, and either out of the pool or (masks) back in
   * it from `poolFrom` on. False if the number is no longer this holder's.
   */
  confirmNumber(svcnum: string, holder: string, state: NumberRecord['state'], now: number, poolFrom?: number): Promise<boolean>;
  /** Gives a leased, uncommitted number straight back to the pool. */
  returnNumber(svcnum: string, holder: string, now: number): Promise<void>;
  /** Retires a holder's number: quarantined, allocatable again from `until`. */
  quarantineNumber(svcnum: string, holder: string, until: number, now: number): Promise<boolean>;
  /** Undoes quarantineNumber for a holder (compensation), back to `state`. */
  restoreNumber(svcnum: string, holder: string, state: NumberRecord['state'], now: number): Promise<boolean>;
  /** Lifecycle transition: only from one of `from` (and, if given, only while `holder` holds it). Returns the new record, or undefined. */
  transitionNumber(svcnum: string, from: readonly NumberRecord['state'][], to: NumberRecord['state'], now: number, holder?: string): Promise<NumberRecord | undefined>;

  // provisioned entities (in the users table)
  listOwned(ownerId: string, accountType: User['accountType'], limit: number, startKey?: PageKey): Promise<Page<User>>;
  /** Sets attributes of an entity; `expected` are attribute values that must hold (optimistic). */
  updateEntity(svcnumId: string, changes: Partial<User>, expected?: Partial<User>): Promise<User | undefined>;
  /** Removes fields of an entity (e.g. a cleared configuration value). */
  clearEntityFields(svcnumId: string, fields: ReadonlyArray<keyof User>): Promise<void>;
  deleteEntity(svcnumId: string): Promise<void>;
  setQuotaOverrides(svcnumId: string, overrides: { independentAgentQuota?: number; dependentAgentQuota?: number }): Promise<User | undefined>;

  // masks
  createMask(mask: Mask): Promise<void>;
  getMask(maskId: string): Promise<Mask | undefined>;
  listMasks(ownerId: string, limit: number, startKey?: PageKey): Promise<Page<Mask>>;
  /** Ends a mask early; undefined if it had already expired at `now`. */
  closeMask(maskId: string, now: number): Promise<Mask | undefined>;

  // agent quota slots
  claimSlot(slotKey: string, holder: string, leaseUntil: number, now: number): Promise<SlotClaim>;
  /** Takes over a slot whose lease lapsed, if it is still exactly as read. */
  takeOverSlot(slot: QuotaSlot, holder: string, leaseUntil: number): Promise<boolean>;
  confirmSlot(slotKey: string, holder: string): Promise<boolean>;
  releaseSlot(slotKey: string, holder: string): Promise<void>;

  // idempotency of creates
  beginRequest(record: IdempotencyRecord, now: number): Promise<RequestClaim>;
  completeRequest(requestKey: string, resourceId: string): Promise<void>;
  abandonRequest(requestKey: string): Promise<void>;
}
