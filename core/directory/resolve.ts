import type { NumberRecord } from '../kernel/model';
import type { Clock } from '../kernel/ports';
import { numberView } from '../kernel/number-view';
import { invalidArgument, notFound } from '../kernel/errors';
import type { DirectoryPort } from './store';
import type { Aliases } from './aliases';
import { aliasField, formattedNumber } from './validation';

// GET /api/resolve: an alias or a formatted number → the canonical number, the entity type and
// the public lifecycle state. Nothing else: never a svcnum_id, an owner, a mask's participants
// or configuration. Numbers that are not in public use (free, leased, an agent's reserved
// fallback, past their cool-off) are unknown.

export type PublicEntityType = NonNullable<NumberRecord['entityType']>;
export type PublicState = 'active' | 'suspended' | 'deactivated' | 'quarantined' | 'expired';

export interface Resolved {
  svcnum: string;
  entity_type: PublicEntityType;
  state: PublicState;
}

/** The answer and how long it stays true by itself (an active mask expires; ms, undefined: no known end). */
export interface Resolution {
  resolved: Resolved;
  validFor?: number;
}

const PUBLIC_STATES: ReadonlySet<string> = new Set(['active', 'suspended', 'deactivated', 'quarantined']);

export function createResolver(deps: { store: DirectoryPort; clock: Clock; coolOff: number; aliases: Aliases }) {
  const { store, clock, coolOff, aliases } = deps;

  /** A mask number: active or expired by its mask (the mask record is the truth; the number follows it). */
  async function maskNumber(number: NumberRecord, now: number): Promise<Resolution | undefined> {
    if (numberView(number, now, coolOff).state === 'available') return undefined; // cooled off: free again
    const mask = number.svcnumId ? await store.getMask(number.svcnumId) : undefined;
    if (mask?.svcnum === number.svcnum) {
      const active = mask.expiresAt > now;
      return {
        resolved: { svcnum: number.svcnum, entity_type: 'mask', state: active ? 'active' : 'expired' },
        ...(active ? { validFor: mask.expiresAt - now } : {}),
      };
    }
    // No mask names it: a lease that never committed, or a mask record swept after its retention.
    if (number.state === 'leased' || number.quarantinedUntil === undefined) return undefined;
    return { resolved: { svcnum: number.svcnum, entity_type: 'mask', state: 'expired' } };
  }

  /** The public view of a number, as it stands for `holder` (its entity) when given. */
  async function publicNumber(svcnum: string, holder?: string): Promise<Resolution | undefined> {
    const number = await store.getNumber(svcnum);
    if (!number?.entityType) return undefined;
    const now = clock.now();
    if (number.entityType === 'mask') return holder ? undefined : maskNumber(number, now);
    let state: string = numberView(number, now, coolOff).state;
    // Through an alias: the entity's own number, or the number it retired, while it cools off.
    // A number handed to someone else since is no longer this entity's.
    const retiredByHolder =
      number.svcnumId === undefined && number.previousSvcnumId === holder && state === 'quarantined';
    if (holder !== undefined && number.svcnumId !== holder && !retiredByHolder) {
      return undefined;
    }
    if (state === 'leased' && number.svcnumId) {
      // The holder may have committed without confirming the lease: then the number is in use.
      const entity = await store.getUser(number.svcnumId);
      if (entity?.svcnum === svcnum) state = entity.numberState ?? 'active';
    }
    if (!PUBLIC_STATES.has(state)) return undefined;
    return { resolved: { svcnum, entity_type: number.entityType, state: state as PublicState } };
  }

  return {
    async resolve(query: string | undefined): Promise<Resolution> {
      if (query === undefined || query.trim() === '') throw invalidArgument('alias is required: an alias or a number');
      const digits = formattedNumber(query);
      if (digits !== undefined) {
        const found = await publicNumber(digits);
        if (!found) throw notFound(`no number ${digits} is in service`);
        return found;
      }
      const alias = aliasField(query.trim(), { allowReserved: true });
      const entity = await aliases.lookup(alias);
      const found = entity && (await publicNumber(entity.entity.svcnum, entity.entity.svcnumId));
      if (!found) throw notFound(`no alias ${alias}`);
      // The entity type is the entity's own (a person, a business, …), whatever the number record says.
      return { ...found, resolved: { ...found.resolved, entity_type: entity.entity.accountType } };
    },
  };
}

export type Resolver = ReturnType<typeof createResolver>;
