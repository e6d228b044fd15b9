import { inService, type Mask } from '../kernel/model';
import type { AccountStatus } from '../kernel/capabilities';
import type { ProvisioningPort } from './store';
import type { ProvisioningParts } from './context';
import { idTime } from '../kernel/ids';
import { provisioningLimits } from './config';
import { failedPrecondition, invalidArgument, notFound } from '../kernel/errors';
import { listPage, type PagedList } from '../kernel/paging';
import { quotaLimit } from './quota';
import type { Caller } from './programmable';
import { afterCommit, Steps, type Held } from './steps';
import { maskScopeField, svcnumIdField } from './validation';

// Masks: a temporary number that anonymously bridges two participants. A mask is `expired` from
// the very millisecond its TTL elapses (checked on every read, whatever DynamoDB's TTL sweeper
// does). Its number stays in the pool index with `availableAt` = expiry + cool-off, so it comes
// back by itself, without any sweeper. A live mask holds one of its owner's live-mask quota slots
// until it expires (quota.ts): the slot is free from that same millisecond.

export interface MaskView {
  maskId: string;
  svcnum: string;
  participantA: string;
  participantB: string;
  scope: string;
  state: 'active' | 'expired';
  createTime: number;
  expireTime: number;
}

export const maskView = (mask: Mask, now: number): MaskView => ({
  maskId: mask.maskId,
  svcnum: mask.svcnum,
  participantA: mask.participantA,
  participantB: mask.participantB,
  scope: mask.scope,
  state: mask.expiresAt > now ? 'active' : 'expired',
  createTime: mask.createdAt,
  expireTime: mask.expiresAt,
});

/** Waits for both; the first one's failure wins whichever ended first, so the answer does not depend on timing. */
async function inOrder<A, B>(first: Promise<A>, second: Promise<B>): Promise<[A, B]> {
  const [a, b] = await Promise.allSettled([first, second]);
  if (a.status === 'rejected') throw a.reason;
  if (b.status === 'rejected') throw b.reason;
  return [a.value, b.value];
}

/** Page keys of ListMasks: the byOwner index of the masks table. */
const maskPages: PagedList<Mask> = {
  name: 'masks',
  keyOf: (mask) => ({ maskId: mask.maskId, ownerId: mask.ownerId }),
};

/** What the masks' operations work with: the shared parts, and whether a participant is in service. */
export interface MasksContext extends ProvisioningParts {
  status: Pick<AccountStatus, 'entityInService'>;
}

/** What CreateMask is asked for. */
interface MaskInput {
  requestId?: string;
  ttlSeconds?: number;
  participantA?: string;
  participantB?: string;
  scope?: string;
}

async function ownedMask(store: ProvisioningPort, caller: Caller, maskId: string | undefined): Promise<Mask> {
  const id = svcnumIdField(maskId, 'mask_id');
  const mask = await store.getMask(id);
  if (!mask || mask.ownerId !== caller.ownerId) throw notFound(`no mask ${id} in your account`);
  return mask;
}

/**
 * An existing participant in service. From the accounts status cache, as callers' own status is
 * checked: an in-service answer may be up to 30 s old, any other is read again first; only a
 * refusal reads the record, for its message.
 */
async function participant({ store, status }: MasksContext, value: string | undefined, field: string): Promise<string> {
  const id = svcnumIdField(value, field);
  if (await status.entityInService(id)) return id;
  const entity = await store.getUser(id);
  if (!entity) throw notFound(`${field} ${id} does not exist`);
  if (!inService(entity)) throw failedPrecondition(`${field} ${id} is not active`);
  return id;
}

/**
 * After the commit: the number rejoins the pool once the mask has expired and cooled off; the
 * quota slot is held until it expires.
 */
const confirmMask = ({ pool, quota, config }: MasksContext, mask: Mask) =>
  afterCommit(
    () => pool.confirm(mask.svcnum, mask.maskId, 'active', mask.expiresAt + config.coolOff),
    async () => mask.quotaSlot && quota.confirm(mask.quotaSlot, mask.maskId, mask.expiresAt),
  );

