import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DAY, HOUR, MINUTE, SECOND } from '../core/kernel/config';
import { defaultProvisioningConfig } from '../core/provisioning/config';
import type { ProgrammableNumberView } from '../core/provisioning/programmable';
import { DomainError } from '../core/kernel/errors';
import { NumberState } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  ListMasksRequest,
  type ListMasksResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ConfigureProgrammableRequest,
  GetNumberRequest,
  ListNumbersRequest,
  ProvisionNumberRequest,
  type ListNumbersResponse,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { createLoginClient } from './support/flow';
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

// NumberService end to end over gRPC on loopback (number_service.proto is the contract), plus
// the operator lifecycle of programmable numbers (the admin CLI's core functions). The pool
// uses the prefix 72. The tests run in order on one service whose clock only moves forward;
// the cool-off is one day here so that recycling can be shown.

const PREFIX = '72';
const SEEDED = 200;
const COOL_OFF = DAY;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const NUMBER = new RegExp(`^${PREFIX}\\d{9}$`);
const NO_FREE_NUMBER = /no number is free in the pool/;

let service: TestService;
let app: ProvisioningApp; // business account: prov:numbers prov:masks prov:agents
let other: ProvisioningApp; // another business account
let person: ProvisioningApp; // person account: prov:agents only

beforeAll(async () => {
  service = await startTestService({
    provisioning: { ...defaultProvisioningConfig, ...ROOMY_POOL_LIMITS, coolOff: COOL_OFF },
  });
  [app, other, person] = await Promise.all([
    provisioningApp(service),
    provisioningApp(service),
    provisioningApp(service, { accountType: 'person' }),
  ]);
});
afterAll(async () => {
  for (const each of [app, other, person]) each?.close();
  await service?.close();
});

// ---- clock: moved by hand; frozen at an exact instant for boundaries, then released forward ----

afterEach(() => service.clock.release());

// ---- calls ----

const bearer = (of: ProvisioningApp) => currentToken(service, of);

type Input<T extends { fromPartial: (object: never) => unknown }> = Parameters<T['fromPartial']>[0];

async function provision(request: Input<typeof ProvisionNumberRequest> = {}, as = app) {
  return call<ProvisionNumberRequest, ProgrammableNumber>(
    as.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial(request),
    await bearer(as),
  );
}
async function getNumber(svcnumId: string, as = app) {
  return call<GetNumberRequest, ProgrammableNumber>(
    as.numbers,
    'getNumber',
    GetNumberRequest.fromPartial({ svcnumId }),
    await bearer(as),
  );
}
async function listNumbers(request: Input<typeof ListNumbersRequest> = {}, as = app) {
  return call<ListNumbersRequest, ListNumbersResponse>(
    as.numbers,
    'listNumbers',
    ListNumbersRequest.fromPartial(request),
    await bearer(as),
  );
}
async function configure(request: Input<typeof ConfigureProgrammableRequest>, as = app) {
  return call<ConfigureProgrammableRequest, ProgrammableNumber>(
    as.numbers,
    'configureProgrammable',
    ConfigureProgrammableRequest.fromPartial(request),
    await bearer(as),
  );
}

/** Every page of ListNumbers, following next_page_token. */
async function listAll(pageSize: number, as = app) {
  const pages: ProgrammableNumber[][] = [];
  let pageToken = '';
  do {
    const page = await listNumbers({ pageSize, pageToken }, as);
    pages.push(page.numbers);
    pageToken = page.nextPageToken;
    expect(pages.length).toBeLessThan(50);
  } while (pageToken);
  return pages;
}

/** Takes every free number of the pool (core calls, no gRPC) for `other`; returns what was taken. */
async function drainPool(): Promise<ProgrammableNumberView[]> {
  const take = () => service.core.provisioning.numbers.provision(callerOf(other), { displayName: 'filler' });
  const taken: ProgrammableNumberView[] = [];
  // In parallel while the pool is full, then one by one until it says it is empty.
  for (let full = true; full; ) {
    const batch = await Promise.allSettled(Array.from({ length: 8 }, take));
    for (const outcome of batch) {
      if (outcome.status === 'fulfilled') taken.push(outcome.value);
      else if (outcome.reason instanceof DomainError) full = false;
      else throw outcome.reason;
    }
    expect(taken.length).toBeLessThanOrEqual(SEEDED + 10);
  }
  for (;;) {
    try {
      taken.push(await take());
    } catch (error) {
      if (error instanceof DomainError && error.kind === 'failed_precondition') return taken;
      throw error;
    }
  }
}

