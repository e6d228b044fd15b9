import type { Client, Grant, Mask, NumberRecord, User } from './model';

/**
 * Store methods on records more than one module reads or writes (users, numbers, clients, masks,
 * grants). Each is declared here once more beside its table's own interface (accounts, oauth,
 * provisioning) so that a module can name it in its port without importing another module; the
 * DynamoDB adapter implements each once. Reads of time-bound items check expiry.
 */
export interface SharedStore {
  getUser(svcnumId: string): Promise<User | undefined>;
  getNumber(svcnum: string): Promise<NumberRecord | undefined>;
  getClient(clientId: string): Promise<Client | undefined>;
  getMask(maskId: string): Promise<Mask | undefined>;
  createUser(user: User): Promise<void>;
  /** Removes a client (compensation of a create that did not complete). */
  deleteClient(clientId: string): Promise<void>;
  /** Revokes a grant; if it does not exist yet, leaves a tombstone so it cannot be created later. */
  revokeGrant(grantId: string, now: number): Promise<void>;
  listGrants(svcnumId: string, clientId?: string): Promise<Grant[]>;
}
