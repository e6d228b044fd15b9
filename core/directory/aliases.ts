import { newUlid } from '../kernel/ids';
import { inService, type User } from '../kernel/model';
import type { Clock, Random } from '../kernel/ports';
import type { ProvisioningScope } from '../kernel/scopes';
import type { DirectoryPort } from './store';
import { DomainError, failedPrecondition, notFound } from '../kernel/errors';
import { svcnumIdField } from '../kernel/validation';
import { directoryLimits } from './config';
import { aliasMember, parseAliasMember, type AliasRecord, type AliasedEntity } from './store';
import { aliasField } from './validation';
import { insufficientScope } from '../kernel/access';

// Public aliases. Without transactions an alias is two single-item writes:
//   1. the claim: a conditional put of the name in `aliases` (unique across the service);
//   2. the commit: the entity's record lists `alias claim-id` in a string set, with the
//      condition that it lists fewer than 5 (so the per-entity limit is exact under concurrency).
// An alias is live only while both agree. If step 2 fails the claim is deleted; if the process
// dies in between, the claim is void once its lease lapses and anyone may take the name over.
// Deletion reverses the order: unlist first (the alias stops resolving at once), then free the
// name. A listing whose claim is gone is pruned when the entity next needs the room.

/** Who acts: a provisioning client of an owner account (with its token's scopes), or an operator (admin CLI). */
export type AliasActor = { ownerId: string; scopes: readonly string[] } | { operator: true };

export const OPERATOR: AliasActor = { operator: true };

export interface AliasView {
  alias: string;
  svcnumId: string;
  createTime: number;
}

/** The scope an owner's token needs to alias each kind of entity it may alias. */
const SCOPE_FOR: Partial<Record<User['accountType'], ProvisioningScope>> = {
  programmable: 'prov:numbers',
  ai_agent: 'prov:agents',
};

const view = (record: AliasRecord): AliasView => ({
  alias: record.alias,
  svcnumId: record.svcnumId,
  createTime: record.createdAt,
});

/** What the alias operations work with. */
interface AliasesContext {
  store: DirectoryPort;
  clock: Clock;
  random: Random;
}

const { aliasesPerEntity: max, aliasClaimLease: lease } = directoryLimits;

/** Whether `record` is live: its entity lists it. */
async function live(store: DirectoryPort, record: AliasRecord, entity?: AliasedEntity): Promise<boolean> {
  const holder = entity ?? (await store.getAliasedEntity(record.svcnumId));
  return (
    holder?.entity.svcnumId === record.svcnumId && holder.aliasClaims.includes(aliasMember(record.alias, record.claim))
  );
}

/**
 * The entity the actor may alias: for an owner, one of its programmable numbers or agents (with
 * the matching scope).
 */
async function entityFor(
  store: DirectoryPort,
  actor: AliasActor,
  svcnumId: string | undefined,
): Promise<AliasedEntity> {
  const id = svcnumIdField(svcnumId, 'svcnum_id');
  const found = await store.getAliasedEntity(id);
  if ('operator' in actor) {
    if (!found) throw notFound(`no entity ${id}`);
    return found;
  }
  const needed = found && SCOPE_FOR[found.entity.accountType];
  if (!found || !needed || found.entity.ownerId !== actor.ownerId) {
    throw notFound(`no programmable number or agent ${id} in your account`);
  }
  authorised(actor, found.entity, needed);
  return found;
}

function authorised(actor: { scopes: readonly string[] }, entity: User, needed: ProvisioningScope) {
  if (!actor.scopes.includes(needed)) {
    const what = entity.accountType === 'programmable' ? 'a programmable number' : 'an agent';
    // The Bearer path's refusal for a missing scope, for the scope this entity needs.
    throw insufficientScope([needed], `aliases of ${what} need a token with the ${needed} scope`);
  }
}

/** Drops listings whose claim is gone (an interrupted deletion); true if any was dropped. */
async function prune(store: DirectoryPort, svcnumId: string): Promise<boolean> {
  const entity = await store.getAliasedEntity(svcnumId);
  if (!entity) return false;
  const stale: string[] = [];
  await Promise.all(
    entity.aliasClaims.map(async (member) => {
      const parsed = parseAliasMember(member);
      const record = parsed && (await store.getAlias(parsed.alias));
      if (!parsed || record?.svcnumId !== svcnumId || record.claim !== parsed.claim) stale.push(member);
    }),
  );
  await store.removeAliasClaims(svcnumId, stale);
  return stale.length > 0;
}

/**
 * Claims the name for `record`: a free name, or one whose earlier claim is void. ALREADY_EXISTS
 * otherwise.
 */
async function claim({ store, clock }: AliasesContext, record: AliasRecord): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await store.claimAlias(record)) return;
    const existing = await store.getAlias(record.alias);
    if (!existing) continue; // deleted meanwhile: try again
    if (existing.leaseUntil > clock.now() || (await live(store, existing))) break;
    if (await store.takeOverAlias(record, existing)) return;
  }
  throw new DomainError('conflict', `the alias ${record.alias} is taken`);
}

