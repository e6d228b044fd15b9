import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { credentials } from '@grpc/grpc-js';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentClient, ensureTables } from '../../core/adapters/dynamo-schema';
import { createDynamoStore } from '../../core/adapters/dynamo-store';
import { openLocalKeyStore, openLocalMacKey, PAGE_TOKEN_KEY_FILE } from '../../core/adapters/local-keys';
import { systemRandom } from '../../core/adapters/system';
import { serviceConfig } from '../../core/kernel/config';
import type { MacKey } from '../../core/kernel/ports';
import { buildModules, modulePorts, type Modules } from '../../core/registry';
import { tableNames, type TableKey } from '../../core/tables';
import {
  CreateAgentRequest,
  CreateDependentAgentRequest,
  ExchangeTokenRequest,
  IssueAgentTokenRequest,
  RotateAgentSvcnumRequest,
  type CreateAgentResponse,
  type Agent,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  AliasServiceClient,
  CreateAliasRequest,
  DeleteAliasRequest,
  ListAliasesRequest,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/alias_service';
import {
  CloseMaskRequest,
  CreateMaskRequest,
  GetMaskRequest,
  ListMasksRequest,
  type Mask,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ConfigureProgrammableRequest,
  GetNumberRequest,
  ListNumbersRequest,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { startGrpcServer, type RunningGrpcServer } from '../../grpc-service/server';
import { routeGroups, type RouteGroup } from '../../lambdas/routes';
import { localCore, type LocalCore } from '../../local/runner';
import { grpcModules } from '../../grpc-service/server';
import { localDynamoClient, startEmbeddedDynamo, type EmbeddedDynamo } from '../../local/embedded-dynamo';
import { startHttpServer, type LambdaHandler, type LocalRoute } from '../../local/http-server';
import { access, type ComputeUnit, type DynamoAction } from '../../lib/access';
import { Browser } from '../support/browser';
import { softwarePasskey } from '../support/passkeys';
import { TestClock } from '../support/clock';
import { dpopKey } from '../support/dpop';
import { createLoginClient, createUser, exchange, obtainCode, postForm, send } from '../support/flow';
import { call, clientCredentialsToken, provisioningApp, seedPool, type ProvisioningApp } from '../support/grpc';
import { openStream, sendMessage } from '../support/messages';
import type { TestService } from '../support/service';

// lib/access.ts, checked against what the code really does: every compute unit (each Lambda
// route group, the Fargate task) gets its own core whose DynamoDB client records each call, and
// the usual flows run through them (sign-in, consent, code exchange, refresh, UserInfo, revoke,
// account page, client credentials, public endpoints, messages, every gRPC service and the
// message stream). Every recorded (action, table or index) must be granted to that unit; a new
// store call in a deployed path that lib/access.ts does not grant fails here, not in AWS. Uses of
// the MAC key (KMS GenerateMac / VerifyMac in AWS) are recorded the same way.

const PREFIX = 'access-';
const names = tableNames(PREFIX);
const tableOf = new Map(Object.entries(names).map(([key, name]) => [name, key as TableKey]));
const units = [...Object.keys(routeGroups), 'provisioning'] as ComputeUnit[];
const used = new Map<ComputeUnit, Set<string>>(units.map((unit) => [unit, new Set()]));

/** Records `<Action> <table>` or `<Action> <table>/index/<name>` for every DynamoDB call of `unit`. */
function recordCalls(client: DynamoDBClient, unit: ComputeUnit) {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const action = String(context.commandName).replace(/Command$/, '');
      const input = args.input as { TableName?: string; IndexName?: string; RequestItems?: Record<string, unknown> };
      const tables = input.TableName ? [input.TableName] : Object.keys(input.RequestItems ?? {});
      for (const table of tables) {
        const key = tableOf.get(table) ?? `unknown table ${table}`;
        used.get(unit)!.add(`${action} ${key}${input.IndexName ? `/index/${input.IndexName}` : ''}`);
      }
      return next(args);
    },
    { step: 'initialize', name: `record-${unit}` },
  );
}

