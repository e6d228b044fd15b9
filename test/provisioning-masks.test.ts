import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { documentClient } from '../core/adapters/dynamo-schema';
import { DAY, HOUR, MINUTE, SECOND } from '../core/kernel/config';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import { DomainError } from '../core/kernel/errors';
import { tableNames } from '../core/tables';
import { localDynamoClient } from '../local/embedded-dynamo';
import { LOCAL_TABLE_PREFIX } from '../local/runner';
import { NumberState } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  CloseMaskRequest,
  CreateMaskRequest,
  GetMaskRequest,
  ListMasksRequest,
  type ListMasksResponse,
  type Mask,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ListNumbersRequest,
  type ListNumbersResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import {
  call,
  callerOf,
  clientCredentialsToken,
  currentToken,
  provisioningApp,
  rejects,
  seedPool,
  type ProvisioningApp,
} from './support/grpc';
import { ROOMY_POOL_LIMITS, startTestService, type TestService } from './support/service';

// MaskService end to end over gRPC on loopback (mask_service.proto is the contract). The pool
// uses the prefix 73. The tests run in order on one service whose clock only moves forward;
// the cool-off is one day here so that a mask number's return to the pool can be shown.

const PREFIX = '73';
const SEEDED = 60;
const COOL_OFF = DAY;
const TTL_MIN = 60;
const TTL_MAX = 2_592_000;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const NUMBER = new RegExp(`^${PREFIX}\\d{9}$`);
const NO_FREE_NUMBER = /no number is free in the pool/;
/** A well-formed id that names nothing. */
const NOBODY = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

let service: TestService;
let app: ProvisioningApp; // business account: prov:numbers prov:masks prov:agents
let other: ProvisioningApp; // another business account
let person: ProvisioningApp; // person account: prov:agents only
let alice: string; // participants: people (no password, so no scrypt)
let bob: string;
let carol: string;

beforeAll(async () => {
  service = await startTestService({
    provisioning: { ...defaultProvisioningConfig, ...ROOMY_POOL_LIMITS, coolOff: COOL_OFF },
  });
  await seedPool(service, PREFIX, SEEDED);
  [app, other, person] = await Promise.all([
    provisioningApp(service),
    provisioningApp(service),
    provisioningApp(service, { accountType: 'person' }),
  ]);
  [alice, bob, carol] = await Promise.all([someone(), someone(), someone()]);
});
afterAll(async () => {
  for (const each of [app, other, person]) each?.close();
  raw?.destroy();
  await service?.close();
});

async function someone(): Promise<string> {
  return (await service.core.registration.createUser({ accountType: 'person' })).svcnumId;
}

// ---- clock: moved by hand; frozen at an exact instant for boundaries, then released forward ----

afterEach(() => service.clock.release());

// ---- calls ----

const bearer = (of: ProvisioningApp) => currentToken(service, of);

type Input<T extends { fromPartial: (object: never) => unknown }> = Parameters<T['fromPartial']>[0];

async function createMask(request: Input<typeof CreateMaskRequest>, as = app) {
  return call<CreateMaskRequest, Mask>(
    as.masks,
    'createMask',
    CreateMaskRequest.fromPartial(request),
    await bearer(as),
  );
}
/** A valid mask between alice and bob, with fields overridden. */
const maskOf = (request: Input<typeof CreateMaskRequest> = {}, as = app) =>
  createMask({ ttlSeconds: 3600, participantA: alice, participantB: bob, scope: 'delivery', ...request }, as);
async function getMask(maskId: string, as = app) {
  return call<GetMaskRequest, Mask>(as.masks, 'getMask', GetMaskRequest.fromPartial({ maskId }), await bearer(as));
}
async function listMasks(request: Input<typeof ListMasksRequest> = {}, as = app) {
  return call<ListMasksRequest, ListMasksResponse>(
    as.masks,
    'listMasks',
    ListMasksRequest.fromPartial(request),
    await bearer(as),
  );
}
async function closeMask(maskId: string, as = app) {
  return call<CloseMaskRequest, Mask>(
    as.masks,
    'closeMask',
    CloseMaskRequest.fromPartial({ maskId }),
    await bearer(as),
  );
}

