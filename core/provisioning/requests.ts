import { createHash } from 'node:crypto';
import type { Clock } from '../ports';
import { provisioningLimits, type ProvisioningConfig } from './config';
import { ProvisioningError } from './errors';
import type { ProvisioningStore } from './store';

// request_id idempotency for creates (AIP-155): a retried create with the same request_id and the
// same request returns the resource made the first time; the same request_id with a different
// request is ALREADY_EXISTS; while the first call is still running, ABORTED.

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

export function createRequestLog(store: ProvisioningStore, clock: Clock, config: ProvisioningConfig) {
  return async function once<T>(
    scope: { ownerId: string; method: string; requestId: string | undefined; request: unknown },
    create: () => Promise<{ id: string; result: T }>,
    replay: (id: string) => Promise<T>,
  ): Promise<T> {
    if (!scope.requestId) return (await create()).result;
    if (!REQUEST_ID.test(scope.requestId)) {
      throw new ProvisioningError('invalid_argument', `request_id must be 1-${provisioningLimits.requestIdMax} characters of [A-Za-z0-9._:-]`);
    }
    const requestKey = `${scope.ownerId}#${scope.method}#${scope.requestId}`;
    const fingerprint = createHash('sha256').update(JSON.stringify(scope.request)).digest('base64url');
    const now = clock.now();
    const claim = await store.beginRequest({
      requestKey, fingerprint, state: 'pending', leaseUntil: now + config.lease, expiresAt: now + provisioningLimits.requestRetention,
    }, now);
    if (claim.outcome === 'exists') {
      const { record } = claim;
      if (record.fingerprint !== fingerprint) throw new ProvisioningError('already_exists', 'request_id was already used for a different request');
      if (record.state === 'pending' || !record.resourceId) throw new ProvisioningError('aborted', 'a call with this request_id is still in progress; retry later');
      return replay(record.resourceId);
    }
    let created: { id: string; result: T };
    try {
      created = await create();
    } catch (error) {
      await store.abandonRequest(requestKey).catch(() => undefined);
      throw error;
    }
    // The resource exists from here on, so the caller gets it even if recording it fails (one
    // retry, then given up). Never abandon the record now: that would let a retry of this
    // request_id create a second resource at once. Left pending, a retry gets ABORTED until the
    // record's lease lapses.
    await store.completeRequest(requestKey, created.id)
      .catch(() => store.completeRequest(requestKey, created.id))
      .catch(() => undefined);
    return created.result;
  };
}

export type RequestLog = ReturnType<typeof createRequestLog>;