/** A person to forward to (no password: no scrypt). */
const someone = () => service.core.registration.createUser({ accountType: 'person' });
/** A well-formed svcnum_id that names nothing. */
const NOBODY = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe('ProvisionNumber with an empty pool', () => {
  it('fails with FAILED_PRECONDITION saying the pool is empty, and does not burn the request_id', async () => {
    await rejects(
      provision({ requestId: 'empty-pool-1', displayName: 'Too early' }),
      status.FAILED_PRECONDITION,
      NO_FREE_NUMBER,
    );
    await seedPool(service, PREFIX, SEEDED);
    // The failed call left no idempotency record behind: the retry goes through.
    const number = await provision({ requestId: 'empty-pool-1', displayName: 'Too early' });
    expect(number.svcnum).toMatch(NUMBER);
    expect(number.displayName).toBe('Too early');
  });
});

describe('NumberService', () => {
  beforeAll(() => seedPool(service, PREFIX, SEEDED));

  describe('ProvisionNumber', () => {
    it('takes a number from the pool with its display name and initial configuration, in state ACTIVE', async () => {
      const target = await someone();
      const before = service.clock.now();
      const number = await provision({
        displayName: '  Support line  ',
        config: { autoReply: 'We answer within a day.', forwardToSvcnumId: target.svcnumId },
      });
      expect(number).toMatchObject({
        svcnum: expect.stringMatching(NUMBER),
        svcnumId: expect.stringMatching(ULID),
        displayName: 'Support line',
        state: NumberState.NUMBER_STATE_ACTIVE,
        config: { autoReply: 'We answer within a day.', forwardToSvcnumId: target.svcnumId },
      });
      expect(number.createTime!.getTime()).toBeGreaterThanOrEqual(before);
      expect(number.createTime!.getTime()).toBeLessThanOrEqual(service.clock.now());
      expect(number.updateTime).toEqual(number.createTime);
      expect(await getNumber(number.svcnumId)).toEqual(number);
      // The pool record names its holder; it is out of the pool.
      expect(await service.core.provisioning.lifecycle.show(number.svcnum)).toMatchObject({
        state: 'active',
        holder: number.svcnumId,
        entity_type: 'programmable',
      });
    });

    it('defaults to no display name and no configuration, and never hands out a number twice', async () => {
      const numbers = await Promise.all(Array.from({ length: 6 }, () => provision()));
      for (const number of numbers) {
        expect(number).toMatchObject({
          displayName: '',
          state: NumberState.NUMBER_STATE_ACTIVE,
          config: { autoReply: '', forwardToSvcnumId: '' },
        });
      }
      expect(new Set(numbers.map((number) => number.svcnum)).size).toBe(6);
      expect(new Set(numbers.map((number) => number.svcnumId)).size).toBe(6);
    });

    it('refuses fields outside their bounds with INVALID_ARGUMENT, without taking a number', async () => {
      const own = (await listAll(100)).flat().length;
      await rejects(
        provision({ displayName: 'x'.repeat(101) }),
        status.INVALID_ARGUMENT,
        /display_name is longer than 100 characters/,
      );
      await rejects(
        provision({ displayName: 'two\nlines' }),
        status.INVALID_ARGUMENT,
        /display_name must not contain control characters/,
      );
      await rejects(
        provision({ config: { autoReply: 'x'.repeat(1001) } }),
        status.INVALID_ARGUMENT,
        /auto_reply is longer than 1000 characters/,
      );
      await rejects(
        provision({ config: { forwardToSvcnumId: 'not-an-id' } }),
        status.INVALID_ARGUMENT,
        /forward_to_svcnum_id must be a svcnum_id/,
      );
      await rejects(
        provision({ config: { forwardToSvcnumId: NOBODY } }),
        status.NOT_FOUND,
        new RegExp(`forward_to_svcnum_id ${NOBODY} does not exist`),
      );
      expect((await listAll(100)).flat()).toHaveLength(own);
      // At the bounds: accepted.
      const edge = await provision({ displayName: 'd'.repeat(100), config: { autoReply: 'r'.repeat(1000) } });
      expect(edge.displayName).toHaveLength(100);
      expect(edge.config!.autoReply).toHaveLength(1000);
    });

    it('counts auto_reply in characters, not UTF-16 code units', async () => {
      const emoji = '\u{1F600}'.repeat(1000); // 1000 characters, 2000 code units
      const number = await provision({ config: { autoReply: emoji } });
      expect(number.config!.autoReply).toBe(emoji);
      await rejects(
        provision({ config: { autoReply: `${emoji}!` } }),
        status.INVALID_ARGUMENT,
        /auto_reply is longer than 1000 characters/,
      );
    });

    it('returns the same number for a retry with the same request_id and request', async () => {
      const requestId = '6f1c2b9e-8a0d-4f7e-9a51-3c2d1e0f9a88';
      const first = await provision({ requestId, displayName: 'Orders', config: { autoReply: 'Thanks!' } });
      const retry = await provision({ requestId, displayName: 'Orders', config: { autoReply: 'Thanks!' } });
      expect(retry).toEqual(first);
      expect((await listAll(100)).flat().filter((number) => number.displayName === 'Orders')).toHaveLength(1);
    });

    it('treats an absent config and an empty config as the same request on a retry', async () => {
      const first = await provision({ requestId: 'same-defaults', displayName: 'Defaults' });
      const retry = await provision({ requestId: 'same-defaults', displayName: 'Defaults', config: {} });
      expect(retry.svcnumId).toBe(first.svcnumId);
    });

    it('answers ALREADY_EXISTS for the same request_id with a different request, and keeps request_ids per account', async () => {
      const first = await provision({ requestId: 'shared-key', displayName: 'First' });
      await rejects(
        provision({ requestId: 'shared-key', displayName: 'Second' }),
        status.ALREADY_EXISTS,
        /request_id was already used for a different request/,
      );
      await rejects(
        provision({ requestId: 'shared-key', displayName: 'First', config: { autoReply: 'hi' } }),
        status.ALREADY_EXISTS,
        /request_id/,
      );
      // Another account's identical request_id is its own.
      const theirs = await provision({ requestId: 'shared-key', displayName: 'First' }, other);
      expect(theirs.svcnumId).not.toBe(first.svcnumId);
      expect(theirs.svcnum).not.toBe(first.svcnum);
    });

    it('refuses a malformed request_id with INVALID_ARGUMENT', async () => {
      await rejects(
        provision({ requestId: 'r'.repeat(65) }),
        status.INVALID_ARGUMENT,
        /request_id must be 1-64 characters/,
      );
      await rejects(provision({ requestId: 'has spaces' }), status.INVALID_ARGUMENT, /request_id/);
      await rejects(provision({ requestId: 'slash/slash' }), status.INVALID_ARGUMENT, /request_id/);
      expect((await provision({ requestId: 'r'.repeat(64) })).svcnum).toMatch(NUMBER);
    });
  });

  describe('GetNumber', () => {
    it("returns the caller's own number and NOT_FOUND for another account's, exactly as for one that does not exist", async () => {
      const mine = await provision({ displayName: 'Mine' });
      expect(await getNumber(mine.svcnumId)).toEqual(mine);
      const theirs = await provision({ displayName: 'Theirs' }, other);
      const hidden = await rejects(getNumber(theirs.svcnumId), status.NOT_FOUND);
      const missing = await rejects(getNumber(NOBODY), status.NOT_FOUND);
      expect(hidden.details.replace(theirs.svcnumId, '<id>')).toBe(missing.details.replace(NOBODY, '<id>'));
      expect(hidden.details).not.toContain(theirs.svcnum);
      expect(hidden.details).not.toContain('Theirs');
      // Nor is any entity that is not a programmable number one: the owner account itself, a person.
      await rejects(getNumber(app.owner.svcnumId), status.NOT_FOUND, /no programmable number/);
      await rejects(getNumber((await someone()).svcnumId), status.NOT_FOUND, /no programmable number/);
    });

    it('refuses an empty or malformed svcnum_id with INVALID_ARGUMENT', async () => {
      await rejects(getNumber(''), status.INVALID_ARGUMENT, /svcnum_id is required/);
      await rejects(
        getNumber('12345'),
        status.INVALID_ARGUMENT,
        /svcnum_id must be a svcnum_id \(a 26-character ULID\)/,
      );
      await rejects(getNumber(NOBODY.toLowerCase()), status.INVALID_ARGUMENT, /svcnum_id/);
      await rejects(getNumber(`${NOBODY}0`), status.INVALID_ARGUMENT, /svcnum_id/);
    });
  });

  describe('ListNumbers', () => {
    let lister: ProvisioningApp;
    let created: ProgrammableNumber[];
    beforeAll(async () => {
      lister = await provisioningApp(service);
      created = [];
      for (let index = 0; index < 5; index++) {
        created.push(await provision({ displayName: `Line ${index}` }, lister));
        service.clock.advance(SECOND);
      }
    });
    afterAll(() => lister?.close());

    it('pages through all numbers with page_size and next_page_token: each exactly once, oldest first', async () => {
      const pages = await listAll(2, lister);
      expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
      expect(pages.flat()).toEqual(created);
      const times = pages.flat().map((number) => number.createTime!.getTime());
      expect(times).toEqual([...times].sort((a, b) => a - b));
    });

    it('ends with an empty next_page_token when the last page is full', async () => {
      const page = await listNumbers({ pageSize: 5 }, lister);
      expect(page.numbers).toEqual(created);
      expect(page.nextPageToken).toBe('');
      const first = await listNumbers({ pageSize: 1 }, lister);
      expect(first.numbers).toEqual(created.slice(0, 1));
      expect(first.nextPageToken).not.toBe('');
      const rest = await listNumbers({ pageSize: 4, pageToken: first.nextPageToken }, lister);
      expect(rest.numbers).toEqual(created.slice(1));
      expect(rest.nextPageToken).toBe('');
    });

    it("lists only the caller account's numbers, 50 by default", async () => {
      const page = await listNumbers({}, lister);
      expect(page).toEqual({ numbers: created, nextPageToken: '' });
      const others = (await listAll(100, app)).flat().map((number) => number.svcnumId);
      expect(others.length).toBeGreaterThan(0);
      for (const number of created) expect(others).not.toContain(number.svcnumId);
    });

    it('treats page_size above 100 as 100, and 0 as 50', async () => {
      const bulk = await provisioningApp(service);
      try {
        const caller = callerOf(bulk);
        for (let index = 0; index < 101; index += 10) {
          await Promise.all(
            Array.from({ length: Math.min(10, 101 - index) }, () =>
              service.core.provisioning.numbers.provision(caller, {}),
            ),
          );
        }
        const capped = await listNumbers({ pageSize: 1000 }, bulk);
        expect(capped.numbers).toHaveLength(100);
        expect(capped.nextPageToken).not.toBe('');
        const rest = await listNumbers({ pageSize: 1000, pageToken: capped.nextPageToken }, bulk);
        expect(rest.numbers).toHaveLength(1);
        expect(rest.nextPageToken).toBe('');
        expect(new Set([...capped.numbers, ...rest.numbers].map((number) => number.svcnumId)).size).toBe(101);
        const byDefault = await listNumbers({ pageSize: 0 }, bulk);
        expect(byDefault.numbers).toEqual(capped.numbers.slice(0, 50));
        expect(byDefault.nextPageToken).not.toBe('');
      } finally {
        bulk.close();
      }
    });

    it('refuses a negative page_size with INVALID_ARGUMENT', async () => {
      await rejects(listNumbers({ pageSize: -1 }, lister), status.INVALID_ARGUMENT, /page_size/);
    });

    it('refuses a page_token of another account, of another list, or garbage with INVALID_ARGUMENT', async () => {
      const theirs = await listNumbers({ pageSize: 1 }, lister);
      expect(theirs.nextPageToken).not.toBe('');
      const notValid = /page_token is not valid for this call/;
      await rejects(
        listNumbers({ pageSize: 1, pageToken: theirs.nextPageToken }, app),
        status.INVALID_ARGUMENT,
        notValid,
      );
      await rejects(listNumbers({ pageToken: 'garbage!' }, lister), status.INVALID_ARGUMENT, notValid);
      await rejects(listNumbers({ pageToken: 'eyJ4IjoxfQ' }, lister), status.INVALID_ARGUMENT, notValid); // {"x":1}
      // Shaped like a token of this caller, but not one ListNumbers returned.
      const forged = (key: object) => Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
      const ownerId = lister.owner.svcnumId;
      await rejects(listNumbers({ pageToken: forged({ ownerId }) }, lister), status.INVALID_ARGUMENT, notValid);
      await rejects(
        listNumbers({ pageToken: forged({ ownerId, ownerSort: `ai_agent#${NOBODY}`, svcnumId: NOBODY }) }, lister),
        status.INVALID_ARGUMENT,
        notValid,
      );
      // A page_token of ListMasks (same account) is not one of ListNumbers.
      for (let index = 0; index < 2; index++) {
        await service.core.provisioning.masks.create(callerOf(lister), {
          ttlSeconds: 3600,
          participantA: created[0]!.svcnumId,
          participantB: created[1]!.svcnumId,
          scope: 'test',
        });
      }
      const masks = await call<ListMasksRequest, ListMasksResponse>(
        lister.masks,
        'listMasks',
        ListMasksRequest.fromPartial({ pageSize: 1 }),
        await bearer(lister),
      );
      expect(masks.nextPageToken).not.toBe('');
      await rejects(listNumbers({ pageToken: masks.nextPageToken }, lister), status.INVALID_ARGUMENT, notValid);
    });
  });

  describe('ConfigureProgrammable', () => {
    let number: ProgrammableNumber;
    let target: string;
    let target2: string;
    beforeAll(async () => {
      number = await provision({ displayName: 'Configurable' });
      target = (await someone()).svcnumId;
      target2 = (await provision({ displayName: 'Forward target' })).svcnumId;
    });

    it('sets auto_reply and forward_to_svcnum_id, returns the number and bumps update_time', async () => {
      service.clock.advance(SECOND);
      const updated = await configure({
        svcnumId: number.svcnumId,
        config: { autoReply: 'Closed on Sundays', forwardToSvcnumId: target },
      });
      expect(updated).toMatchObject({
        ...number,
        config: { autoReply: 'Closed on Sundays', forwardToSvcnumId: target },
        updateTime: expect.any(Date),
      });
      expect(updated.updateTime!.getTime()).toBeGreaterThan(number.updateTime!.getTime());
      expect(updated.createTime).toEqual(number.createTime);
      expect(await getNumber(number.svcnumId)).toEqual(updated);
    });

    it('replaces only the path named in update_mask and leaves the other unchanged', async () => {
      await configure({ svcnumId: number.svcnumId, config: { autoReply: 'A', forwardToSvcnumId: target } });
      // Fields not named in update_mask are ignored, even invalid ones.
      const reply = await configure({
        svcnumId: number.svcnumId,
        config: { autoReply: 'B', forwardToSvcnumId: 'ignored' },
        updateMask: ['auto_reply'],
      });
      expect(reply.config).toEqual({ autoReply: 'B', forwardToSvcnumId: target });
      const forward = await configure({
        svcnumId: number.svcnumId,
        config: { autoReply: 'x'.repeat(2000), forwardToSvcnumId: target2 },
        updateMask: ['forward_to_svcnum_id'],
      });
      expect(forward.config).toEqual({ autoReply: 'B', forwardToSvcnumId: target2 });
      expect((await getNumber(number.svcnumId)).config).toEqual({ autoReply: 'B', forwardToSvcnumId: target2 });
    });

    it('turns a behaviour off with an empty value: one path, or both without update_mask', async () => {
      await configure({ svcnumId: number.svcnumId, config: { autoReply: 'A', forwardToSvcnumId: target } });
      const noForward = await configure({
        svcnumId: number.svcnumId,
        config: {},
        updateMask: ['forward_to_svcnum_id'],
      });
      expect(noForward.config).toEqual({ autoReply: 'A', forwardToSvcnumId: '' });
      await configure({ svcnumId: number.svcnumId, config: { autoReply: 'A', forwardToSvcnumId: target } });
      const cleared = await configure({ svcnumId: number.svcnumId, config: {} });
      expect(cleared.config).toEqual({ autoReply: '', forwardToSvcnumId: '' });
      expect((await getNumber(number.svcnumId)).config).toEqual({ autoReply: '', forwardToSvcnumId: '' });
      // An empty update_mask is the same as none.
      await configure({ svcnumId: number.svcnumId, config: { autoReply: 'A', forwardToSvcnumId: target } });
      expect(
        (await configure({ svcnumId: number.svcnumId, config: { autoReply: 'C' }, updateMask: [] })).config,
      ).toEqual({ autoReply: 'C', forwardToSvcnumId: '' });
    });

    it('refuses invalid configurations with INVALID_ARGUMENT or NOT_FOUND and changes nothing', async () => {
      const before = await configure({
        svcnumId: number.svcnumId,
        config: { autoReply: 'Keep', forwardToSvcnumId: target },
      });
      const id = number.svcnumId;
      await rejects(
        configure({ svcnumId: id, config: { forwardToSvcnumId: id }, updateMask: ['forward_to_svcnum_id'] }),
        status.INVALID_ARGUMENT,
        /forward_to_svcnum_id must not be the number itself/,
      );
      await rejects(
        configure({ svcnumId: id, config: { forwardToSvcnumId: NOBODY }, updateMask: ['forward_to_svcnum_id'] }),
        status.NOT_FOUND,
        new RegExp(`forward_to_svcnum_id ${NOBODY} does not exist`),
      );
      await rejects(
        configure({ svcnumId: id, config: { forwardToSvcnumId: 'abc' } }),
        status.INVALID_ARGUMENT,
        /forward_to_svcnum_id must be a svcnum_id/,
      );
      await rejects(
        configure({ svcnumId: id, config: { autoReply: 'x' }, updateMask: ['auto_reply', 'display_name'] }),
        status.INVALID_ARGUMENT,
        /update_mask may name only: auto_reply, forward_to_svcnum_id/,
      );
      await rejects(
        configure({ svcnumId: id, config: { autoReply: 'x' }, updateMask: ['autoReply'] }),
        status.INVALID_ARGUMENT,
        /update_mask/,
      );
      await rejects(
        configure({ svcnumId: id, config: { autoReply: 'x'.repeat(1001) } }),
        status.INVALID_ARGUMENT,
        /auto_reply is longer than 1000 characters/,
      );
      await rejects(configure({ svcnumId: id }), status.INVALID_ARGUMENT, /config is required/);
      expect(await getNumber(id)).toEqual(before);
      // At the bound: accepted.
      expect(
        (await configure({ svcnumId: id, config: { autoReply: 'y'.repeat(1000) }, updateMask: ['auto_reply'] })).config!
          .autoReply,
      ).toHaveLength(1000);
    });

    it("refuses a malformed svcnum_id with INVALID_ARGUMENT and another account's number with NOT_FOUND", async () => {
      await rejects(
        configure({ svcnumId: 'nope', config: {} }),
        status.INVALID_ARGUMENT,
        /svcnum_id must be a svcnum_id/,
      );
      await rejects(configure({ svcnumId: '', config: {} }), status.INVALID_ARGUMENT, /svcnum_id is required/);
      const theirs = await provision({ config: { autoReply: 'theirs' } }, other);
      await rejects(
        configure({ svcnumId: theirs.svcnumId, config: { autoReply: 'hijacked' } }),
        status.NOT_FOUND,
        /no programmable number/,
      );
      await rejects(configure({ svcnumId: NOBODY, config: {} }), status.NOT_FOUND, /no programmable number/);
      expect((await getNumber(theirs.svcnumId, other)).config!.autoReply).toBe('theirs');
    });
  });
});