/** Records `kms:GenerateMac <name>` / `kms:VerifyMac <name>` for every use of a MAC key by `unit`. */
const recordMac = (macKey: MacKey, unit: ComputeUnit, name: 'mac-key' | 'page-token-key'): MacKey => ({
  mac: (message) => {
    used.get(unit)!.add(`kms:GenerateMac ${name}`);
    return macKey.mac(message);
  },
  verify: (message, mac) => {
    used.get(unit)!.add(`kms:VerifyMac ${name}`);
    return macKey.verify(message, mac);
  },
});

/** What lib/access.ts grants `unit` on the two MAC keys, as recordMac names it. */
const grantedMac = (unit: ComputeUnit) => [
  ...(access[unit].mac ?? []).map((action) => `${action} mac-key`),
  ...(access[unit].pageTokenMac ?? []).map((action) => `${action} page-token-key`),
];

function granted(unit: ComputeUnit): Set<string> {
  const allowed = new Set<string>(grantedMac(unit));
  for (const [key, tableAccess] of Object.entries(access[unit].tables)) {
    for (const action of tableAccess.actions as readonly DynamoAction[]) allowed.add(`${action} ${key}`);
    for (const index of tableAccess.queryIndexes ?? []) allowed.add(`Query ${key}/index/${index}`);
  }
  return allowed;
}

let dataDir: string;
let dynamo: EmbeddedDynamo;
const clients: DynamoDBClient[] = [];
let server: Server;
let grpc: RunningGrpcServer;
let service: TestService;
let app: ProvisioningApp;
let aliases: AliasServiceClient;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'svcnum-access-'));
  dynamo = await startEmbeddedDynamo(dataDir, 0);
  const admin = localDynamoClient(dynamo.endpoint);
  clients.push(admin);
  await ensureTables(admin, names);
  const keys = await openLocalKeyStore(join(dataDir, 'keys'));
  const macKey = await openLocalMacKey(join(dataDir, 'keys'));
  const pageTokenKey = await openLocalMacKey(join(dataDir, 'keys'), PAGE_TOKEN_KEY_FILE);
  const clock = new TestClock();
  const routes = new Map<string, LocalRoute>();
  const started = await startHttpServer(routes, { port: 0, host: '127.0.0.1' });
  server = started.server;
  const issuer = `http://localhost:${started.port}`;
  const infrastructureFor = (unit?: ComputeUnit) => {
    const client = localDynamoClient(dynamo.endpoint);
    clients.push(client);
    const db = documentClient(client);
    // Single-item reads go through the store client's own read client (core/adapters/dynamo-schema.ts).
    if (unit) for (const recorded of [client, db.reads]) recordCalls(recorded, unit);
    return {
      store: createDynamoStore(db, names),
      keys,
      clock,
      random: systemRandom,
      config: serviceConfig(issuer),
      macKey: unit ? recordMac(macKey, unit, 'mac-key') : macKey,
      pageTokenKey: unit ? recordMac(pageTokenKey, unit, 'page-token-key') : pageTokenKey,
      // DPoP nonces on, as DPOP_NONCES=on deploys them: the token endpoint derives their key.
      dpopNonces: true,
    };
  };
  // Each unit builds only the modules its entry builds (lambdas/<group>.ts, grpc-service/main.ts).
  for (const [group, definition] of Object.entries(routeGroups)) {
    const modules = buildModules(
      modulePorts(infrastructureFor(group as RouteGroup)),
      definition.modules,
    ) as unknown as Modules;
    const handler = definition.create(modules) as LambdaHandler;
    for (const path of Object.keys(definition.routes)) routes.set(path, { handler, functionName: group });
  }
  grpc = await startGrpcServer(buildModules(modulePorts(infrastructureFor('provisioning')), grpcModules), {
    port: 0,
    host: '127.0.0.1',
  });
  // Set-up (clients, users, the pool) goes through an unrecorded core: the operator's admin CLI.
  const operator: LocalCore = localCore(infrastructureFor());
  service = {
    issuer,
    host: '127.0.0.1',
    port: started.port,
    grpcPort: grpc.port,
    dynamoEndpoint: dynamo.endpoint,
    core: operator,
    clock,
    dataDir,
    close: async () => undefined,
  };
  await seedPool(service, '77', 20);
  app = await provisioningApp(service);
  aliases = new AliasServiceClient(`127.0.0.1:${grpc.port}`, credentials.createInsecure());
}, 60_000);

