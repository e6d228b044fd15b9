import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient, ensureTables, type StoreDb } from '../core/adapters/dynamo-schema';
import { aliasMember, type AliasRecord } from '../core/directory/store';
import type { StoredMessage } from '../core/messaging/store';
import type {
  AuthorizationCode,
  AuthRequest,
  Client,
  Grant,
  IdempotencyRecord,
  Mask,
  Passkey,
  Session,
  SignInThrottle,
  User,
} from '../core/kernel/model';
import type { Store } from '../core/store';
import { tableNames, type TableNames } from '../core/tables';
import { localDynamoClient, type EmbeddedDynamo } from '../local/embedded-dynamo';
import { startDynalite, startDynamoDbLocal } from './support/dynamodb-local';

// The store contract: the DynamoDB semantics the adapters (core/adapters/dynamo-*.ts) and the core
// rely on, pinned through the store port and run unchanged against every engine below. Where two
// engines disagree, AWS's own DynamoDB Local is the reference. The tables are created once per
// engine; cases never reset them, each writes items under keys of its own (`unique`).
// Index (GSI) reads are eventually consistent in AWS, while both emulators update an index with
// the write. The code never relies on reading its own write through an index (a pooled number is
// leased by a conditional write on its item), so cases that read an index after writing pin its
// order, key condition and paging, not its freshness.

/** Where an engine departs from AWS in a way the store could meet (pinned, so that a change shows). */
type Divergence = 'accepts an empty string as an index key';

interface Engine {
  name: string;
  start(): Promise<EmbeddedDynamo>;
  divergences: readonly Divergence[];
}

/** Every DynamoDB the store runs on. A further engine is one more line. */
const engines: Engine[] = [
  // The embedded default of `npm start` and of every other test.
  { name: 'dynalite', start: startDynalite, divergences: ['accepts an empty string as an index key'] },
  // AWS's own emulator: needs Java 17 on PATH, and fails (never skips) without it.
  { name: 'DynamoDB Local', start: startDynamoDbLocal, divergences: [] },
];

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const DAY = 86_400_000;
/** The store takes `now` as an argument: cases move time by passing later instants. */
const T = Date.now();

/** A key no other case uses. */
const unique = (label: string) => `${label}-${randomUUID()}`;
/** Ids that sort in creation order (`prefix-000`, `prefix-001`, …), as ULIDs do. */
const ordered = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, index) => `${prefix}-${String(index).padStart(3, '0')}`);

const client = (overrides: Partial<Client> = {}): Client => ({
  clientId: unique('client'),
  kind: 'api',
  name: 'contract',
  redirectUris: [],
  scopes: ['messaging'],
  secretHash: 'hash-1',
  disabled: false,
  createdAt: T,
  ...overrides,
});
const user = (overrides: Partial<User> = {}): User => ({
  svcnumId: unique('user'),
  svcnum: unique('svcnum'),
  status: 'active',
  accountType: 'person',
  createdAt: T,
  ...overrides,
});
const authRequest = (overrides: Partial<AuthRequest> = {}): AuthRequest => ({
  requestId: unique('request'),
  clientId: 'c',
  redirectUri: 'https://rp.example/cb',
  scopes: ['openid'],
  codeChallenge: 'challenge',
  forceLogin: false,
  forceConsent: false,
  promptNone: false,
  expiresAt: T + 10 * MINUTE,
  ...overrides,
});
const code = (overrides: Partial<AuthorizationCode> = {}): AuthorizationCode => ({
  codeHash: unique('code'),
  clientId: 'c',
  redirectUri: 'https://rp.example/cb',
  codeChallenge: 'challenge',
  scopes: ['openid'],
  svcnumId: 'u',
  authTime: T,
  grantId: unique('grant'),
  expiresAt: T + 5 * MINUTE,
  ...overrides,
});
const binding = (of: AuthorizationCode) => ({
  clientId: of.clientId,
  redirectUri: of.redirectUri,
  codeChallenge: of.codeChallenge,
});
const grant = (overrides: Partial<Grant> = {}): Grant => ({
  grantId: unique('grant'),
  secretHash: 'secret-hash',
  clientId: 'c',
  svcnumId: unique('subject'),
  scopes: ['openid'],
  authTime: T,
  createdAt: T,
  lastUsedAt: T,
  ...overrides,
});
const throttle = (key: string, failures: number, expiresAt = T + DAY): SignInThrottle => ({
  key,
  failures,
  blockedUntil: 0,
  expiresAt,
});
const session = (overrides: Partial<Session> = {}): Session => ({
  sessionHash: unique('session'),
  svcnumId: 'u',
  authTime: T,
  csrfToken: 'csrf',
  expiresAt: T + DAY,
  ...overrides,
});
const mask = (overrides: Partial<Mask> = {}): Mask => ({
  maskId: unique('mask'),
  ownerId: unique('owner'),
  svcnum: unique('svcnum'),
  participantA: 'a',
  participantB: 'b',
  scope: 'x',
  createdAt: T,
  expiresAt: T + DAY,
  ...overrides,
});
const requestRecord = (overrides: Partial<IdempotencyRecord> = {}): IdempotencyRecord => ({
  requestKey: unique('request'),
  fingerprint: 'f',
  state: 'pending',
  resourceId: unique('resource'),
  leaseUntil: T + MINUTE,
  expiresAt: T + DAY,
  ...overrides,
});
const alias = (overrides: Partial<AliasRecord> = {}): AliasRecord => ({
  alias: unique('alias'),
  svcnumId: unique('entity'),
  claim: unique('claim'),
  createdAt: T,
  leaseUntil: T + MINUTE,
  ...overrides,
});
const message = (inboxId: string, seq: number): StoredMessage => ({
  inboxId,
  seq,
  messageId: unique('message'),
  fromSvcnum: '+1',
  senderEntityType: 'person',
  toSvcnum: '+2',
  text: `message ${seq}`,
  kind: 'message',
  hops: 0,
  acceptedAt: T,
});

/** Exactly one of parallel attempts succeeds. */
const wins = (results: readonly unknown[]) => results.filter((result) => result === true).length;

