import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AgentKind,
  ListAgentsRequest,
  type ListAgentsResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  ListMasksRequest,
  type ListMasksResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ListNumbersRequest,
  type ListNumbersResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import {
  call,
  callerOf,
  clientCredentialsToken,
  provisioningApp,
  rejects,
  seedPool,
  type ProvisioningApp,
} from './support/grpc';
import { openStream, sendMessage, type OpenStream } from './support/messages';
import { publicGet } from './support/public';
import { startTestService, type TestService } from './support/service';

// Page tokens and resume cursors are authenticated (core/kernel/page-token.ts): bound to the list
// that issued them, the filter of that listing and the caller they were issued to. End to end
// over gRPC (ListNumbers, ListMasks, ListAgents, StreamAllMessages) and HTTP (/api/discover): a
// forged token (a self-made DynamoDB key of the old, unsigned kind, or one with a made-up tag),
// an altered byte, a truncated token, another caller's, another list's and another filter's are
// each refused (INVALID_ARGUMENT / 400 invalid_request), and genuine tokens page as before.

const NOT_VALID = /page_token is not valid for this call; start again without it/;
const TAG_BYTES = 32;

let service: TestService;
let app: ProvisioningApp;
let other: ProvisioningApp;
let numberIds: string[];
const streams: OpenStream[] = [];

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
/** The token with byte `index` of its decoded bytes flipped (negative: from the end). */
function flipByte(token: string, index: number): string {
  const bytes = Buffer.from(token, 'base64url');
  const at = index < 0 ? bytes.length + index : index;
  bytes[at] = bytes[at]! ^ 0x01;
  return bytes.toString('base64url');
}
/** The same bytes, one fewer at the end (a cut tag), spelled canonically. */
const cutByte = (token: string) => Buffer.from(token, 'base64url').subarray(0, -1).toString('base64url');
/** The readable position a token carries, with a tag of our own making. */
const withMadeUpTag = (position: unknown) =>
  Buffer.concat([Buffer.from(JSON.stringify(position), 'utf8'), Buffer.alloc(TAG_BYTES, 7)]).toString('base64url');
/** The position a genuine token carries (readable, not secret). */
const positionOf = (token: string) =>
  JSON.parse(Buffer.from(token, 'base64url').subarray(0, -TAG_BYTES).toString('utf8')) as unknown;

const listNumbers = (as: ProvisioningApp, fields: Partial<ListNumbersRequest>) =>
  call<ListNumbersRequest, ListNumbersResponse>(
    as.numbers,
    'listNumbers',
    ListNumbersRequest.fromPartial(fields),
    as.token,
  );
const listMasks = (as: ProvisioningApp, fields: Partial<ListMasksRequest>) =>
  call<ListMasksRequest, ListMasksResponse>(as.masks, 'listMasks', ListMasksRequest.fromPartial(fields), as.token);
const listAgents = (as: ProvisioningApp, fields: Partial<ListAgentsRequest>) =>
  call<ListAgentsRequest, ListAgentsResponse>(as.agents, 'listAgents', ListAgentsRequest.fromPartial(fields), as.token);
const discover = (query: Record<string, string>) =>
  publicGet(service, `/api/discover?${new URLSearchParams(query).toString()}`);

beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '86', 40);
  [app, other] = await Promise.all([provisioningApp(service), provisioningApp(service)]);
  const caller = callerOf(app);
  const { numbers, masks, agents } = service.core.provisioning;
  numberIds = [];
  for (const name of ['One', 'Two', 'Three'])
    numberIds.push((await numbers.provision(caller, { displayName: name })).svcnumId);
  for (let index = 0; index < 3; index++) {
    await masks.create(caller, {
      ttlSeconds: 3600,
      participantA: numberIds[0],
      participantB: numberIds[1],
      scope: 'test',
    });
  }
  const independent = [];
  for (const name of ['Booker A', 'Booker B', 'Booker C']) {
    independent.push(
      (
        await agents.create(caller, {
          displayName: name,
          capabilities: ['tokens.booking', 'tokens.chat'],
          discoverable: true,
        })
      ).agent,
    );
  }
  for (const name of ['Sub A', 'Sub B'])
    await agents.createDependent(caller, { ownerSvcnumId: independent[0]!.svcnumId, displayName: name });
  // The other account has a page of its own, so its tokens are genuine too.
  await numbers.provision(callerOf(other), { displayName: 'Theirs 1' });
  await numbers.provision(callerOf(other), { displayName: 'Theirs 2' });
}, 60_000);
afterEach(() => {
  for (const stream of streams.splice(0)) stream.cancel();
});
afterAll(async () => {
  for (const each of [app, other]) each?.close();
  await service?.close();
});

describe('List* page tokens (gRPC)', () => {
  it("page through every list with genuine tokens: each item once, the token carries only the list's key", async () => {
    const seen: string[] = [];
    let pageToken = '';
    do {
      const page = await listNumbers(app, { pageSize: 1, pageToken });
      seen.push(...page.numbers.map((number) => number.svcnumId));
      pageToken = page.nextPageToken;
      if (pageToken) {
        expect(pageToken).toMatch(/^[A-Za-z0-9_-]+$/);
        // Position readable: the byOwner key of the last number shown, nothing more.
        expect(positionOf(pageToken)).toEqual({
          svcnumId: seen.at(-1),
          ownerId: app.owner.svcnumId,
          ownerSort: `programmable#${seen.at(-1)}`,
        });
      }
    } while (pageToken);
    expect(seen).toEqual(numberIds);

    const masks = await listMasks(app, { pageSize: 2 });
    expect((await listMasks(app, { pageSize: 2, pageToken: masks.nextPageToken })).masks).toHaveLength(1);
    const independent = await listAgents(app, { pageSize: 2, kind: AgentKind.AGENT_KIND_INDEPENDENT });
    const rest = await listAgents(app, {
      pageSize: 2,
      pageToken: independent.nextPageToken,
      kind: AgentKind.AGENT_KIND_INDEPENDENT,
    });
    expect([...independent.agents, ...rest.agents].map((agent) => agent.displayName)).toEqual([
      'Booker A',
      'Booker B',
      'Booker C',
    ]);
    expect(rest.nextPageToken).toBe('');
  });

  it('refuse forged, altered, truncated, other-caller, other-list and other-filter tokens with INVALID_ARGUMENT; the genuine one still works', async () => {
    const numbers = await listNumbers(app, { pageSize: 1 });
    const masks = await listMasks(app, { pageSize: 1 });
    const agents = await listAgents(app, { pageSize: 1 });
    const independentAgents = await listAgents(app, { pageSize: 1, kind: AgentKind.AGENT_KIND_INDEPENDENT });
    const theirs = await listNumbers(other, { pageSize: 1 });
    for (const token of [numbers, masks, agents, independentAgents, theirs].map((page) => page.nextPageToken))
      expect(token).not.toBe('');
    const lists = {
      numbers: {
        own: numbers.nextPageToken,
        list: (pageToken: string, as = app) => listNumbers(as, { pageSize: 1, pageToken }),
      },
      masks: {
        own: masks.nextPageToken,
        list: (pageToken: string, as = app) => listMasks(as, { pageSize: 1, pageToken }),
      },
      agents: {
        own: agents.nextPageToken,
        list: (pageToken: string, as = app) => listAgents(as, { pageSize: 1, pageToken }),
      },
    };
    // Calls are made one at a time, in order (thunks).
    const refused: Array<[string, () => Promise<unknown>]> = [];
    for (const [name, { own, list }] of Object.entries(lists)) {
      const key = positionOf(own) as Record<string, string>;
      refused.push(
        // The very DynamoDB key this list continues from, in the old unsigned format (accepted before).
        [`${name}: forged old-format key`, () => list(b64(key))],
        [`${name}: forged key with a made-up tag`, () => list(withMadeUpTag(key))],
        [
          `${name}: forged key of another owner's item`,
          () => list(withMadeUpTag({ ...key, ownerId: other.owner.svcnumId })),
        ],
        [`${name}: altered position byte`, () => list(flipByte(own, 2))],
        [`${name}: altered tag byte`, () => list(flipByte(own, -1))],
        [`${name}: truncated (a byte cut)`, () => list(cutByte(own))],
        [
          `${name}: truncated (the tag alone)`,
          () => list(Buffer.from(own, 'base64url').subarray(-TAG_BYTES).toString('base64url')),
        ],
        [`${name}: one character more`, () => list(`${own}A`)],
        [`${name}: another caller's genuine token`, () => list(own, other)],
        [`${name}: garbage`, () => list('%%%')],
      );
    }
    refused.push(
      ["numbers: the other account's token", () => listNumbers(app, { pageSize: 1, pageToken: theirs.nextPageToken })],
      ['numbers: a ListMasks token', () => lists.numbers.list(masks.nextPageToken)],
      ['masks: a ListNumbers token', () => lists.masks.list(numbers.nextPageToken)],
      ['agents: a ListNumbers token', () => lists.agents.list(numbers.nextPageToken)],
      // The same list under another filter (ListAgents' kind).
      [
        'agents: an all-kinds token with kind=independent',
        () => listAgents(app, { pageSize: 1, pageToken: agents.nextPageToken, kind: AgentKind.AGENT_KIND_INDEPENDENT }),
      ],
      [
        'agents: an independent token with kind=dependent',
        () =>
          listAgents(app, {
            pageSize: 1,
            pageToken: independentAgents.nextPageToken,
            kind: AgentKind.AGENT_KIND_DEPENDENT,
          }),
      ],
      [
        'agents: an independent token without kind',
        () => listAgents(app, { pageSize: 1, pageToken: independentAgents.nextPageToken }),
      ],
    );
    for (const [what, attempt] of refused) {
      const error = await rejects(attempt(), status.INVALID_ARGUMENT, NOT_VALID).catch((failure: Error) => {
        throw new Error(`${what}: ${failure.message}`);
      });
      expect(error.details, what).not.toMatch(/ownerId|svcnumId|dynamo/i);
    }
    expect(refused).toHaveLength(37);

    // Genuine tokens, unchanged, continue their own listing.
    expect((await lists.numbers.list(numbers.nextPageToken)).numbers[0]!.svcnumId).toBe(numberIds[1]);
    expect((await lists.masks.list(masks.nextPageToken)).masks).toHaveLength(1);
    expect(
      (
        await listAgents(app, {
          pageSize: 1,
          pageToken: independentAgents.nextPageToken,
          kind: AgentKind.AGENT_KIND_INDEPENDENT,
        })
      ).agents[0]!.displayName,
    ).toBe('Booker B');
  });
});

