import { invalidToken } from '../kernel/access';
import type { TokenParties } from '../kernel/capabilities';
import type { Client, User } from '../kernel/model';

// Disabled means disabled: the one rule every path that accepts or issues a token applies. A token
// is in force only while every party it names is enabled:
//   - its client (`client_id`);
//   - the account it acts for (`sub`, unless the client acts as itself: API and provisioning clients);
//   - each actor of its `act` chain (the agent a number is lent to, a dependent's owner);
//   - the owner account of each of these accounts and of the client;
//   - an agent's own client (an agent whose client is disabled acts for no one).
// Records come from the accounts caches (up to RECORD_CACHE_TTL old); a record that would refuse is
// read again first, so a party enabled again works at once.

/** How many `act` levels are followed (tokens issued now nest none; older ones at most a few). */
const MAX_ACTORS = 8;

/** The actors of an `act` chain (RFC 8693 §4.1), outermost first. */
function actorsOf(act: unknown): string[] {
  const actors: string[] = [];
  for (
    let level = act;
    level && typeof level === 'object' && actors.length < MAX_ACTORS;
    level = (level as { act?: unknown }).act
  ) {
    const sub = (level as { sub?: unknown }).sub;
    if (typeof sub === 'string') actors.push(sub);
  }
  return actors;
}

const enabledClient = (client: Client | undefined): client is Client => client !== undefined && !client.disabled;
const activeAccount = (user: User | undefined): user is User => user?.status === 'active';

export function createTokenStanding(lookups: {
  /** A client record, cached; read again when `settled` refuses it. */
  client(clientId: string, settled: (client: Client | undefined) => boolean): Promise<Client | undefined>;
  /** An account record, cached alike. */
  account(svcnumId: string, settled: (user: User | undefined) => boolean): Promise<User | undefined>;
}) {
  const client = (clientId: string) => lookups.client(clientId, enabledClient);
  const account = (svcnumId: string) => lookups.account(svcnumId, activeAccount);

  /**
   * The token's client and why the token may not be used now (the first disabled party found), if
   * it may not.
   */
  async function judge(parties: TokenParties, current?: User): Promise<{ own?: Client; refused?: string }> {
    const actors = actorsOf(parties.act);
    const acting = [...(parties.sub === parties.client_id ? [] : [parties.sub]), ...actors];
    // The caller's own read of the account (just now, so fresher than the cache) saves a look-up.
    const accountOf = (id: string) => (current && current.svcnumId === id ? Promise.resolve(current) : account(id));
    const [own, ...accounts] = await Promise.all([client(parties.client_id), ...acting.map(accountOf)]);
    if (!enabledClient(own)) return { refused: 'its client is disabled' };
    for (const [index, found] of accounts.entries()) {
      if (activeAccount(found)) continue;
      const refused =
        acting[index] === parties.sub ? 'its account is not active' : `its acting agent ${acting[index]} is not active`;
      return { own, refused };
    }
    const owners = new Set(
      [own.ownerId, ...accounts.map((found) => found!.ownerId)].filter(
        (id): id is string => id !== undefined && !acting.includes(id),
      ),
    );
    const agentClients = new Set(
      accounts.map((found) => found!.clientId).filter((id): id is string => id !== undefined && id !== own.clientId),
    );
    const [ownersFound, clientsFound] = await Promise.all([
      Promise.all([...owners].map(account)),
      Promise.all([...agentClients].map(client)),
    ]);
    if (!ownersFound.every(activeAccount)) return { own, refused: 'its owner account is not active' };
    if (!clientsFound.every(enabledClient)) return { own, refused: 'the client of its acting agent is disabled' };
    return { own };
  }

  return {
    /** Why a token naming `parties` may not be used now, or undefined: each path words the refusal. */
    tokenRefusal: async (parties: TokenParties, current?: User): Promise<string | undefined> =>
      (await judge(parties, current)).refused,
    /**
     * The token's client, if every party of the token is enabled; else RFC 6750 invalid_token (401,
     * UNAUTHENTICATED).
     */
    async tokenInForce(claims: TokenParties, current?: User): Promise<Client> {
      const { own, refused } = await judge(claims, current);
      if (refused) throw invalidToken(`this token can no longer be used: ${refused}`);
      return own!;
    },
  };
}
