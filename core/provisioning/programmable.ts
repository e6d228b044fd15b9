import type { NumberStreams } from '../kernel/capabilities';
import type { NumberState, User } from '../kernel/model';
import type { ProvisioningPort } from './store';
import type { ProvisioningParts } from './context';
import { idTime } from '../kernel/ids';
import { provisioningLimits } from './config';
import { failedPrecondition, invalidArgument, notFound } from '../kernel/errors';
import { listPage, type PageKey, type PagedList } from '../kernel/paging';
import { quotaLimit } from './quota';
import { afterCommit, Steps, type Held } from './steps';
import { displayNameField, svcnumIdField } from './validation';

// Programmable numbers: non-AI automated senders owned by a business account. Their behaviour
// (auto_reply, forward_to_svcnum_id) is configured here and acted on when messages arrive. Each
// holds one of its owner's number quota slots (quota.ts) until it is deactivated.

export interface Caller {
  ownerId: string;
  clientId: string;
}

export interface ProgrammableConfig {
  autoReply: string;
  forwardToSvcnumId: string;
}

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

/** What the programmable numbers' operations work with: the shared parts, and the owners' streams. */
export interface ProgrammableContext extends ProvisioningParts {
  streams: NumberStreams;
}

/** What ProvisionNumber is asked for. */
interface ProvisionInput {
  requestId?: string;
  displayName?: string;
  config?: Partial<ProgrammableConfig>;
}

/** What ConfigureNumber is asked for: the new configuration, and which of its fields to change. */
interface ConfigureInput {
  svcnumId?: string;
  config?: Partial<ProgrammableConfig>;
  updatePaths?: readonly string[];
}

/** The caller's programmable number, or NOT_FOUND (never tells whether someone else's exists). */
async function ownedNumber(store: ProvisioningPort, caller: Caller, svcnumId: string | undefined): Promise<User> {
  const id = svcnumIdField(svcnumId, 'svcnum_id');
  const entity = await store.getUser(id);
  if (entity?.accountType !== 'programmable' || entity.ownerId !== caller.ownerId) {
    throw notFound(`no programmable number ${id} in your account`);
  }
  return entity;
}

/** Validated configuration changes: the fields named in `paths` (all when empty). */
async function configChanges(
  store: ProvisioningPort,
  self: string,
  config: Partial<ProgrammableConfig>,
  paths: readonly string[],
): Promise<Partial<User>> {
  const unknown = paths.filter((path) => !(CONFIG_FIELDS as readonly string[]).includes(path));
  if (unknown.length > 0) throw invalidArgument(`update_mask may name only: ${CONFIG_FIELDS.join(', ')}`);
  const all = paths.length === 0;
  const changes: Partial<User> = {};
  if (all || paths.includes('auto_reply')) {
    const reply = config.autoReply ?? '';
    if (characters(reply) > provisioningLimits.autoReplyMax) {
      throw invalidArgument(`auto_reply is longer than ${provisioningLimits.autoReplyMax} characters`);
    }
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
      if (!destination || destination.status === 'disabled') {
        throw notFound(`forward_to_svcnum_id ${target} does not exist`);
      }
      changes.forwardToSvcnumId = target;
    }
  }
  return changes;
}

/**
 * After the commit: the number's lease and quota slot made permanent, and the owner's open
 * streams told (the number is the owner's, and an inbox of its streams, from the commit on).
 */
const confirmNumber = ({ pool, quota, streams }: ProgrammableContext, entity: User) =>
  afterCommit(
    () => pool.confirm(entity.svcnum, entity.svcnumId, 'active'),
    async () => entity.quotaSlot && quota.confirm(entity.quotaSlot, entity.svcnumId),
    () => streams.numbersGained(entity.ownerId!, [entity.svcnumId]),
  );

/** The steps of one ProvisionNumber attempt under `svcnumId`: slot, number, the record as commit. */
function buildNumber(
  ctx: ProgrammableContext,
  caller: Caller,
  input: ProvisionInput,
  displayName: string | undefined,
  svcnumId: string,
  held: Held,
): Promise<ProgrammableNumberView> {
  const { store, pool, quota, config } = ctx;
  return Steps.all(async (steps) => {
    const [changes, owner] = await Promise.all([
      configChanges(store, svcnumId, input.config ?? {}, []),
      store.getUser(caller.ownerId),
    ]);
    const slot = await steps.run(
      () => quota.claim(caller.ownerId, 'numbers', svcnumId, quotaLimit(owner, 'numbers', config)),
      (key) => quota.release(key, svcnumId),
    );
    const svcnum = await steps.run(
      () => pool.lease(svcnumId, 'programmable'),
      (number) => pool.giveBack(number, svcnumId),
    );
    // Created when its id was chosen: ListNumbers (by id) is then oldest first by create_time too.
    const createdAt = idTime(svcnumId);
    const entity: User = {
      svcnumId,
      svcnum,
      status: 'active',
      accountType: 'programmable',
      createdAt,
      updatedAt: createdAt,
      ownerId: caller.ownerId,
      ownerSort: `programmable#${svcnumId}`,
      numberState: 'active',
      quotaSlot: slot,
      ...(displayName ? { displayName } : {}),
      ...Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)),
    };
    await steps.commit(
      () => store.createUser(entity),
      async () => (await store.getUser(svcnumId))?.svcnum === svcnum,
    );
    await confirmNumber(ctx, entity);
    return programmableView(entity);
  }, held);
}