describe('StreamAllMessages resume_cursor', () => {
  it('resumes from a genuine cursor; refuses forged, altered, truncated, other-caller and other-list cursors with INVALID_ARGUMENT', async () => {
    const { client, clientSecret } = await service.core.registration.createApiClient({
      name: 'Cursor sender',
      scope: 'messaging',
      ownerId: app.owner.svcnumId,
    });
    const api = await clientCredentialsToken(service, client.clientId, clientSecret!);
    for (const text of ['first', 'second']) {
      expect(
        (
          await sendMessage(service, api, {
            from: app.owner.svcnum,
            to: (await service.core.provisioning.numbers.get(callerOf(app), numberIds[0])).svcnum,
            text,
          })
        ).status,
      ).toBe(202);
    }
    const opened = openStream(app);
    streams.push(opened);
    const [first] = await opened.waitFor(2);
    const cursor = first!.cursor;
    expect(positionOf(cursor)).toEqual({ [numberIds[0]!]: 1 });

    const resumed = openStream(app, cursor);
    streams.push(resumed);
    expect((await resumed.waitFor(1)).map((message) => message.text)).toEqual(['second']);

    const numbersToken = (await listNumbers(app, { pageSize: 1 })).nextPageToken;
    const refusals: Array<[string, ProvisioningApp, string]> = [
      ['forged old-format cursor', app, b64({ o: app.owner.svcnumId, p: { [numberIds[0]!]: 1 } })],
      ['forged positions with a made-up tag', app, withMadeUpTag({ [numberIds[0]!]: 0 })],
      ['altered position byte', app, flipByte(cursor, 3)],
      ['altered tag byte', app, flipByte(cursor, -5)],
      ['truncated', app, cutByte(cursor)],
      ["another caller's genuine cursor", other, cursor],
      ['a ListNumbers page token', app, numbersToken],
    ];
    for (const [what, as, resumeCursor] of refusals) {
      const refused = openStream(as, resumeCursor);
      streams.push(refused);
      await expect(refused.waitFor(1, 5_000), what).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
      expect(refused.error!.details, what).toMatch(/resume_cursor is not valid for this call/);
      expect(refused.messages, what).toEqual([]);
    }
    // And a cursor is no page token of ListNumbers.
    await rejects(listNumbers(app, { pageSize: 1, pageToken: cursor }), status.INVALID_ARGUMENT, NOT_VALID);
  });
});

