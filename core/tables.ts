// The one definition of every DynamoDB table: keys, indexes and TTL attribute. The CDK stacks
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
  readonly description: string;
}

export const TTL_ATTRIBUTE = 'ttl';

export const tableDefinitions = {
  clients: {
    partitionKey: 'clientId',
    description: 'Registered clients: login clients, External API clients, provisioning clients',
  },
  users: {
    partitionKey: 'svcnumId',
    indexes: [{ name: 'byOwner', partitionKey: 'ownerId', sortKey: 'ownerSort' }],
    description: 'Every entity with a svcnum_id (ULID): people, businesses, programmable numbers, AI agents',
  },
  emails: {
    partitionKey: 'email',
    description: 'Uniqueness claim and sign-in lookup: normalised email → svcnum_id',
  },
  numbers: {
    partitionKey: 'svcnum',
    // Sparse: only numbers that are (or will become) free carry `poolKey` ('free'); `availableAt` (padded
    // epoch ms) says from when: seeded numbers at once, leases when they lapse, quarantined
    // numbers and mask numbers when their cool-off ends.
    indexes: [{ name: 'pool', partitionKey: 'poolKey', sortKey: 'availableAt' }],
    description: 'Service numbers: uniqueness claim, holder, lifecycle state and the free pool',
  },
  masks: {
    partitionKey: 'maskId',
    ttlAttribute: TTL_ATTRIBUTE,
    indexes: [{ name: 'byOwner', partitionKey: 'ownerId', sortKey: 'maskId' }],
    description: 'Temporary mask numbers bridging two participants',
  },
  quotaSlots: {
    partitionKey: 'slotKey',
    description:
      'Per-owner quotas (agents, live masks, programmable numbers): one item per used slot (`owner#kind#n`), ' +
      'claimed with a lease',
  },
  inboxes: {
    partitionKey: 'svcnumId',
    description: 'Per-recipient message counter: the last sequence number handed out (orders an inbox)',
  },
  messages: {
    partitionKey: 'inboxId',
    sortKey: 'seq',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'Messages by recipient and sequence (zero-padded), kept 30 days',
  },
  aliases: {
    partitionKey: 'alias',
    indexes: [{ name: 'byEntity', partitionKey: 'svcnumId', sortKey: 'alias' }],
    description: 'Public aliases of numbers (normalised, unique) → svcnum_id',
  },
  capabilities: {
    partitionKey: 'capability',
    sortKey: 'svcnumId',
    description: 'Discover index: one item per capability of each discoverable agent',
  },
  requests: {
    partitionKey: 'requestKey',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'Idempotency records of create calls with a request_id (24 hours)',
  },
  authRequests: {
    partitionKey: 'requestId',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'Validated authorization requests waiting for sign-in or consent (10 minutes)',
  },
  codes: {
    partitionKey: 'codeHash',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'Authorization codes, stored as SHA-256 hashes (5 minutes, single use)',
  },
  grants: {
    partitionKey: 'grantId',
    ttlAttribute: TTL_ATTRIBUTE,
    indexes: [{ name: 'bySubject', partitionKey: 'svcnumId', sortKey: 'clientId' }],
    description: 'Grants behind refresh tokens (180 days sliding inactivity)',
  },
  consents: {
    partitionKey: 'svcnumId',
    sortKey: 'clientId',
    description: 'Remembered consent per user and client',
  },
  signInThrottle: {
    partitionKey: 'key',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'Sign-in attempts per hashed identifier and per device cookie (forgotten a day after the last)',
  },
  dpopProofs: {
    partitionKey: 'proofKey',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'DPoP proofs seen, by key and jti (RFC 9449)',
  },
  sessions: {
    partitionKey: 'sessionHash',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'Browser sign-in sessions, stored as SHA-256 hashes of the cookie value',
  },
  passkeys: {
    partitionKey: 'svcnumId',
    sortKey: 'credentialId',
    description:
      "Accounts' passkeys (WebAuthn): public key, signature counter, transports, backup flags, name, use; " +
      'found at sign-in by the user handle and credential id',
  },
  passkeyChallenges: {
    partitionKey: 'challenge',
    ttlAttribute: TTL_ATTRIBUTE,
    description: 'WebAuthn challenges handed to browsers (5 minutes, single use: taken with a conditional delete)',
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
