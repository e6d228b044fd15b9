// Who may do what: the least-privilege mapping of every compute unit (one Lambda per route group,
// and the Fargate task) to the DynamoDB tables, indexes and KMS operations its code paths use.
// Derived from the code, call by call (core/adapters/dynamo-*.ts are the only places that talk
// to DynamoDB):
//
// browser  (/oauth/authorize, /login, /consent, /account, /account/revoke, /logout, stylesheet, favicon)
//   clients       GetItem                       getClient (authorize, consent page, account page)
//   users         GetItem                       getUser (sign-in, every page)
//   emails        GetItem                       findSvcnumIdByEmail (sign-in by email)
//   numbers       GetItem                       getNumber (sign-in by number)
//   authRequests  GetItem, PutItem, UpdateItem, DeleteItem   park, read, markSignedIn, finish
//   codes         PutItem                       putCode (issuing only; redemption is the token endpoint's)
//   consents      GetItem, PutItem, Query, DeleteItem        remember, list (/account), forget
//   grants        UpdateItem + Query bySubject  /account/revoke: listGrants, revokeGrant
//   sessions      GetItem, PutItem, DeleteItem  sign-in, every page, sign-out
//   signInThrottle GetItem, PutItem, DeleteItem sign-in: read and count an attempt, clear on success
//   KMS           no signing key: the pages never sign or verify a JWT. The sign-in MAC key (MAC_KEY_ID):
//                 GenerateMac, VerifyMac for the sign-in CSRF token and device cookies; only the pages
//                 hold it, since whoever may GenerateMac with it can mint a device cookie for any account.
//
// token    (/oauth/token, /oauth/revoke)
//   clients       GetItem                       authenticate (cached and fresh reads)
//   codes         GetItem, UpdateItem           redeemCode: one conditional update (+ a read on failure)
//   grants        GetItem, PutItem, UpdateItem  createGrant, getGrant (refresh), touchGrant, revokeGrant
//   users         GetItem                       account still active (code exchange, agent and provisioning clients)
//   KMS           Sign, GetPublicKey            signs access and ID tokens (the kid comes from the public key:
//                                               KMS_PUBLIC_KEYS, GetPublicKey only for a key missing there)
//
// userinfo (/oauth/userinfo)
//   users         GetItem, BatchGetItem         the claims (with the grant in one batch for a token of a grant)
//   grants        BatchGetItem                  getUserAndGrant: a revoked grant's tokens are refused
//   clients       GetItem                       the token's client still enabled (cached 30 s; docs/security.md,
//                                               "Disabled means disabled")
//   KMS           GetPublicKey                  verifies the access token locally from public keys (KMS_PUBLIC_KEYS;
//                                               GetPublicKey only for a key missing there)
//
// discovery (/.well-known/openid-configuration, /.well-known/jwks.json)
//   no table;     KMS GetPublicKey              publishes the JWKS
//
// public   (/api/resolve, /api/discover: no credential, rate-limited per IP by the WAF)
//   aliases       GetItem                       alias → entity
//   numbers       GetItem                       the number's public state
//   users         GetItem, BatchGetItem         the entity (resolve); the agents of a discover page; their owners' status (GetItem, cached 30 s)
//   masks         GetItem                       a mask number's state (never its participants)
//   capabilities  Query                         discover: agents by capability (base table)
//   KMS           the page-token key (PAGE_TOKEN_KEY_ID): GenerateMac, once per container, derives
//                 the key of discover's page_token (core/kernel/page-token.ts); never the sign-in MAC key
//
// messages (POST /api/messages: the Messaging External API's ingress)
//   clients       GetItem                       the sending client (cached)
//   numbers       GetItem                       the recipient number, a sender's own number
//   users         GetItem                       recipient, sender entity, forwarding target
//   masks         GetItem                       a mask number's participants
//   inboxes       UpdateItem                    nextSeq: the recipient inbox's counter
//   messages      PutItem                       appendMessage (conditional, retried on a lost sequence)
//   KMS           GetPublicKey                  verifies the bearer access token locally
//
// provisioning (the Fargate gRPC task: NumberService incl. StreamAllMessages, MaskService, AgentService,
//               AliasService)
//   clients       GetItem, PutItem, UpdateItem, DeleteItem   caller lookup; agents' own clients
//                                               (create, rotate secret, compensate)
//   users         GetItem, PutItem, UpdateItem + Query byOwner   entities (numbers, agents), owner
//                                               status, alias claims, lists
//   numbers       UpdateItem + Query pool       lease, confirm, return, quarantine, restore, transition; free pool
//   masks         GetItem, PutItem, UpdateItem + Query byOwner   create, read, close, list
//   quotaSlots    GetItem, PutItem, UpdateItem, DeleteItem   claim, take over, confirm, release
//   requests      GetItem, PutItem, UpdateItem, DeleteItem   request_id idempotency
//   aliases       GetItem, PutItem, DeleteItem  claim, take over a lapsed claim, remove
//   capabilities  PutItem                       the discover index of a new discoverable agent
//   inboxes       BatchGetItem                  StreamAllMessages: polls the watched inboxes' counters
//   messages      Query, PutItem                StreamAllMessages: reads an inbox from a cursor (and, for an inbox
//                                               a cursor does not name, its last message before the cursor's
//                                               watermark, newest first); a tombstone fills a sequence whose writer gave up
//   KMS           Sign, GetPublicKey            verifies callers' tokens; signs agent and exchanged tokens
//                 the page-token key (PAGE_TOKEN_KEY_ID): GenerateMac, once per task, derives the key of
//                 the List* page tokens and StreamAllMessages' cursors (core/kernel/page-token.ts)
//
// KMS uses are granted twice from this one list (lib/keys.ts): in the unit's IAM policy and in the
// key's policy, which names the unit's role; the account itself may only administer the keys.
//
// Nothing deployed scans a table, deletes a user or writes email/number claims: those are
// operator actions of the admin CLI (`--env`), which runs with the operator's own credentials.
// A new store call in a deployed code path needs its line here, or it fails with AccessDenied.