describe('authentication and scopes of NumberService', () => {
  beforeAll(() => seedPool(service, PREFIX, SEEDED));

  const everyRpc = (as: { numbers: ProvisioningApp['numbers'] }, token?: string) => [
    () => call(as.numbers, 'provisionNumber', ProvisionNumberRequest.fromPartial({ displayName: 'x' }), token),
    () => call(as.numbers, 'getNumber', GetNumberRequest.fromPartial({ svcnumId: NOBODY }), token),
    () => call(as.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), token),
    () =>
      call(
        as.numbers,
        'configureProgrammable',
        ConfigureProgrammableRequest.fromPartial({ svcnumId: NOBODY, config: {} }),
        token,
      ),
  ];

  it("refuses a person account's client (prov:agents only) with PERMISSION_DENIED on every RPC", async () => {
    for (const attempt of everyRpc(person, await bearer(person))) {
      await rejects(attempt(), status.PERMISSION_DENIED, /this call needs a token with the prov:numbers scope/);
    }
  });

  it('refuses a token narrowed to other scopes with PERMISSION_DENIED, and takes no number', async () => {
    const own = (await listAll(100)).flat().length;
    for (const scope of ['prov:agents', 'prov:masks', 'prov:masks prov:agents']) {
      const narrowed = await clientCredentialsToken(service, app.clientId, app.clientSecret, scope);
      for (const attempt of everyRpc(app, narrowed)) await rejects(attempt(), status.PERMISSION_DENIED, /prov:numbers/);
    }
    expect((await listAll(100)).flat()).toHaveLength(own);
    // The same client with the scope left in works.
    const numbersOnly = await clientCredentialsToken(service, app.clientId, app.clientSecret, 'prov:numbers');
    expect(
      (
        await call<ListNumbersRequest, ListNumbersResponse>(
          app.numbers,
          'listNumbers',
          ListNumbersRequest.fromPartial({}),
          numbersOnly,
        )
      ).numbers,
    ).toHaveLength(own);
  });

  it('refuses a missing, malformed or garbage token with UNAUTHENTICATED', async () => {
    for (const attempt of everyRpc(app)) await rejects(attempt(), status.UNAUTHENTICATED, /authorization/);
    for (const attempt of everyRpc(app, 'not-a-jwt'))
      await rejects(attempt(), status.UNAUTHENTICATED, /access token is invalid/);
    const [header, payload] = (await bearer(app)).split('.');
    await rejects(
      call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), `${header}.${payload}.AAAA`),
      status.UNAUTHENTICATED,
      /access token is invalid/,
    );
  });

  it('refuses a token of a client that is not a provisioning client with UNAUTHENTICATED', async () => {
    // A login client's user access token, as the token endpoint issues it after a sign-in.
    const login = await createLoginClient(service);
    const user = await someone();
    const userToken = await service.core.oauth.issuer.accessToken({
      subject: user.svcnumId,
      clientId: login.clientId,
      scopes: ['openid', 'profile'],
      authTime: service.clock.now(),
    });
    for (const attempt of everyRpc(app, userToken.token))
      await rejects(attempt(), status.UNAUTHENTICATED, /does not belong to an enabled provisioning client/);
    // Even if it claimed the scope.
    const claiming = await service.core.oauth.issuer.accessToken({
      subject: user.svcnumId,
      clientId: login.clientId,
      scopes: ['prov:numbers'],
      authTime: service.clock.now(),
    });
    await rejects(
      call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), claiming.token),
      status.UNAUTHENTICATED,
      /provisioning client/,
    );
    // An External API client's client_credentials token.
    const api = await service.core.registration.createApiClient({ name: 'Messaging app', scope: 'messaging' });
    const apiToken = await clientCredentialsToken(service, api.client.clientId, api.clientSecret!);
    await rejects(
      call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), apiToken),
      status.UNAUTHENTICATED,
      /provisioning client/,
    );
  });

  it('refuses a token of a disabled provisioning client with UNAUTHENTICATED', async () => {
    const { client } = await service.core.registration.createProvisioningClient({
      name: 'Soon disabled',
      scope: 'prov:numbers',
      ownerId: app.owner.svcnumId,
    });
    // Its token as the token endpoint issued it; then the operator disables the client (before
    // any use of it: client records are cached in-process for 30 s).
    const { token } = await service.core.oauth.issuer.accessToken({
      subject: client.clientId,
      clientId: client.clientId,
      scopes: ['prov:numbers'],
    });
    await service.core.store.setClientDisabled(client.clientId, true);
    for (const attempt of everyRpc(app, token))
      await rejects(attempt(), status.UNAUTHENTICATED, /this token can no longer be used: its client is disabled/);
  });

  it('refuses an expired token with UNAUTHENTICATED, and a fresh one works', async () => {
    const token = await clientCredentialsToken(service, app.clientId, app.clientSecret);
    await call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), token);
    service.clock.advance(HOUR);
    for (const attempt of everyRpc(app, token))
      await rejects(attempt(), status.UNAUTHENTICATED, /the access token expired/);
    const fresh = await clientCredentialsToken(service, app.clientId, app.clientSecret);
    expect(
      (
        await call<ListNumbersRequest, ListNumbersResponse>(
          app.numbers,
          'listNumbers',
          ListNumbersRequest.fromPartial({}),
          fresh,
        )
      ).numbers.length,
    ).toBeGreaterThan(0);
  });
});

