// Who may do what: the least-privilege mapping of every compute unit (one Lambda per route group,
// and the Fargate task) to the DynamoDB tables, indexes and KMS operations its code paths use,
// derived call by call from core/adapters/dynamo-*.ts (the only places that talk to DynamoDB).
// The table `access` below is the one statement of it; each entry says which code path needs it.
// lib/grants.ts turns it into IAM grants, and lib/keys.ts writes its KMS uses twice: in the unit's
// IAM policy and in the key's policy, which names the unit's role (the account itself may only
// administer the keys). test/infra/access-runtime.test.ts fails on a call the table does not grant.
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
   * The same on the RSA keys (lib/keys.ts `rsa`: RS256 ID tokens), where a unit uses them: the
   * unit gets KMS_RSA_KEY_ID and KMS_RSA_VERIFY_KEY_IDS. None where absent.
   */
  readonly rsaKeys?: KeyUse;
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
  // /oauth/authorize, /login, /consent, /account, /account/revoke, /account/passkeys…, /logout (RP-Initiated
  // Logout), assets
  browser: {
    tables: {
      clients: { actions: ['GetItem'] }, // getClient: authorize, consent and account pages
      users: { actions: ['GetItem'] }, // getUser: sign-in, every page
      emails: { actions: ['GetItem'] }, // findSvcnumIdByEmail: sign-in by email
      numbers: { actions: ['GetItem'] }, // getNumber: sign-in by number
      // park, read, markSignedIn, finish
      authRequests: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] },
      codes: { actions: ['PutItem'] }, // putCode: issuing only; redemption is the token endpoint's
      consents: { actions: ['GetItem', 'PutItem', 'Query', 'DeleteItem'] }, // remember, list (/account), forget
      grants: { actions: ['UpdateItem'], queryIndexes: ['bySubject'] }, // /account/revoke: listGrants, revokeGrant
      sessions: { actions: ['GetItem', 'PutItem', 'DeleteItem'] }, // sign-in, every page, sign-out
      // sign-in: read and count an attempt, clear it on success
      signInThrottle: { actions: ['GetItem', 'PutItem', 'DeleteItem'] },
      // add (conditional put), passkey sign-in (read, counter update), /account (list), rename, remove
      passkeys: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'Query', 'DeleteItem'] },
      // options hand one out (put); an answer takes it once (conditional delete)
      passkeyChallenges: { actions: ['PutItem', 'DeleteItem'] },
    },
    // The pages never sign a JWT; /logout verifies an id_token_hint (EdDSA or RS256) with the published
    // keys (KMS_PUBLIC_KEYS; GetPublicKey only for a key missing there). The sign-in MAC key signs the
    // CSRF token and device cookies; only the pages hold it: whoever may GenerateMac with it can mint a
    // device cookie.
    keys: 'verify',
    rsaKeys: 'verify',
    mac: ['kms:GenerateMac', 'kms:VerifyMac'],
  },
  // /oauth/token, /oauth/revoke
  token: {
    tables: {
      clients: { actions: ['GetItem'] }, // authenticate (cached and fresh reads)
      codes: { actions: ['GetItem', 'UpdateItem'] }, // redeemCode: one conditional update (+ a read on failure)
      grants: { actions: ['GetItem', 'PutItem', 'UpdateItem'] }, // createGrant, getGrant, touchGrant, revokeGrant
      users: { actions: ['GetItem'] }, // the account still active (code exchange, agent and provisioning clients)
      dpopProofs: { actions: ['PutItem'] }, // claimDpopProof: a DPoP proof's jti, once (conditional put)
    },
    // Signs access and ID tokens (RS256 ones with the RSA keys); the kid comes from KMS_PUBLIC_KEYS
    // (GetPublicKey only for a key missing there).
    keys: 'sign',
    rsaKeys: 'sign',
    // Derives the DPoP nonce key once per container, when DPOP_NONCES is on (core/oauth/dpop-nonces.ts).
    pageTokenMac: ['kms:GenerateMac'],
  },
  // /oauth/userinfo: the claims, with the token's grant in one batch (a revoked grant's tokens are
  // refused) and its client still enabled (cached 30 s); the token verified locally from public keys.
  userinfo: {
    tables: {
      users: { actions: ['GetItem', 'BatchGetItem'] },
      grants: { actions: ['BatchGetItem'] },
      clients: { actions: ['GetItem'] },
      dpopProofs: { actions: ['PutItem'] }, // claimDpopProof: a DPoP proof's jti, once
    },
    keys: 'verify',
  },
  // /.well-known/openid-configuration, /.well-known/jwks.json: publishes the JWKS.
  discovery: {
    tables: {},
    keys: 'verify',
    rsaKeys: 'verify',
  },
  // /api/resolve, /api/discover: no credential, rate-limited per IP by the WAF
  public: {
    tables: {
      aliases: { actions: ['GetItem'] }, // alias → entity
      numbers: { actions: ['GetItem'] }, // the number's public state
      users: { actions: ['GetItem', 'BatchGetItem'] }, // the entity; a discover page's agents; owners' status
      masks: { actions: ['GetItem'] }, // a mask number's state (never its participants)
      capabilities: { actions: ['Query'] }, // discover: agents by capability (base table)
    },
    keys: 'none',
    // Derives the key of discover's page_token once per container (core/kernel/page-token.ts).
    pageTokenMac: ['kms:GenerateMac'],
  },
  // POST /api/messages
  messages: {
    tables: {
      clients: { actions: ['GetItem'] }, // the sending client (cached)
      numbers: { actions: ['GetItem'] }, // the recipient number, a sender's own number
      users: { actions: ['GetItem'] }, // recipient, sender entity, forwarding target
      masks: { actions: ['GetItem'] }, // a mask number's participants
      inboxes: { actions: ['UpdateItem'] }, // nextSeq: the recipient inbox's counter
      messages: { actions: ['PutItem'] }, // appendMessage (conditional, retried on a lost sequence)
      dpopProofs: { actions: ['PutItem'] }, // claimDpopProof: a DPoP proof's jti, once
    },
    keys: 'verify', // verifies the bearer access token locally
  },
  // The Fargate gRPC task: NumberService (with StreamAllMessages), MaskService, AgentService, AliasService
  provisioning: {
    tables: {
      // caller look-up; agents' own clients (create, rotate secret, compensate)
      clients: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] },
      // entities (numbers, agents), owner status, alias claims, lists
      users: { actions: ['GetItem', 'PutItem', 'UpdateItem'], queryIndexes: ['byOwner'] },
      // lease, confirm, return, quarantine, restore, transition; the free pool
      numbers: { actions: ['UpdateItem'], queryIndexes: ['pool'] },
      masks: { actions: ['GetItem', 'PutItem', 'UpdateItem'], queryIndexes: ['byOwner'] }, // create, read, close, list
      quotaSlots: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] }, // claim, take over, confirm, release
      requests: { actions: ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem'] }, // request_id idempotency
      aliases: { actions: ['GetItem', 'PutItem', 'DeleteItem'] }, // claim, take over a lapsed claim, remove
      capabilities: { actions: ['PutItem'] }, // the discover index of a new discoverable agent
      inboxes: { actions: ['BatchGetItem'] }, // StreamAllMessages polls the watched inboxes' counters
      // StreamAllMessages reads an inbox from a cursor (and, for an inbox the cursor does not name, its
      // last message before the watermark); a tombstone fills a sequence whose writer gave up
      messages: { actions: ['Query', 'PutItem'] },
      dpopProofs: { actions: ['PutItem'] }, // claimDpopProof: a call's DPoP proof's jti, once
    },
    // Verifies callers' tokens; signs agent and exchanged tokens. The page-token key derives the key
    // of the List* page tokens and StreamAllMessages' cursors once per task.
    keys: 'sign',
    pageTokenMac: ['kms:GenerateMac'],
  },
};

export const keyActions: Record<KeyUse, readonly string[]> = {
  sign: ['kms:Sign', 'kms:GetPublicKey'],
  verify: ['kms:GetPublicKey'],
  none: [],
};