/** The steps of one CreateMask attempt under `maskId`: slot, number, the mask as commit. */
function buildMask(
  ctx: MasksContext,
  caller: Caller,
  input: MaskInput,
  checked: { ttl: number; scope: string },
  maskId: string,
  held: Held,
): Promise<MaskView> {
  const { store, clock, pool, quota, config } = ctx;
  return Steps.all(async (steps) => {
    // Read at once (one round trip of wall time); the first refusal in field order wins.
    const [[participantA, participantB], owner] = await inOrder(
      inOrder(
        participant(ctx, input.participantA, 'participant_a'),
        participant(ctx, input.participantB, 'participant_b'),
      ),
      store.getUser(caller.ownerId),
    );
    const slot = await steps.run(
      () => quota.claim(caller.ownerId, 'masks', maskId, quotaLimit(owner, 'masks', config)),
      (key) => quota.release(key, maskId),
    );
    const svcnum = await steps.run(
      () => pool.lease(maskId, 'mask'),
      (number) => pool.giveBack(number, maskId),
    );
    // Created when its id was chosen (ListMasks, by id, is oldest first by create_time too), and
    // expires ttl_seconds after that; one finished by a retry after its first attempt's lease
    // lived its whole TTL from the commit instead.
    const now = clock.now();
    const createdAt = idTime(maskId);
    const lifeFrom = now - createdAt < config.lease ? createdAt : now;
    const mask: Mask = {
      maskId,
      ownerId: caller.ownerId,
      svcnum,
      participantA,
      participantB,
      scope: checked.scope,
      createdAt,
      expiresAt: lifeFrom + checked.ttl * 1000,
      quotaSlot: slot,
    };
    await steps.commit(
      () => store.createMask(mask),
      async () => (await store.getMask(maskId))?.svcnum === svcnum,
    );
    await confirmMask(ctx, mask);
    return maskView(mask, now);
  }, held);
}

function createMask(ctx: MasksContext, caller: Caller, input: MaskInput): Promise<MaskView> {
  const { store, clock, once } = ctx;
  const ttl = input.ttlSeconds ?? 0;
  const min = provisioningLimits.maskTtlMin / 1000;
  const max = provisioningLimits.maskTtlMax / 1000;
  if (!Number.isInteger(ttl) || ttl < min || ttl > max) {
    throw invalidArgument(`ttl_seconds must be an integer from ${min} to ${max}`);
  }
  const scope = maskScopeField(input.scope);
  if (input.participantA && input.participantA === input.participantB) {
    throw invalidArgument('participant_a and participant_b must be different');
  }
  const request = { ttl, scope, participantA: input.participantA, participantB: input.participantB };
  return once(
    { ownerId: caller.ownerId, method: 'CreateMask', requestId: input.requestId, request },
    {
      create: (maskId, held) => buildMask(ctx, caller, input, { ttl, scope }, maskId, held),
      async recover(maskId) {
        const mask = await store.getMask(maskId);
        if (mask?.ownerId !== caller.ownerId) return undefined;
        await confirmMask(ctx, mask);
        return maskView(mask, clock.now());
      },
      replay: async (maskId) => maskView(await ownedMask(store, caller, maskId), clock.now()),
    },
  );
}

/**
 * Early close: expired at once, its quota slot free, its number's cool-off starts now. Closing
 * an expired mask changes nothing but frees its slot if a close failed half way.
 */
async function closeMask(
  { store, clock, quota, config }: MasksContext,
  caller: Caller,
  maskId: string | undefined,
): Promise<MaskView> {
  const mask = await ownedMask(store, caller, maskId);
  const now = clock.now();
  const closed = await store.closeMask(mask.maskId, now);
  if (mask.quotaSlot) await quota.end(mask.quotaSlot, mask.maskId);
  if (!closed) return maskView(mask, now);
  await store.confirmNumber(mask.svcnum, mask.maskId, 'active', now, now + config.coolOff);
  return maskView(closed, now);
}

/** Masks of an owner account: each operation is a function of the context above. */
export function createMasks(ctx: MasksContext) {
  const { store, clock, pageTokens } = ctx;
  return {
    create: (caller: Caller, input: MaskInput) => createMask(ctx, caller, input),

    get: async (caller: Caller, maskId: string | undefined) =>
      maskView(await ownedMask(store, caller, maskId), clock.now()),

    async list(caller: Caller, input: { pageSize?: number; pageToken?: string }) {
      const now = clock.now();
      return listPage(
        pageTokens,
        input,
        caller.ownerId,
        maskPages,
        (limit, startKey) => store.listMasks(caller.ownerId, limit, startKey),
        (mask) => maskView(mask, now),
      );
    },

    /** Early close (see closeMask). */
    close: (caller: Caller, maskId: string | undefined) => closeMask(ctx, caller, maskId),
  };
}
