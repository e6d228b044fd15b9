import type { Client, NumberRecord, User, UserStatus } from '../kernel/model';
import type { SharedStore } from '../kernel/store';

/** The accounts side of the store: clients, users and their unique identifiers (email, number). */
export interface AccountsStore {
  // clients
  createClient(client: Client): Promise<void>;
  /** Replaces a confidential client's secret (by its hash); the old secret stops working. */
  setClientSecret(clientId: string, secretHash: string): Promise<boolean>;
  /** Removes a client (compensation of a create that did not complete). */
  deleteClient(clientId: string): Promise<void>;
  getClient(clientId: string): Promise<Client | undefined>;
  listClients(): Promise<Client[]>;
  setClientDisabled(clientId: string, disabled: boolean): Promise<Client | undefined>;

  // users and their unique identifiers
  claimEmail(email: string, svcnumId: string): Promise<boolean>;
  releaseEmail(email: string, svcnumId: string): Promise<void>;
  findSvcnumIdByEmail(email: string): Promise<string | undefined>;
  claimNumber(record: NumberRecord): Promise<boolean>;
  releaseNumber(svcnum: string, svcnumId: string): Promise<void>;
  getNumber(svcnum: string): Promise<NumberRecord | undefined>;
  createUser(user: User): Promise<void>;
  getUser(svcnumId: string): Promise<User | undefined>;
  listUsers(): Promise<User[]>;
  setUserStatus(svcnumId: string, status: UserStatus): Promise<User | undefined>;
}

/** Exactly the store methods the accounts module's look-ups call. */
export type AccountLookupsPort = Pick<AccountsStore, 'findSvcnumIdByEmail' | 'getClient' | 'getNumber' | 'getUser'>;

/** Exactly the store methods the registration module calls. */
export type RegistrationPort = Pick<
  AccountsStore & SharedStore,
  | 'claimEmail'
  | 'claimNumber'
  | 'createClient'
  | 'createUser'
  | 'getUser'
  | 'listGrants'
  | 'releaseEmail'
  | 'releaseNumber'
  | 'revokeGrant'
  | 'setClientSecret'
  | 'setUserStatus'
>;
