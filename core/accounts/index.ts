import { ttlCache } from '../kernel/cache';
import type { Clock, Random } from '../kernel/ports';
import { findUser } from './lookups';
import { createRegistration } from './registration';
import type { AccountLookupsPort, RegistrationPort } from './store';

export { normaliseEmail } from './lookups';
export * from './registration';

/**
 * How long client records and account status are trusted from memory: a disabled client or
 * account stops working within this. Unknown ids are cached too (briefly), so random ids cannot
 * force a read per request.
 */
const RECORD_CACHE_TTL = 30_000;

/**
 * The accounts module: the look-ups other modules use (clients and account status, briefly
 * cached; the account a person signs in with). Creating and changing accounts is the
 * registration module's, so that a Lambda reading accounts carries none of its input schemas.
 */
export function createAccountsModule(ports: { store: AccountLookupsPort }) {
  const { store } = ports;
  // Secret checks read the client fresh, so that a rotated secret works (and the old one stops) at once.
  const clients = ttlCache((clientId) => store.getClient(clientId), RECORD_CACHE_TTL);
  /** Whether an account (the owner of a client or an entity) is active; each user of it keeps its own cache. */
  const accountActiveNow = async (svcnumId: string) => (await store.getUser(svcnumId))?.status === 'active';
  const accountStatus = () => ttlCache(accountActiveNow, RECORD_CACHE_TTL).get;
  return {
    getClient: clients.get,
    getClientFresh: clients.fresh,
    accountStatus,
    accountActiveNow,
    findUser: (identifier: string) => findUser(store, identifier),
  };
}

/** The registration module: users and clients created, secrets rotated, accounts disabled (admin CLI, agents' clients). */
export function createRegistrationModule(ports: { store: RegistrationPort; clock: Clock; random: Random }) {
  return createRegistration(ports.store, ports.clock, ports.random);
}
