import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentClient, ensureTables } from '../core/adapters/dynamo-schema';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { openLocalKeyStore, openLocalMacKey, PAGE_TOKEN_KEY_FILE } from '../core/adapters/local-keys';
import { systemRandom } from '../core/adapters/system';
import { serviceConfig } from '../core/kernel/config';
import { defineGrant, type GrantContext } from '../core/kernel/grant-type';
import { paramsFrom } from '../core/kernel/params';
import { buildModules, grantTypesOf, modulePorts, registrationModule, tokenEndpointModule } from '../core/registry';
import { defineModule, type ModulesOf } from '../core/registry-types';
import { tableNames } from '../core/tables';
import { discoveryDocument } from '../lambdas/discovery';
import { localDynamoClient } from '../local/embedded-dynamo';
import { startDynalite } from './support/dynamodb-local';
import { TestClock } from './support/clock';
import type { EmbeddedDynamo } from '../local/embedded-dynamo';

// The token endpoint's table of grants drives both dispatch and discovery: a module that is not
// OAuth's adds a grant type through its own definition's `grants`, and a token endpoint that needs
// it (a test registry here) serves it, reads its declared parameters, and lists it.

const ISSUER = 'http://127.0.0.1:1';
const TEST_GRANT = 'urn:example:params:oauth:grant-type:echo';

/** A module of the test registry: it counts the requests its grant served. */
function createEchoModule() {
  const seen: GrantContext['parameters'][] = [];
  return { seen };
}

const echoGrant = defineGrant({
  name: TEST_GRANT,
  clients: ['api'],
  parameters: { required: ['word'], optional: ['scope'] },
  async handler({ client, parameters }, echo: ReturnType<typeof createEchoModule>) {
    echo.seen.push(parameters);
    const scope = parameters.scope ?? '';
    return { access_token: `${client.clientId}:${parameters.word}`, token_type: 'Bearer', expires_in: 1, scope };
  },
});

const echoModule = defineModule({ name: 'echo', needs: {}, create: createEchoModule, grants: [echoGrant] });
/** The token endpoint as the registry defines it, needing one more module that adds a grant. */
const testEndpoint = { ...tokenEndpointModule, needs: { ...tokenEndpointModule.needs, echo: echoModule } };

let dynamo: EmbeddedDynamo;
let keysDir: string;
const testRegistry = [testEndpoint, echoModule, registrationModule] as const;
let modules: ModulesOf<typeof testRegistry>;
let api: { clientId: string; secret: string };
let login: { clientId: string };

beforeAll(async () => {
  dynamo = await startDynalite();
  keysDir = await mkdtemp(join(tmpdir(), 'svcnum-grant-table-'));
  const client = localDynamoClient(dynamo.endpoint);
  const tables = tableNames('grant-table-');
  await ensureTables(client, tables);
  const ports = modulePorts({
    store: createDynamoStore(documentClient(client), tables),
    keys: await openLocalKeyStore(keysDir),
    macKey: await openLocalMacKey(keysDir),
    pageTokenKey: await openLocalMacKey(keysDir, PAGE_TOKEN_KEY_FILE),
    clock: new TestClock(),
    random: systemRandom,
    config: serviceConfig(ISSUER),
  });
  modules = buildModules(ports, testRegistry);
  const created = await modules.registration.createApiClient({ name: 'Echo caller', scope: 'messaging poll' });
  api = { clientId: created.client.clientId, secret: created.clientSecret! };
  const loginClient = await modules.registration.createLoginClient({
    name: 'Login',
    scope: 'openid',
    redirectUris: ['https://app.example/cb'],
  });
  login = { clientId: loginClient.client.clientId };
}, 60_000);

afterAll(async () => {
  await dynamo?.close();
  if (keysDir) await rm(keysDir, { recursive: true, force: true });
});

const token = (form: [string, string][]) =>
  modules.tokenEndpoint.token(paramsFrom([['grant_type', TEST_GRANT], ...form]), {
    basic: { clientId: api.clientId, clientSecret: api.secret },
  });
const invalidRequest = (message: string) => ({ oauth: 'invalid_request', message });

describe('a grant type added by a module through its definition', () => {
  it("is listed after OAuth's own, by the endpoint and by discovery alike", () => {
    const names = [
      'authorization_code',
      'refresh_token',
      'client_credentials',
      'urn:ietf:params:oauth:grant-type:token-exchange',
      TEST_GRANT,
    ];
    expect(modules.tokenEndpoint.grantTypes).toEqual(names);
    expect(grantTypesOf(testEndpoint.needs)).toEqual(names);
    expect(discoveryDocument(ISSUER, grantTypesOf(testEndpoint.needs)).grant_types_supported).toEqual(names);
  });

  it('is dispatched to its handler, given its module as built and the parameters it declares only', async () => {
    const response = await token([
      ['word', 'hello'],
      ['scope', 'poll'],
      ['other', 'x'],
      ['other', 'y'],
    ]);
    expect(response).toEqual({
      access_token: `${api.clientId}:hello`,
      token_type: 'Bearer',
      expires_in: 1,
      scope: 'poll',
    });
    expect(modules.echo.seen.at(-1)).toEqual({ word: 'hello', scope: 'poll' });
  });

  it('has its declared parameters checked before it runs: required, not empty, not repeated', async () => {
    const before = modules.echo.seen.length;
    await expect(token([])).rejects.toMatchObject(invalidRequest('word is required'));
    await expect(token([['word', '']])).rejects.toMatchObject(invalidRequest('word is required'));
    await expect(
      token([
        ['word', 'a'],
        ['word', 'a'],
      ]),
    ).rejects.toMatchObject(invalidRequest('word must not be repeated'));
    await expect(
      token([
        ['word', 'a'],
        ['scope', 'poll'],
        ['scope', 'poll'],
      ]),
    ).rejects.toMatchObject(invalidRequest('scope must not be repeated'));
    expect(modules.echo.seen.length).toBe(before);
  });

  it("serves only the client kinds it names; the registry's own endpoint does not serve it", async () => {
    const form = paramsFrom([
      ['grant_type', TEST_GRANT],
      ['client_id', login.clientId],
      ['word', 'a'],
    ]);
    const refused = modules.tokenEndpoint.token(form, {});
    await expect(refused).rejects.toMatchObject({ oauth: 'unauthorized_client' });
    expect(grantTypesOf(tokenEndpointModule.needs)).not.toContain(TEST_GRANT);
  });
});