/** The caller's live alias `alias`, with its entity, or NOT_FOUND. */
async function owned(store: DirectoryPort, actor: AliasActor, value: string | undefined) {
  const alias = aliasField(value, { allowReserved: true });
  const record = await store.getAlias(alias);
  const entity = record && (await store.getAliasedEntity(record.svcnumId));
  if (!record || !entity || !(await live(store, record, entity))) {
    throw notFound(`no alias ${alias}${'operator' in actor ? '' : ' in your account'}`);
  }
  if (!('operator' in actor)) {
    const needed = SCOPE_FOR[entity.entity.accountType];
    if (!needed || entity.entity.ownerId !== actor.ownerId) throw notFound(`no alias ${alias} in your account`);
    authorised(actor, entity.entity, needed);
  }
  return { record, entity };
}

/** Registers an alias for an active entity. Operators may alias any entity and use reserved names. */
async function createAlias(
  context: AliasesContext,
  actor: AliasActor,
  input: { svcnumId?: string; alias?: string },
): Promise<AliasView> {
  const { store, clock, random } = context;
  const alias = aliasField(input.alias, { allowReserved: 'operator' in actor });
  const { entity } = await entityFor(store, actor, input.svcnumId);
  if (!inService(entity)) {
    const state = entity.status !== 'active' ? entity.status : entity.numberState;
    throw failedPrecondition(`entity ${entity.svcnumId} is ${state}; only an active entity can get an alias`);
  }
  const now = clock.now();
  const record: AliasRecord = {
    alias,
    svcnumId: entity.svcnumId,
    claim: newUlid(clock, random),
    createdAt: now,
    leaseUntil: now + lease,
  };
  await claim(context, record);
  const member = aliasMember(alias, record.claim);
  let committed = false;
  try {
    committed = await store.addAliasClaim(entity.svcnumId, member, max);
    // A full list may hold listings whose claim is gone (an interrupted deletion): drop them, try once more.
    if (!committed && (await prune(store, entity.svcnumId))) {
      committed = await store.addAliasClaim(entity.svcnumId, member, max);
    }
  } finally {
    // Not committed (refused or failed): free the name at once; if even that fails, the claim is
    // void after its lease.
    if (!committed) await store.deleteAlias(alias, record.claim).catch(() => undefined);
  }
  if (!committed) {
    if (!(await store.getAliasedEntity(entity.svcnumId))) throw notFound(`no entity ${entity.svcnumId}`);
    throw new DomainError('exhausted', `entity ${entity.svcnumId} already has ${max} aliases; delete one first`);
  }
  return view(record);
}

/** Removes a live alias: it stops resolving at once; then the name is freed. */
async function removeAlias(store: DirectoryPort, actor: AliasActor, value: string | undefined): Promise<AliasView> {
  const { record } = await owned(store, actor, value);
  await store.removeAliasClaims(record.svcnumId, [aliasMember(record.alias, record.claim)]);
  // If this fails, the claim is void (no longer listed) and the next claimant takes it over.
  await store.deleteAlias(record.alias, record.claim).catch(() => undefined);
  return view(record);
}

/** The live aliases of one entity, sorted. */
async function listAliases(
  store: DirectoryPort,
  actor: AliasActor,
  svcnumId: string | undefined,
): Promise<AliasView[]> {
  const found = await entityFor(store, actor, svcnumId);
  const records = await Promise.all(
    found.aliasClaims.map(async (member) => {
      const parsed = parseAliasMember(member);
      const record = parsed && (await store.getAlias(parsed.alias));
      return record?.svcnumId === found.entity.svcnumId && record.claim === parsed!.claim ? record : undefined;
    }),
  );
  return records
    .filter((record): record is AliasRecord => record !== undefined)
    .sort((a, b) => (a.alias < b.alias ? -1 : a.alias > b.alias ? 1 : 0))
    .map(view);
}

/** The entity a name stands for, if the alias is live (for resolve). */
async function lookupAlias(store: DirectoryPort, alias: string): Promise<AliasedEntity | undefined> {
  const record = await store.getAlias(alias);
  if (!record) return undefined;
  const entity = await store.getAliasedEntity(record.svcnumId);
  return entity && (await live(store, record, entity)) ? entity : undefined;
}

/** Public aliases: each operation is a function of the context above. */
export function createAliases(context: AliasesContext) {
  const { store } = context;
  return {
    /** Registers an alias for an active entity. Operators may alias any entity and use reserved names. */
    create: (actor: AliasActor, input: { svcnumId?: string; alias?: string }) => createAlias(context, actor, input),
    /** Removes a live alias: it stops resolving at once; then the name is freed. */
    remove: (actor: AliasActor, value: string | undefined) => removeAlias(store, actor, value),
    /** The live aliases of one entity, sorted. */
    list: (actor: AliasActor, svcnumId: string | undefined) => listAliases(store, actor, svcnumId),
    /** The entity a name stands for, if the alias is live (for resolve). */
    lookup: (alias: string) => lookupAlias(store, alias),
  };
}

export type Aliases = ReturnType<typeof createAliases>;
