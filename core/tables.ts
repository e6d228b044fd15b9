// The one definition of every DynamoDB table: keys, indexes and TTL attribute, and in its comment
// what it holds (a comment, not data: every Lambda bundle holds this module). The CDK stacks
// and the local bootstrap both build their tables from this module, so they cannot drift.
// Keys are strings throughout. TTL attributes hold epoch seconds; TTL is housekeeping only:
// every read of a time-bound item checks its own expiry (see core/store.ts).

export interface IndexDefinition {
  readonly name: string;
  readonly partitionKey: string;
  readonly sortKey?: string;
}

export interface TableDefinition {
  readonly partitionKey: string;
  readonly sortKey?: string;
  readonly ttlAttribute?: string;
  readonly indexes?: readonly IndexDefinition[];
}

export const TTL_ATTRIBUTE = 'ttl';

export const tableDefinitions = {
  /** Registered clients: login clients, External API clients, provisioning clients */
  clients: {
    partitionKey: 'clientId',
  },
  /** Every entity with a svcnum_id (ULID): people, businesses, programmable numbers, AI agents */
  users: {
    partitionKey: 'svcnumId',
    indexes: [{ name: 'byOwner', partitionKey: 'ownerId', sortKey: 'ownerSort' }],
  },
  /** Uniqueness claim and sign-in lookup: normalised email → svcnum_id */
  emails: {
    partitionKey: 'email',
  },
  /** Service numbers: uniqueness claim, holder, lifecycle state and the free pool */
  numbers: {
    partitionKey: 'svcnum',
    // Sparse: only numbers that are (or will become) free carry `poolKey` ('free'); `availableAt` (padded
    // epoch ms) says from when: seeded numbers at once, leases when they lapse, quarantined
    // numbers and mask numbers when their cool-off ends.
    indexes: [{ name: 'pool', partitionKey: 'poolKey', sortKey: 'availableAt' }],
  },
  /** Temporary mask numbers bridging two participants */
  masks: {
    partitionKey: 'maskId',
    ttlAttribute: TTL_ATTRIBUTE,
    indexes: [{ name: 'byOwner', partitionKey: 'ownerId', sortKey: 'maskId' }],
  },
  /**
   * Per-owner quotas (agents, live masks, programmable numbers): one item per used slot (`owner#kind#n`), claimed
   * with a lease
   */
  quotaSlots: {
    partitionKey: 'slotKey',
  },
  /** Per-recipient message counter: the last sequence number handed out (orders an inbox) */
  inboxes: {
    partitionKey: 'svcnumId',
  },
  /** Messages by recipient and sequence (zero-padded), kept 30 days */
  messages: {
    partitionKey: 'inboxId',
    sortKey: 'seq',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /** Public aliases of numbers (normalised, unique) → svcnum_id */
  aliases: {
    partitionKey: 'alias',
    indexes: [{ name: 'byEntity', partitionKey: 'svcnumId', sortKey: 'alias' }],
  },
  /** Discover index: one item per capability of each discoverable agent */
  capabilities: {
    partitionKey: 'capability',
    sortKey: 'svcnumId',
  },
  /** Idempotency records of create calls with a request_id (24 hours) */
  requests: {
    partitionKey: 'requestKey',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /** Validated authorization requests waiting for sign-in or consent (10 minutes) */
  authRequests: {
    partitionKey: 'requestId',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /** Authorization codes, stored as SHA-256 hashes (5 minutes, single use) */
  codes: {
    partitionKey: 'codeHash',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /** Grants behind refresh tokens (180 days sliding inactivity) */
  grants: {
    partitionKey: 'grantId',
    ttlAttribute: TTL_ATTRIBUTE,
    indexes: [{ name: 'bySubject', partitionKey: 'svcnumId', sortKey: 'clientId' }],
  },
  /** Remembered consent per user and client */
  consents: {
    partitionKey: 'svcnumId',
    sortKey: 'clientId',
  },
  /** Sign-in attempts per hashed identifier and per device cookie (forgotten a day after the last) */
  signInThrottle: {
    partitionKey: 'key',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /** DPoP proofs seen, by key and jti (RFC 9449) */
  dpopProofs: {
    partitionKey: 'proofKey',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /** Browser sign-in sessions, stored as SHA-256 hashes of the cookie value */
  sessions: {
    partitionKey: 'sessionHash',
    ttlAttribute: TTL_ATTRIBUTE,
  },
  /**
   * Accounts' passkeys (WebAuthn): public key, signature counter, transports, backup flags, name, use; found at
   * sign-in by the user handle and credential id
   */
  passkeys: {
    partitionKey: 'svcnumId',
    sortKey: 'credentialId',
  },
  /** WebAuthn challenges handed to browsers (5 minutes, single use: taken with a conditional delete) */
  passkeyChallenges: {
    partitionKey: 'challenge',
    ttlAttribute: TTL_ATTRIBUTE,
  },
} as const satisfies Record<string, TableDefinition>;

export type TableKey = keyof typeof tableDefinitions;

export type TableNames = Record<TableKey, string>;

/** Physical table names: one prefix per environment (`local-`, `sandbox-`, `production-`). */
export function tableNames(prefix: string): TableNames {
  const names = {} as TableNames;
  for (const key of Object.keys(tableDefinitions) as TableKey[]) names[key] = `${prefix}${key}`;
  return names;
}
