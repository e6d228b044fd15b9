import type { Client, ClientKind, DpopMode, RefreshResponse, User } from './model';
import type { SigningAlg } from './ports';

// What one domain module offers another, as small interfaces: a module declares the capability it
// needs, another implements it, and the registry (core/registry.ts) injects it. No domain imports
// another. Access-token capabilities are in ./access.ts.

/**
 * Client records by id (accounts), cached for at most 30 s. `getClientRechecked` answers from the
 * cache when `settled` accepts the record, else reads it again (a new secret works at once).
 */
export interface ClientLookup {
  getClient(clientId: string): Promise<Client | undefined>;
  getClientRechecked(clientId: string, settled: (client: Client | undefined) => boolean): Promise<Client | undefined>;
}

/**
 * Account status (accounts), cached like client records: an active answer may be up to 30 s old;
 * an inactive one is read again first, so a reactivated account works at once.
 */
export interface AccountStatus {
  /** Whether an account (the owner of a client) is active. */
  accountActive(svcnumId: string): Promise<boolean>;
  /** Whether an entity (an agent) may act: its account and its number active. */
  entityInService(svcnumId: string): Promise<boolean>;
  /**
   * Whether an account is active, from memory for up to 30 s either way (an inactive answer is not
   * read again first): for public listings, where no caller may force a read per request.
   */
  accountActiveCached(svcnumId: string): Promise<boolean>;
}

/** What a token names, as its claims do: its client, the account it acts for, its actors (RFC 8693 `act`). */
export interface TokenParties {
  client_id: string;
  sub: string;
  act?: unknown;
}

/**
 * Disabled means disabled (accounts, core/accounts/token-standing.ts): whether every party a token
 * names is enabled (its client, account, actors, their owners, an acting agent's client), judged
 * from the 30 s caches, a refusing record read again first.
 */
export interface TokenStanding {
  /**
   * Why a token naming these parties may not be used now, or undefined. `current`: the account
   * `sub` names as the caller read it just now (used instead of the cached record).
   */
  tokenRefusal(parties: TokenParties, current?: User): Promise<string | undefined>;
  /** The token's client if the token is in force; else invalid_token. */
  tokenInForce(claims: TokenParties, current?: User): Promise<Client>;
}

/** The account a person signs in with, by number or email (accounts). */
export interface AccountFinder {
  findUser(identifier: string): Promise<User | undefined>;
}

/** A client to register (accounts' registration): what its creator chooses. */
export interface ClientInput {
  name: string;
  scope: string;
  redirectUris?: string[];
  ownerId?: string;
  subjectId?: string;
  refreshResponse?: RefreshResponse;
  idTokenAlg?: SigningAlg;
  postLogoutRedirectUris?: string[];
  dpop?: DpopMode;
  /** Given by the caller only where it is derived from something unique (an agent's client). */
  clientId?: string;
}

/** The OAuth clients of agents (accounts): created with the agent, secret rotated on request. */
export interface AgentClients {
  createClient(kind: ClientKind, input: ClientInput): Promise<{ client: Client; clientSecret?: string }>;
  rotateClientSecret(clientId: string): Promise<string>;
}

/** Open message streams (messaging): told when an owner gains numbers, so that they follow them at once. */
export interface NumberStreams {
  /**
   * After the store write. Never rejects, and never waits for the engine (the notice goes out
   * behind); a lost notice leaves the number to the streams' periodic re-list.
   */
  numbersGained(ownerId: string, svcnumIds: readonly string[]): Promise<void>;
}

/** The discover index (directory): an agent's capabilities, listed for /api/discover. */
export interface DiscoverIndex {
  indexAgent(agent: User, now: number): Promise<void>;
}
