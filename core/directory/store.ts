import type { User } from '../kernel/model';
import type { Page, PageKey } from '../kernel/paging';
import type { SharedStore } from '../kernel/store';

/**
 * The uniqueness claim of an alias (table `aliases`). A claim is only half of an alias: it is
 * live while its entity also lists `aliasMember(alias, claim)` (the commit write, which is
 * where the per-entity limit is counted). A claim its entity does not list is void once
 * `leaseUntil` has passed, and anyone may take the name over.
 */
export interface AliasRecord {
  /** Normalised (lower case). */
  alias: string;
  /** The entity the alias names. */
  svcnumId: string;
  /** Id of this claim (a ULID): a later claim of the same name never revives an old listing. */
  claim: string;
  createdAt: number;
  leaseUntil: number;
}

/** One entry of the discover index (table `capabilities`); readers re-check the agent. */
export interface CapabilityEntry {
  capability: string;
  svcnumId: string;
  createdAt: number;
}

/** An entity (users table) with the alias claims it lists. */
export interface AliasedEntity {
  entity: User;
  aliasClaims: string[];
}

/** What an entity lists for a live alias. */
export const aliasMember = (alias: string, claim: string) => `${alias} ${claim}`;

export function parseAliasMember(member: string): { alias: string; claim: string } | undefined {
  const [alias, claim, ...rest] = member.split(' ');
  return alias && claim && rest.length === 0 ? { alias, claim } : undefined;
}

/** The store port of the directory. Single-item writes and reads only (no transactions). */
export interface DirectoryStore {
  // aliases
  /** Claims a free name (conditional put); false if the name has a claim already. */
  claimAlias(record: AliasRecord): Promise<boolean>;
  /** Replaces a void claim, if it is still exactly `previous`. */
  takeOverAlias(record: AliasRecord, previous: Pick<AliasRecord, 'svcnumId' | 'claim'>): Promise<boolean>;
  /** Strongly consistent. */
  getAlias(alias: string): Promise<AliasRecord | undefined>;
  /** Removes a claim if it is still `claim`. */
  deleteAlias(alias: string, claim: string): Promise<boolean>;
  /**
   * The commit of an alias: the entity lists `member`, if it lists fewer than `max`. False
   * otherwise (or no such entity).
   */
  addAliasClaim(svcnumId: string, member: string, max: number): Promise<boolean>;
  removeAliasClaims(svcnumId: string, members: readonly string[]): Promise<void>;
  /** An entity and the alias claims it lists (one strongly consistent read). */
  getAliasedEntity(svcnumId: string): Promise<AliasedEntity | undefined>;

  // discover index
  /** One index entry per capability (idempotent puts). */
  indexCapabilities(svcnumId: string, capabilities: readonly string[], now: number): Promise<void>;
  /** Index entries of one capability, by svcnum_id. */
  listCapability(capability: string, limit: number, startKey?: PageKey): Promise<Page<CapabilityEntry>>;
  /** Several entities in one round trip (any order; missing ones left out). */
  getEntities(svcnumIds: readonly string[]): Promise<User[]>;
}

/** Exactly the store methods the directory module calls. */
export type DirectoryPort = Pick<
  DirectoryStore & SharedStore,
  | 'addAliasClaim'
  | 'claimAlias'
  | 'deleteAlias'
  | 'getAlias'
  | 'getAliasedEntity'
  | 'getEntities'
  | 'getMask'
  | 'getNumber'
  | 'getUser'
  | 'indexCapabilities'
  | 'listCapability'
  | 'removeAliasClaims'
  | 'takeOverAlias'
>;
