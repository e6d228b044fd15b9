import { ttlCache } from '../kernel/cache';
import type { Clock, Random } from '../kernel/ports';
import type { AccountsPort } from './store';
import { createAccounts } from './accounts';

export * from './accounts';

/**
 * How long client records and account status are trusted from memory: a disabled client or
 * account stops working within this. Unknown ids are cached too (briefly), so random ids cannot
 * force a read per request.
 */
const RECORD_CACHE_TTL = 30_000;

/** The accounts module: users and clients (registration, admin), and the cached look-ups other modules use. */
export function createAccountsModule(ports: { store: AccountsPort; clock: Clock; random: Random }) {
  const { store } = ports;
  // Secret checks read the client fresh, so that a rotated secret works (and the old one stops) at once.
  const clients = ttlCache((clientId) => store.getClient(clientId), RECORD_CACHE_TTL);
  /** Whether an account (the owner of a client or an entity) is active; each user of it keeps its own cache. */
  const accountActiveNow = async (svcnumId: string) => (await store.getUser(svcnumId))?.status === 'active';
  const accountStatus = () => ttlCache(accountActiveNow, RECORD_CACHE_TTL).get;
  return {
    ...createAccounts(store, ports.clock, ports.random),
    getClient: clients.get,
    getClientFresh: clients.fresh,
    accountStatus,
    accountActiveNow,
  };
}