afterAll(async () => {
  app?.close();
  aliases?.close();
  await grpc?.drain(1_000);
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  for (const client of clients) client.destroy();
  await dynamo?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('lib/access.ts against the DynamoDB calls the code makes', () => {
  it('runs the flows of every route group and of the gRPC task', async () => {
    // Browser sign-in, consent, code exchange, refresh, UserInfo, revocation.
    const client = await createLoginClient(service);
    const login = await createUser(service);
    const { code, verifier, browser } = await obtainCode(service, client, login);
    const tokens = await exchange(service, client, code, verifier);
    expect(tokens.status).toBe(200);
    expect((await exchange(service, client, code, verifier)).status).toBe(400); // replay: revokes the grant
    const second = await obtainCode(service, client, login, {}, browser);
    const fresh = await exchange(service, client, second.code, second.verifier);
    const refresh = String(fresh.json.refresh_token);
    service.clock.advance(2 * 86_400_000); // the refresh then moves the inactivity window (a write)
    const refreshed = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: refresh,
      client_id: client.clientId,
    });
    expect(refreshed.status).toBe(200);
    expect(
      (
        await send(`${service.issuer}/oauth/userinfo`, {
          method: 'GET',
          headers: { Authorization: `Bearer ${String(refreshed.json.access_token)}` },
        })
      ).status,
    ).toBe(200);
    // DPoP: a refresh with a proof (a nonce round first: nonces are on), then UserInfo with the bound token.
    const key = await dpopKey();
    const tokenUrl = `${service.issuer}/oauth/token`;
    const iat = () => Math.floor(service.clock.now() / 1000);
    const form = { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.clientId };
    const asked = await postForm(tokenUrl, form, { DPoP: await key.proof('POST', tokenUrl, { iat: iat() }) });
    const nonce = asked.headers.get('dpop-nonce')!;
    const bound = await postForm(tokenUrl, form, { DPoP: await key.proof('POST', tokenUrl, { iat: iat(), nonce }) });
    expect(bound.json.token_type).toBe('DPoP');
    const accessToken = String(bound.json.access_token);
    const userinfoUrl = `${service.issuer}/oauth/userinfo`;
    const proof = await key.proof('GET', userinfoUrl, { iat: iat(), accessToken });
    const headers = { Authorization: `DPoP ${accessToken}`, DPoP: proof };
    expect((await send(userinfoUrl, { method: 'GET', headers })).status).toBe(200);
    expect(
      (await postForm(`${service.issuer}/oauth/revoke`, { token: refresh, client_id: client.clientId })).status,
    ).toBe(200);
    // Sign-in by number, a wrong password, prompt=none, the account page, revoking an app, sign-out.
    const other = new Browser(service.issuer);
    const page = await other.request('/login');
    await other.request('/login', {
      form: { csrf: Browser.field(page.body, 'csrf'), identifier: login.user.svcnum, password: 'wrong password here' },
    });
    await other.request('/login', {
      form: { csrf: Browser.field(page.body, 'csrf'), identifier: login.user.svcnum, password: login.password },
    });
    const account = await other.request('/account');
    expect(account.status).toBe(200);
    await passkeyCalls(other, Browser.field(account.body, 'csrf'), login.user.svcnumId);
    // (The first browser's session expired with the clock moved 2 days; the second one is fresh.)
    expect(
      (
        await other.request('/account/revoke', {
          form: { client_id: client.clientId, csrf: Browser.field(account.body, 'csrf') },
        })
      ).status,
    ).toBe(303);
    expect(
      (
        await other.request('/logout', {
          form: { csrf: Browser.field((await other.request('/account')).body, 'csrf') },
        })
      ).status,
    ).toBeLessThan(400);
    // Discovery and keys.
    expect((await send(`${service.issuer}/.well-known/openid-configuration`, { method: 'GET' })).status).toBe(200);
    expect((await send(`${service.issuer}/.well-known/jwks.json`, { method: 'GET' })).status).toBe(200);

    // gRPC: numbers, masks, agents, token exchange, rotation, aliases, the message stream (with a
    // token from after the clock moved).
    const token = await clientCredentialsToken(service, app.clientId, app.clientSecret);
    const number = await call<ProvisionNumberRequest, ProgrammableNumber>(
      app.numbers,
      'provisionNumber',
      ProvisionNumberRequest.fromPartial({ displayName: 'Inbox', requestId: 'n-1' }),
      token,
    );
    await call(app.numbers, 'getNumber', GetNumberRequest.fromPartial({ svcnumId: number.svcnumId }), token);
    await call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({ pageSize: 10 }), token);
    await call(
      app.numbers,
      'configureProgrammable',
      ConfigureProgrammableRequest.fromPartial({
        svcnumId: number.svcnumId,
        config: { autoReply: 'closed' },
        updateMask: ['auto_reply'],
      }),
      token,
    );
    const agent = await call<CreateAgentRequest, CreateAgentResponse>(
      app.agents,
      'createAgent',
      CreateAgentRequest.fromPartial({
        displayName: 'Booking',
        capabilities: ['booking'],
        discoverable: true,
        requestId: 'a-1',
      }),
      token,
    );
    const agentToken = await call<IssueAgentTokenRequest, { accessToken: string }>(
      app.agents,
      'issueAgentToken',
      IssueAgentTokenRequest.fromPartial({ svcnumId: agent.agent!.svcnumId }),
      token,
    );
    await call<CreateDependentAgentRequest, Agent>(
      app.agents,
      'createDependentAgent',
      CreateDependentAgentRequest.fromPartial({
        ownerSvcnumId: agent.agent!.svcnumId,
        displayName: 'Sub',
        capabilities: ['booking'],
        discoverable: true,
      }),
      token,
    );
    await call(
      app.agents,
      'exchangeToken',
      ExchangeTokenRequest.fromPartial({
        subjectToken: number.svcnumId,
        subjectTokenType: 'urn:svcnum:params:oauth:token-type:svcnum-id',
        actorToken: agentToken.accessToken,
        actorTokenType: 'urn:ietf:params:oauth:token-type:access_token',
        scope: 'messaging',
      }),
      token,
    );
    await call(
      app.agents,
      'rotateAgentSvcnum',
      RotateAgentSvcnumRequest.fromPartial({ svcnumId: agent.agent!.svcnumId }),
      token,
    );
    const mask = await call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 3600,
        participantA: number.svcnumId,
        participantB: agent.agent!.svcnumId,
        scope: 'delivery',
        requestId: 'm-1',
      }),
      token,
    );
    await call(app.masks, 'getMask', GetMaskRequest.fromPartial({ maskId: mask.maskId }), token);
    await call(app.masks, 'listMasks', ListMasksRequest.fromPartial({ pageSize: 10 }), token);
    await call(
      aliases,
      'createAlias',
      CreateAliasRequest.fromPartial({ svcnumId: number.svcnumId, alias: 'access-test-inbox' }),
      token,
    );
    await call(aliases, 'listAliases', ListAliasesRequest.fromPartial({ svcnumId: number.svcnumId }), token);

    // Messages in, on the owner's stream; the public directory.
    const stream = openStream(app, '', token);
    expect((await sendMessage(service, agentToken.accessToken, { to: number.svcnum, text: 'hello' })).status).toBe(202);
    await stream.waitFor(1);
    stream.cancel();
    expect((await send(`${service.issuer}/api/resolve?alias=access-test-inbox`, { method: 'GET' })).status).toBe(200);
    expect((await send(`${service.issuer}/api/resolve?alias=${number.svcnum}`, { method: 'GET' })).status).toBe(200);
    // Two agents offer `booking`: the first page of one carries a page_token (the page-token key, from the MAC key).
    const firstPage = await send(`${service.issuer}/api/discover?capability=booking&page_size=1`, { method: 'GET' });
    expect(firstPage.status).toBe(200);
    const pageToken = String(firstPage.json.next_page_token);
    expect(pageToken).not.toBe('');
    expect(
      (
        await send(`${service.issuer}/api/discover?capability=booking&page_size=1&page_token=${pageToken}`, {
          method: 'GET',
        })
      ).status,
    ).toBe(200);
    await call(aliases, 'deleteAlias', DeleteAliasRequest.fromPartial({ alias: 'access-test-inbox' }), token);
    await call(app.masks, 'closeMask', CloseMaskRequest.fromPartial({ maskId: mask.maskId }), token);
  }, 60_000);

  it.each(units)('grants %s every DynamoDB call it made', (unit) => {
    const made = [...used.get(unit)!].sort();
    const allowed = granted(unit);
    expect(
      made.filter((operation) => !allowed.has(operation)),
      `${unit} made: ${made.join(', ')}`,
    ).toStrictEqual([]);
  });

  it('uses every MAC key action it grants, on its key (sign-in tokens; the page-token key of discover, List*, the message stream and DPoP nonces)', () => {
    for (const unit of units) {
      const made = [...used.get(unit)!].filter((operation) => / (mac-key|page-token-key)$/.test(operation)).sort();
      expect(made, unit).toStrictEqual(grantedMac(unit).sort());
    }
  });

  it('exercised every unit that has tables', () => {
    for (const unit of units) {
      if (Object.keys(access[unit].tables).length > 0) expect(used.get(unit)!.size, unit).toBeGreaterThan(0);
    }
  });
});

