import type { NumberStreams } from '../kernel/capabilities';
import type { NumberState, User } from '../kernel/model';
import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock } from '../kernel/ports';
import type { ProvisioningPort } from './store';
import { idTime } from '../kernel/ids';
import { provisioningLimits, type ProvisioningConfig } from './config';
import { failedPrecondition, invalidArgument, notFound } from '../kernel/errors';
import { listPage, type PagedList } from '../kernel/paging';
import type { NumberPool } from './pool';
import { quotaLimit, type Quota } from './quota';
import type { RequestLog } from './requests';
import { afterCommit, Steps } from './steps';
import { displayNameField, svcnumIdField } from './validation';

// Programmable numbers: non-AI automated senders owned by a business account. Their behaviour
// (auto_reply, forward_to_svcnum_id) is configured here and acted on when messages arrive. Each
// holds one of its owner's number quota slots (quota.ts) until it is deactivated.

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

/** Length in characters (code points), as the API documents its bounds, not UTF-16 code units. */
const characters = (text: string) => [...text].length;

/** Page keys of ListNumbers: the byOwner index of the users table, programmable numbers only. */
const numberPages: PagedList<User> = {
  name: 'numbers',
  keyOf: (entity) => ({ svcnumId: entity.svcnumId, ownerId: entity.ownerId, ownerSort: entity.ownerSort }),
};

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

export function createProgrammableNumbers(deps: {
  store: ProvisioningPort; clock: Clock; pool: NumberPool; quota: Quota; once: RequestLog; config: ProvisioningConfig; pageTokens: PageTokenCodec; streams: NumberStreams;
}) {
  const { store, clock, pool, quota, once, config, pageTokens, streams } = deps;

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
      if (characters(reply) > provisioningLimits.autoReplyMax) throw invalidArgument(`auto_reply is longer than ${provisioningLimits.autoReplyMax} characters`);
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

  /**
   * After the commit: the number's lease and quota slot made permanent, and the owner's open
   * streams told (the number is the owner's, and an inbox of its streams, from the commit on).
   */
  const confirm = (entity: User) => afterCommit(
    () => pool.confirm(entity.svcnum, entity.svcnumId, 'active'),
    async () => entity.quotaSlot && quota.confirm(entity.quotaSlot, entity.svcnumId),
    () => streams.numbersGained(entity.ownerId!, [entity.svcnumId]),
  );

  return {
    /** Takes a number from the pool for the caller's account. */
    provision(caller: Caller, input: { requestId?: string; displayName?: string; config?: Partial<ProgrammableConfig> }): Promise<ProgrammableNumberView> {
      const displayName = displayNameField(input.displayName, false);
      // What a retry must repeat: an absent config and one with empty fields are the same request.
      const request = { displayName: displayName ?? '', config: { autoReply: input.config?.autoReply ?? '', forwardToSvcnumId: input.config?.forwardToSvcnumId ?? '' } };
      return once({ ownerId: caller.ownerId, method: 'ProvisionNumber', requestId: input.requestId, request }, {
        create: (svcnumId, held) => Steps.all(async (steps) => {
          const [changes, owner] = await Promise.all([configChanges(svcnumId, input.config ?? {}, []), store.getUser(caller.ownerId)]);
          const slot = await steps.run(
            () => quota.claim(caller.ownerId, 'numbers', svcnumId, quotaLimit(owner, 'numbers', config)),
            (key) => quota.release(key, svcnumId),
          );
          const svcnum = await steps.run(() => pool.lease(svcnumId, 'programmable'), (number) => pool.giveBack(number, svcnumId));
          // Created when its id was chosen: ListNumbers (by id) is then oldest first by create_time too.
          const createdAt = idTime(svcnumId);
          const entity: User = {
            svcnumId, svcnum, status: 'active', accountType: 'programmable', createdAt, updatedAt: createdAt,
            ownerId: caller.ownerId, ownerSort: `programmable#${svcnumId}`, numberState: 'active', quotaSlot: slot,
            ...(displayName ? { displayName } : {}),
            ...Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)),
          };
          await steps.commit(() => store.createUser(entity), async () => (await store.getUser(svcnumId))?.svcnum === svcnum);
          await confirm(entity);
          return programmableView(entity);
        }, held),
        async recover(svcnumId) {
          const entity = await store.getUser(svcnumId);
          if (entity?.accountType !== 'programmable' || entity.ownerId !== caller.ownerId) return undefined;
          await confirm(entity);
          return programmableView(entity);
        },
        replay: async (svcnumId) => programmableView(await owned(caller, svcnumId)),
      });
    },

    get: async (caller: Caller, svcnumId: string | undefined) => programmableView(await owned(caller, svcnumId)),

    /** Whether `svcnumId` is one of the caller's programmable numbers now (a strongly consistent read, unlike the listing). */
    holds: async (caller: Caller, svcnumId: string) => {
      const entity = await store.getUser(svcnumId);
      return entity?.accountType === 'programmable' && entity.ownerId === caller.ownerId;
    },

    /** Every programmable number of the caller's account (the inboxes its message stream follows). */
    async allIds(caller: Caller): Promise<string[]> {
      const ids: string[] = [];
      let startKey;
      do {
        const page = await store.listOwned(caller.ownerId, 'programmable', 100, startKey);
        ids.push(...page.items.map((entity) => entity.svcnumId));
        startKey = page.nextKey;
      } while (startKey);
      return ids;
    },

    list: (caller: Caller, input: { pageSize?: number; pageToken?: string }) => listPage(pageTokens, input, caller.ownerId, numberPages,
      (limit, startKey) => store.listOwned(caller.ownerId, 'programmable', limit, startKey), programmableView),

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