describe('number lifecycle (operator)', () => {
  const lifecycle = () => service.core.provisioning.lifecycle;
  beforeAll(() => seedPool(service, PREFIX, SEEDED));

  it('suspends and reactivates a number; GetNumber and ListNumbers show the state', async () => {
    const number = await provision({ displayName: 'Lifecycle' });
    expect(await lifecycle().suspend(number.svcnum)).toMatchObject({
      svcnum: number.svcnum,
      state: 'suspended',
      holder: number.svcnumId,
    });
    expect((await getNumber(number.svcnumId)).state).toBe(NumberState.NUMBER_STATE_SUSPENDED);
    expect((await listAll(100)).flat().find((each) => each.svcnumId === number.svcnumId)?.state).toBe(
      NumberState.NUMBER_STATE_SUSPENDED,
    );
    // A suspended number can still be configured.
    expect((await configure({ svcnumId: number.svcnumId, config: { autoReply: 'Back soon' } })).state).toBe(
      NumberState.NUMBER_STATE_SUSPENDED,
    );
    await expect(lifecycle().suspend(number.svcnum)).rejects.toMatchObject({
      kind: 'failed_precondition',
      message: expect.stringMatching(/is suspended; it must be active/),
    });
    expect(await lifecycle().reactivate(number.svcnum)).toMatchObject({ state: 'active', holder: number.svcnumId });
    expect((await getNumber(number.svcnumId)).state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    await expect(lifecycle().reactivate(number.svcnum)).rejects.toMatchObject({
      kind: 'failed_precondition',
      message: expect.stringMatching(/is active; it must be suspended/),
    });
  });

  it('deactivates a number: the number is QUARANTINED for the cool-off, the entity DEACTIVATED and no longer configurable', async () => {
    const number = await provision({ displayName: 'Retired', config: { autoReply: 'bye' } });
    await lifecycle().suspend(number.svcnum);
    const at = service.clock.freeze();
    const shown = await lifecycle().deactivate(number.svcnum);
    expect(shown).toMatchObject({
      svcnum: number.svcnum,
      state: 'quarantined',
      cool_off_until: new Date(at + COOL_OFF).toISOString(),
    });
    expect(shown).not.toHaveProperty('holder');
    expect(await lifecycle().show(number.svcnum)).toEqual(shown);
    const entity = await getNumber(number.svcnumId);
    expect(entity).toMatchObject({
      svcnumId: number.svcnumId,
      svcnum: number.svcnum,
      state: NumberState.NUMBER_STATE_DEACTIVATED,
      config: { autoReply: 'bye' },
    });
    await rejects(
      configure({ svcnumId: number.svcnumId, config: { autoReply: 'again' } }),
      status.FAILED_PRECONDITION,
      new RegExp(`number ${number.svcnum} is deactivated`),
    );
    // No way back, and nothing more to do.
    await expect(lifecycle().reactivate(number.svcnum)).rejects.toMatchObject({ kind: 'failed_precondition' });
    await expect(lifecycle().suspend(number.svcnum)).rejects.toMatchObject({
      kind: 'failed_precondition',
      message: expect.stringMatching(/is quarantined/),
    });
    await expect(lifecycle().deactivate(number.svcnum)).rejects.toMatchObject({
      kind: 'failed_precondition',
      message: expect.stringMatching(/only active or suspended numbers can be deactivated/),
    });
    expect((await getNumber(number.svcnumId)).state).toBe(NumberState.NUMBER_STATE_DEACTIVATED);
  });

  it('refuses unknown and malformed service numbers, and numbers still in the pool', async () => {
    await expect(lifecycle().suspend(`${PREFIX}999999999`)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(lifecycle().show('12')).rejects.toMatchObject({ kind: 'invalid_argument' });
    await expect(lifecycle().deactivate('abc')).rejects.toMatchObject({ kind: 'invalid_argument' });
    // A number still in the pool has no holder to suspend or retire.
    const { first: free } = await seedPool(service, `${PREFIX}9`, 1);
    expect((await lifecycle().show(free)).state).toBe('available');
    await expect(lifecycle().suspend(free)).rejects.toMatchObject({ kind: 'failed_precondition' });
    await expect(lifecycle().deactivate(free)).rejects.toMatchObject({ kind: 'failed_precondition' });
    expect((await lifecycle().show(free)).state).toBe('available');
  });

  it('does not allocate a quarantined number before its cool-off ends, and does at that instant', async () => {
    // Earlier cool-offs end first, then every free number is taken: the pool is empty.
    service.clock.advance(COOL_OFF + MINUTE);
    const taken = await drainPool();
    expect(taken.length).toBeGreaterThan(0);
    await rejects(provision(), status.FAILED_PRECONDITION, NO_FREE_NUMBER);

    const retired = taken.at(-1)!;
    const at = service.clock.freeze();
    await lifecycle().deactivate(retired.svcnum);
    const until = at + COOL_OFF;
    expect((await lifecycle().show(retired.svcnum)).cool_off_until).toBe(new Date(until).toISOString());
    await rejects(provision(), status.FAILED_PRECONDITION, NO_FREE_NUMBER);

    service.clock.freeze(until - 1);
    expect((await lifecycle().show(retired.svcnum)).state).toBe('quarantined');
    await rejects(provision(), status.FAILED_PRECONDITION, NO_FREE_NUMBER);

    service.clock.freeze(until);
    expect((await lifecycle().show(retired.svcnum)).state).toBe('available');
    const again = await provision({ displayName: 'Second holder' });
    expect(again.svcnum).toBe(retired.svcnum);
    expect(again.svcnumId).not.toBe(retired.svcnumId);
    expect(again.state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    expect(await lifecycle().show(retired.svcnum)).toMatchObject({
      state: 'active',
      holder: again.svcnumId,
      entity_type: 'programmable',
    });
    expect(await lifecycle().show(retired.svcnum)).not.toHaveProperty('cool_off_until');
    // The retired entity stays retired; the new holder's lifecycle is its own.
    expect((await getNumber(retired.svcnumId, other)).state).toBe(NumberState.NUMBER_STATE_DEACTIVATED);
    await lifecycle().suspend(again.svcnum);
    expect((await getNumber(again.svcnumId)).state).toBe(NumberState.NUMBER_STATE_SUSPENDED);
    expect((await getNumber(retired.svcnumId, other)).state).toBe(NumberState.NUMBER_STATE_DEACTIVATED);
  });
});