/**
 * Passkeys through the browser group, with a software authenticator: add one (options, the answer),
 * sign in with it in a second browser, rename and remove it.
 */
async function passkeyCalls(browser: Browser, csrf: string, svcnumId: string) {
  const passkey = softwarePasskey('localhost', service.issuer);
  const options = await browser.request('/account/passkeys/options', { form: { csrf } });
  const { challenge } = JSON.parse(options.body) as { challenge: string };
  const credential = JSON.stringify(passkey.register(challenge));
  expect((await browser.request('/account/passkeys', { form: { csrf, credential } })).location).toBe(
    '/account?passkey=added',
  );
  const elsewhere = new Browser(service.issuer);
  const signInCsrf = Browser.field((await elsewhere.request('/login')).body, 'csrf');
  const signInOptions = await elsewhere.request('/login/passkey', { form: { csrf: signInCsrf } });
  const answer = passkey.assert((JSON.parse(signInOptions.body) as { challenge: string }).challenge, svcnumId);
  const signedIn = await elsewhere.request('/login', { form: { csrf: signInCsrf, passkey: JSON.stringify(answer) } });
  expect(signedIn.location).toBe('/account');
  const id = passkey.credentialId;
  await browser.request('/account/passkeys/rename', { form: { csrf, id, name: 'Laptop' } });
  expect((await browser.request('/account/passkeys/remove', { form: { csrf, id } })).location).toBe(
    '/account?passkey=removed',
  );
}
