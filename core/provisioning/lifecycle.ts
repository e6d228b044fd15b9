import type { NumberRecord, NumberState } from '../kernel/model';
import { numberView } from '../kernel/number-view';
import type { Clock } from '../kernel/ports';
import type { ProvisioningPort } from './store';
import type { ProvisioningConfig } from './config';
import { failedPrecondition, invalidArgument, notFound } from '../kernel/errors';
import type { LeaseResolver, NumberPool } from './pool';
import type { Quota } from './quota';

// Operator side of the number lifecycle (admin CLI):
//   available ─lease→ active ⇄ suspended;  active|suspended ─deactivate→ deactivated ─→ quarantined
//   quarantined ─(cool-off ends)→ allocatable again;  masks: active → expired when the TTL elapses.
// Deactivation is three writes (deactivated, the holder's quota slot freed, then quarantined);
// repeating it finishes a half-done one.

const SERVICE_NUMBER = /^\d{11,15}$/;

/** What the operator's lifecycle operations work with. */
interface LifecycleContext {
  store: ProvisioningPort;
  clock: Clock;
  config: ProvisioningConfig;
  pool: NumberPool;
  quota: Quota;
}

async function existing(store: ProvisioningPort, svcnum: string): Promise<NumberRecord> {
  if (!SERVICE_NUMBER.test(svcnum)) throw invalidArgument('a service number is 11 to 15 digits');
  const number = await store.getNumber(svcnum);
  if (!number) throw notFound(`no number ${svcnum}`);
  return number;
}

/** A mask's number is not the operator's to change. */
function notMaskNumber(number: NumberRecord) {
  if (number.entityType === 'mask') throw failedPrecondition('mask numbers follow their mask: close the mask instead');
}

/** Mirrors a number's state onto its holder entity, so lists need no extra reads. */
async function mirror({ store, clock }: LifecycleContext, number: NumberRecord, state: NumberState) {
  if (!number.svcnumId || number.entityType === 'mask') return;
  const holder = await store.getUser(number.svcnumId);
  if (holder?.svcnum === number.svcnum) {
    await store.updateEntity(holder.svcnumId, { numberState: state, updatedAt: clock.now() });
  }
}

const view = ({ clock, config }: LifecycleContext, number: NumberRecord) =>
  numberView(number, clock.now(), config.coolOff);

async function transition(ctx: LifecycleContext, svcnum: string, from: NumberRecord['state'][], to: NumberState) {
  const number = await existing(ctx.store, svcnum);
  notMaskNumber(number);
  const changed = await ctx.store.transitionNumber(svcnum, from, to, ctx.clock.now());
  if (!changed) throw failedPrecondition(`number ${svcnum} is ${number.state}; it must be ${from.join(' or ')}`);
  await mirror(ctx, changed, to);
  return view(ctx, changed);
}

/** Adds `count` consecutive numbers from `first` to the pool; existing numbers are skipped. */
async function seedNumbers({ store, clock }: LifecycleContext, first: string, count: number) {
  if (!SERVICE_NUMBER.test(first)) throw invalidArgument('--from must be a service number of 11 to 15 digits');
  if (!Number.isInteger(count) || count < 1 || count > 100_000) throw invalidArgument('--count must be 1 to 100000');
  const start = BigInt(first);
  let added = 0;
  const skipped: string[] = [];
  for (let offset = 0; offset < count; offset++) {
    const svcnum = (start + BigInt(offset)).toString().padStart(first.length, '0');
    if (await store.seedNumber(svcnum, clock.now())) added++;
    else skipped.push(svcnum);
  }
  const last = (start + BigInt(count - 1)).toString().padStart(first.length, '0');
  return { added, skipped: skipped.length, first, last };
}

/** Retires a number from its holder: deactivated, then quarantined for the cool-off. */
async function deactivateNumber(ctx: LifecycleContext, svcnum: string) {
  const { store, clock, pool, quota } = ctx;
  const number = await existing(store, svcnum);
  notMaskNumber(number);
  if (number.state === 'active' || number.state === 'suspended') {
    const changed = await store.transitionNumber(svcnum, ['active', 'suspended'], 'deactivated', clock.now());
    if (!changed) throw failedPrecondition(`number ${svcnum} changed meanwhile; retry`);
    await mirror(ctx, changed, 'deactivated');
  } else if (number.state !== 'deactivated') {
    throw failedPrecondition(
      `number ${svcnum} is ${number.state}; only active or suspended numbers can be deactivated`,
    );
  }
  const holder = number.svcnumId;
  // A programmable number counts against its owner's number quota until deactivated.
  const entity = holder ? await store.getUser(holder) : undefined;
  if (entity?.accountType === 'programmable' && entity.svcnum === svcnum && entity.quotaSlot) {
    await quota.end(entity.quotaSlot, entity.svcnumId);
  }
  if (holder && !(await pool.quarantine(svcnum, holder))) {
    throw failedPrecondition(`number ${svcnum} changed meanwhile; retry`);
  }
  return view(ctx, (await store.getNumber(svcnum))!);
}

export function createNumberLifecycle(ctx: LifecycleContext) {
  return {
    /** Adds `count` consecutive numbers from `first` to the pool; existing numbers are skipped. */
    seed: (first: string, count: number) => seedNumbers(ctx, first, count),
    show: async (svcnum: string) => view(ctx, await existing(ctx.store, svcnum)),
    suspend: (svcnum: string) => transition(ctx, svcnum, ['active'], 'suspended'),
    reactivate: (svcnum: string) => transition(ctx, svcnum, ['suspended'], 'active'),
    /** Retires a number from its holder: deactivated, then quarantined for the cool-off. */
    deactivate: (svcnum: string) => deactivateNumber(ctx, svcnum),
  };
}

/**
 * Whether the holder of a lapsed lease committed, and if so the state its number should have:
 * the commit write (entity or mask) names the number.
 */
export function leaseResolver(store: ProvisioningPort, config: ProvisioningConfig): LeaseResolver {
  return async (number) => {
    const holder = number.svcnumId!;
    if (number.entityType === 'mask') {
      const mask = await store.getMask(holder);
      return mask?.svcnum === number.svcnum
        ? { state: 'active', poolFrom: mask.expiresAt + config.coolOff }
        : undefined;
    }
    const entity = await store.getUser(holder);
    if (entity?.svcnum === number.svcnum) return { state: 'active' };
    if (entity?.fallbackSvcnum === number.svcnum) return { state: 'reserved' };
    return undefined;
  };
}
