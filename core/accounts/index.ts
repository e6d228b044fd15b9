import { ttlCache } from '../kernel/cache';
import { inService, type User } from '../kernel/model';
import type { Clock, Random } from '../kernel/ports';
import type { ScryptCost } from '../kernel/secrets';
import { findUser } from './lookups';
import { createRegistration } from './registration';
import { createTokenStanding } from './token-standing';
import type { AccountLookupsPort, RegistrationPort } from './store';

export { normaliseEmail } from './lookups';
export * from './registration';

/**
 * How long client records and account status are trusted from memory: a disabled client or
 * account, or a replaced client secret, stops working within this. Unknown ids are cached too, so
 * random ids cannot force a read per request.
 */
export const RECORD_CACHE_TTL = 30_000;

/**
 * The accounts module: the look-ups other modules use (clients and account status, briefly
 * cached; the account a person signs in with). Creating and changing accounts is the
 * registration module's, so that a Lambda reading accounts carries none of its input schemas.
 *
 * What the caches accept may be up to RECORD_CACHE_TTL old; what they would refuse is read again
 * first (at most a few times a second per record), so a new secret, a re-enabled client or a
 * reactivated account works at once.
 */
export function createAccountsModule(ports: { store: AccountLookupsPort; clock: Clock }) {
  const { store, clock } = ports;
  const clients = ttlCache((clientId) => store.getClient(clientId), { clock, ttlMs: RECORD_CACHE_TTL });
  const accounts = ttlCache((svcnumId) => store.getUser(svcnumId), { clock, ttlMs: RECORD_CACHE_TTL });
  const isActive = (user: User | undefined) => user?.status === 'active';
  return {
    ...createTokenStanding({ client: clients.recheck, account: accounts.recheck }),
    getClient: clients.get,
    getClientRechecked: clients.recheck,
    accountActive: async (svcnumId: string) => isActive(await accounts.recheck(svcnumId, isActive)),
    entityInService: async (svcnumId: string) => inService(await accounts.recheck(svcnumId, inService)),
    // Never re-read before the lifetime ends, whatever the answer: a public listing may thus show
    // an account's change up to RECORD_CACHE_TTL late, and anonymous callers cannot force reads.
    accountActiveCached: async (svcnumId: string) => isActive(await accounts.get(svcnumId)),
    findUser: (identifier: string) => findUser(store, identifier),
  };
}

/**
 * The registration module: users and clients created, secrets rotated, accounts disabled (admin
 * CLI, agents' clients).
 */
export function createRegistrationModule(ports: {
  store: RegistrationPort;
  clock: Clock;
  random: Random;
  passwordCost?: ScryptCost;
}) {
  return createRegistration(ports.store, ports.clock, ports.random, ports.passwordCost);
}