/** Every page of ListMasks, following next_page_token. */
async function listAll(pageSize: number, as = app) {
  const pages: Mask[][] = [];
  let pageToken = '';
  do {
    const page = await listMasks({ pageSize, pageToken }, as);
    pages.push(page.masks);
    pageToken = page.nextPageToken;
    expect(pages.length).toBeLessThan(50);
  } while (pageToken);
  return pages;
}

const lifecycle = () => service.core.provisioning.lifecycle;

/** Direct reads of stored items (what the store port does not expose). */
let raw: DynamoDBClient | undefined;
const db = () => {
  raw ??= localDynamoClient(service.dynamoEndpoint);
  return documentClient(raw);
};
const tables = tableNames(LOCAL_TABLE_PREFIX);

/** How many masks the app's account has (all pages). */
const maskCount = async (as = app) => (await listAll(100, as)).flat().length;

describe('CreateMask', () => {
  it('creates an ACTIVE mask with a number from the pool that expires ttl_seconds after creation', async () => {
    const at = service.clock.freeze();
    const mask = await createMask({
      ttlSeconds: 3600,
      participantA: alice,
      participantB: bob,
      scope: 'delivery.order-1234',
    });
    expect(mask).toEqual({
      maskId: expect.stringMatching(ULID),
      svcnum: expect.stringMatching(NUMBER),
      participantA: alice,
      participantB: bob,
      scope: 'delivery.order-1234',
      state: NumberState.NUMBER_STATE_ACTIVE,
      createTime: new Date(at),
      expireTime: new Date(at + HOUR),
    });
    expect(await getMask(mask.maskId)).toEqual(mask);
    // The mask number is held by the mask and rejoins the pool after expiry and cool-off.
    expect(await lifecycle().show(mask.svcnum)).toMatchObject({
      state: 'active',
      holder: mask.maskId,
      entity_type: 'mask',
      cool_off_until: new Date(at + HOUR + COOL_OFF).toISOString(),
    });
  });

  it('bridges any two existing, active entities (a programmable number too), each mask with its own number', async () => {
    const number = await service.core.provisioning.numbers.provision(callerOf(app), { displayName: 'Dispatch' });
    const masks = await Promise.all([
      maskOf({ participantA: number.svcnumId, participantB: alice }),
      maskOf({ participantA: number.svcnumId, participantB: bob }),
    ]);
    expect(masks.map((mask) => mask.participantA)).toEqual([number.svcnumId, number.svcnumId]);
    expect(new Set(masks.map((mask) => mask.svcnum)).size).toBe(2);
    expect(masks[0]!.svcnum).not.toBe(number.svcnum);
  });

  it('accepts ttl_seconds from 60 to 2592000 and refuses anything outside with INVALID_ARGUMENT', async () => {
    const before = await maskCount();
    for (const ttlSeconds of [0, -60, TTL_MIN - 1, TTL_MAX + 1, 10 ** 12]) {
      await rejects(
        maskOf({ ttlSeconds }),
        status.INVALID_ARGUMENT,
        /ttl_seconds must be an integer from 60 to 2592000/,
      );
    }
    expect(await maskCount()).toBe(before);
    for (const ttlSeconds of [TTL_MIN, TTL_MAX]) {
      const at = service.clock.freeze();
      const mask = await maskOf({ ttlSeconds });
      expect(mask.expireTime!.getTime()).toBe(at + ttlSeconds * SECOND);
      service.clock.release();
    }
  });

  it('refuses empty, malformed and identical participants with INVALID_ARGUMENT', async () => {
    await rejects(maskOf({ participantA: '' }), status.INVALID_ARGUMENT, /participant_a is required/);
    await rejects(maskOf({ participantB: '' }), status.INVALID_ARGUMENT, /participant_b is required/);
    await rejects(maskOf({ participantA: 'alice' }), status.INVALID_ARGUMENT, /participant_a must be a svcnum_id/);
    await rejects(
      maskOf({ participantB: alice.toLowerCase() }),
      status.INVALID_ARGUMENT,
      /participant_b must be a svcnum_id/,
    );
    await rejects(
      maskOf({ participantA: alice, participantB: alice }),
      status.INVALID_ARGUMENT,
      /participant_a and participant_b must be different/,
    );
  });

  it('refuses a participant that does not exist with NOT_FOUND, naming it', async () => {
    const before = await maskCount();
    await rejects(
      maskOf({ participantA: NOBODY }),
      status.NOT_FOUND,
      new RegExp(`participant_a ${NOBODY} does not exist`),
    );
    await rejects(
      maskOf({ participantB: NOBODY }),
      status.NOT_FOUND,
      new RegExp(`participant_b ${NOBODY} does not exist`),
    );
    expect(await maskCount()).toBe(before);
  });

  it('refuses a participant that is not active with FAILED_PRECONDITION: a disabled user, an unfinished registration, a suspended number', async () => {
    const before = await maskCount();
    const disabled = await someone();
    await service.core.registration.disableUser(disabled);
    await rejects(
      maskOf({ participantB: disabled }),
      status.FAILED_PRECONDITION,
      new RegExp(`participant_b ${disabled} is not active`),
    );
    const unfinished = (await service.core.registration.createUser({ setupRequired: true })).svcnumId;
    await rejects(
      maskOf({ participantA: unfinished }),
      status.FAILED_PRECONDITION,
      new RegExp(`participant_a ${unfinished} is not active`),
    );
    const number = await service.core.provisioning.numbers.provision(callerOf(app), { displayName: 'Suspended' });
    await lifecycle().suspend(number.svcnum);
    await rejects(
      maskOf({ participantA: number.svcnumId }),
      status.FAILED_PRECONDITION,
      /participant_a .* is not active/,
    );
    await lifecycle().reactivate(number.svcnum);
    expect((await maskOf({ participantA: number.svcnumId })).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    expect(await maskCount()).toBe(before + 1);
  });

  it('refuses a scope that breaks ^[a-z][a-z0-9_.-]{0,63}$ with INVALID_ARGUMENT', async () => {
    for (const scope of ['', 'Delivery', '1st', '-x', 'two words', 'ümlaut', 'a/b', `a${'b'.repeat(64)}`]) {
      await rejects(
        maskOf({ scope }),
        status.INVALID_ARGUMENT,
        /scope is required: 1-64 characters of \[a-z0-9_.-\], starting with a letter/,
      );
    }
    for (const scope of ['a', 'ride_share.trip-42', `a${'b'.repeat(63)}`])
      expect((await maskOf({ scope })).scope).toBe(scope);
  });

  it('returns the same mask for a retry with the same request_id and request; ALREADY_EXISTS for a different request', async () => {
    const requestId = 'a3f4d0e6-5b7c-4c1d-9e2f-0a1b2c3d4e5f';
    const first = await maskOf({ requestId, scope: 'retry' });
    service.clock.advance(SECOND);
    const retry = await maskOf({ requestId, scope: 'retry' });
    expect(retry).toEqual(first);
    expect((await listAll(100)).flat().filter((mask) => mask.scope === 'retry')).toHaveLength(1);
    const different = /request_id was already used for a different request/;
    await rejects(maskOf({ requestId, scope: 'retry', ttlSeconds: 7200 }), status.ALREADY_EXISTS, different);
    await rejects(
      maskOf({ requestId, scope: 'retry', participantA: bob, participantB: alice }),
      status.ALREADY_EXISTS,
      different,
    );
    await rejects(maskOf({ requestId, scope: 'other' }), status.ALREADY_EXISTS, different);
    // request_ids are per account and per method.
    const theirs = await maskOf({ requestId, scope: 'retry' }, other);
    expect(theirs.maskId).not.toBe(first.maskId);
    await service.core.provisioning.numbers.provision(callerOf(app), { requestId: 'used-by-provision' });
    expect((await maskOf({ requestId: 'used-by-provision' })).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
  });

  it('does not burn a request_id on a failed call', async () => {
    const disabled = await someone();
    await service.core.registration.disableUser(disabled);
    await rejects(maskOf({ requestId: 'after-failure', participantB: disabled }), status.FAILED_PRECONDITION);
    await rejects(maskOf({ requestId: 'after-failure', participantB: NOBODY }), status.NOT_FOUND);
    // The failed calls left no record: the key is free for a request that succeeds.
    const mask = await maskOf({ requestId: 'after-failure', participantB: carol });
    expect(mask.participantB).toBe(carol);
    expect(await maskOf({ requestId: 'after-failure', participantB: carol })).toEqual(mask);
  });

  it('refuses a malformed request_id with INVALID_ARGUMENT', async () => {
    await rejects(maskOf({ requestId: 'r'.repeat(65) }), status.INVALID_ARGUMENT, /request_id must be 1-64 characters/);
    await rejects(maskOf({ requestId: 'white space' }), status.INVALID_ARGUMENT, /request_id/);
    expect((await maskOf({ requestId: 'r'.repeat(64) })).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
  });
});

describe('GetMask', () => {
  it("returns the caller's own mask; another account's is NOT_FOUND exactly like one that does not exist", async () => {
    const mine = await maskOf({ scope: 'mine' });
    expect(await getMask(mine.maskId)).toEqual(mine);
    const theirs = await maskOf({ participantA: carol, scope: 'secret-pair' }, other);
    const hidden = await rejects(getMask(theirs.maskId), status.NOT_FOUND);
    const missing = await rejects(getMask(NOBODY), status.NOT_FOUND);
    expect(hidden.details.replace(theirs.maskId, '<id>')).toBe(missing.details.replace(NOBODY, '<id>'));
    for (const secret of [carol, bob, theirs.svcnum, 'secret-pair']) expect(hidden.details).not.toContain(secret);
    // A svcnum_id of an entity is not a mask id.
    await rejects(getMask(alice), status.NOT_FOUND, /no mask/);
  });

  it('refuses an empty or malformed mask_id with INVALID_ARGUMENT', async () => {
    await rejects(getMask(''), status.INVALID_ARGUMENT, /mask_id is required/);
    await rejects(getMask('mask-1'), status.INVALID_ARGUMENT, /mask_id must be/);
    await rejects(getMask(NOBODY.toLowerCase()), status.INVALID_ARGUMENT, /mask_id must be/);
  });
});

describe('ListMasks', () => {
  let lister: ProvisioningApp;
  let created: Mask[];
  beforeAll(async () => {
    lister = await provisioningApp(service);
    created = [];
    for (let index = 0; index < 5; index++) {
      // Different lifetimes: the second one expires while the others are still active.
      created.push(await maskOf({ scope: `list.${index}`, ttlSeconds: index === 1 ? 60 : 3600 }, lister));
      service.clock.advance(SECOND);
    }
  });
  afterAll(() => lister?.close());

  it('pages through all masks with page_size and next_page_token: each exactly once, oldest first', async () => {
    const pages = await listAll(2, lister);
    expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual(created);
    const times = pages.flat().map((mask) => mask.createTime!.getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // A page that ends the list carries no token; 0 means the default of 50; above 100 means 100.
    for (const pageSize of [5, 0, 1000])
      expect(await listMasks({ pageSize }, lister)).toEqual({ masks: created, nextPageToken: '' });
  });

  it("lists only the caller account's masks", async () => {
    const theirs = (await listAll(100, app)).flat().map((mask) => mask.maskId);
    expect(theirs.length).toBeGreaterThan(0);
    for (const mask of created) expect(theirs).not.toContain(mask.maskId);
  });

  it('lists masks whose TTL elapsed as EXPIRED, next to the active ones', async () => {
    const at = created[1]!.expireTime!.getTime();
    // At the later of `at` and now (freezing at `now` itself: one reading).
    if (at > service.clock.now()) service.clock.freeze(at);
    else service.clock.freeze();
    const masks = (await listAll(2, lister)).flat();
    expect(masks.map((mask) => mask.maskId)).toEqual(created.map((mask) => mask.maskId));
    expect(masks.map((mask) => mask.state)).toEqual([1, 5, 1, 1, 1].map((state) => state as NumberState));
    expect(masks[1]).toEqual({ ...created[1], state: NumberState.NUMBER_STATE_EXPIRED });
  });

  it('refuses a negative page_size with INVALID_ARGUMENT', async () => {
    await rejects(listMasks({ pageSize: -5 }, lister), status.INVALID_ARGUMENT, /page_size/);
  });

  it('refuses a page_token of another account, of another list, or garbage with INVALID_ARGUMENT', async () => {
    const notValid = /page_token is not valid for this call/;
    const theirs = await listMasks({ pageSize: 1 }, lister);
    expect(theirs.nextPageToken).not.toBe('');
    await rejects(listMasks({ pageToken: theirs.nextPageToken }, app), status.INVALID_ARGUMENT, notValid);
    await rejects(listMasks({ pageToken: '%%%' }, lister), status.INVALID_ARGUMENT, notValid);
    const forged = (key: object) => Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
    await rejects(
      listMasks({ pageToken: forged({ ownerId: lister.owner.svcnumId }) }, lister),
      status.INVALID_ARGUMENT,
      notValid,
    );
    await rejects(
      listMasks({ pageToken: forged({ ownerId: lister.owner.svcnumId, maskId: 7 }) }, lister),
      status.INVALID_ARGUMENT,
      notValid,
    );
    // A page_token of ListNumbers (same account) is not one of ListMasks.
    for (let index = 0; index < 2; index++) await service.core.provisioning.numbers.provision(callerOf(lister), {});
    const numbers = await call<ListNumbersRequest, ListNumbersResponse>(
      lister.numbers,
      'listNumbers',
      ListNumbersRequest.fromPartial({ pageSize: 1 }),
      await bearer(lister),
    );
    expect(numbers.nextPageToken).not.toBe('');
    await rejects(listMasks({ pageToken: numbers.nextPageToken }, lister), status.INVALID_ARGUMENT, notValid);
  });
});

describe('mask expiry', () => {
  it('is ACTIVE until the last millisecond and EXPIRED at exactly ttl_seconds, whatever DynamoDB TTL does', async () => {
    const at = service.clock.freeze();
    const mask = await maskOf({ ttlSeconds: 60, scope: 'expiry', requestId: 'expiry-1' });
    expect(mask.expireTime!.getTime()).toBe(at + 60 * SECOND);

    service.clock.freeze(at + 60 * SECOND - 1);
    expect((await getMask(mask.maskId)).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    expect((await lifecycle().show(mask.svcnum)).state).toBe('active');
    expect((await listAll(100)).flat().find((each) => each.maskId === mask.maskId)?.state).toBe(
      NumberState.NUMBER_STATE_ACTIVE,
    );

    service.clock.freeze(at + 60 * SECOND);
    expect(await getMask(mask.maskId)).toEqual({ ...mask, state: NumberState.NUMBER_STATE_EXPIRED });
    // The operator sees its number cooling off.
    expect((await lifecycle().show(mask.svcnum)).state).toBe('quarantined');
    expect((await listAll(100)).flat().find((each) => each.maskId === mask.maskId)?.state).toBe(
      NumberState.NUMBER_STATE_EXPIRED,
    );
    // A retry of the create answers with the mask as it is now.
    expect((await maskOf({ ttlSeconds: 60, scope: 'expiry', requestId: 'expiry-1' })).state).toBe(
      NumberState.NUMBER_STATE_EXPIRED,
    );
    // The stored item is still there and its DynamoDB TTL lies far ahead: expiry is enforced on read.
    const item = (await db().send(new GetCommand({ TableName: tables.masks, Key: { maskId: mask.maskId } }))).Item!;
    expect(item.expiresAt).toBe(at + 60 * SECOND);
    expect(Number(item.ttl) * 1000).toBeGreaterThan(at + 60 * SECOND + DAY);
  });
});

describe('CloseMask', () => {
  it('expires a mask at once with expire_time set to the closing time; closing again returns it unchanged', async () => {
    const mask = await maskOf({ ttlSeconds: 86_400, scope: 'close' });
    service.clock.advance(MINUTE);
    const closedAt = service.clock.freeze();
    const closed = await closeMask(mask.maskId);
    expect(closed).toEqual({ ...mask, state: NumberState.NUMBER_STATE_EXPIRED, expireTime: new Date(closedAt) });
    expect(await getMask(mask.maskId)).toEqual(closed);
    // Its number's cool-off starts now.
    expect(await lifecycle().show(mask.svcnum)).toMatchObject({
      state: 'quarantined',
      holder: mask.maskId,
      cool_off_until: new Date(closedAt + COOL_OFF).toISOString(),
    });
    service.clock.release();
    service.clock.advance(HOUR);
    expect(await closeMask(mask.maskId)).toEqual(closed);
    expect(await getMask(mask.maskId)).toEqual(closed);
    expect((await lifecycle().show(mask.svcnum)).cool_off_until).toBe(new Date(closedAt + COOL_OFF).toISOString());
  });

  it('returns a mask whose TTL already elapsed unchanged, with its original expire_time', async () => {
    const mask = await maskOf({ ttlSeconds: 60, scope: 'lapsed' });
    service.clock.advance(2 * MINUTE);
    const expired = { ...mask, state: NumberState.NUMBER_STATE_EXPIRED };
    expect(await closeMask(mask.maskId)).toEqual(expired);
    expect(await getMask(mask.maskId)).toEqual(expired);
  });

  it("refuses another account's mask with NOT_FOUND and leaves it active; an empty or malformed mask_id with INVALID_ARGUMENT", async () => {
    const theirs = await maskOf({ scope: 'theirs' }, other);
    await rejects(closeMask(theirs.maskId), status.NOT_FOUND, new RegExp(`no mask ${theirs.maskId} in your account`));
    expect((await getMask(theirs.maskId, other)).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    await rejects(closeMask(NOBODY), status.NOT_FOUND, /no mask/);
    await rejects(closeMask(''), status.INVALID_ARGUMENT, /mask_id is required/);
    await rejects(closeMask('42'), status.INVALID_ARGUMENT, /mask_id must be/);
  });

  it('is the only way to end a mask number: the operator lifecycle refuses mask numbers', async () => {
    const mask = await maskOf({ scope: 'operator' });
    for (const operation of [lifecycle().suspend, lifecycle().reactivate, lifecycle().deactivate]) {
      await expect(operation(mask.svcnum)).rejects.toMatchObject({
        kind: 'failed_precondition',
        message: expect.stringMatching(/close the mask instead/),
      });
    }
    expect((await getMask(mask.maskId)).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
  });
});

describe('authentication and scopes of MaskService', () => {
  const everyRpc = (as: { masks: ProvisioningApp['masks'] }, token?: string) => [
    () =>
      call(
        as.masks,
        'createMask',
        CreateMaskRequest.fromPartial({ ttlSeconds: 3600, participantA: alice, participantB: bob, scope: 'denied' }),
        token,
      ),
    () => call(as.masks, 'getMask', GetMaskRequest.fromPartial({ maskId: NOBODY }), token),
    () => call(as.masks, 'listMasks', ListMasksRequest.fromPartial({}), token),
    () => call(as.masks, 'closeMask', CloseMaskRequest.fromPartial({ maskId: NOBODY }), token),
  ];

  it("refuses a person account's client (prov:agents only) with PERMISSION_DENIED on every RPC", async () => {
    for (const attempt of everyRpc(person, await bearer(person))) {
      await rejects(attempt(), status.PERMISSION_DENIED, /this call needs a token with the prov:masks scope/);
    }
  });

  it('refuses a token narrowed to other scopes, or a client without prov:masks, with PERMISSION_DENIED; creates nothing', async () => {
    const before = await maskCount();
    for (const scope of ['prov:agents', 'prov:numbers', 'prov:numbers prov:agents']) {
      const narrowed = await clientCredentialsToken(service, app.clientId, app.clientSecret, scope);
      for (const attempt of everyRpc(app, narrowed)) await rejects(attempt(), status.PERMISSION_DENIED, /prov:masks/);
    }
    const { client, clientSecret } = await service.core.registration.createProvisioningClient({
      name: 'Numbers only',
      scope: 'prov:numbers',
      ownerId: app.owner.svcnumId,
    });
    const numbersOnly = await clientCredentialsToken(service, client.clientId, clientSecret!);
    for (const attempt of everyRpc(app, numbersOnly)) await rejects(attempt(), status.PERMISSION_DENIED, /prov:masks/);
    expect(await maskCount()).toBe(before);
    // A token narrowed to prov:masks alone is enough.
    const masksOnly = await clientCredentialsToken(service, app.clientId, app.clientSecret, 'prov:masks');
    expect(
      (
        await call<ListMasksRequest, ListMasksResponse>(
          app.masks,
          'listMasks',
          ListMasksRequest.fromPartial({ pageSize: 100 }),
          masksOnly,
        )
      ).masks,
    ).toHaveLength(before);
  });

  it("refuses a missing or garbage token, and a disabled client's, with UNAUTHENTICATED", async () => {
    for (const attempt of everyRpc(app)) await rejects(attempt(), status.UNAUTHENTICATED, /authorization/);
    for (const attempt of everyRpc(app, 'garbage'))
      await rejects(attempt(), status.UNAUTHENTICATED, /access token is invalid/);
    const { client } = await service.core.registration.createProvisioningClient({
      name: 'Disabled',
      scope: 'prov:masks',
      ownerId: app.owner.svcnumId,
    });
    const { token } = await service.core.oauth.issuer.accessToken({
      subject: client.clientId,
      clientId: client.clientId,
      scopes: ['prov:masks'],
    });
    await service.core.store.setClientDisabled(client.clientId, true); // before any use: clients are cached for 30 s
    for (const attempt of everyRpc(app, token))
      await rejects(attempt(), status.UNAUTHENTICATED, /its client is disabled/);
  });

  it('refuses an expired token with UNAUTHENTICATED', async () => {
    const token = await clientCredentialsToken(service, app.clientId, app.clientSecret);
    await call(app.masks, 'listMasks', ListMasksRequest.fromPartial({}), token);
    service.clock.advance(HOUR);
    for (const attempt of everyRpc(app, token))
      await rejects(attempt(), status.UNAUTHENTICATED, /the access token expired/);
  });
});

describe("a mask number's return to the pool", () => {
  /** Takes every free number of the pool with core calls; returns how many. */
  async function drainPool(): Promise<number> {
    let taken = 0;
    for (;;) {
      try {
        await service.core.provisioning.numbers.provision(callerOf(other), { displayName: 'filler' });
        taken++;
      } catch (error) {
        if (error instanceof DomainError && error.kind === 'failed_precondition') return taken;
        throw error;
      }
    }
  }

  it('comes only once the mask expired and cooled off, not before', async () => {
    // Every earlier mask (30 days at most) has expired and cooled off; then the pool is emptied
    // and exactly one new number is added.
    service.clock.advance(TTL_MAX * SECOND + COOL_OFF + MINUTE);
    expect(await drainPool()).toBeGreaterThan(0);
    const { added, last } = await seedPool(service, PREFIX, SEEDED + 1);
    expect(added).toBe(1);

    const at = service.clock.freeze();
    const mask = await maskOf({ ttlSeconds: 60, scope: 'recycled' });
    expect(mask.svcnum).toBe(last);
    await rejects(maskOf({ scope: 'none-left' }), status.FAILED_PRECONDITION, NO_FREE_NUMBER);

    service.clock.freeze(at + 60 * SECOND);
    expect((await getMask(mask.maskId)).state).toBe(NumberState.NUMBER_STATE_EXPIRED);
    await rejects(maskOf({ scope: 'none-left' }), status.FAILED_PRECONDITION, NO_FREE_NUMBER);

    service.clock.freeze(at + 60 * SECOND + COOL_OFF - 1);
    expect((await lifecycle().show(mask.svcnum)).state).toBe('quarantined');
    await rejects(maskOf({ scope: 'none-left' }), status.FAILED_PRECONDITION, NO_FREE_NUMBER);

    service.clock.freeze(at + 60 * SECOND + COOL_OFF);
    expect((await lifecycle().show(mask.svcnum)).state).toBe('available');
    const next = await maskOf({ scope: 'recycled' });
    expect(next.svcnum).toBe(mask.svcnum);
    expect(next.maskId).not.toBe(mask.maskId);
    expect(await lifecycle().show(mask.svcnum)).toMatchObject({
      state: 'active',
      holder: next.maskId,
      entity_type: 'mask',
    });
    // The old mask stays expired; closing it does not touch the number's new holder.
    expect(await closeMask(mask.maskId)).toEqual({ ...mask, state: NumberState.NUMBER_STATE_EXPIRED });
    expect((await getMask(next.maskId)).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    expect((await lifecycle().show(mask.svcnum)).holder).toBe(next.maskId);
  });
});
