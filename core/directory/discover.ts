import type { PageTokenCodec } from '../kernel/page-token';
import { inService, type User } from '../kernel/model';
import { invalidArgument } from '../kernel/errors';
import type { PageKey } from '../kernel/paging';
import { capabilitiesField } from '../kernel/validation';
import type { AccountStatus } from '../kernel/capabilities';
import type { DirectoryPort } from './store';
import { directoryLimits } from './config';
import type { CapabilityEntry } from './store';

// GET /api/discover: agents that offer a capability and opted in (`discoverable`). The index
// (table `capabilities`) is written after an agent is committed, one entry per capability. It
// may hold entries of agents that are gone, suspended or no longer discoverable: readers
// re-check every agent, so an entry can never show more than the agent itself allows. An index
// write that is lost leaves the agent out of discover (never a dangling entry that shows).
// An agent shows only while its owner account is active too (a disabled or deleted owner hides
// its agents): read from the accounts module's cache, so a page costs no owner read in steady state
// (at most one GetItem per distinct owner per RECORD_CACHE_TTL per process), and an owner's change
// shows within that lifetime.

export interface DiscoveredAgent {
  svcnum: string;
  display_name: string;
  capabilities: string[];
}

/** Writes the discover index of a newly committed agent (idempotent). */
export async function indexAgent(store: DirectoryPort, agent: User, now: number): Promise<void> {
  if (!agent.discoverable || !agent.capabilities?.length) return;
  await store.indexCapabilities(agent.svcnumId, agent.capabilities, now);
}

/** Whether an agent may be shown for `capability` right now. */
export function discoverable(agent: User | undefined, capability: string): agent is User {
  return (
    agent?.accountType === 'ai_agent' &&
    inService(agent) &&
    agent.discoverable === true &&
    (agent.capabilities ?? []).includes(capability)
  );
}

const publicAgent = (agent: User): DiscoveredAgent => ({
  svcnum: agent.svcnum,
  display_name: agent.displayName ?? '',
  capabilities: [...(agent.capabilities ?? [])],
});

/**
 * page_token: where the listing of one capability continues (after this svcnum_id); public, so
 * bound to the capability only.
 */
const discoverPages = (capability: string) => ({ list: 'discover', filter: capability, caller: '' });

function pageSizeParam(value: string | undefined): number {
  const { discoverPageDefault: fallback, discoverPageMax: max } = directoryLimits;
  if (value === undefined || value === '') return fallback;
  if (!/^\d{1,6}$/.test(value)) throw invalidArgument(`page_size must be a whole number from 1 to ${max}`);
  const size = Number(value);
  if (size === 0) return fallback;
  return Math.min(size, max);
}

export function createDiscovery(deps: {
  store: DirectoryPort;
  pageTokens: PageTokenCodec;
  accounts: Pick<AccountStatus, 'accountActiveCached'>;
}) {
  const { store, pageTokens, accounts } = deps;
  return {
    /**
     * One page of discoverable agents offering `capability`, oldest first. Reads at most
     * `discoverScanMax` index entries; a page may then be short and still carry a token.
     */
    async discover(input: {
      capability?: string;
      pageToken?: string;
      pageSize?: string;
    }): Promise<{ agents: DiscoveredAgent[]; next_page_token: string }> {
      if (!input.capability) throw invalidArgument('capability is required');
      const [capability] = capabilitiesField([input.capability]);
      const size = pageSizeParam(input.pageSize);
      const pages = discoverPages(capability!);
      const after = await pageTokens.open<string>(pages, input.pageToken);
      let startKey: PageKey | undefined =
        after === undefined ? undefined : { capability: capability!, svcnumId: after };
      const shown: Array<{ entry: CapabilityEntry; agent: User }> = [];
      let lastRead: CapabilityEntry | undefined;
      let scanned = 0;
      do {
        const limit = Math.min(size + 1 - shown.length, directoryLimits.discoverScanMax - scanned);
        const page = await store.listCapability(capability!, limit, startKey);
        const entities = await store.getEntities(page.items.map((entry) => entry.svcnumId));
        const agents = new Map(entities.map((agent) => [agent.svcnumId, agent]));
        const candidates = page.items.flatMap((entry) => {
          const agent = agents.get(entry.svcnumId);
          return discoverable(agent, capability!) ? [{ entry, agent }] : [];
        });
        // Agents of one owner share its look-up (the accounts cache reads each owner once at a time).
        const ownerActive = await Promise.all(
          candidates.map(({ agent }) => (agent.ownerId ? accounts.accountActiveCached(agent.ownerId) : false)),
        );
        shown.push(...candidates.filter((_, index) => ownerActive[index]));
        scanned += page.items.length;
        lastRead = page.items.at(-1) ?? lastRead;
        startKey = page.nextKey;
      } while (startKey && shown.length <= size && scanned < directoryLimits.discoverScanMax);

      if (shown.length > size) {
        const items = shown.slice(0, size);
        return {
          agents: items.map(({ agent }) => publicAgent(agent)),
          next_page_token: await pageTokens.seal(pages, items.at(-1)!.entry.svcnumId),
        };
      }
      // The end of the index, or the scan budget is spent: continue after the last entry read.
      return {
        agents: shown.map(({ agent }) => publicAgent(agent)),
        next_page_token: startKey && lastRead ? await pageTokens.seal(pages, lastRead.svcnumId) : '',
      };
    },
  };
}

export type Discovery = ReturnType<typeof createDiscovery>;
