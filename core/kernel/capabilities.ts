import type { Client, ClientKind, RefreshResponse, User } from './model';

// What one domain module offers another, as small interfaces: a module declares the capability it
// needs, another implements it, and the registry (core/registry.ts) injects it. No domain imports
// another. Access-token capabilities are in ./access.ts.

/** Client records by id (accounts): `getClient` briefly cached, `getClientFresh` read now (secret checks). */
export interface ClientLookup {
  getClient(clientId: string): Promise<Client | undefined>;
  getClientFresh(clientId: string): Promise<Client | undefined>;
}

/** Whether an account is active (accounts): each call gives a look-up with its own short cache. */
export interface AccountStatus {
  accountStatus(): (svcnumId: string) => Promise<boolean>;
  /** Read now, not from a cache: where a credential is being issued, a disabled account must stop at once. */
  accountActiveNow(svcnumId: string): Promise<boolean>;
}

/** The account a person signs in with, by number or email (accounts). */
export interface AccountFinder {
  findUser(identifier: string): Promise<User | undefined>;
}

/** The OAuth clients of agents (accounts): created with the agent, secret rotated on request. */
export interface AgentClients {
  createClient(kind: ClientKind, input: {
    name: string; scope: string; redirectUris?: string[]; ownerId?: string; subjectId?: string; refreshResponse?: RefreshResponse; clientId?: string;
  }): Promise<{ client: Client; clientSecret?: string }>;
  rotateClientSecret(clientId: string): Promise<string>;
}

/** The discover index (directory): an agent's capabilities, listed for /api/discover. */
export interface DiscoverIndex {
  indexAgent(agent: User, now: number): Promise<void>;
}
