import { createPublicKey } from 'node:crypto';
import { builtinModules } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, status, type ServiceError } from '@grpc/grpc-js';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRegistration } from '../core/accounts';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient, ensureTables } from '../core/adapters/dynamo-schema';
import { systemClock, systemRandom } from '../core/adapters/system';
import type { Client, User } from '../core/kernel/model';
import { tableNames } from '../core/tables';
import {
  HealthClient,
  healthCheckResponse_ServingStatusToJSON as statusName,
} from '../grpc-service/gen/grpc/health/v1/health';
import {
  ListNumbersRequest,
  NumberServiceClient,
  type ListNumbersResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { access } from '../lib/access';
import { routeManifest, type RouteGroup } from '../lambdas/manifest';
import { localDynamoClient, startEmbeddedDynamo, type EmbeddedDynamo } from '../local/embedded-dynamo';
import { startHttpServer, type LocalRoute } from '../local/http-server';
import { buildLambdaBundle, type BuiltLambdaBundle } from '../lib/build-lambda';
import { lambdaBundle } from '../lib/bundling';
import { repoRoot } from '../lib/util';
import {
  awsRuntimeEnvironment,
  BLOCKED_MARK,
  buildGrpcBundle,
  lambdaRuntimeEnvironment,
  PUBLIC_KEYS_MARK,
  stackSettings,
  startGrpcTask,
  startLambdaHost,
  withPublicKeys,
  type GrpcBundle,
  type GrpcTask,
  type LambdaHost,
  type StackSettings,
} from './support/artifacts';
import { Browser, pkcePair } from './support/browser';
import { authorizeInBrowser, postForm, REDIRECT_URI, send } from './support/flow';
import { call } from './support/grpc';
import { startKmsStandIn, type KmsStandIn } from './support/kms-standin';

// The deployed artifacts, run: each Lambda bundle built as the stack builds it (lib/build-lambda.ts,
// the NodejsFunction options), loaded by plain Node in its own process with only the environment
// the synthesized template gives that function (plus region, fake credentials and the SDK's
// endpoint overrides; ISSUER too stays the stack's https issuer), and invoked with API Gateway
// REST proxy events, by a loopback HTTP front (local/http-server.ts builds the events) that
// routes each path to its function's process. The
// gRPC bundle is built by package.json's build:grpc command, as the image's Dockerfile runs it,
// and started like the image's CMD with the task definition's environment. Behind them: dynalite
// and a KMS stand-in (test/support/kms-standin.ts). Nothing may connect beyond loopback.

const groups = Object.keys(routeManifest) as RouteGroup[];

let root: string;
let settings: StackSettings;
let dynamo: EmbeddedDynamo;
let kms: KmsStandIn;
let gateway: Awaited<ReturnType<typeof startHttpServer>>;
/** The issuer the stack configures (the custom domain); requests go to `base`, the loopback front. */
let issuer: string;
let base: string;
let bundles: Record<RouteGroup, BuiltLambdaBundle>;
/** Issue 10's ceiling for every Lambda bundle (minified, as the stack ships it; `npm run bench` prints the sizes). */
const MAX_BUNDLE_BYTES = 300_000;
const hosts = {} as Record<RouteGroup, LambdaHost>;
let grpcBundle: GrpcBundle;
let grpcTask: GrpcTask | undefined;
let registration: ReturnType<typeof createRegistration>;
/** Every secret the test handled: none may appear in any process's output. */
const secrets: string[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'svcnum-artifacts-'));
  // esbuild works in its own process while the synthesis below keeps this one busy.
  const building = Promise.all(
    groups.map((group) => buildLambdaBundle(join(repoRoot, routeManifest[group].entry), join(root, group))),
  );
  const buildingGrpc = buildGrpcBundle(join(root, 'grpc'));
  settings = stackSettings();

  const prefixes = new Set([
    settings.task.TABLE_PREFIX,
    ...groups.map((group) => settings.lambdas[group].environment.TABLE_PREFIX),
  ]);
  expect(prefixes.size).toBe(1);
  const names = tableNames(settings.task.TABLE_PREFIX!);
  dynamo = await startEmbeddedDynamo(join(root, 'dynamodb'), 0);
  const dynamoClient = localDynamoClient(dynamo.endpoint);
  await ensureTables(dynamoClient, names);
  registration = createRegistration(createDynamoStore(documentClient(dynamoClient), names), systemClock, systemRandom);
  kms = await startKmsStandIn(settings.keys);

  const routes = new Map<string, LocalRoute>();
  gateway = await startHttpServer(routes, { port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${gateway.port}`;
  issuer = settings.task.ISSUER!;
  expect(issuer).toMatch(/^https:\/\//);
  expect(new Set(groups.map((group) => settings.lambdas[group].environment.ISSUER))).toEqual(new Set([issuer]));
  const runtime = awsRuntimeEnvironment(settings, { dynamodb: dynamo.endpoint, kms: kms.endpoint });

  bundles = Object.fromEntries((await building).map((built, index) => [groups[index], built])) as Record<
    RouteGroup,
    BuiltLambdaBundle
  >;
  await Promise.all(
    groups.map(async (group) => {
      const function_ = settings.lambdas[group];
      const directory = join(root, group);
      hosts[group] = await startLambdaHost(directory, function_, {
        ...withPublicKeys(function_.environment, settings, kms.publicKeyDer),
        ...runtime,
        ...lambdaRuntimeEnvironment(function_.functionName, directory),
      });
      for (const path of Object.keys(routeManifest[group].routes))
        routes.set(path, { handler: hosts[group].invoke, functionName: function_.functionName });
    }),
  );

  grpcBundle = await buildingGrpc;
  // Free ports instead of the container's fixed 50051 and 8081: other tests run beside this one.
  grpcTask = await startGrpcTask(grpcBundle, {
    ...withPublicKeys(settings.task, settings, kms.publicKeyDer),
    GRPC_PORT: '0',
    HEALTH_PORT: '0',
    ...runtime,
  });
}, 180_000);

afterAll(async () => {
  await grpcTask?.kill();
  await Promise.all(Object.values(hosts).map((host) => host.close()));
  await gateway?.close();
  await kms?.close();
  await dynamo?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const kmsKeyId = () => settings.lambdas.token.environment.KMS_KEY_ID!;
const rsaKeyId = () => settings.lambdas.token.environment.KMS_RSA_KEY_ID!;

async function clientCredentials(client: { clientId: string }, clientSecret: string) {
  secrets.push(clientSecret);
  const reply = await postForm(`${base}/oauth/token`, {
    grant_type: 'client_credentials',
    client_id: client.clientId,
    client_secret: clientSecret,
  });
  expect(reply.status, reply.text).toBe(200);
  const token = String(reply.json.access_token);
  secrets.push(token);
  return token;
}

async function verify(token: string, audience?: string) {
  const jwks = (await send(`${base}/.well-known/jwks.json`, { method: 'GET' })).json as {
    keys: Array<{ kid: string }>;
  };
  return jwtVerify(token, createLocalJWKSet({ keys: jwks.keys }), {
    algorithms: ['EdDSA'],
    issuer,
    typ: 'at+jwt',
    ...(audience ? { audience } : {}),
  });
}

let owner: User;
let person: { user: User; email: string; password: string };
let loginClient: Client;

describe('the Lambda bundles, as deployed', () => {
  it('are single files the stack names (Handler index.handler), import nothing but Node built-ins, and load under plain Node with only their stack environment', () => {
    const builtins = new Set(builtinModules);
    for (const group of groups) {
      const { handler, environment } = settings.lambdas[group];
      expect(`${handler.split('.')[0]}.mjs`, group).toBe(lambdaBundle.outputFile);
      const output = Object.values(bundles[group].metafile.outputs)[0]!;
      const external = output.imports.filter((entry) => entry.external);
      expect(
        external.filter(
          ({ path }) =>
            !path.startsWith('node:') && !builtins.has(path) && !lambdaBundle.externalModules.includes(path),
        ),
        group,
      ).toEqual([]);
      // What lib/bundling.ts leaves out is only ever loaded on demand (never, for DynamoDB and KMS).
      for (const left of external.filter(({ path }) => lambdaBundle.externalModules.includes(path)))
        expect(left.kind, group).toBe('dynamic-import');
      expect(hosts[group].output.stderr, group).not.toMatch(/Error|ERR_/);
      // What the stack configures, read from the template: each MAC key only where lib/access.ts grants it.
      expect('MAC_KEY_ID' in environment, group).toBe(access[group].mac !== undefined);
      expect('PAGE_TOKEN_KEY_ID' in environment, group).toBe(access[group].pageTokenMac !== undefined);
      expect('KMS_RSA_KEY_ID' in environment, group).toBe(access[group].rsaKeys !== undefined);
      expect(environment.KMS_KEY_ID, group).toBe(kmsKeyId());
      // The public keys come from the deploy-time custom resource (lib/public-keys.ts), never from GetPublicKey.
      expect(environment.KMS_PUBLIC_KEYS, group).toBe(PUBLIC_KEYS_MARK);
    }
    expect(settings.task.KMS_PUBLIC_KEYS).toBe(PUBLIC_KEYS_MARK);
  });

  it('are each at most 300 KB minified, and hold only what their routes use', () => {
    // A file reached but tree-shaken away to nothing is not held.
    const held = (group: RouteGroup, fragment: string) =>
      Object.entries(Object.values(bundles[group].metafile.outputs)[0]!.inputs).some(
        ([input, { bytesInOutput }]) => input.includes(fragment) && bytesInOutput > 0,
      );
    for (const group of groups) {
      const output = Object.values(bundles[group].metafile.outputs)[0]!;
      expect(output.bytes, `${group}: ${output.bytes} bytes`).toBeLessThanOrEqual(MAX_BUNDLE_BYTES);
      // No Lambda creates accounts, so none carries the input schemas (zod).
      expect(held(group, 'node_modules/zod/'), group).toBe(false);
      // The pub/sub engine's client (about 195 KB minified) is the gRPC task's, not a Lambda's.
      expect(held(group, 'node_modules/ioredis/'), group).toBe(false);
      expect(held(group, 'core/provisioning/agents.ts'), group).toBe(false);
    }
    // The SDK clients each holds: DynamoDB and KMS, none streaming events (so the event-stream codec
    // lib/bundling.ts leaves out is never loaded). A new client here must be checked for that.
    const clients = (group: RouteGroup) =>
      [
        ...new Set(
          Object.entries(Object.values(bundles[group].metafile.outputs)[0]!.inputs)
            .filter(([, { bytesInOutput }]) => bytesInOutput > 0)
            .map(([input]) => /@aws-sdk\/(client-[a-z0-9-]+)\//.exec(input)?.[1])
            .filter((name) => name !== undefined),
        ),
      ].sort();
    for (const group of groups)
      expect(clients(group), group).toEqual(group === 'discovery' ? ['client-kms'] : ['client-dynamodb', 'client-kms']);
    // Discovery reads no store; only the browser has the sign-in flow; only the token endpoint runs
    // its grants (discovery holds the table of grants, whose names it lists, but not the endpoint).
    expect(held('discovery', '@aws-sdk/client-dynamodb')).toBe(false);
    for (const group of groups) expect(held(group, 'core/oauth/authorization.ts'), group).toBe(group === 'browser');
    for (const group of groups) expect(held(group, 'core/oauth/token-service.ts'), group).toBe(group === 'token');
    for (const group of groups) {
      expect(held(group, 'core/oauth/grants/refresh-token.ts'), group).toBe(group === 'token' || group === 'discovery');
    }
  });

  it("discovery: the OpenID configuration names this issuer; the JWKS publishes the KMS key's public key", async () => {
    const configuration = await send(`${base}/.well-known/openid-configuration`, { method: 'GET' });
    expect(configuration.status).toBe(200);
    expect(configuration.json).toMatchObject({
      issuer,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      token_endpoint: `${issuer}/oauth/token`,
    });
    const jwks = await send(`${base}/.well-known/jwks.json`, { method: 'GET' });
    expect(jwks.status).toBe(200);
    const keys = jwks.json.keys as Array<Record<string, string>>;
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatchObject({ ...kms.publicJwk(kmsKeyId()), alg: 'EdDSA', use: 'sig' });
    expect(keys[0]!.kid).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    // Then the RSA key of RS256 ID tokens (KMS_RSA_KEY_ID), as discovery alone of the verifiers is given it.
    const rsa = createPublicKey({
      key: Buffer.from(kms.publicKeyDer(rsaKeyId()), 'base64'),
      format: 'der',
      type: 'spki',
    });
    const { n, e } = rsa.export({ format: 'jwk' });
    expect(keys[1]).toMatchObject({ kty: 'RSA', n, e, alg: 'RS256', use: 'sig' });
    expect(configuration.json).toMatchObject({
      id_token_signing_alg_values_supported: ['EdDSA', 'RS256'],
      end_session_endpoint: `${issuer}/logout`,
    });
  });

  it("token: a client_credentials token, signed by KMS Sign with the stack's key, verifies against the JWKS", async () => {
    owner = await registration.createUser({
      email: `owner-${Date.now()}@example.com`,
      password: 'owner password 1',
      accountType: 'business',
    });
    const { client, clientSecret } = await registration.createApiClient({
      name: 'Artifacts app',
      scope: 'messaging',
      ownerId: owner.svcnumId,
    });
    const signsBefore = kms.requests.filter((request) => request.operation === 'Sign').length;
    const token = await clientCredentials(client, clientSecret!);
    const { payload } = await verify(token);
    expect(payload).toMatchObject({ client_id: client.clientId, sub: client.clientId, scope: 'messaging' });
    expect(kms.requests.filter((request) => request.operation === 'Sign').slice(signsBefore)).toEqual([
      { operation: 'Sign', keyId: kmsKeyId(), signed: true, status: 200 },
    ]);
  });

  it('browser, token, userinfo: a person signs in through the pages (CSRF by KMS GenerateMac/VerifyMac), the code is redeemed, UserInfo answers', async () => {
    const email = `person-${Date.now()}@example.com`;
    const password = 'correct horse battery staple';
    person = { user: await registration.createUser({ email, password }), email, password };
    secrets.push(password);
    loginClient = (
      await registration.createLoginClient({
        name: 'Artifacts login',
        scope: 'openid profile email',
        redirectUris: [REDIRECT_URI],
      })
    ).client;

    const browser = new Browser(base);
    const login = await browser.request('/login');
    expect([200, 400]).toContain(login.status); // the page, or its error page without a pending request
    expect(login.headers.get('content-type')).toMatch(/^text\/html/);
    for (const cookie of login.headers.getSetCookie()) expect(cookie).toMatch(/^__Host-[^;]*;.*; Secure/);

    const pkce = pkcePair();
    const final = await authorizeInBrowser(browser, loginClient, person, { code_challenge: pkce.challenge });
    const redirect = new URL(final.location!);
    expect(`${redirect.origin}${redirect.pathname}`).toBe(REDIRECT_URI);
    expect(redirect.searchParams.get('iss')).toBe(issuer);
    // An https issuer, as deployed: the pages' cookies are __Host- prefixed and Secure.
    expect([...browser.cookies.keys()].length).toBeGreaterThan(0);
    expect([...browser.cookies.keys()].filter((name) => !name.startsWith('__Host-'))).toEqual([]);
    const code = redirect.searchParams.get('code')!;
    secrets.push(code, pkce.verifier);
    const macKey = settings.lambdas.browser.environment.MAC_KEY_ID;
    const macCalls = kms.requests.filter(
      (request) => request.operation === 'GenerateMac' || request.operation === 'VerifyMac',
    );
    expect(macCalls.map((request) => request.operation)).toEqual(expect.arrayContaining(['GenerateMac', 'VerifyMac']));
    expect(macCalls.every((request) => request.keyId === macKey && request.status === 200)).toBe(true);

    const tokens = await postForm(`${base}/oauth/token`, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT_URI,
      client_id: loginClient.clientId,
      code_verifier: pkce.verifier,
    });
    expect(tokens.status, tokens.text).toBe(200);
    expect(tokens.headers.get('cache-control')).toBe('no-store');
    const accessToken = String(tokens.json.access_token);
    secrets.push(accessToken, String(tokens.json.id_token), String(tokens.json.refresh_token));
    expect((await verify(accessToken, issuer)).payload).toMatchObject({
      sub: person.user.svcnumId,
      client_id: loginClient.clientId,
    });

    const userinfo = await send(`${base}/oauth/userinfo`, {
      method: 'GET',
      headers: { Authorization: `Bearer ${accessToken}` },
    });
    expect(userinfo.status, userinfo.text).toBe(200);
    expect(userinfo.json).toMatchObject({ sub: person.user.svcnumId, email: person.email });
    const anonymous = await send(`${base}/oauth/userinfo`, { method: 'GET' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('token, browser: an RS256 client gets an RS256 ID token (KMS Sign of a DIGEST with the RSA key), which /logout takes as hint', async () => {
    const bye = 'https://client.example/bye';
    const { client } = await registration.createLoginClient({
      name: 'Artifacts RS256',
      scope: 'openid',
      redirectUris: [REDIRECT_URI],
      idTokenAlg: 'RS256',
      postLogoutRedirectUris: [bye],
    });
    const browser = new Browser(base);
    const pkce = pkcePair();
    const final = await authorizeInBrowser(browser, client, person, {
      scope: 'openid',
      code_challenge: pkce.challenge,
    });
    const code = new URL(final.location!).searchParams.get('code')!;
    secrets.push(code, pkce.verifier);
    const signsBefore = kms.requests.filter((request) => request.operation === 'Sign').length;
    const tokens = await postForm(`${base}/oauth/token`, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT_URI,
      client_id: client.clientId,
      code_verifier: pkce.verifier,
    });
    expect(tokens.status, tokens.text).toBe(200);
    const idToken = String(tokens.json.id_token);
    secrets.push(idToken, String(tokens.json.access_token), String(tokens.json.refresh_token));
    const jwks = (await send(`${base}/.well-known/jwks.json`, { method: 'GET' })).json as {
      keys: Array<{ kid: string }>;
    };
    const { protectedHeader } = await jwtVerify(idToken, createLocalJWKSet(jwks as { keys: never[] }), {
      algorithms: ['RS256'],
      issuer,
      audience: client.clientId,
    });
    expect(protectedHeader.kid).toBe(jwks.keys[1]!.kid);
    // One Sign per key: the access token (Ed25519), the ID token (RSA).
    expect(
      kms.requests
        .filter((request) => request.operation === 'Sign')
        .slice(signsBefore)
        .map((request) => request.keyId)
        .sort(),
    ).toEqual([kmsKeyId(), rsaKeyId()].sort());
    const logout = await browser.request(
      `/logout?${new URLSearchParams({ id_token_hint: idToken, post_logout_redirect_uri: bye, state: 'st' })}`,
    );
    expect(logout.status, logout.body).toBe(302);
    expect(logout.location).toBe(`${bye}?state=st`);
  });

  it('messages: an External API client of the business sends to the person; the message is accepted', async () => {
    const { client, clientSecret } = await registration.createApiClient({
      name: 'Artifacts sender',
      scope: 'messaging',
      ownerId: owner.svcnumId,
    });
    const token = await clientCredentials(client, clientSecret!);
    const sent = await send(`${base}/api/messages`, {
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ from: owner.svcnum, to: person.user.svcnum, text: 'hello from the bundles' }),
    });
    expect(sent.status, sent.text).toBe(202);
    expect(sent.json).toMatchObject({ from: owner.svcnum, to: person.user.svcnum });
  });

  it("public: /api/resolve answers a person's number with its public state only", async () => {
    const resolved = await send(`${base}/api/resolve?alias=${person.user.svcnum}`, { method: 'GET' });
    expect(resolved.status, resolved.text).toBe(200);
    expect(resolved.json).toEqual({ svcnum: person.user.svcnum, entity_type: 'person', state: 'active' });
  });
});

describe('the gRPC bundle, as the image runs it', () => {
  it('is built only from what the Dockerfile copies and imports only production dependencies', () => {
    const packageJson = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const builtins = new Set(builtinModules);
    const inputs = Object.keys(grpcBundle.metafile.inputs);
    expect(
      inputs.filter(
        (input) => !grpcBundle.dockerBuildContext.some((copied) => input === copied || input.startsWith(`${copied}/`)),
      ),
    ).toEqual([]);
    const packageOf = (path: string) =>
      path
        .split('/')
        .slice(0, path.startsWith('@') ? 2 : 1)
        .join('/');
    const imported = Object.values(grpcBundle.metafile.outputs).flatMap((output) =>
      output.imports.filter((entry) => entry.external).map((entry) => entry.path),
    );
    const outside = imported.filter(
      (path) => !path.startsWith('node:') && !builtins.has(path) && !(packageOf(path) in packageJson.dependencies),
    );
    expect(outside).toEqual([]);
    expect(grpcBundle.imageEnvironment).toMatchObject({ NODE_ENV: 'production' });
  });

  it("answers grpc.health.v1 Check and ListNumbers for a provisioning client's token", async () => {
    const target = `127.0.0.1:${grpcTask!.port}`;
    const health = new HealthClient(target, credentials.createInsecure());
    const numbers = new NumberServiceClient(target, credentials.createInsecure());
    try {
      const serving = await new Promise<string>((resolve, reject) =>
        health.check({ service: '' }, (error, response) =>
          error ? reject(error) : resolve(statusName(response.status)),
        ),
      );
      expect(serving).toBe('SERVING');
      const { client, clientSecret } = await registration.createProvisioningClient({
        name: 'Artifacts provisioning',
        scope: 'prov:numbers',
        ownerId: owner.svcnumId,
      });
      const token = await clientCredentials(client, clientSecret!);
      const listed = await call<ListNumbersRequest, ListNumbersResponse>(
        numbers,
        'listNumbers',
        ListNumbersRequest.fromPartial({}),
        token,
      );
      expect(listed.numbers).toEqual([]);
      const refused = await call(numbers, 'listNumbers', ListNumbersRequest.fromPartial({})).catch(
        (error: ServiceError) => error,
      );
      expect((refused as ServiceError).code).toBe(status.UNAUTHENTICATED);
    } finally {
      health.close();
      numbers.close();
    }
  });
});

describe('what the artifacts did', () => {
  it("reached nothing beyond loopback; every KMS call was signed, to the stack's keys, and answered; none was GetPublicKey (KMS_PUBLIC_KEYS)", () => {
    const outputs = [
      ...groups.map((group) => [group, hosts[group].output] as const),
      ['grpc', grpcTask!.output] as const,
    ];
    for (const [name, output] of outputs) expect(output.stderr, name).not.toContain(BLOCKED_MARK);
    const operations = new Set(kms.requests.map((request) => request.operation));
    expect([...operations].sort()).toEqual(['GenerateMac', 'Sign', 'VerifyMac']);
    for (const request of kms.requests) {
      expect(request, JSON.stringify(request)).toMatchObject({ signed: true, status: 200 });
      expect([...settings.keys.signing, ...settings.keys.mac, ...settings.keys.rsa]).toContain(request.keyId);
    }
  });

  it('logged no secret, token, code or password', () => {
    const outputs = [
      ...groups.map((group) => [group, hosts[group].output] as const),
      ['grpc', grpcTask!.output] as const,
    ];
    expect(secrets.length).toBeGreaterThan(8);
    for (const [name, output] of outputs) {
      const text = output.stdout + output.stderr;
      expect(text.length, `${name} logs something`).toBeGreaterThan(0);
      for (const secret of secrets) expect(text.includes(secret), `${name} logged a secret`).toBe(false);
    }
  });

  it('logged and measured as the service the stack names (SERVICE_NAME), the first request of a function as its cold start', () => {
    const lines = (output: { stdout: string }) =>
      output.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    for (const group of groups) {
      const logged = lines(hosts[group].output);
      const requests = logged.filter((line) => line.message === 'request');
      const metrics = logged.filter((line) => '_aws' in line);
      expect(requests.length, group).toBeGreaterThan(0);
      expect(metrics.length, group).toBe(requests.length);
      const service = settings.lambdas[group].environment.SERVICE_NAME;
      expect(new Set([...requests, ...metrics].map((line) => line.service)), group).toEqual(new Set([service]));
      expect(
        requests.map((line) => line.cold_start),
        group,
      ).toEqual([true, ...requests.slice(1).map(() => false)]);
    }
    expect(new Set(lines(grpcTask!.output).map((line) => line.service))).toEqual(new Set([settings.task.SERVICE_NAME]));
  });

  it('the gRPC task drains and exits 0 on SIGTERM, as ECS stops it', async () => {
    expect(await grpcTask!.stop()).toBe(0);
  });
});