import type { RouteGroup } from '../lambdas/manifest';
import type { TableKey } from '../core/tables';

export type DynamoAction = 'GetItem' | 'BatchGetItem' | 'PutItem' | 'UpdateItem' | 'DeleteItem' | 'Query';

export interface TableAccess {
  /** Item actions on the table itself (Query here means a query of the base table). */
  readonly actions: readonly DynamoAction[];
  /** Global secondary indexes queried (Query on the index ARN only). */
  readonly queryIndexes?: readonly string[];
}

export type KeyUse = 'sign' | 'verify' | 'none';

export type MacAction = 'kms:GenerateMac' | 'kms:VerifyMac';

export interface ComputeAccess {
  readonly tables: Partial<Record<TableKey, TableAccess>>;
  /**
   * sign: kms:Sign + kms:GetPublicKey; verify: kms:GetPublicKey only. Granted on the environment's
   * signing keys only (active and published), never on `*`.
   */
  readonly keys: KeyUse;
  /**
   * KMS MAC operations on the sign-in MAC key (lib/keys.ts HmacKey `sign-in-mac`), nothing else;
   * the unit gets MAC_KEY_ID.
   */
  readonly mac?: readonly MacAction[];
  /**
   * KMS MAC operations on the page-token key (lib/keys.ts HmacKey `page-token`); the unit gets
   * PAGE_TOKEN_KEY_ID. GenerateMac only: the page-token key is derived once, then local.
   */
  readonly pageTokenMac?: readonly MacAction[];
}

export type ComputeUnit = RouteGroup | 'provisioning';

export const access: Record<ComputeUnit, ComputeAccess> = {
  browser: {
    tables: {
      clients: { actions: ['GetItem'] },
      users: { actions: ['GetItem'] },
      emails: { actions: ['GetItem'] },
      numbers: { actions: ['GetItem'] },
      authRequests: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] },
      codes: { actions: ['PutItem'] },
      consents: { actions: ['GetItem', 'PutItem', 'Query', 'DeleteItem'] },
      grants: { actions: ['UpdateItem'], queryIndexes: ['bySubject'] },
      sessions: { actions: ['GetItem', 'PutItem', 'DeleteItem'] },
      signInThrottle: { actions: ['GetItem', 'PutItem', 'DeleteItem'] },
    },
    keys: 'none',
    mac: ['kms:GenerateMac', 'kms:VerifyMac'],
  },
  token: {
    tables: {
      clients: { actions: ['GetItem'] },
      codes: { actions: ['GetItem', 'UpdateItem'] },
      grants: { actions: ['GetItem', 'PutItem', 'UpdateItem'] },
      users: { actions: ['GetItem'] },
    },
    keys: 'sign',
  },
  userinfo: {
    tables: { users: { actions: ['GetItem', 'BatchGetItem'] }, grants: { actions: ['BatchGetItem'] }, clients: { actions: ['GetItem'] } },
    keys: 'verify',
  },
  discovery: {
    tables: {},
    keys: 'verify',
  },
  public: {
    tables: {
      aliases: { actions: ['GetItem'] },
      numbers: { actions: ['GetItem'] },
      users: { actions: ['GetItem', 'BatchGetItem'] },
      masks: { actions: ['GetItem'] },
      capabilities: { actions: ['Query'] },
    },
    keys: 'none',
    pageTokenMac: ['kms:GenerateMac'],
  },
  messages: {
    tables: {
      clients: { actions: ['GetItem'] },
      numbers: { actions: ['GetItem'] },
      users: { actions: ['GetItem'] },
      masks: { actions: ['GetItem'] },
      inboxes: { actions: ['UpdateItem'] },
      messages: { actions: ['PutItem'] },
    },
    keys: 'verify',
  },
  provisioning: {
    tables: {
      clients: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] },
      users: { actions: ['GetItem', 'PutItem', 'UpdateItem'], queryIndexes: ['byOwner'] },
      numbers: { actions: ['UpdateItem'], queryIndexes: ['pool'] },
      masks: { actions: ['GetItem', 'PutItem', 'UpdateItem'], queryIndexes: ['byOwner'] },
      quotaSlots: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] },
      requests: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] },
      aliases: { actions: ['GetItem', 'PutItem', 'DeleteItem'] },
      capabilities: { actions: ['PutItem'] },
      inboxes: { actions: ['BatchGetItem'] },
      messages: { actions: ['Query', 'PutItem'] },
    },
    keys: 'sign',
    pageTokenMac: ['kms:GenerateMac'],
  },
};

export const keyActions: Record<KeyUse, readonly string[]> = {
  sign: ['kms:Sign', 'kms:GetPublicKey'],
  verify: ['kms:GetPublicKey'],
  none: [],
};
