import type { IdempotencyRecord, Mask, NumberRecord, QuotaSlot, User } from '../kernel/model';

import type { Page, PageKey } from '../kernel/paging';
import type { SharedStore } from '../kernel/store';

export type { Page, PageKey } from '../kernel/paging';

export type SlotClaim =
  | { outcome: 'claimed' }
  | { outcome: 'taken' }
  /** Held under a lease that has lapsed: the caller decides whether to take it over. */
  | { outcome: 'lapsed'; slot: QuotaSlot };

/** The per-owner quota overrides an owner record may carry. */
export type QuotaOverrides = Partial<
  Pick<User, 'independentAgentQuota' | 'dependentAgentQuota' | 'maskQuota' | 'numberQuota'>
>;

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
  leaseNumber(
    number: NumberRecord,
    holder: string,
    entityType: NonNullable<NumberRecord['entityType']>,
    leaseUntil: number,
    now: number,
  ): Promise<boolean>;
  /**
   * Makes a lease permanent for its holder: `state`, and either out of the pool or (masks) back in
   * it from `poolFrom` on. False if the number is no longer this holder's.
   */
  confirmNumber(
    svcnum: string,
    holder: string,
    state: NumberRecord['state'],
    now: number,
    poolFrom?: number,
  ): Promise<boolean>;
  /** Gives a leased, uncommitted number straight back to the pool. */
  returnNumber(svcnum: string, holder: string, now: number): Promise<void>;
  /** Retires a holder's number: quarantined, allocatable again from `until`. */
  quarantineNumber(svcnum: string, holder: string, until: number, now: number): Promise<boolean>;
  /** Undoes quarantineNumber for a holder (compensation), back to `state`. */
  restoreNumber(svcnum: string, holder: string, state: NumberRecord['state'], now: number): Promise<boolean>;
  /**
   * Lifecycle transition: only from one of `from` (and, if given, only while `holder` holds it).
   * Returns the new record, or undefined.
   */
  transitionNumber(
    svcnum: string,
    from: readonly NumberRecord['state'][],
    to: NumberRecord['state'],
    now: number,
    holder?: string,
  ): Promise<NumberRecord | undefined>;

  // provisioned entities (in the users table)
  listOwned(ownerId: string, accountType: User['accountType'], limit: number, startKey?: PageKey): Promise<Page<User>>;
  /** Sets attributes of an entity; `expected` are attribute values that must hold (optimistic). */
  updateEntity(svcnumId: string, changes: Partial<User>, expected?: Partial<User>): Promise<User | undefined>;
  /**
   * Holds an agent for a number rotation until `until`, if no rotation holds it at `now` and
   * `expected` values hold.
   */
  claimRotation(svcnumId: string, expected: Partial<User>, until: number, now: number): Promise<boolean>;
  /** Removes fields of an entity (e.g. a cleared configuration value). */
  clearEntityFields(svcnumId: string, fields: ReadonlyArray<keyof User>): Promise<void>;
  deleteEntity(svcnumId: string): Promise<void>;
  setQuotaOverrides(svcnumId: string, overrides: QuotaOverrides): Promise<User | undefined>;

  // masks
  createMask(mask: Mask): Promise<void>;
  getMask(maskId: string): Promise<Mask | undefined>;
  listMasks(ownerId: string, limit: number, startKey?: PageKey): Promise<Page<Mask>>;
  /** Ends a mask early; undefined if it had already expired at `now`. */
  closeMask(maskId: string, now: number): Promise<Mask | undefined>;

  // agent quota slots
  /**
   * Claims a free slot, one whose `heldUntil` has come at `now`, or one `holder` holds under a
   * lease (left by an interrupted attempt of the same request, which builds under the same id); a
   * confirmed slot is never claimed again before its `heldUntil`.
   */
  claimSlot(slotKey: string, holder: string, leaseUntil: number, now: number): Promise<SlotClaim>;
  /** Takes over a slot whose lease lapsed, if it is still exactly as read. */
  takeOverSlot(slot: QuotaSlot, holder: string, leaseUntil: number): Promise<boolean>;
  /** Ends the lease of `holder`'s slot: held for good, or (`heldUntil`) until then. */
  confirmSlot(slotKey: string, holder: string, heldUntil?: number): Promise<boolean>;
  /** Gives back a slot `holder` holds under a lease (never a confirmed one). */
  releaseSlot(slotKey: string, holder: string): Promise<void>;
  /** Frees a slot `holder` holds, confirmed or not (its mask closed, its number deactivated). */
  endSlot(slotKey: string, holder: string): Promise<void>;

  // idempotency of creates
  /** Writes the pending record of a request's first call, or returns the record already there. */
  beginRequest(record: IdempotencyRecord): Promise<RequestClaim>;
  /**
   * Takes over a pending record whose lease lapsed, if it is still exactly as read: a new lease,
   * and `resourceId` only if the record has none. Returns the record as taken, or undefined.
   */
  takeOverRequest(
    seen: IdempotencyRecord,
    leaseUntil: number,
    resourceId: string,
  ): Promise<IdempotencyRecord | undefined>;
  /** Marks the request done, if the record still names `resourceId`. */
  completeRequest(requestKey: string, resourceId: string): Promise<void>;
  /** Ends the lease of a pending record (so a retry may take it over at once), if it is still `leaseUntil`. */
  releaseRequest(requestKey: string, leaseUntil: number, now: number): Promise<void>;
  /** Deletes a pending record under lease `leaseUntil`: its request created nothing. */
  abandonRequest(requestKey: string, leaseUntil: number): Promise<void>;
}

/** Exactly the store methods the provisioning module calls. */
export type ProvisioningPort = Pick<
  ProvisioningStore & SharedStore,
  | 'abandonRequest'
  | 'beginRequest'
  | 'claimRotation'
  | 'claimSlot'
  | 'closeMask'
  | 'completeRequest'
  | 'confirmNumber'
  | 'confirmSlot'
  | 'createMask'
  | 'createUser'
  | 'deleteClient'
  | 'endSlot'
  | 'freeNumbers'
  | 'getClient'
  | 'getMask'
  | 'getNumber'
  | 'getUser'
  | 'leaseNumber'
  | 'listMasks'
  | 'listOwned'
  | 'quarantineNumber'
  | 'releaseRequest'
  | 'releaseSlot'
  | 'restoreNumber'
  | 'returnNumber'
  | 'seedNumber'
  | 'takeOverRequest'
  | 'takeOverSlot'
  | 'transitionNumber'
  | 'updateEntity'
>;
