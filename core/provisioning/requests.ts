import { createHash } from 'node:crypto';
import { newUlid } from '../kernel/ids';
import type { IdempotencyRecord } from '../kernel/model';
import type { Clock, Random } from '../kernel/ports';
import { provisioningLimits, type ProvisioningConfig } from './config';
import { DomainError } from '../kernel/errors';
import { LEASE_LOST, type Held } from './steps';
import type { ProvisioningPort } from './store';

// request_id idempotency for creates (AIP-155): a retried create with the same request_id and the
// same request returns the resource made the first time; the same request_id with a different
// request is ALREADY_EXISTS; while the first call is still running, ABORTED.
//
// Exactly once across crashes, without transactions: the resource id is chosen when the request
// record is first written, and every attempt builds the resource under that id, so at most one
// commit write can succeed (it is conditional on the id being new). A retry that finds the record
// pending past its lease takes it over (one conditional write: one retry wins), then looks for
// what the earlier attempt committed under the id: found, it finishes that resource's
// confirmations and answers with it; not found, it creates it.

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** How one kind of resource is created under a request's resource id. */
export interface Creation<T> {
  /** Builds the resource under `id` and commits it, only while `held` (its steps check it). */
  create(id: string, held: Held): Promise<T>;
  /**
   * What an interrupted attempt committed under `id`, its confirmations finished, as the answer
   * to the retry; undefined when nothing was committed.
   */
  recover(id: string): Promise<T | undefined>;
  /** The answer to a retry of a completed request. */
  replay(id: string): Promise<T>;
}

const ignore = () => undefined;

export function createRequestLog(store: ProvisioningPort, clock: Clock, random: Random, config: ProvisioningConfig) {
  /** Runs one attempt of a request under its record's lease and records how it ended. */
  async function attempt<T>(record: IdempotencyRecord, run: (id: string, held: Held) => Promise<T>): Promise<T> {
    const id = record.resourceId!;
    // Held until a margin before the lease ends: a retry takes over only once it has ended, so a
    // commit or an undo of this attempt never runs while a retry builds the same resource.
    const heldUntil = record.leaseUntil - config.lease / 5;
    let result: T;
    try {
      result = await run(id, () => clock.now() < heldUntil);
    } catch (error) {
      if (error instanceof DomainError && error.code !== LEASE_LOST) {
        // A refusal (bad input, quota, empty pool) comes before any commit write: nothing was
        // created, so the request_id is free for a corrected request.
        await store.abandonRequest(record.requestKey, record.leaseUntil).catch(ignore);
      } else {
        // Anything else may have committed (a write that timed out after DynamoDB applied it):
        // the record stays, its lease ends, and a retry looks for the resource before creating it.
        await store.releaseRequest(record.requestKey, record.leaseUntil, clock.now()).catch(ignore);
      }
      throw error;
    }
    // The resource exists from here on, so the caller gets it even if recording it fails (one
    // retry, then given up): left pending, a retry is ABORTED until the lease lapses, then finds
    // the resource under the record's id.
    await store
      .completeRequest(record.requestKey, id)
      .catch(() => store.completeRequest(record.requestKey, id))
      .catch(ignore);
    return result;
  }

  return async function once<T>(
    scope: { ownerId: string; method: string; requestId: string | undefined; request: unknown },
    creation: Creation<T>,
  ): Promise<T> {
    if (!scope.requestId) return creation.create(newUlid(clock, random), () => true);
    if (!REQUEST_ID.test(scope.requestId)) {
      throw new DomainError(
        'invalid_argument',
        `request_id must be 1-${provisioningLimits.requestIdMax} characters of [A-Za-z0-9._:-]`,
      );
    }
    const requestKey = `${scope.ownerId}#${scope.method}#${scope.requestId}`;
    const fingerprint = createHash('sha256').update(JSON.stringify(scope.request)).digest('base64url');
    const now = clock.now();
    const first: IdempotencyRecord = {
      requestKey,
      fingerprint,
      state: 'pending',
      resourceId: newUlid(clock, random),
      leaseUntil: now + config.lease,
      expiresAt: now + provisioningLimits.requestRetention,
    };
    const claim = await store.beginRequest(first);
    if (claim.outcome === 'started') return attempt(first, creation.create);

    const { record } = claim;
    if (record.fingerprint !== fingerprint) {
      throw new DomainError('conflict', 'request_id was already used for a different request');
    }
    if (record.state === 'done' && record.resourceId) return creation.replay(record.resourceId);
    const inProgress = () =>
      new DomainError('aborted', 'a call with this request_id is still in progress; retry later');
    if (record.state !== 'pending' || record.leaseUntil > now) throw inProgress();
    // The attempt holding the record crashed or failed: take it over with its resource id (a
    // record from before resource ids gets one now).
    const taken = await store.takeOverRequest(record, now + config.lease, first.resourceId!);
    if (!taken) throw inProgress();
    return attempt(taken, async (id, held) => (await creation.recover(id)) ?? creation.create(id, held));
  };
}

export type RequestLog = ReturnType<typeof createRequestLog>;
