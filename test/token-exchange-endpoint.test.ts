import { status } from '@grpc/grpc-js';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECORD_CACHE_TTL } from '../core/accounts';
import type { Client } from '../core/kernel/model';
import type { ServedGrant } from '../core/kernel/grant-type';
import { createGrantTable } from '../core/oauth/grants/table';
import {
  type Agent,
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  ExchangeTokenRequest,
  type ExchangeTokenResponse,
  IssueAgentTokenRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import type { AccessToken } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { dpopKey } from './support/dpop';
import { createLoginClient, postForm, verifyWithJwks, type Reply } from './support/flow';
import { call, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// RFC 8693 token exchange at POST /oauth/token, driven by the RP libraries the project uses
// (openid-client v6 `genericGrantRequest`, oauth4webapi `genericTokenEndpointRequest`): the
// ExchangeToken RPC's rules for a provisioning client that proves its secret. A parity table runs
// the same inputs through the RPC and the token endpoint: they accept and refuse alike.

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const SVCNUM_ID = 'urn:svcnum:params:oauth:token-type:svcnum-id';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

let service: TestService;
let app: ProvisioningApp;
let other: ProvisioningApp;
let number: ProgrammableNumber;
let theirNumber: ProgrammableNumber;
/** Independent agents of the app: A owns the dependent D; B is a bystander. */
let agentA: CreateAgentResponse;
let agentB: CreateAgentResponse;
let dependentD: Agent;
let login: Client;
let api: { client: Client; clientSecret: string };

const createAgent = (owner: ProvisioningApp, displayName: string) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    owner.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName }),
    owner.token,
  );
const provisionNumber = (owner: ProvisioningApp, displayName: string) =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    owner.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName }),
    owner.token,
  );
const agentToken = async (svcnumId: string, scope = '') =>
  (
    await call<IssueAgentTokenRequest, AccessToken>(
      app.agents,
      'issueAgentToken',
      IssueAgentTokenRequest.fromPartial({ svcnumId, scope }),
      app.token,
    )
  ).accessToken;
const claimsOf = async (token: string) =>
  (await verifyWithJwks(service, token, { audience: service.issuer, typ: 'at+jwt' })).payload;

beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '73', 40);
  [app, other] = await Promise.all([provisioningApp(service), provisioningApp(service)]);
  number = await provisionNumber(app, 'Shop line');
  theirNumber = await provisionNumber(other, 'Their line');
  agentA = await createAgent(app, 'Agent A');
  agentB = await createAgent(app, 'Agent B');
  dependentD = await call<CreateDependentAgentRequest, Agent>(
    app.agents,
    'createDependentAgent',
    CreateDependentAgentRequest.fromPartial({
      displayName: 'Dependent D',
      ownerSvcnumId: agentA.agent!.svcnumId,
      scope: 'openid messaging',
    }),
    app.token,
  );
  login = await createLoginClient(service);
  api = (await service.core.registration.createApiClient({ name: 'Messaging partner', scope: 'messaging poll' })) as {
    client: Client;
    clientSecret: string;
  };
});
afterAll(async () => {
  app?.close();
  other?.close();
  await service?.close();
});

type Method = 'basic' | 'post' | 'none';
interface Credentials {
  clientId: string;
  secret?: string;
  method?: Method;
}
type ExchangeParams = Record<string, string> | URLSearchParams;

/** One library's token exchange call: the validated token response, or its rejection. */
interface ExchangeClient {
  name: string;
  exchange(credentials: Credentials, params: ExchangeParams): Promise<Record<string, unknown>>;
}

const methodOf = (credentials: Credentials): Method =>
  credentials.method ?? (credentials.secret === undefined ? 'none' : 'basic');

const openidClient: ExchangeClient = {
  name: 'openid-client',
  async exchange(credentials, params) {
    const method = methodOf(credentials);
    const auth =
      method === 'none'
        ? oidc.None()
        : method === 'basic'
          ? oidc.ClientSecretBasic(credentials.secret!)
          : oidc.ClientSecretPost(credentials.secret!);
    const config = await oidc.discovery(new URL(service.issuer), credentials.clientId, undefined, auth, {
      execute: [oidc.allowInsecureRequests],
    });
    return { ...(await oidc.genericGrantRequest(config, TOKEN_EXCHANGE, params)) };
  },
};