describe('GET /api/discover page_token', () => {
  it('pages with genuine tokens; refuses forged, altered, truncated, other-capability and other-list tokens with 400 invalid_request', async () => {
    const names: string[] = [];
    let token = '';
    do {
      const reply = await discover({
        capability: 'tokens.booking',
        page_size: '1',
        ...(token ? { page_token: token } : {}),
      });
      expect(reply.status).toBe(200);
      const page = reply.json as { agents: Array<{ display_name: string }>; next_page_token: string };
      names.push(...page.agents.map((agent) => agent.display_name));
      token = page.next_page_token;
    } while (token);
    expect(names).toEqual(['Booker A', 'Booker B', 'Booker C']);

    const first = String((await discover({ capability: 'tokens.booking', page_size: '1' })).json.next_page_token);
    const svcnumId = positionOf(first) as string;
    const numbersToken = (await listNumbers(app, { pageSize: 1 })).nextPageToken;
    const refusals: Array<[string, Record<string, string>]> = [
      [
        'forged old-format token',
        { capability: 'tokens.booking', page_token: b64({ c: 'tokens.booking', k: svcnumId }) },
      ],
      ['forged position with a made-up tag', { capability: 'tokens.booking', page_token: withMadeUpTag(svcnumId) }],
      ['altered position byte', { capability: 'tokens.booking', page_token: flipByte(first, 4) }],
      ['altered tag byte', { capability: 'tokens.booking', page_token: flipByte(first, -1) }],
      ['truncated', { capability: 'tokens.booking', page_token: cutByte(first) }],
      ['another capability (filter)', { capability: 'tokens.chat', page_token: first }],
      ['a ListNumbers page token (another list)', { capability: 'tokens.booking', page_token: numbersToken }],
    ];
    for (const [what, query] of refusals) {
      const reply = await discover({ page_size: '1', ...query });
      expect(reply.status, what).toBe(400);
      expect(reply.json, what).toEqual({
        error: 'invalid_request',
        error_description: 'page_token is not valid for this call; start again without it',
      });
    }
    // A discover token is no page token of ListNumbers either.
    await rejects(listNumbers(app, { pageSize: 1, pageToken: first }), status.INVALID_ARGUMENT, NOT_VALID);
    // The genuine token still continues.
    expect((await discover({ capability: 'tokens.booking', page_size: '1', page_token: first })).json.agents).toEqual([
      expect.objectContaining({ display_name: 'Booker B' }),
    ]);
  });
});