describe.each(engines)('store contract on $name', (engine) => {
  const tables: TableNames = tableNames('contract-');
  let dynamo: EmbeddedDynamo;
  let raw: DynamoDBClient;
  let db: StoreDb;
  let store: Store;
  /** The DynamoDB operations sent since the case began (round trips the contract counts). */
  const sent: string[] = [];

  beforeAll(async () => {
    dynamo = await engine.start();
    raw = localDynamoClient(dynamo.endpoint);
    const logOperations = (client: DynamoDBClient) =>
      client.middlewareStack.add(
        (next, context) => (args) => {
          sent.push(String(context.commandName));
          return next(args);
        },
        { step: 'initialize', name: 'contractOperationLog' },
      );
    logOperations(raw);
    await ensureTables(raw, tables);
    db = documentClient(raw);
    // Single-item reads go through the store client's own read client (core/adapters/dynamo-schema.ts).
    logOperations(db.reads);
    store = createDynamoStore(db, tables);
  });
  afterAll(async () => {
    raw?.destroy();
    await dynamo?.close();
  });
  beforeEach(() => {
    sent.length = 0;
  });

  /** An item as stored, storage attributes included. */
  const stored = async (table: keyof TableNames, key: Record<string, string>) =>
    (await db.send(new GetCommand({ TableName: tables[table], Key: key, ConsistentRead: true }))).Item;

  describe('clients', () => {
    it('createClient refuses an existing id and keeps the first record', async () => {
      const first = client();
      await store.createClient(first);
      await expect(store.createClient({ ...first, name: 'second' })).rejects.toThrow();
      expect(await store.getClient(first.clientId)).toEqual(first);
    });

    it("setClientSecret replaces a confidential client's secret; a public or missing client gets none and no record appears", async () => {
      const confidential = client();
      const login = client({ kind: 'login', secretHash: undefined });
      await store.createClient(confidential);
      await store.createClient(login);
      expect(await store.setClientSecret(confidential.clientId, 'hash-2')).toBe(true);
      expect((await store.getClient(confidential.clientId))?.secretHash).toBe('hash-2');
      expect(await store.setClientSecret(login.clientId, 'hash-2')).toBe(false);
      expect((await store.getClient(login.clientId))?.secretHash).toBeUndefined();
      const missing = unique('client');
      expect(await store.setClientSecret(missing, 'hash-2')).toBe(false);
      expect(await store.getClient(missing)).toBeUndefined();
    });

    it('setClientDisabled answers the updated record, and undefined without creating one for a missing client', async () => {
      const registered = client();
      await store.createClient(registered);
      expect(await store.setClientDisabled(registered.clientId, true)).toEqual({ ...registered, disabled: true });
      const missing = unique('client');
      expect(await store.setClientDisabled(missing, true)).toBeUndefined();
      expect(await store.getClient(missing)).toBeUndefined();
    });

    it('listClients scans every client; deleteClient removes one, and deleting a missing one is no error', async () => {
      const [kept, removed] = [client(), client()];
      await store.createClient(kept);
      await store.createClient(removed);
      await store.deleteClient(removed.clientId);
      await store.deleteClient(unique('client'));
      const ids = (await store.listClients()).map((listed) => listed.clientId);
      expect(ids).toContain(kept.clientId);
      expect(ids).not.toContain(removed.clientId);
    });
  });

  describe('unique claims of emails, numbers and users', () => {
    it('claimEmail: of parallel claims of one address exactly one wins, and the lookup names its winner', async () => {
      const email = `${unique('person')}@example.com`;
      const claimants = Array.from({ length: 5 }, () => unique('user'));
      const results = await Promise.all(claimants.map((svcnumId) => store.claimEmail(email, svcnumId)));
      expect(wins(results)).toBe(1);
      expect(await store.findSvcnumIdByEmail(email)).toBe(claimants[results.indexOf(true)]);
      expect(await store.claimEmail(email, unique('user'))).toBe(false);
    });

    it('releaseEmail frees an address for its holder only', async () => {
      const email = `${unique('person')}@example.com`;
      await store.claimEmail(email, 'holder');
      await store.releaseEmail(email, 'stranger');
      expect(await store.findSvcnumIdByEmail(email)).toBe('holder');
      await store.releaseEmail(email, 'holder');
      expect(await store.findSvcnumIdByEmail(email)).toBeUndefined();
      expect(await store.claimEmail(email, 'next')).toBe(true);
    });

    it('claimNumber: of parallel claims exactly one wins; releaseNumber frees it for its holder only', async () => {
      const svcnum = unique('number');
      const holders = Array.from({ length: 5 }, () => unique('user'));
      const results = await Promise.all(
        holders.map((svcnumId) => store.claimNumber({ svcnum, svcnumId, state: 'active', updatedAt: T })),
      );
      expect(wins(results)).toBe(1);
      const holder = holders[results.indexOf(true)]!;
      await store.releaseNumber(svcnum, 'stranger');
      expect((await store.getNumber(svcnum))?.svcnumId).toBe(holder);
      await store.releaseNumber(svcnum, holder);
      expect(await store.getNumber(svcnum)).toBeUndefined();
    });

    it('createUser refuses an existing id; getUser reads its own write at once', async () => {
      const person = user();
      await store.createUser(person);
      expect(await store.getUser(person.svcnumId)).toEqual(person);
      await expect(store.createUser({ ...person, svcnum: 'other' })).rejects.toThrow();
      expect((await store.getUser(person.svcnumId))?.svcnum).toBe(person.svcnum);
    });

    it('setUserStatus updates an existing user and never creates one', async () => {
      const person = user();
      await store.createUser(person);
      expect(await store.setUserStatus(person.svcnumId, 'disabled')).toEqual({ ...person, status: 'disabled' });
      expect((await store.getUser(person.svcnumId))?.status).toBe('disabled');
      const missing = unique('user');
      expect(await store.setUserStatus(missing, 'active')).toBeUndefined();
      expect(await store.getUser(missing)).toBeUndefined();
    });
  });

  describe('sign-in throttle', () => {
    it('a first count is written only where nothing is live', async () => {
      const key = unique('id');
      expect(await store.putSignInThrottle(throttle(key, 1), undefined, T)).toBe(true);
      expect(await store.putSignInThrottle(throttle(key, 1), undefined, T)).toBe(false);
      expect((await store.getSignInThrottle(key, T))?.failures).toBe(1);
    });

    it('of parallel attempts that saw the same count exactly one is written', async () => {
      const key = unique('id');
      await store.putSignInThrottle(throttle(key, 1), undefined, T);
      const results = await Promise.all(
        [2, 3, 4, 5, 6].map((failures) => store.putSignInThrottle(throttle(key, failures), 1, T)),
      );
      expect(wins(results)).toBe(1);
      expect((await store.getSignInThrottle(key, T))?.failures).toBe([2, 3, 4, 5, 6][results.indexOf(true)]);
      // Parallel first counts, too.
      const fresh = unique('id');
      expect(
        wins(await Promise.all([1, 2, 3].map(() => store.putSignInThrottle(throttle(fresh, 1), undefined, T)))),
      ).toBe(1);
    });

    it('a count expired at `now` is no count: read as none and replaced as new, though still stored', async () => {
      const key = unique('device');
      await store.putSignInThrottle(throttle(key, 7, T + MINUTE), undefined, T);
      expect(await store.getSignInThrottle(key, T + MINUTE - 1)).toMatchObject({ failures: 7 });
      expect(await store.getSignInThrottle(key, T + MINUTE)).toBeUndefined();
      expect(await stored('signInThrottle', { key })).toMatchObject({ failures: 7 });
      expect(await store.putSignInThrottle(throttle(key, 1, T + 2 * DAY), undefined, T + MINUTE)).toBe(true);
      expect((await store.getSignInThrottle(key, T + MINUTE))?.failures).toBe(1);
    });

    it('a count that is not there cannot be replaced as if seen; deleteSignInThrottle clears one', async () => {
      const key = unique('id');
      expect(await store.putSignInThrottle(throttle(key, 2), 1, T)).toBe(false);
      expect(await store.getSignInThrottle(key, T)).toBeUndefined();
      await store.putSignInThrottle(throttle(key, 1), undefined, T);
      await store.deleteSignInThrottle(key);
      expect(await store.getSignInThrottle(key, T)).toBeUndefined();
      expect(await store.putSignInThrottle(throttle(key, 1), undefined, T)).toBe(true);
    });
  });

  describe('passkeys and their challenges', () => {
    const passkey = (svcnumId: string, credentialId: string): Passkey => ({
      svcnumId,
      credentialId,
      userHandle: Buffer.from(svcnumId).toString('base64url'),
      publicKey: 'pQECAyYgASFY',
      counter: 0,
      transports: ['internal', 'hybrid'],
      backupEligible: true,
      backedUp: false,
      name: 'Phone',
      createdAt: T,
    });

    it("putPasskey refuses a credential the account has; lists, renames and removes only that account's", async () => {
      const [owner, other] = [unique('user'), unique('user')];
      expect(await store.putPasskey(passkey(owner, 'c1'))).toBe(true);
      expect(await store.putPasskey({ ...passkey(owner, 'c1'), name: 'Again' })).toBe(false);
      expect(await store.putPasskey(passkey(owner, 'c2'))).toBe(true);
      expect(await store.putPasskey(passkey(other, 'c1'))).toBe(true);
      expect((await store.listPasskeys(owner)).map((item) => item.credentialId)).toEqual(['c1', 'c2']);
      expect(await store.getPasskey(owner, 'c1')).toEqual(passkey(owner, 'c1'));
      expect(await store.renamePasskey(owner, 'c1', 'Laptop')).toBe(true);
      expect(await store.renamePasskey(owner, 'nope', 'Laptop')).toBe(false);
      expect(await store.getPasskey(owner, 'nope')).toBeUndefined();
      expect(await store.deletePasskey(owner, 'c1')).toEqual({ ...passkey(owner, 'c1'), name: 'Laptop' });
      expect(await store.deletePasskey(owner, 'c1')).toBeUndefined();
      expect((await store.getPasskey(other, 'c1'))?.name).toBe('Phone');
    });

    it('of parallel uses that saw one counter exactly one is recorded; a removed passkey records none', async () => {
      const owner = unique('user');
      await store.putPasskey(passkey(owner, 'c1'));
      const key = { svcnumId: owner, credentialId: 'c1' };
      const results = await Promise.all(
        [1, 2, 3].map((counter) => store.recordPasskeyUse(key, 0, { counter, backedUp: true, lastUsedAt: T + 1 })),
      );
      expect(wins(results)).toBe(1);
      expect(await store.getPasskey(owner, 'c1')).toMatchObject({
        counter: [1, 2, 3][results.indexOf(true)],
        backedUp: true,
        lastUsedAt: T + 1,
      });
      await store.deletePasskey(owner, 'c1');
      expect(await store.recordPasskeyUse(key, 0, { counter: 9, backedUp: true, lastUsedAt: T })).toBe(false);
      expect(await stored('passkeys', key)).toBeUndefined();
    });

    it('a challenge is taken once, only before its expiry, and parallel takers get it once', async () => {
      const challenge = (expiresAt: number) => ({
        challenge: unique('challenge'),
        purpose: 'sign-in' as const,
        expiresAt,
      });
      const live = challenge(T + 1000);
      await store.putPasskeyChallenge(live);
      const taken = await Promise.all([1, 2, 3].map(() => store.takePasskeyChallenge(live.challenge, T)));
      expect(taken.filter(Boolean)).toEqual([live]);
      const expired = challenge(T + 1000);
      await store.putPasskeyChallenge(expired);
      expect(await store.takePasskeyChallenge(expired.challenge, T + 1000)).toBeUndefined();
      expect(await stored('passkeyChallenges', { challenge: expired.challenge })).toBeUndefined();
    });
  });

  describe('DPoP proofs seen (RFC 9449 jti)', () => {
    it('of parallel claims of one proof exactly one wins; a record past its expiry counts as absent', async () => {
      const proofKey = unique('proof');
      expect(wins(await Promise.all([1, 2, 3].map(() => store.claimDpopProof(proofKey, T + MINUTE, T))))).toBe(1);
      expect(await store.claimDpopProof(proofKey, T + MINUTE, T + MINUTE - 1)).toBe(false);
      // Still stored (TTL sweeps late, or never): expired at that millisecond all the same.
      expect(await stored('dpopProofs', { proofKey })).toMatchObject({ expiresAt: T + MINUTE });
      expect(await store.claimDpopProof(proofKey, T + 2 * MINUTE, T + MINUTE)).toBe(true);
    });
  });

  describe('time-bound items: read until their expiry, whatever TTL did', () => {
    it('an auth request is read until its expiry, and not from that millisecond on', async () => {
      const request = authRequest();
      await store.putAuthRequest(request);
      expect(await store.getAuthRequest(request.requestId, request.expiresAt - 1)).toEqual(request);
      expect(await store.getAuthRequest(request.requestId, request.expiresAt)).toBeUndefined();
      expect(await store.getAuthRequest(request.requestId, request.expiresAt + DAY)).toBeUndefined();
      await store.deleteAuthRequest(request.requestId);
      expect(await stored('authRequests', { requestId: request.requestId })).toBeUndefined();
    });

    it('markAuthRequestSignedIn records the sign-in, and never creates a request that is not there', async () => {
      const request = authRequest();
      await store.putAuthRequest(request);
      await store.markAuthRequestSignedIn(request.requestId, T + 5);
      expect((await store.getAuthRequest(request.requestId, T))?.signedInAt).toBe(T + 5);
      const missing = unique('request');
      await store.markAuthRequestSignedIn(missing, T);
      expect(await stored('authRequests', { requestId: missing })).toBeUndefined();
    });

    it('a session is read until its expiry; deleteSession ends it', async () => {
      const open = session();
      await store.putSession(open);
      expect(await store.getSession(open.sessionHash, open.expiresAt - 1)).toEqual(open);
      expect(await store.getSession(open.sessionHash, open.expiresAt)).toBeUndefined();
      await store.deleteSession(open.sessionHash);
      expect(await store.getSession(open.sessionHash, T)).toBeUndefined();
    });

    it('TTL attributes are epoch seconds, rounded up so nothing is swept early, and never reach the caller', async () => {
      const request = authRequest({ expiresAt: T + 10 * MINUTE + 1 });
      await store.putAuthRequest(request);
      expect((await stored('authRequests', { requestId: request.requestId }))?.ttl).toBe(
        Math.ceil(request.expiresAt / SECOND),
      );
      expect(await store.getAuthRequest(request.requestId, T)).not.toHaveProperty('ttl');
      const issued = code();
      await store.putCode(issued);
      expect((await stored('codes', { codeHash: issued.codeHash }))?.ttl).toBe(Math.ceil(issued.expiresAt / SECOND));
      expect(await store.redeemCode(issued.codeHash, binding(issued), T)).toEqual({
        outcome: 'redeemed',
        code: { ...issued, redeemedAt: T },
      });
      const open = session({ expiresAt: T + DAY + 999 });
      await store.putSession(open);
      expect((await stored('sessions', { sessionHash: open.sessionHash }))?.ttl).toBe(
        Math.ceil(open.expiresAt / SECOND),
      );
    });
  });

  describe('authorization codes', () => {
    it('putCode refuses a code hash that exists', async () => {
      const issued = code();
      await store.putCode(issued);
      await expect(store.putCode({ ...issued, clientId: 'other' })).rejects.toThrow();
    });

    it('redeemCode redeems once, answering the code; then reports the replay with the grant to revoke', async () => {
      const issued = code();
      await store.putCode(issued);
      expect(await store.redeemCode(issued.codeHash, binding(issued), T + 1)).toEqual({
        outcome: 'redeemed',
        code: { ...issued, redeemedAt: T + 1 },
      });
      expect(await store.redeemCode(issued.codeHash, binding(issued), T + 2)).toEqual({
        outcome: 'replayed',
        grantId: issued.grantId,
      });
    });

    it('an unknown code is unknown', async () => {
      expect(
        await store.redeemCode(
          unique('code'),
          { clientId: 'c', redirectUri: 'https://rp.example/cb', codeChallenge: 'x' },
          T,
        ),
      ).toEqual({ outcome: 'unknown' });
    });

    it('a code is expired from its expiry on, and the failed attempt leaves it unused', async () => {
      const issued = code();
      await store.putCode(issued);
      expect(await store.redeemCode(issued.codeHash, binding(issued), issued.expiresAt)).toEqual({
        outcome: 'expired',
      });
      expect(await store.redeemCode(issued.codeHash, binding(issued), issued.expiresAt - 1)).toMatchObject({
        outcome: 'redeemed',
      });
    });

    it.each([
      ['client', { clientId: 'other' }],
      ['redirect URI', { redirectUri: 'https://rp.example/other' }],
      ['PKCE challenge', { codeChallenge: 'other' }],
    ])('another %s is a mismatch and leaves the code unused', async (_, change) => {
      const issued = code();
      await store.putCode(issued);
      expect(await store.redeemCode(issued.codeHash, { ...binding(issued), ...change }, T)).toEqual({
        outcome: 'mismatch',
      });
      expect(await store.redeemCode(issued.codeHash, binding(issued), T)).toMatchObject({ outcome: 'redeemed' });
    });

    it('of parallel redemptions exactly one redeems; the others are replays', async () => {
      const issued = code();
      await store.putCode(issued);
      const outcomes = (
        await Promise.all(Array.from({ length: 5 }, () => store.redeemCode(issued.codeHash, binding(issued), T)))
      ).map((result) => result.outcome);
      expect(outcomes.filter((outcome) => outcome === 'redeemed')).toHaveLength(1);
      expect(outcomes.filter((outcome) => outcome === 'replayed')).toHaveLength(4);
    });

    it('a redemption is one conditional UpdateItem; only a failed one reads the code back', async () => {
      const issued = code();
      await store.putCode(issued);
      sent.length = 0;
      await store.redeemCode(issued.codeHash, binding(issued), T);
      expect(sent).toEqual(['UpdateItemCommand']);
      sent.length = 0;
      await store.redeemCode(issued.codeHash, binding(issued), T);
      expect(sent).toEqual(['UpdateItemCommand', 'GetItemCommand']);
    });
  });

  describe('grants', () => {
    it('createGrant refuses an existing id', async () => {
      const issued = grant();
      expect(await store.createGrant(issued, T + DAY)).toBe(true);
      expect(await store.createGrant({ ...issued, secretHash: 'other' }, T + DAY)).toBe(false);
      expect(await store.getGrant(issued.grantId)).toEqual(issued);
    });

    it('revoking a grant that does not exist yet leaves a tombstone: it cannot be created, and is no grant', async () => {
      const late = grant();
      await store.revokeGrant(late.grantId, T);
      expect(await store.createGrant(late, T + DAY)).toBe(false);
      expect(await store.getGrant(late.grantId)).toBeUndefined();
      expect((await store.getUserAndGrant(late.svcnumId, late.grantId)).grant).toBeUndefined();
      // The tombstone outlives any code that could still create the grant.
      expect((await stored('grants', { grantId: late.grantId }))?.ttl).toBe(Math.ceil((T + DAY) / SECOND));
    });

    it("revokeGrant keeps the first revocation time and the grant's own expiry", async () => {
      const issued = grant();
      await store.createGrant(issued, T + 180 * DAY);
      await store.revokeGrant(issued.grantId, T + 1);
      await store.revokeGrant(issued.grantId, T + 2);
      expect(await store.getGrant(issued.grantId)).toEqual({ ...issued, revokedAt: T + 1 });
      expect((await stored('grants', { grantId: issued.grantId }))?.ttl).toBe(Math.ceil((T + 180 * DAY) / SECOND));
    });

    it('touchGrant slides a live grant forward only, and never touches a revoked or missing one', async () => {
      const issued = grant();
      await store.createGrant(issued, T + DAY);
      await store.touchGrant(issued.grantId, T + DAY, T + 2 * DAY);
      expect((await store.getGrant(issued.grantId))?.lastUsedAt).toBe(T + DAY);
      expect((await stored('grants', { grantId: issued.grantId }))?.ttl).toBe(Math.ceil((T + 2 * DAY) / SECOND));
      await store.touchGrant(issued.grantId, T + 1, T + 3 * DAY);
      expect((await store.getGrant(issued.grantId))?.lastUsedAt).toBe(T + DAY);
      await store.revokeGrant(issued.grantId, T + DAY + 1);
      await store.touchGrant(issued.grantId, T + 2 * DAY, T + 4 * DAY);
      expect((await store.getGrant(issued.grantId))?.lastUsedAt).toBe(T + DAY);
      const missing = unique('grant');
      await store.touchGrant(missing, T, T + DAY);
      expect(await stored('grants', { grantId: missing })).toBeUndefined();
    });

    it('getUserAndGrant reads both, just written, in one BatchGetItem', async () => {
      const person = user();
      const issued = grant({ svcnumId: person.svcnumId });
      await store.createUser(person);
      await store.createGrant(issued, T + DAY);
      sent.length = 0;
      expect(await store.getUserAndGrant(person.svcnumId, issued.grantId)).toEqual({ user: person, grant: issued });
      expect(sent).toEqual(['BatchGetItemCommand']);
      await store.setUserStatus(person.svcnumId, 'disabled');
      await store.revokeGrant(issued.grantId, T + 1);
      expect(await store.getUserAndGrant(person.svcnumId, issued.grantId)).toEqual({
        user: { ...person, status: 'disabled' },
        grant: { ...issued, revokedAt: T + 1 },
      });
    });

    it('getUserAndGrant leaves out what is missing', async () => {
      const person = user();
      await store.createUser(person);
      expect(await store.getUserAndGrant(person.svcnumId, unique('grant'))).toEqual({ user: person });
      const issued = grant();
      await store.createGrant(issued, T + DAY);
      expect(await store.getUserAndGrant(unique('user'), issued.grantId)).toEqual({ grant: issued });
      expect(await store.getUserAndGrant(unique('user'), unique('grant'))).toEqual({});
    });

    it("listGrants lists a subject's grants, all or of one client (the bySubject index)", async () => {
      const subject = unique('subject');
      const grants = [
        grant({ svcnumId: subject, clientId: 'a' }),
        grant({ svcnumId: subject, clientId: 'b' }),
        grant({ svcnumId: subject, clientId: 'b' }),
      ];
      for (const issued of grants) await store.createGrant(issued, T + DAY);
      await store.createGrant(grant({ clientId: 'b' }), T + DAY);
      expect(new Set((await store.listGrants(subject)).map((listed) => listed.grantId))).toEqual(
        new Set(grants.map((issued) => issued.grantId)),
      );
      expect(new Set((await store.listGrants(subject, 'b')).map((listed) => listed.grantId))).toEqual(
        new Set(grants.slice(1).map((issued) => issued.grantId)),
      );
      expect(await store.listGrants(unique('subject'))).toEqual([]);
    });
  });

  describe('consents', () => {
    it("putConsent replaces; listConsents lists one user's consents in client order; deleteConsent removes one", async () => {
      const svcnumId = unique('user');
      for (const clientId of ['c2', 'c1', 'c3'])
        await store.putConsent({ svcnumId, clientId, scopes: ['openid'], grantedAt: T });
      await store.putConsent({ svcnumId, clientId: 'c2', scopes: ['openid', 'email'], grantedAt: T + 1 });
      await store.putConsent({ svcnumId: unique('user'), clientId: 'c1', scopes: ['openid'], grantedAt: T });
      expect(await store.getConsent(svcnumId, 'c2')).toEqual({
        svcnumId,
        clientId: 'c2',
        scopes: ['openid', 'email'],
        grantedAt: T + 1,
      });
      expect((await store.listConsents(svcnumId)).map((consent) => consent.clientId)).toEqual(['c1', 'c2', 'c3']);
      await store.deleteConsent(svcnumId, 'c1');
      expect(await store.getConsent(svcnumId, 'c1')).toBeUndefined();
      expect((await store.listConsents(svcnumId)).map((consent) => consent.clientId)).toEqual(['c2', 'c3']);
    });
  });

  describe('the number pool (a table of its own per case: the pool index is one partition)', () => {
    /** A store whose numbers table is new and empty. */
    async function poolStore(): Promise<Store> {
      const own = { ...tables, numbers: unique('contract-numbers') };
      await ensureTables(raw, own, ['numbers']);
      return createDynamoStore(db, own);
    }
    const seeded = async (pool: Store, svcnums: readonly string[]) => {
      for (const svcnum of svcnums) expect(await pool.seedNumber(svcnum, T)).toBe(true);
    };

    it('seedNumber adds a number once; it is free at once', async () => {
      const pool = await poolStore();
      expect(await pool.seedNumber('+100', T)).toBe(true);
      expect(await pool.seedNumber('+100', T)).toBe(false);
      expect(await pool.freeNumbers(T, 10)).toEqual([
        { svcnum: '+100', state: 'available', poolKey: 'free', availableAt: '000000000000000', updatedAt: T },
      ]);
    });

    it('freeNumbers lists what is free at `now`, longest free first, at most `limit`, from the boundary instant on', async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1', '+2', '+3']);
      for (const svcnum of ['+1', '+2', '+3']) {
        const [candidate] = (await pool.freeNumbers(T, 10)).filter((number) => number.svcnum === svcnum);
        expect(
          await pool.leaseNumber(candidate!, unique('holder'), 'programmable', T + Number(svcnum.slice(1)) * MINUTE, T),
        ).toBe(true);
      }
      await seeded(pool, ['+0']);
      expect((await pool.freeNumbers(T, 10)).map((number) => number.svcnum)).toEqual(['+0']);
      expect((await pool.freeNumbers(T + 2 * MINUTE - 1, 10)).map((number) => number.svcnum)).toEqual(['+0', '+1']);
      expect((await pool.freeNumbers(T + 2 * MINUTE, 10)).map((number) => number.svcnum)).toEqual(['+0', '+1', '+2']);
      expect((await pool.freeNumbers(T + DAY, 2)).map((number) => number.svcnum)).toEqual(['+0', '+1']);
    });

    it('leaseNumber is optimistic: of parallel leases of one candidate exactly one wins, and a stale read loses', async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1']);
      const [candidate] = await pool.freeNumbers(T, 1);
      const holders = Array.from({ length: 5 }, () => unique('holder'));
      const results = await Promise.all(
        holders.map((holder) => pool.leaseNumber(candidate!, holder, 'ai_agent', T + MINUTE, T)),
      );
      expect(wins(results)).toBe(1);
      expect(await pool.getNumber('+1')).toMatchObject({
        state: 'leased',
        svcnumId: holders[results.indexOf(true)],
        entityType: 'ai_agent',
        leaseUntil: T + MINUTE,
      });
      // Once the lease lapses the number is free again, but only as read now: the old read is stale.
      const [lapsed] = await pool.freeNumbers(T + MINUTE, 1);
      expect(lapsed).toMatchObject({ svcnum: '+1', state: 'leased' });
      expect(await pool.leaseNumber(candidate!, 'late', 'ai_agent', T + 2 * MINUTE, T + MINUTE)).toBe(false);
      expect(await pool.leaseNumber(lapsed!, 'next', 'ai_agent', T + 2 * MINUTE, T + MINUTE)).toBe(true);
    });

    it('a lease cannot start before its candidate is free, nor on a number that is not in the pool', async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1']);
      const [candidate] = await pool.freeNumbers(T, 1);
      await pool.leaseNumber(candidate!, 'holder', 'programmable', T + MINUTE, T);
      const leased = (await pool.getNumber('+1'))!;
      expect(await pool.leaseNumber(leased, 'early', 'programmable', T + 2 * MINUTE, T + MINUTE - 1)).toBe(false);
      await pool.confirmNumber('+1', 'holder', 'active', T);
      // No availableAt at all (out of the pool): the condition fails, it is no error.
      const confirmed = (await pool.getNumber('+1'))!;
      expect(confirmed.availableAt).toBeUndefined();
      expect(await pool.leaseNumber(confirmed, 'other', 'programmable', T + DAY, T + DAY)).toBe(false);
    });

    it('confirmNumber takes a leased number out of the pool for good; twice is harmless; another holder cannot', async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1']);
      const [candidate] = await pool.freeNumbers(T, 1);
      await pool.leaseNumber(candidate!, 'holder', 'programmable', T + MINUTE, T);
      expect(await pool.confirmNumber('+1', 'stranger', 'active', T)).toBe(false);
      expect(await pool.confirmNumber('+1', 'holder', 'active', T)).toBe(true);
      expect(await pool.confirmNumber('+1', 'holder', 'active', T + 1)).toBe(true);
      expect(await pool.getNumber('+1')).toEqual({
        svcnum: '+1',
        state: 'active',
        svcnumId: 'holder',
        entityType: 'programmable',
        updatedAt: T + 1,
      });
      expect(await pool.freeNumbers(T + 365 * DAY, 10)).toEqual([]);
    });

    it("confirmNumber with poolFrom (a mask's number) puts it back in the pool from that instant", async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1']);
      const [candidate] = await pool.freeNumbers(T, 1);
      await pool.leaseNumber(candidate!, 'mask', 'mask', T + MINUTE, T);
      expect(await pool.confirmNumber('+1', 'mask', 'active', T, T + DAY)).toBe(true);
      expect(await pool.freeNumbers(T + DAY - 1, 10)).toEqual([]);
      expect(await pool.freeNumbers(T + DAY, 10)).toMatchObject([
        { svcnum: '+1', state: 'active', svcnumId: 'mask', quarantinedUntil: T + DAY },
      ]);
    });

    it('returnNumber gives a leased number straight back, for its holder only', async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1']);
      const [candidate] = await pool.freeNumbers(T, 1);
      await pool.leaseNumber(candidate!, 'holder', 'programmable', T + MINUTE, T);
      await pool.returnNumber('+1', 'stranger', T + 1);
      expect(await pool.freeNumbers(T + 1, 10)).toEqual([]);
      await pool.returnNumber('+1', 'holder', T + 1);
      expect(await pool.freeNumbers(T + 1, 10)).toEqual([
        {
          svcnum: '+1',
          state: 'available',
          poolKey: 'free',
          availableAt: String(T + 1).padStart(15, '0'),
          updatedAt: T + 1,
        },
      ]);
    });

    it("quarantineNumber pools a holder's number from the cool-off end; restoreNumber undoes it for that holder only", async () => {
      const pool = await poolStore();
      await seeded(pool, ['+1']);
      const [candidate] = await pool.freeNumbers(T, 1);
      await pool.leaseNumber(candidate!, 'holder', 'person', T + MINUTE, T);
      await pool.confirmNumber('+1', 'holder', 'active', T);
      expect(await pool.quarantineNumber('+1', 'stranger', T + DAY, T)).toBe(false);
      expect(await pool.quarantineNumber('+1', 'holder', T + DAY, T)).toBe(true);
      expect(await pool.quarantineNumber('+1', 'holder', T + DAY, T)).toBe(false);
      expect(await pool.freeNumbers(T + DAY - 1, 10)).toEqual([]);
      expect(await pool.freeNumbers(T + DAY, 10)).toMatchObject([
        { svcnum: '+1', state: 'quarantined', previousSvcnumId: 'holder' },
      ]);
      expect(await pool.restoreNumber('+1', 'stranger', 'active', T)).toBe(false);
      expect(await pool.restoreNumber('+1', 'holder', 'suspended', T)).toBe(true);
      expect(await pool.getNumber('+1')).toEqual({
        svcnum: '+1',
        state: 'suspended',
        svcnumId: 'holder',
        entityType: 'person',
        updatedAt: T,
      });
      expect(await pool.freeNumbers(T + DAY, 10)).toEqual([]);
    });

    it('transitionNumber moves only from the listed states and, when named, for the holder only; it never creates a number', async () => {
      const svcnum = unique('number');
      await store.claimNumber({ svcnum, svcnumId: 'holder', state: 'active', updatedAt: T });
      expect(await store.transitionNumber(svcnum, ['suspended'], 'active', T)).toBeUndefined();
      expect(await store.transitionNumber(svcnum, ['active', 'suspended'], 'suspended', T, 'stranger')).toBeUndefined();
      expect(await store.transitionNumber(svcnum, ['active', 'suspended'], 'suspended', T + 1, 'holder')).toEqual({
        svcnum,
        svcnumId: 'holder',
        state: 'suspended',
        updatedAt: T + 1,
      });
      expect(await store.transitionNumber(svcnum, ['suspended'], 'deactivated', T + 2)).toMatchObject({
        state: 'deactivated',
      });
      const missing = unique('number');
      expect(await store.transitionNumber(missing, ['active'], 'suspended', T)).toBeUndefined();
      expect(await store.getNumber(missing)).toBeUndefined();
    });
  });

  describe('provisioned entities (the byOwner index of users)', () => {
    /** An owner with `count` entities of one type, oldest first, and a few of another type around them. */
    async function ownerWith(count: number, accountType: 'programmable' | 'ai_agent' = 'programmable') {
      const ownerId = unique('owner');
      const entities = ordered(unique('entity'), count).map((svcnumId) =>
        user({ svcnumId, accountType, ownerId, ownerSort: `${accountType}#${svcnumId}` }),
      );
      for (const entity of entities) await store.createUser(entity);
      const other = accountType === 'programmable' ? 'ai_agent' : 'programmable';
      for (const svcnumId of ordered(unique('other'), 2))
        await store.createUser(user({ svcnumId, accountType: other, ownerId, ownerSort: `${other}#${svcnumId}` }));
      return { ownerId, entities };
    }

    it("listOwned pages one type of an owner's entities oldest first; the pages join without gaps or repeats", async () => {
      const { ownerId, entities } = await ownerWith(7, 'ai_agent');
      const seen: string[] = [];
      let startKey: Awaited<ReturnType<typeof store.listOwned>>['nextKey'];
      let pages = 0;
      do {
        const page = await store.listOwned(ownerId, 'ai_agent', 3, startKey);
        expect(page.items.length).toBeLessThanOrEqual(3);
        seen.push(...page.items.map((entity) => entity.svcnumId));
        startKey = page.nextKey;
        pages++;
      } while (startKey);
      expect(seen).toEqual(entities.map((entity) => entity.svcnumId));
      expect(pages).toBe(3);
      expect((await store.listOwned(ownerId, 'ai_agent', 100)).items).toEqual(entities);
    });

    it('a page that fills its limit carries a key even at the end of the list; the page after it is empty and has none', async () => {
      const { ownerId } = await ownerWith(4);
      const full = await store.listOwned(ownerId, 'programmable', 4);
      expect(full.items).toHaveLength(4);
      expect(full.nextKey).toBeDefined();
      expect(await store.listOwned(ownerId, 'programmable', 4, full.nextKey)).toEqual({ items: [] });
      expect((await store.listOwned(ownerId, 'programmable', 5)).nextKey).toBeUndefined();
      expect(await store.listOwned(unique('owner'), 'programmable', 5)).toEqual({ items: [] });
    });

    it("the key to continue is the last item's table and index key; one built from any item, even a deleted one, continues after it", async () => {
      const { ownerId, entities } = await ownerWith(5);
      const first = await store.listOwned(ownerId, 'programmable', 2);
      const last = entities[1]!;
      // Exactly the attributes the page-token lists accept back (core/provisioning/programmable.ts, agents.ts).
      expect(first.nextKey).toEqual({ svcnumId: last.svcnumId, ownerId, ownerSort: last.ownerSort });
      const third = entities[2]!;
      await store.deleteEntity(third.svcnumId);
      const after = await store.listOwned(ownerId, 'programmable', 10, {
        svcnumId: third.svcnumId,
        ownerId,
        ownerSort: third.ownerSort,
      });
      expect(after.items.map((entity) => entity.svcnumId)).toEqual(entities.slice(3).map((entity) => entity.svcnumId));
    });

    it('an empty string as an index key is refused (ValidationException): index keys must never be empty', async () => {
      // dynalite stores it, so only this case (on AWS's engine) would catch code that writes one.
      const write = store.createUser(
        user({ accountType: 'programmable', ownerId: '', ownerSort: `programmable#${unique('entity')}` }),
      );
      if (engine.divergences.includes('accepts an empty string as an index key'))
        await expect(write).resolves.toBeUndefined();
      else await expect(write).rejects.toMatchObject({ name: 'ValidationException' });
    });

    it('updateEntity sets and removes fields while the expected values hold, and never creates an entity', async () => {
      const agent = user({ accountType: 'ai_agent', displayName: 'Old', autoReply: 'away' });
      await store.createUser(agent);
      expect(
        await store.updateEntity(
          agent.svcnumId,
          { displayName: 'New', autoReply: undefined, updatedAt: T + 1 },
          { displayName: 'Old' },
        ),
      ).toEqual({ ...agent, displayName: 'New', autoReply: undefined, updatedAt: T + 1 });
      expect(await store.getUser(agent.svcnumId)).not.toHaveProperty('autoReply');
      expect(
        await store.updateEntity(agent.svcnumId, { displayName: 'Newer' }, { displayName: 'Old' }),
      ).toBeUndefined();
      expect((await store.getUser(agent.svcnumId))?.displayName).toBe('New');
      const missing = unique('entity');
      expect(await store.updateEntity(missing, { displayName: 'Ghost' })).toBeUndefined();
      expect(await store.getUser(missing)).toBeUndefined();
    });

    it('claimRotation holds an agent for one rotation at a time, until the hold ends', async () => {
      const agent = user({ accountType: 'ai_agent', fallbackSvcnum: '+9' });
      await store.createUser(agent);
      expect(await store.claimRotation(agent.svcnumId, { fallbackSvcnum: '+8' }, T + MINUTE, T)).toBe(false);
      const results = await Promise.all(
        [1, 2, 3].map(() => store.claimRotation(agent.svcnumId, { fallbackSvcnum: '+9' }, T + MINUTE, T)),
      );
      expect(wins(results)).toBe(1);
      expect(await store.claimRotation(agent.svcnumId, { fallbackSvcnum: '+9' }, T + 2 * MINUTE, T + MINUTE - 1)).toBe(
        false,
      );
      expect(await store.claimRotation(agent.svcnumId, { fallbackSvcnum: '+9' }, T + 2 * MINUTE, T + MINUTE)).toBe(
        true,
      );
      expect((await store.getUser(agent.svcnumId))?.rotationUntil).toBe(T + 2 * MINUTE);
      expect(await store.claimRotation(unique('agent'), {}, T + MINUTE, T)).toBe(false);
    });

    it('clearEntityFields removes fields; setQuotaOverrides sets them; deleteEntity removes the entity; none creates one', async () => {
      const owner = user({ autoReply: 'away', forwardToSvcnumId: 'x' });
      await store.createUser(owner);
      await store.clearEntityFields(owner.svcnumId, ['autoReply', 'forwardToSvcnumId']);
      expect(await store.setQuotaOverrides(owner.svcnumId, { independentAgentQuota: 20 })).toEqual({
        svcnumId: owner.svcnumId,
        svcnum: owner.svcnum,
        status: 'active',
        accountType: 'person',
        createdAt: T,
        independentAgentQuota: 20,
      });
      const missing = unique('entity');
      await store.clearEntityFields(missing, ['autoReply']);
      expect(await store.setQuotaOverrides(missing, { dependentAgentQuota: 1 })).toBeUndefined();
      expect(await store.getUser(missing)).toBeUndefined();
      await store.deleteEntity(owner.svcnumId);
      await store.deleteEntity(missing);
      expect(await store.getUser(owner.svcnumId)).toBeUndefined();
    });
  });

  describe('masks', () => {
    it('createMask refuses an existing id; getMask reads its own write', async () => {
      const created = mask();
      await store.createMask(created);
      expect(await store.getMask(created.maskId)).toEqual(created);
      await expect(store.createMask({ ...created, participantA: 'c' })).rejects.toThrow();
      expect(await store.getMask(unique('mask'))).toBeUndefined();
    });

    it("listMasks pages an owner's masks in mask id order; the key to continue is {maskId, ownerId}", async () => {
      const ownerId = unique('owner');
      const masks = ordered(unique('mask'), 5).map((maskId) => mask({ maskId, ownerId }));
      for (const created of [...masks].reverse()) await store.createMask(created);
      await store.createMask(mask());
      const first = await store.listMasks(ownerId, 2);
      expect(first).toEqual({ items: masks.slice(0, 2), nextKey: { maskId: masks[1]!.maskId, ownerId } });
      const rest = await store.listMasks(ownerId, 10, first.nextKey);
      expect(rest).toEqual({ items: masks.slice(2) });
    });

    it('closeMask ends a live mask once; an expired or missing mask stays as it is', async () => {
      const live = mask({ expiresAt: T + DAY });
      await store.createMask(live);
      expect(await store.closeMask(live.maskId, T + 1)).toEqual({ ...live, expiresAt: T + 1 });
      expect(await store.closeMask(live.maskId, T + 2)).toBeUndefined();
      expect((await store.getMask(live.maskId))?.expiresAt).toBe(T + 1);
      const lapsed = mask({ expiresAt: T });
      await store.createMask(lapsed);
      expect(await store.closeMask(lapsed.maskId, T)).toBeUndefined();
      const missing = unique('mask');
      expect(await store.closeMask(missing, T)).toBeUndefined();
      expect(await store.getMask(missing)).toBeUndefined();
    });
  });

  describe('agent quota slots', () => {
    it('a free slot is claimed; its holder may claim its lease again; another holder finds it taken', async () => {
      const slotKey = unique('owner#independent#1');
      expect(await store.claimSlot(slotKey, 'request-1', T + MINUTE, T)).toEqual({ outcome: 'claimed' });
      expect(await store.claimSlot(slotKey, 'request-1', T + 2 * MINUTE, T)).toEqual({ outcome: 'claimed' });
      expect(await store.claimSlot(slotKey, 'request-2', T + MINUTE, T)).toEqual({ outcome: 'taken' });
    });

    it('of parallel claims of one free slot exactly one wins', async () => {
      const slotKey = unique('owner#dependent#1');
      const outcomes = await Promise.all(
        [1, 2, 3, 4, 5].map((n) => store.claimSlot(slotKey, `request-${n}`, T + MINUTE, T)),
      );
      expect(outcomes.filter((claim) => claim.outcome === 'claimed')).toHaveLength(1);
      expect(outcomes.filter((claim) => claim.outcome === 'taken')).toHaveLength(4);
    });

    it('a confirmed slot is never claimed again, not even by its holder, nor released', async () => {
      const slotKey = unique('owner#independent#1');
      await store.claimSlot(slotKey, 'request-1', T + MINUTE, T);
      expect(await store.confirmSlot(slotKey, 'request-2')).toBe(false);
      expect(await store.confirmSlot(slotKey, 'request-1')).toBe(true);
      expect(await store.claimSlot(slotKey, 'request-1', T + MINUTE, T)).toEqual({ outcome: 'taken' });
      expect(await store.claimSlot(slotKey, 'request-2', T + DAY, T + DAY)).toEqual({ outcome: 'taken' });
      await store.releaseSlot(slotKey, 'request-1');
      expect(await store.claimSlot(slotKey, 'request-2', T + MINUTE, T)).toEqual({ outcome: 'taken' });
      expect(await store.confirmSlot(unique('slot'), 'request-1')).toBe(false);
    });

    it('a lapsed lease is reported with the slot as read; of parallel take-overs one wins, and a stale read loses', async () => {
      const slotKey = unique('owner#independent#2');
      await store.claimSlot(slotKey, 'crashed', T + MINUTE, T);
      expect(await store.claimSlot(slotKey, 'retry', T + 2 * MINUTE, T + MINUTE - 1)).toEqual({ outcome: 'taken' });
      const claim = await store.claimSlot(slotKey, 'retry', T + 2 * MINUTE, T + MINUTE);
      expect(claim).toEqual({ outcome: 'lapsed', slot: { slotKey, holder: 'crashed', leaseUntil: T + MINUTE } });
      if (claim.outcome !== 'lapsed') throw new Error('unreachable');
      const results = await Promise.all(
        [1, 2, 3].map((n) => store.takeOverSlot(claim.slot, `retry-${n}`, T + 2 * MINUTE)),
      );
      expect(wins(results)).toBe(1);
      expect(await store.takeOverSlot(claim.slot, 'late', T + 3 * MINUTE)).toBe(false);
      expect(await store.claimSlot(slotKey, `retry-${results.indexOf(true) + 1}`, T + 3 * MINUTE, T + MINUTE)).toEqual({
        outcome: 'claimed',
      });
    });

    it('releaseSlot frees a leased slot for its holder only', async () => {
      const slotKey = unique('owner#dependent#2');
      await store.claimSlot(slotKey, 'request-1', T + MINUTE, T);
      await store.releaseSlot(slotKey, 'request-2');
      expect(await store.claimSlot(slotKey, 'request-2', T + MINUTE, T)).toEqual({ outcome: 'taken' });
      await store.releaseSlot(slotKey, 'request-1');
      expect(await store.claimSlot(slotKey, 'request-2', T + MINUTE, T)).toEqual({ outcome: 'claimed' });
    });
  });

  describe('idempotency records of create calls', () => {
    it('beginRequest starts a request once; every other call, parallel ones too, gets the record as stored', async () => {
      const first = requestRecord();
      const outcomes = await Promise.all(
        [1, 2, 3, 4].map((n) => store.beginRequest({ ...first, resourceId: `resource-${n}` })),
      );
      expect(outcomes.filter((claim) => claim.outcome === 'started')).toHaveLength(1);
      const winner = outcomes.findIndex((claim) => claim.outcome === 'started') + 1;
      for (const claim of outcomes.filter((each) => each.outcome === 'exists')) {
        expect(claim).toEqual({ outcome: 'exists', record: { ...first, resourceId: `resource-${winner}` } });
      }
    });

    it('takeOverRequest takes a record exactly as read: a new lease, the resource id kept if it has one, set if not', async () => {
      const named = requestRecord();
      await store.beginRequest(named);
      const results = await Promise.all(
        [1, 2, 3].map((n) => store.takeOverRequest(named, T + 2 * MINUTE, `other-${n}`)),
      );
      expect(results.filter(Boolean)).toEqual([{ ...named, leaseUntil: T + 2 * MINUTE }]);
      expect(await store.takeOverRequest(named, T + 3 * MINUTE, 'late')).toBeUndefined();
      const unnamed = requestRecord({ resourceId: undefined });
      await store.beginRequest(unnamed);
      expect(await store.takeOverRequest(unnamed, T + 2 * MINUTE, 'chosen')).toEqual({
        ...unnamed,
        leaseUntil: T + 2 * MINUTE,
        resourceId: 'chosen',
      });
      const done = requestRecord({ state: 'done' });
      await store.beginRequest(done);
      expect(await store.takeOverRequest(done, T + 2 * MINUTE, 'x')).toBeUndefined();
    });

    it('completeRequest marks done only the record that names the resource', async () => {
      const pending = requestRecord();
      await store.beginRequest(pending);
      await store.completeRequest(pending.requestKey, 'other');
      expect(await store.beginRequest(pending)).toEqual({ outcome: 'exists', record: pending });
      await store.completeRequest(pending.requestKey, pending.resourceId!);
      expect(await store.beginRequest(pending)).toEqual({ outcome: 'exists', record: { ...pending, state: 'done' } });
      const missing = unique('request');
      await store.completeRequest(missing, 'x');
      expect(await stored('requests', { requestKey: missing })).toBeUndefined();
    });

    it('releaseRequest ends only the lease named; abandonRequest deletes only a pending record under the lease named', async () => {
      const pending = requestRecord();
      await store.beginRequest(pending);
      await store.releaseRequest(pending.requestKey, T + 5, T);
      await store.abandonRequest(pending.requestKey, T + 5);
      expect(await store.beginRequest(pending)).toEqual({ outcome: 'exists', record: pending });
      await store.releaseRequest(pending.requestKey, pending.leaseUntil, T + 1);
      expect(await store.beginRequest(pending)).toEqual({
        outcome: 'exists',
        record: { ...pending, leaseUntil: T + 1 },
      });
      await store.abandonRequest(pending.requestKey, T + 1);
      expect(await store.beginRequest(pending)).toEqual({ outcome: 'started' });
      const done = requestRecord({ state: 'done' });
      await store.beginRequest(done);
      await store.abandonRequest(done.requestKey, done.leaseUntil);
      await store.releaseRequest(done.requestKey, done.leaseUntil, T);
      expect(await store.beginRequest(done)).toEqual({ outcome: 'exists', record: done });
    });
  });

  describe('aliases', () => {
    it('claimAlias claims a free name once; takeOverAlias replaces only the claim as read; deleteAlias removes only its own claim', async () => {
      const first = alias();
      expect(await store.claimAlias(first)).toBe(true);
      expect(await store.claimAlias({ ...first, claim: 'other' })).toBe(false);
      expect(await store.getAlias(first.alias)).toEqual(first);
      const next = alias({ alias: first.alias });
      expect(await store.takeOverAlias(next, { svcnumId: first.svcnumId, claim: 'stale' })).toBe(false);
      const takers = await Promise.all(
        [1, 2, 3].map((n) => store.takeOverAlias({ ...next, claim: `claim-${n}` }, first)),
      );
      expect(wins(takers)).toBe(1);
      const holder = `claim-${takers.indexOf(true) + 1}`;
      expect(await store.deleteAlias(first.alias, first.claim)).toBe(false);
      expect(await store.deleteAlias(first.alias, holder)).toBe(true);
      expect(await store.getAlias(first.alias)).toBeUndefined();
      expect(await store.deleteAlias(first.alias, holder)).toBe(false);
      expect(await store.takeOverAlias(alias({ alias: unique('alias') }), first)).toBe(false);
    });

    it('addAliasClaim counts exactly under concurrency: an entity never lists more than max', async () => {
      const entity = user({ accountType: 'programmable' });
      await store.createUser(entity);
      const members = Array.from({ length: 6 }, (_, n) => aliasMember(`name${n}`, unique('claim')));
      const results = await Promise.all(members.map((member) => store.addAliasClaim(entity.svcnumId, member, 3)));
      expect(wins(results)).toBe(3);
      const listed = (await store.getAliasedEntity(entity.svcnumId))!;
      expect(new Set(listed.aliasClaims)).toEqual(new Set(members.filter((_, n) => results[n])));
      expect(listed.entity).toEqual(entity);
    });

    it('addAliasClaim: a member listed already is no new one, even at the limit; a missing entity lists nothing', async () => {
      const entity = user({ accountType: 'ai_agent' });
      await store.createUser(entity);
      const [one, two] = [aliasMember('one', 'c1'), aliasMember('two', 'c2')];
      expect(await store.addAliasClaim(entity.svcnumId, one, 1)).toBe(true);
      expect(await store.addAliasClaim(entity.svcnumId, one, 1)).toBe(true);
      expect(await store.addAliasClaim(entity.svcnumId, two, 1)).toBe(false);
      expect((await store.getAliasedEntity(entity.svcnumId))?.aliasClaims).toEqual([one]);
      const missing = unique('entity');
      expect(await store.addAliasClaim(missing, one, 5)).toBe(false);
      expect(await store.getUser(missing)).toBeUndefined();
    });

    it('removeAliasClaims removes members; an entity with none left lists [] and stays as it was', async () => {
      const entity = user({ accountType: 'programmable' });
      await store.createUser(entity);
      expect(await store.getAliasedEntity(entity.svcnumId)).toEqual({ entity, aliasClaims: [] });
      const [one, two] = [aliasMember('one', 'c1'), aliasMember('two', 'c2')];
      await store.addAliasClaim(entity.svcnumId, one, 5);
      await store.addAliasClaim(entity.svcnumId, two, 5);
      await store.removeAliasClaims(entity.svcnumId, [one, aliasMember('never', 'c3')]);
      expect((await store.getAliasedEntity(entity.svcnumId))?.aliasClaims).toEqual([two]);
      await store.removeAliasClaims(entity.svcnumId, [two]);
      expect(await store.getAliasedEntity(entity.svcnumId)).toEqual({ entity, aliasClaims: [] });
      // The commit counts from zero again.
      expect(await store.addAliasClaim(entity.svcnumId, one, 1)).toBe(true);
      await store.removeAliasClaims(unique('entity'), [one]);
      expect(await store.getAliasedEntity(unique('entity'))).toBeUndefined();
    });
  });

  describe('the discover index', () => {
    it("listCapability pages one capability's entries in svcnum_id order; indexCapabilities is idempotent", async () => {
      const capability = unique('capability');
      const ids = ordered(unique('agent'), 5);
      for (const svcnumId of [...ids].reverse())
        await store.indexCapabilities(svcnumId, [capability, unique('capability')], T);
      await store.indexCapabilities(ids[0]!, [capability], T + 1);
      const first = await store.listCapability(capability, 3);
      expect(first.items.map((entry) => entry.svcnumId)).toEqual(ids.slice(0, 3));
      expect(first.nextKey).toEqual({ capability, svcnumId: ids[2] });
      expect(first.items[0]).toEqual({ capability, svcnumId: ids[0], createdAt: T + 1 });
      // discover continues from a key it builds itself (capability and the last svcnum_id read).
      expect(
        (await store.listCapability(capability, 3, { capability, svcnumId: ids[2] })).items.map(
          (entry) => entry.svcnumId,
        ),
      ).toEqual(ids.slice(3));
      expect(await store.listCapability(unique('capability'), 3)).toEqual({ items: [] });
    });

    it("getEntities reads more than one BatchGetItem's 100 keys, each once, leaving out missing ones", async () => {
      const entities = ordered(unique('agent'), 130).map((svcnumId) => user({ svcnumId, accountType: 'ai_agent' }));
      await Promise.all(entities.map((entity) => store.createUser(entity)));
      const ids = entities.map((entity) => entity.svcnumId);
      sent.length = 0;
      const found = await store.getEntities([...ids, ids[0]!, ids[129]!, unique('missing')]);
      expect(found).toHaveLength(130);
      expect(new Map(found.map((entity) => [entity.svcnumId, entity]))).toEqual(
        new Map(entities.map((entity) => [entity.svcnumId, entity])),
      );
      expect(sent).toEqual(['BatchGetItemCommand', 'BatchGetItemCommand']);
      expect(await store.getEntities([])).toEqual([]);
    });
  });

  describe('message inboxes', () => {
    it('nextSeq hands out 1, 2, 3 … per inbox, without gaps or repeats among parallel callers', async () => {
      const inbox = unique('inbox');
      expect(await store.nextSeq(inbox)).toBe(1);
      const parallel = await Promise.all(Array.from({ length: 9 }, () => store.nextSeq(inbox)));
      expect([...parallel].sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(await store.nextSeq(unique('inbox'))).toBe(1);
    });

    it('nextSeq hands out a block of `count` sequences and returns its first; blocks of parallel callers never overlap', async () => {
      const inbox = unique('inbox');
      expect(await store.nextSeq(inbox, 3)).toBe(1);
      expect(await store.nextSeq(inbox)).toBe(4);
      const blocks = await Promise.all(
        [5, 1, 7, 2].map(async (count) => ({ first: await store.nextSeq(inbox, count), count })),
      );
      const handedOut = blocks.flatMap(({ first, count }) =>
        Array.from({ length: count }, (_, index) => first + index),
      );
      expect(handedOut.sort((a, b) => a - b)).toEqual(Array.from({ length: 15 }, (_, index) => index + 5));
    });

    it('appendMessage writes once per sequence; a sequence tombstoned refuses its message, and a written one its tombstone', async () => {
      const inbox = unique('inbox');
      expect(await store.appendMessage(message(inbox, 1), T + DAY)).toBe(true);
      expect(await store.appendMessage({ ...message(inbox, 1), text: 'again' }, T + DAY)).toBe(false);
      expect(await store.tombstone(inbox, 1, T + DAY)).toBe(false);
      expect(await store.tombstone(inbox, 2, T + DAY)).toBe(true);
      expect(await store.appendMessage(message(inbox, 2), T + DAY)).toBe(false);
      const racers = await Promise.all([
        store.appendMessage(message(inbox, 3), T + DAY),
        store.tombstone(inbox, 3, T + DAY),
      ]);
      expect(wins(racers)).toBe(1);
    });

    it('readInbox reads after a sequence in numeric order (9 < 10 < 100), at most `limit`, tombstones included, its own writes at once', async () => {
      const inbox = unique('inbox');
      const messages = [1, 9, 10, 11, 100].map((seq) => message(inbox, seq));
      for (const written of [...messages].reverse()) await store.appendMessage(written, T + DAY);
      await store.tombstone(inbox, 2, T + DAY);
      await store.appendMessage(message(unique('inbox'), 5), T + DAY);
      expect(await store.readInbox(inbox, 0, 10)).toEqual([
        messages[0],
        { inboxId: inbox, seq: 2, tombstone: true },
        ...messages.slice(1),
      ]);
      expect(await store.readInbox(inbox, 9, 2)).toEqual(messages.slice(2, 4));
      expect(await store.readInbox(inbox, 100, 10)).toEqual([]);
    });

    it('lastSeqBefore answers the highest sequence accepted before a time, newest first across pages, passing over tombstones (0 for none)', async () => {
      const inbox = unique('inbox');
      // Sequence n accepted at T + n, except 40 (a tombstone); 60 entries: more than one page of 25.
      for (let seq = 1; seq <= 60; seq++) {
        if (seq === 40) await store.tombstone(inbox, seq, T + DAY);
        else await store.appendMessage({ ...message(inbox, seq), acceptedAt: T + seq }, T + DAY);
      }
      expect(await store.lastSeqBefore(inbox, T + 61)).toBe(60);
      expect(await store.lastSeqBefore(inbox, T + 41)).toBe(39);
      expect(await store.lastSeqBefore(inbox, T + 10)).toBe(9);
      expect(await store.lastSeqBefore(inbox, T + 1)).toBe(0);
      expect(await store.lastSeqBefore(unique('inbox'), T + 100)).toBe(0);
    });

    it('inboxHeads answers the last sequence of each inbox (0 for a new one) across batches of 100, each inbox once', async () => {
      const inboxes = ordered(unique('inbox'), 105);
      await Promise.all(
        inboxes
          .slice(0, 103)
          .map((inbox, n) =>
            n % 2 ? Promise.all([store.nextSeq(inbox), store.nextSeq(inbox)]) : store.nextSeq(inbox),
          ),
      );
      const heads = await store.inboxHeads([...inboxes, inboxes[0]!, inboxes[104]!]);
      expect(heads.size).toBe(105);
      for (const [n, inbox] of inboxes.entries()) expect(heads.get(inbox)).toBe(n >= 103 ? 0 : n % 2 ? 2 : 1);
      expect(await store.inboxHeads([])).toEqual(new Map());
    });
  });
});