const oauth4webapi: ExchangeClient = {
  name: 'oauth4webapi',
  async exchange(credentials, params) {
    const insecure = { [oauth.allowInsecureRequests]: true };
    const issuer = new URL(service.issuer);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const client: oauth.Client = { client_id: credentials.clientId };
    const method = methodOf(credentials);
    const auth =
      method === 'none'
        ? oauth.None()
        : method === 'basic'
          ? oauth.ClientSecretBasic(credentials.secret!)
          : oauth.ClientSecretPost(credentials.secret!);
    const response = await oauth.genericTokenEndpointRequest(as, client, auth, TOKEN_EXCHANGE, params, insecure);
    return { ...(await oauth.processGenericTokenEndpointResponse(as, client, response)) };
  },
};

const appCredentials = (method: Method = 'basic'): Credentials => ({
  clientId: app.clientId,
  secret: app.clientSecret,
  method,
});
const lend = (actorToken: string, extra: Record<string, string> = {}) => ({
  subject_token: number.svcnumId,
  subject_token_type: SVCNUM_ID,
  actor_token: actorToken,
  actor_token_type: ACCESS_TOKEN,
  ...extra,
});

describe.each([openidClient, oauth4webapi])('$name: grant_type token-exchange at the token endpoint', (library) => {
  it.each(['basic', 'post'] as const)(
    'lends a number to an agent (client_secret_%s): sub is the number, act.sub the agent',
    async (method) => {
      // Frozen: a fresh actor token leaves the full hour (its remaining seconds bound the result).
      service.clock.freeze();
      const tokens = await library
        .exchange(appCredentials(method), lend(await agentToken(agentA.agent!.svcnumId)))
        .finally(() => service.clock.release());
      expect(tokens).toMatchObject({
        issued_token_type: ACCESS_TOKEN,
        token_type: 'bearer',
        scope: 'messaging',
        expires_in: 3600,
      });
      expect(await claimsOf(String(tokens.access_token))).toMatchObject({
        sub: number.svcnumId,
        act: { sub: agentA.agent!.svcnumId },
        client_id: agentA.clientId,
        scope: 'messaging',
      });
    },
  );

  it("issues a dependent agent's token, act.sub its owner agent; narrows scope; our audience and resource are accepted", async () => {
    const plain = await library.exchange(appCredentials(), {
      subject_token: dependentD.svcnumId,
      subject_token_type: SVCNUM_ID,
    });
    expect(plain).toMatchObject({ issued_token_type: ACCESS_TOKEN, token_type: 'bearer', scope: 'openid messaging' });
    expect(await claimsOf(String(plain.access_token))).toMatchObject({
      sub: dependentD.svcnumId,
      act: { sub: agentA.agent!.svcnumId },
      client_id: app.clientId,
    });

    const ownerToken = await agentToken(agentA.agent!.svcnumId, 'messaging profile');
    const acted = await library.exchange(appCredentials('post'), {
      subject_token: dependentD.svcnumId,
      subject_token_type: SVCNUM_ID,
      actor_token: ownerToken,
      actor_token_type: ACCESS_TOKEN,
      scope: 'messaging',
      requested_token_type: ACCESS_TOKEN,
      audience: service.issuer,
      resource: service.issuer,
    });
    expect(acted).toMatchObject({ scope: 'messaging', issued_token_type: ACCESS_TOKEN });
    expect(await claimsOf(String(acted.access_token))).toMatchObject({
      sub: dependentD.svcnumId,
      act: { sub: agentA.agent!.svcnumId },
      client_id: agentA.clientId,
    });
  });

  it('refuses bad requests per RFC 8693 §2.2.2: invalid_request, invalid_target, invalid_scope (400)', async () => {
    const actorToken = await agentToken(agentA.agent!.svcnumId);
    const refused = (params: ExchangeParams, error: string) =>
      expect(
        library.exchange(appCredentials(), params),
        JSON.stringify([...new URLSearchParams(params)]),
      ).rejects.toMatchObject({ error, status: 400 });
    await refused({ subject_token_type: SVCNUM_ID }, 'invalid_request');
    await refused({ subject_token: number.svcnumId }, 'invalid_request');
    await refused(lend(actorToken, { subject_token_type: ACCESS_TOKEN }), 'invalid_request');
    await refused(lend('not-a-token'), 'invalid_request');
    await refused({ subject_token: number.svcnumId, subject_token_type: SVCNUM_ID }, 'invalid_request');
    await refused(
      lend(actorToken, { requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' }),
      'invalid_request',
    );
    // Not the caller's: another account's number, an independent agent (NOT_FOUND over gRPC).
    await refused({ ...lend(actorToken), subject_token: theirNumber.svcnumId }, 'invalid_request');
    await refused({ subject_token: agentB.agent!.svcnumId, subject_token_type: SVCNUM_ID }, 'invalid_request');
    // Each parameter at most once.
    const repeated = new URLSearchParams(lend(actorToken));
    repeated.append('subject_token', theirNumber.svcnumId);
    await refused(repeated, 'invalid_request');
    await refused(lend(actorToken, { audience: 'https://elsewhere.example' }), 'invalid_target');
    await refused(lend(actorToken, { resource: 'https://elsewhere.example/api' }), 'invalid_target');
    await refused(lend(actorToken, { scope: 'messaging openid' }), 'invalid_scope');
  });

  it('refuses a wrong client secret with invalid_client (401)', async () => {
    await expect(
      library.exchange({ ...appCredentials('basic'), secret: `${app.clientSecret}x` }, lend('x')),
    ).rejects.toMatchObject({ status: 401, cause: [{ scheme: 'basic' }] });
    await expect(
      library.exchange({ ...appCredentials('post'), secret: `${app.clientSecret}x` }, lend('x')),
    ).rejects.toMatchObject({ status: 401, error: 'invalid_client' });
  });

  it('refuses clients the ExchangeToken RPC would not admit with unauthorized_client: login, API and agent clients', async () => {
    const params = { subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID };
    for (const credentials of [
      { clientId: login.clientId },
      { clientId: api.client.clientId, secret: api.clientSecret },
      { clientId: agentA.clientId, secret: agentA.clientSecret, method: 'post' as const },
    ]) {
      await expect(library.exchange(credentials, params)).rejects.toMatchObject({
        error: 'unauthorized_client',
        status: 400,
      });
    }
  });
});

describe('token exchange at the token endpoint over plain HTTP', () => {
  const basic = (id: string, secret: string) =>
    `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
  const exchangeForm = (form: Record<string, string>, who: ProvisioningApp = app) =>
    postForm(
      `${service.issuer}/oauth/token`,
      { grant_type: TOKEN_EXCHANGE, ...form },
      { Authorization: basic(who.clientId, who.clientSecret) },
    );

  it('answers RFC 8693 §2.2.1 exactly, never cached', async () => {
    const reply = await exchangeForm({ subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID });
    expect(reply.status).toBe(200);
    expect(Object.keys(reply.json).sort()).toEqual([
      'access_token',
      'expires_in',
      'issued_token_type',
      'scope',
      'token_type',
    ]);
    expect(reply.json).toMatchObject({
      issued_token_type: ACCESS_TOKEN,
      token_type: 'Bearer',
      expires_in: 3600,
      scope: 'openid messaging',
    });
    expect(reply.headers.get('cache-control')).toBe('no-store');
  });

  it('binds the token to the key of a DPoP proof sent with the request (RFC 9449 §5)', async () => {
    const key = await dpopKey();
    const reply = await postForm(
      `${service.issuer}/oauth/token`,
      { grant_type: TOKEN_EXCHANGE, subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID },
      {
        Authorization: basic(app.clientId, app.clientSecret),
        DPoP: await key.proof('POST', `${service.issuer}/oauth/token`),
      },
    );
    expect(reply.json.token_type).toBe('DPoP');
    expect(decodeJwt(String(reply.json.access_token)).cnf).toEqual({ jkt: key.jkt });
  });

  it("takes a DPoP-bound agent token as actor_token only with a proof of the agent token's key (RFC 9449 §7.2)", async () => {
    const tokenUrl = `${service.issuer}/oauth/token`;
    const key = await dpopKey();
    const bound = await postForm(
      tokenUrl,
      { grant_type: 'client_credentials', client_id: agentA.clientId, client_secret: agentA.clientSecret },
      { DPoP: await key.proof('POST', tokenUrl) },
    );
    expect(bound.json.token_type).toBe('DPoP');
    const form = { grant_type: TOKEN_EXCHANGE, ...lend(String(bound.json.access_token)) };
    const auth = { Authorization: basic(app.clientId, app.clientSecret) };
    const asBearer = await postForm(tokenUrl, form, auth);
    expect(asBearer.status).toBe(400);
    expect(asBearer.json).toMatchObject({ error: 'invalid_request', error_description: /actor_token is DPoP-bound/ });
    const otherKey = await dpopKey();
    const wrongKey = await postForm(tokenUrl, form, { ...auth, DPoP: await otherKey.proof('POST', tokenUrl) });
    expect(wrongKey.json).toMatchObject({ error: 'invalid_request' });
    const proven = await postForm(tokenUrl, form, { ...auth, DPoP: await key.proof('POST', tokenUrl) });
    expect(proven.status).toBe(200);
    expect(decodeJwt(String(proven.json.access_token)).cnf).toEqual({ jkt: key.jkt });
  });

  it('refuses a provisioning client without prov:agents, or of an inactive account, with unauthorized_client', async () => {
    const numbersOnly = await provisioningApp(service, { scope: 'prov:numbers' });
    const disabled = await provisioningApp(service);
    try {
      await service.core.registration.disableUser(disabled.owner.svcnumId);
      // The owner's status is cached for up to 30 s (it was read when the app got its token).
      service.clock.advance(RECORD_CACHE_TTL);
      for (const who of [numbersOnly, disabled]) {
        const reply = await exchangeForm({ subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID }, who);
        expect({ status: reply.status, error: reply.json.error }).toEqual({
          status: 400,
          error: 'unauthorized_client',
        });
        expect(reply.headers.get('cache-control')).toBe('no-store');
      }
    } finally {
      numbersOnly.close();
      disabled.close();
    }
  });

  it('trusts the owner account as client_credentials does: a disabled owner stops exchanging within 30 s', async () => {
    const soon = await provisioningApp(service);
    try {
      // Admitted as a caller (its subject is not its own, so the exchange itself is refused) …
      const admitted = await exchangeForm({ subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID }, soon);
      expect({ status: admitted.status, error: admitted.json.error }).toEqual({
        status: 400,
        error: 'invalid_request',
      });
      // … still admitted right after its account is disabled (the status is cached for up to 30 s) …
      await service.core.registration.disableUser(soon.owner.svcnumId);
      const cached = await exchangeForm({ subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID }, soon);
      expect({ status: cached.status, error: cached.json.error }).toEqual({ status: 400, error: 'invalid_request' });
      // … and refused as a caller once that has passed.
      service.clock.advance(RECORD_CACHE_TTL);
      const refused = await exchangeForm({ subject_token: dependentD.svcnumId, subject_token_type: SVCNUM_ID }, soon);
      expect({ status: refused.status, error: refused.json.error }).toEqual({
        status: 400,
        error: 'unauthorized_client',
      });
    } finally {
      soon.close();
    }
  });

  it('answers odd values of every RFC 8693 parameter with a 400 OAuth error, never a 5xx', async () => {
    const actorToken = await agentToken(agentA.agent!.svcnumId);
    const odd = [
      '',
      ' ',
      'x'.repeat(4097),
      '\u0000',
      '%zz',
      'constructor',
      '__proto__',
      'a.b.c',
      `${actorToken}x`,
      '\u{1F600}'.repeat(10),
      'urn:',
    ];
    const names = [
      'subject_token',
      'subject_token_type',
      'actor_token',
      'actor_token_type',
      'requested_token_type',
      'scope',
      'audience',
      'resource',
    ];
    for (const name of names) {
      for (const value of odd) {
        const reply = await exchangeForm({ ...lend(actorToken), [name]: value });
        // An empty value is an omitted parameter (RFC 6749 §3.1); some omissions are fine (scope, audience, resource).
        if (reply.status === 200) continue;
        expect({ name, value: value.slice(0, 20), status: reply.status }).toEqual({
          name,
          value: value.slice(0, 20),
          status: 400,
        });
        expect(['invalid_request', 'invalid_target', 'invalid_scope']).toContain(reply.json.error);
      }
    }
  });
});

describe('parity: the ExchangeToken RPC and the token endpoint accept and refuse alike', () => {
  type Outcome =
    | { ok: true; scope: string; issuedTokenType: string; claims: Record<string, unknown> }
    | { ok: false; error: string };
  const claimsWanted = async (token: string) => {
    const { sub, act, client_id: clientId, scope } = await claimsOf(token);
    return { sub, act, clientId, scope };
  };

  async function viaRpc(who: ProvisioningApp, fields: Partial<ExchangeTokenRequest>): Promise<Outcome> {
    try {
      const result = await call<ExchangeTokenRequest, ExchangeTokenResponse>(
        who.agents,
        'exchangeToken',
        ExchangeTokenRequest.fromPartial(fields),
        who.token,
      );
      return {
        ok: true,
        scope: result.scope,
        issuedTokenType: result.issuedTokenType,
        claims: await claimsWanted(result.accessToken),
      };
    } catch (error) {
      const code = (error as { metadata?: { get(key: string): unknown[] } }).metadata?.get('oauth-error')[0];
      return { ok: false, error: String(code) };
    }
  }

  async function viaTokenEndpoint(who: ProvisioningApp, fields: Partial<ExchangeTokenRequest>): Promise<Outcome> {
    const names: Record<keyof ExchangeTokenRequest, string> = {
      subjectToken: 'subject_token',
      subjectTokenType: 'subject_token_type',
      actorToken: 'actor_token',
      actorTokenType: 'actor_token_type',
      requestedTokenType: 'requested_token_type',
      scope: 'scope',
      audience: 'audience',
    };
    const form: Record<string, string> = {
      grant_type: TOKEN_EXCHANGE,
      client_id: who.clientId,
      client_secret: who.clientSecret,
    };
    for (const [field, value] of Object.entries(fields)) form[names[field as keyof ExchangeTokenRequest]] = value;
    const reply: Reply = await postForm(`${service.issuer}/oauth/token`, form);
    if (reply.status !== 200) {
      expect(reply.status).toBe(400);
      return { ok: false, error: String(reply.json.error) };
    }
    return {
      ok: true,
      scope: String(reply.json.scope),
      issuedTokenType: String(reply.json.issued_token_type),
      claims: await claimsWanted(String(reply.json.access_token)),
    };
  }

  it('gives the same outcome (or the same OAuth error code) for each input', async () => {
    const actorToken = await agentToken(agentA.agent!.svcnumId);
    const ownerToken = await agentToken(agentA.agent!.svcnumId, 'messaging');
    const bystanderToken = await agentToken(agentB.agent!.svcnumId);
    const suspended = await provisionNumber(app, 'Suspended line');
    await service.core.provisioning.lifecycle.suspend(suspended.svcnum);
    const lendFields = (actor: string, extra: Partial<ExchangeTokenRequest> = {}): Partial<ExchangeTokenRequest> => ({
      subjectToken: number.svcnumId,
      subjectTokenType: SVCNUM_ID,
      actorToken: actor,
      actorTokenType: ACCESS_TOKEN,
      ...extra,
    });
    const dependent = (extra: Partial<ExchangeTokenRequest> = {}): Partial<ExchangeTokenRequest> => ({
      subjectToken: dependentD.svcnumId,
      subjectTokenType: SVCNUM_ID,
      ...extra,
    });
    const cases: Array<[string, Partial<ExchangeTokenRequest>, string]> = [
      ['lend a number', lendFields(actorToken), 'ok'],
      [
        'lend, narrowed, our audience, access token requested',
        lendFields(actorToken, { scope: 'messaging', audience: service.issuer, requestedTokenType: ACCESS_TOKEN }),
        'ok',
      ],
      ['lend, wider scope', lendFields(actorToken, { scope: 'messaging openid' }), 'invalid_scope'],
      [
        'lend without an actor token',
        { subjectToken: number.svcnumId, subjectTokenType: SVCNUM_ID },
        'invalid_request',
      ],
      ['lend, actor token not a token', lendFields('not-a-token'), 'invalid_request'],
      [
        'lend, actor_token_type wrong',
        lendFields(actorToken, { actorTokenType: 'urn:ietf:params:oauth:token-type:jwt' }),
        'invalid_request',
      ],
      [
        'lend, requested id_token',
        lendFields(actorToken, { requestedTokenType: 'urn:ietf:params:oauth:token-type:id_token' }),
        'invalid_request',
      ],
      ['lend, foreign audience', lendFields(actorToken, { audience: 'https://elsewhere.example' }), 'invalid_target'],
      ['lend their number', lendFields(actorToken, { subjectToken: theirNumber.svcnumId }), 'invalid_request'],
      ['lend a suspended number', lendFields(actorToken, { subjectToken: suspended.svcnumId }), 'invalid_request'],
      ['no subject_token', { subjectTokenType: SVCNUM_ID }, 'invalid_request'],
      ['wrong subject_token_type', dependent({ subjectTokenType: ACCESS_TOKEN }), 'invalid_request'],
      ['dependent', dependent(), 'ok'],
      ['dependent, narrowed', dependent({ scope: 'openid' }), 'ok'],
      ['dependent, owner acts', dependent({ actorToken: ownerToken, actorTokenType: ACCESS_TOKEN }), 'ok'],
      [
        'dependent, a bystander acts',
        dependent({ actorToken: bystanderToken, actorTokenType: ACCESS_TOKEN }),
        'invalid_request',
      ],
      ['dependent, wider scope', dependent({ scope: 'openid profile' }), 'invalid_scope'],
      [
        'an independent agent as subject',
        { subjectToken: agentB.agent!.svcnumId, subjectTokenType: SVCNUM_ID },
        'invalid_request',
      ],
    ];
    for (const [name, fields, expected] of cases) {
      const [rpc, endpoint] = [await viaRpc(app, fields), await viaTokenEndpoint(app, fields)];
      expect(endpoint, name).toEqual(rpc);
      expect(rpc.ok ? 'ok' : rpc.error, name).toBe(expected);
    }
  });

  it('refuses the same callers: a client without prov:agents, or of an inactive account', async () => {
    const numbersOnly = await provisioningApp(service, { scope: 'prov:numbers' });
    const disabled = await provisioningApp(service);
    try {
      await service.core.registration.disableUser(disabled.owner.svcnumId);
      service.clock.advance(RECORD_CACHE_TTL);
      // Each protocol says it in its words: a missing scope is PERMISSION_DENIED, a token of a
      // disabled account UNAUTHENTICATED (its token is no longer in force); the token endpoint: unauthorized_client.
      for (const [who, code] of [
        [numbersOnly, status.PERMISSION_DENIED],
        [disabled, status.UNAUTHENTICATED],
      ] as const) {
        const fields = { subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID };
        expect(
          (await failure(call(who.agents, 'exchangeToken', ExchangeTokenRequest.fromPartial(fields), who.token))).code,
        ).toBe(code);
        expect(await viaTokenEndpoint(who, fields)).toEqual({ ok: false, error: 'unauthorized_client' });
      }
    } finally {
      numbersOnly.close();
      disabled.close();
    }
  });
});

describe('the grant type registry', () => {
  it('is what discovery lists as grant_types_supported: the three of RFC 6749, then token exchange', async () => {
    const document = (await (await fetch(`${service.issuer}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(document.grant_types_supported).toEqual([...service.core.tokenEndpoint.grantTypes]);
    expect(service.core.tokenEndpoint.grantTypes).toEqual([
      'authorization_code',
      'refresh_token',
      'client_credentials',
      TOKEN_EXCHANGE,
    ]);
  });

  it('serves confidential grants only to clients that proved a secret: a non-login record without one cannot authenticate', async () => {
    // A record no admin path makes (every kind but login gets a secret); the token endpoint must not treat it as
    // public.
    const clientId = `secretless-${Date.now()}`;
    await service.core.store.createClient({
      clientId,
      kind: 'provisioning',
      name: 'No secret',
      redirectUris: [],
      scopes: ['prov:agents'],
      ownerId: app.owner.svcnumId,
      disabled: false,
      createdAt: 0,
    });
    for (const grantType of ['client_credentials', TOKEN_EXCHANGE]) {
      const reply = await postForm(`${service.issuer}/oauth/token`, {
        grant_type: grantType,
        client_id: clientId,
        subject_token: dependentD.svcnumId,
        subject_token_type: SVCNUM_ID,
      });
      expect({ status: reply.status, error: reply.json.error }).toEqual({ status: 401, error: 'invalid_client' });
    }
  });

  it('finds own entries only, and refuses a type registered twice', () => {
    const grant = (name: string): ServedGrant => ({
      name,
      clients: ['login'],
      parameters: { required: [], optional: [] },
      handle: async () => {
        throw new Error('not called');
      },
    });
    const table = createGrantTable([grant('a'), grant('b')]);
    expect(table.names).toEqual(['a', 'b']);
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty'])
      expect(table.find(name)).toBeUndefined();
    expect(() => createGrantTable([grant('a'), grant('a')])).toThrow();
  });
});