/** Takes a number from the pool for the caller's account. */
function provisionNumber(
  ctx: ProgrammableContext,
  caller: Caller,
  input: ProvisionInput,
): Promise<ProgrammableNumberView> {
  const { store, once } = ctx;
  const displayName = displayNameField(input.displayName, false);
  // What a retry must repeat: an absent config and one with empty fields are the same request.
  const request = {
    displayName: displayName ?? '',
    config: { autoReply: input.config?.autoReply ?? '', forwardToSvcnumId: input.config?.forwardToSvcnumId ?? '' },
  };
  return once(
    { ownerId: caller.ownerId, method: 'ProvisionNumber', requestId: input.requestId, request },
    {
      create: (svcnumId, held) => buildNumber(ctx, caller, input, displayName, svcnumId, held),
      async recover(svcnumId) {
        const entity = await store.getUser(svcnumId);
        if (entity?.accountType !== 'programmable' || entity.ownerId !== caller.ownerId) return undefined;
        await confirmNumber(ctx, entity);
        return programmableView(entity);
      },
      replay: async (svcnumId) => programmableView(await ownedNumber(store, caller, svcnumId)),
    },
  );
}

/** Every programmable number of the caller's account (the inboxes its message stream follows). */
async function allNumberIds(store: ProvisioningPort, caller: Caller): Promise<string[]> {
  const ids: string[] = [];
  let startKey: PageKey | undefined;
  do {
    const page = await store.listOwned(caller.ownerId, 'programmable', 100, startKey);
    ids.push(...page.items.map((entity) => entity.svcnumId));
    startKey = page.nextKey;
  } while (startKey);
  return ids;
}

async function configureNumber(
  { store, clock }: ProgrammableContext,
  caller: Caller,
  input: ConfigureInput,
): Promise<ProgrammableNumberView> {
  const entity = await ownedNumber(store, caller, input.svcnumId);
  if (entity.numberState === 'deactivated' || entity.numberState === 'quarantined') {
    throw failedPrecondition(`number ${entity.svcnum} is ${entity.numberState}`);
  }
  const changes = await configChanges(store, entity.svcnumId, input.config ?? {}, input.updatePaths ?? []);
  const updated = await store.updateEntity(entity.svcnumId, { ...changes, updatedAt: clock.now() });
  if (!updated) throw notFound(`no programmable number ${entity.svcnumId} in your account`);
  return programmableView(updated);
}

/** Programmable numbers of an owner account: each operation is a function of the context above. */
export function createProgrammableNumbers(ctx: ProgrammableContext) {
  const { store, pageTokens } = ctx;
  return {
    /** Takes a number from the pool for the caller's account. */
    provision: (caller: Caller, input: ProvisionInput) => provisionNumber(ctx, caller, input),

    get: async (caller: Caller, svcnumId: string | undefined) =>
      programmableView(await ownedNumber(store, caller, svcnumId)),

    /**
     * Whether `svcnumId` is one of the caller's programmable numbers now (a strongly consistent
     * read, unlike the listing).
     */
    holds: async (caller: Caller, svcnumId: string) => {
      const entity = await store.getUser(svcnumId);
      return entity?.accountType === 'programmable' && entity.ownerId === caller.ownerId;
    },

    /** Every programmable number of the caller's account (the inboxes its message stream follows). */
    allIds: (caller: Caller) => allNumberIds(store, caller),

    list: (caller: Caller, input: { pageSize?: number; pageToken?: string }) =>
      listPage(
        pageTokens,
        input,
        caller.ownerId,
        numberPages,
        (limit, startKey) => store.listOwned(caller.ownerId, 'programmable', limit, startKey),
        programmableView,
      ),

    configure: (caller: Caller, input: ConfigureInput) => configureNumber(ctx, caller, input),
  };
}
