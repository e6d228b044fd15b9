import { newUlid } from '../ids';
import type { NumberState, User } from '../model';
import type { Clock, Random } from '../ports';
import type { Store } from '../store';
import { provisioningLimits } from './config';
import { failedPrecondition, invalidArgument, notFound } from './errors';
import { decodePageToken, pageOf, pageSize } from './pages';
import type { NumberPool } from './pool';
import type { RequestLog } from './requests';
import { Steps } from './steps';
import { displayNameField, svcnumIdField } from './validation';

// Programmable numbers: non-AI automated senders owned by a business account. Their behaviour
// (auto_reply, forward_to_svcnum_id) is configured here and acted on when messages arrive.

export interface Caller { ownerId: string; clientId: string }

export interface ProgrammableConfig { autoReply: string; forwardToSvcnumId: string }

export interface ProgrammableNumberView {
  svcnumId: string;
  svcnum: string;
  displayName: string;
  state: NumberState;
  config: ProgrammableConfig;
  createTime: number;
  updateTime: number;
}

export const CONFIG_FIELDS = ['auto_reply', 'forward_to_svcnum_id'] as const;

export function programmableView(entity: User): ProgrammableNumberView {
  return {
    svcnumId: entity.svcnumId,
    svcnum: entity.svcnum,
    displayName: entity.displayName ?? '',
    state: entity.numberState ?? 'active',
    config: { autoReply: entity.autoReply ?? '', forwardToSvcnumId: entity.forwardToSvcnumId ?? '' },
    createTime: entity.createdAt,
    updateTime: entity.updatedAt ?? entity.createdAt,
  };
}

export function createProgrammableNumbers(deps: { store: Store; clock: Clock; random: Random; pool: NumberPool; once: RequestLog }) {
  const { store, clock, random, pool, once } = deps;

  /** The caller's programmable number, or NOT_FOUND (never tells whether someone else's exists). */
  async function owned(caller: Caller, svcnumId: string | undefined): Promise<User> {
    const id = svcnumIdField(svcnumId, 'svcnum_id');
    const entity = await store.getUser(id);
    if (!entity || entity.accountType !== 'programmable' || entity.ownerId !== caller.ownerId) throw notFound(`no programmable number ${id} in your account`);
    return entity;
  }

  /** Validated configuration changes: the fields named in `paths` (all when empty). */
  async function configChanges(self: string, config: Partial<ProgrammableConfig>, paths: readonly string[]): Promise<Partial<User>> {
    const unknown = paths.filter((path) => !(CONFIG_FIELDS as readonly string[]).includes(path));
    if (unknown.length > 0) throw invalidArgument(`update_mask may name only: ${CONFIG_FIELDS.join(', ')}`);
    const all = paths.length === 0;
    const changes: Partial<User> = {};
    if (all || paths.includes('auto_reply')) {
      const reply = config.autoReply ?? '';
      if (reply.length > provisioningLimits.autoReplyMax) throw invalidArgument(`auto_reply is longer than ${provisioningLimits.autoReplyMax} characters`);
      changes.autoReply = reply === '' ? undefined : reply;
    }
    if (all || paths.includes('forward_to_svcnum_id')) {
      const target = config.forwardToSvcnumId ?? '';
      if (target === '') {
        changes.forwardToSvcnumId = undefined;
      } else {
        svcnumIdField(target, 'forward_to_svcnum_id');
        if (target === self) throw invalidArgument('forward_to_svcnum_id must not be the number itself');
        const destination = await store.getUser(target);
        if (!destination || destination.status === 'disabled') throw notFound(`forward_to_svcnum_id ${target} does not exist`);
        changes.forwardToSvcnumId = target;
      }
    }
    return changes;
  }

  return {
    /** Takes a number from the pool for the caller's account. */
    provision(caller: Caller, input: { requestId?: string; displayName?: string; config?: Partial<ProgrammableConfig> }): Promise<ProgrammableNumberView> {
      const displayName = displayNameField(input.displayName, false);
      return once({ ownerId: caller.ownerId, method: 'ProvisionNumber', requestId: input.requestId, request: { displayName, config: input.config ?? {} } },
        () => Steps.all(async (steps) => {
          const svcnumId = newUlid(clock, random);
          const changes = await configChanges(svcnumId, input.config ?? {}, []);
          const svcnum = await steps.run(() => pool.lease(svcnumId, 'programmable'), (number) => pool.giveBack(number, svcnumId));
          const now = clock.now();
          const entity: User = {
            svcnumId, svcnum, status: 'active', accountType: 'programmable', createdAt: now, updatedAt: now,
            ownerId: caller.ownerId, ownerSort: `programmable#${svcnumId}`, numberState: 'active',
            ...(displayName ? { displayName } : {}),
            ...Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)),
          };
          await steps.commit(() => store.createUser(entity));
          await steps.afterCommit(() => pool.confirm(svcnum, svcnumId, 'active'));
          return { id: svcnumId, result: programmableView(entity) };
        }),
        async (id) => programmableView(await owned(caller, id)));
    },

    get: async (caller: Caller, svcnumId: string | undefined) => programmableView(await owned(caller, svcnumId)),

    async list(caller: Caller, input: { pageSize?: number; pageToken?: string }) {
      const page = await store.listOwned(caller.ownerId, 'programmable', pageSize(input.pageSize), decodePageToken(input.pageToken, caller.ownerId));
      return pageOf(page, programmableView);
    },

    async configure(caller: Caller, input: { svcnumId?: string; config?: Partial<ProgrammableConfig>; updatePaths?: readonly string[] }): Promise<ProgrammableNumberView> {
      const entity = await owned(caller, input.svcnumId);
      if (entity.numberState === 'deactivated' || entity.numberState === 'quarantined') throw failedPrecondition(`number ${entity.svcnum} is ${entity.numberState}`);
      const changes = await configChanges(entity.svcnumId, input.config ?? {}, input.updatePaths ?? []);
      const updated = await store.updateEntity(entity.svcnumId, { ...changes, updatedAt: clock.now() });
      if (!updated) throw notFound(`no programmable number ${entity.svcnumId} in your account`);
      return programmableView(updated);
    },
  };
}
