import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECORD_CACHE_TTL } from '../core/accounts';
import {
  type Agent,
  CreateAgentRequest,
  type CreateAgentResponse,
  CreateDependentAgentRequest,
  ExchangeTokenRequest,
  type ExchangeTokenResponse,
  IssueAgentTokenRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  ListNumbersRequest,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import type { Client } from '../core/kernel/model';
import * as exchangeTokenTypes from '../core/provisioning/exchange';
import { TOKEN_EXCHANGE } from '../core/provisioning/token-exchange-grant';
import { createLoginClient, createUser, exchange as redeemCode, obtainCode, postForm, send } from './support/flow';
import { call, clientCredentialsToken, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { sendMessage } from './support/messages';
import { startTestService, type TestService } from './support/service';

// Disabled means disabled (issue 24 items 1–3, 10): on every path that accepts or issues a token,
// the token's client, the account it acts for, its actors and their owner must each be enabled,
// judged at most 30 s late (RECORD_CACHE_TTL: the clock is moved past it, nothing sleeps), and a
// party enabled again works at once (no clock move). One table: path × kind of token × party.

const { TOKEN_TYPE_SVCNUM_ID: SVCNUM_ID, TOKEN_TYPE_ACCESS_TOKEN: ACCESS_TOKEN } = exchangeTokenTypes;

let service: TestService;
/** The business owner account B, its provisioning client P (and its gRPC clients). */
let app: ProvisioningApp;
/** Independent agent A (its own client), its dependent D, and a programmable number N of B. */
let agentA: CreateAgentResponse;
let dependentD: Agent;
let numberN: ProgrammableNumber;
/** An External API client of B. */
let api: { clientId: string; secret: string };
let login: { client: Client; email: string; password: string; svcnumId: string };

/** The parties a case disables, then enables again. */
type Party = { kind: 'client' | 'account'; id: () => string; name: string };
const client = (name: string, id: () => string): Party => ({ kind: 'client', id, name });
const account = (name: string, id: () => string): Party => ({ kind: 'account', id, name });

async function setEnabled(party: Party, enabled: boolean) {
  // What `admin client disable|enable` and `admin user disable|enable` change.
  if (party.kind === 'client') await service.core.store.setClientDisabled(party.id(), !enabled);
  else await service.core.store.setUserStatus(party.id(), enabled ? 'active' : 'disabled');
}

const PARTIES = {
  loginClient: client('login client', () => login.client.clientId),
  user: account('user', () => login.svcnumId),
  apiClient: client('API client', () => api.clientId),
  provisioningClient: client('provisioning client', () => app.clientId),
  owner: account('owner account', () => app.owner.svcnumId),
  agentClient: client("agent's client", () => agentA.clientId),
  agent: account('agent', () => agentA.agent!.svcnumId),
  number: account('lent number', () => numberN.svcnumId),
  dependent: account('dependent', () => dependentD.svcnumId),
};

const agents = <Req, Res>(method: string, request: Req, token = app.token) =>
  call<Req, Res>(app.agents, method, request, token);
const agentOwnToken = async () => clientCredentialsToken(service, agentA.clientId, agentA.clientSecret);
const lend = async (actorToken: string) =>
  agents<ExchangeTokenRequest, ExchangeTokenResponse>(
    'exchangeToken',
    ExchangeTokenRequest.fromPartial({
      subjectToken: numberN.svcnumId,
      subjectTokenType: SVCNUM_ID,
      actorToken,
      actorTokenType: ACCESS_TOKEN,
      scope: 'messaging',
    }),
  );
const dependentToken = async (actorToken?: string) =>
  (
    await agents<ExchangeTokenRequest, ExchangeTokenResponse>(
      'exchangeToken',
      ExchangeTokenRequest.fromPartial({
        subjectToken: dependentD.svcnumId,
        subjectTokenType: SVCNUM_ID,
        ...(actorToken ? { actorToken, actorTokenType: ACCESS_TOKEN } : {}),
      }),
    )
  ).accessToken;

/** Tokens of each kind, fetched before the parties are disabled (they stay within their lifetime). */
const tokens: Record<string, string> = {};

/** What a path answers with a token: 'ok', or the refusal as the caller sees it. */
type Outcome = string;

async function userInfo(token: string): Promise<Outcome> {
  const reply = await send(`${service.issuer}/oauth/userinfo`, { headers: { Authorization: `Bearer ${token}` } });
  if (reply.status === 200) return 'ok';
  expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
  return `${reply.status} ${reply.json.error}`;
}

async function messages(token: string, from?: string): Promise<Outcome> {
  const reply = await sendMessage(service, token, {
    to: app.owner.svcnum,
    text: 'still here?',
    ...(from ? { from } : {}),
  });
  if (reply.status === 202) return 'ok';
  if (reply.status === 401) expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
  return `${reply.status} ${reply.json.error}`;
}

async function grpcOutcome(work: () => Promise<unknown>): Promise<Outcome> {
  try {
    await work();
    return 'ok';
  } catch (error) {
    const refused = error as { code: status; metadata?: { get(key: string): unknown[] } };
    const oauth = refused.metadata?.get('oauth-error')?.[0];
    return `${status[refused.code]}${oauth ? ` ${String(oauth)}` : ''}`;
  }
}

async function tokenEndpoint(form: Record<string, string>): Promise<Outcome> {
  const reply = await postForm(`${service.issuer}/oauth/token`, form);
  return reply.status === 200 ? 'ok' : `${reply.status} ${reply.json.error}`;
}

interface Case {
  path: string;
  token: string;
  parties: Party[];
  attempt: () => Promise<Outcome>;
  refused: Outcome;
}

const CASES: Case[] = [
  // UserInfo: every kind of token that may carry `openid`.
  {
    path: 'UserInfo',
    token: 'login',
    parties: [PARTIES.loginClient, PARTIES.user],
    attempt: () => userInfo(tokens.login!),
    refused: '401 invalid_token',
  },
  {
    path: 'UserInfo',
    token: 'agent',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.owner],
    attempt: () => userInfo(tokens.agent!),
    refused: '401 invalid_token',
  },
  {
    path: 'UserInfo',
    token: 'dependent (through its owner agent)',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.dependent, PARTIES.owner],
    attempt: () => userInfo(tokens.dependentThroughAgent!),
    refused: '401 invalid_token',
  },
  {
    path: 'UserInfo',
    token: 'dependent (by the provisioning client)',
    parties: [PARTIES.provisioningClient, PARTIES.agentClient, PARTIES.agent, PARTIES.dependent, PARTIES.owner],
    attempt: () => userInfo(tokens.dependentByApp!),
    refused: '401 invalid_token',
  },
  // POST /api/messages: every kind of token that may carry `messaging`.
  {
    path: '/api/messages',
    token: 'API client',
    parties: [PARTIES.apiClient, PARTIES.owner],
    attempt: () => messages(tokens.api!, numberN.svcnum),
    refused: '401 invalid_token',
  },
  {
    path: '/api/messages',
    token: 'agent',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.owner],
    attempt: () => messages(tokens.agent!),
    refused: '401 invalid_token',
  },
  {
    path: '/api/messages',
    token: 'lent number',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.number, PARTIES.owner],
    attempt: () => messages(tokens.lent!),
    refused: '401 invalid_token',
  },
  {
    path: '/api/messages',
    token: 'dependent (through its owner agent)',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.dependent, PARTIES.owner],
    attempt: () => messages(tokens.dependentThroughAgent!),
    refused: '401 invalid_token',
  },
  {
    path: '/api/messages',
    token: 'dependent (by the provisioning client)',
    parties: [PARTIES.provisioningClient, PARTIES.agentClient, PARTIES.agent, PARTIES.dependent, PARTIES.owner],
    attempt: () => messages(tokens.dependentByApp!),
    refused: '401 invalid_token',
  },
  // gRPC: a provisioning client's own token.
  {
    path: 'gRPC ListNumbers',
    token: 'provisioning client',
    parties: [PARTIES.provisioningClient, PARTIES.owner],
    attempt: () =>
      grpcOutcome(() => call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), tokens.provisioning!)),
    refused: 'UNAUTHENTICATED',
  },
  // Issuing: no token is issued that its first use would refuse.
  {
    path: 'ExchangeToken (lend a number)',
    token: 'agent as actor',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.number],
    attempt: () => grpcOutcome(() => lend(tokens.agent!)),
    refused: 'FAILED_PRECONDITION invalid_request',
  },
  {
    path: 'token exchange at /oauth/token (lend a number)',
    token: 'agent as actor',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.number],
    attempt: () =>
      tokenEndpoint({
        grant_type: TOKEN_EXCHANGE,
        client_id: app.clientId,
        client_secret: app.clientSecret,
        subject_token: numberN.svcnumId,
        subject_token_type: SVCNUM_ID,
        actor_token: tokens.agent!,
        actor_token_type: ACCESS_TOKEN,
      }),
    refused: '400 invalid_request',
  },
  {
    path: "ExchangeToken (a dependent's token)",
    token: 'no actor token',
    parties: [PARTIES.agentClient, PARTIES.agent, PARTIES.dependent],
    attempt: () => grpcOutcome(() => dependentToken()),
    refused: 'FAILED_PRECONDITION invalid_request',
  },
  {
    path: 'IssueAgentToken',
    token: 'provisioning client',
    parties: [PARTIES.agentClient, PARTIES.agent],
    attempt: () =>
      grpcOutcome(() =>
        agents(
          'issueAgentToken',
          IssueAgentTokenRequest.fromPartial({ svcnumId: agentA.agent!.svcnumId }),
          tokens.provisioning!,
        ),
      ),
    refused: 'FAILED_PRECONDITION',
  },
  {
    path: 'IssueAgentToken / ExchangeToken',
    token: 'provisioning client',
    parties: [PARTIES.provisioningClient, PARTIES.owner],
    attempt: () =>
      grpcOutcome(() =>
        agents(
          'issueAgentToken',
          IssueAgentTokenRequest.fromPartial({ svcnumId: agentA.agent!.svcnumId }),
          tokens.provisioning!,
        ),
      ),
    refused: 'UNAUTHENTICATED',
  },
  {
    path: 'client_credentials',
    token: 'agent',
    parties: [PARTIES.agent, PARTIES.owner],
    attempt: () =>
      tokenEndpoint({
        grant_type: 'client_credentials',
        client_id: agentA.clientId,
        client_secret: agentA.clientSecret,
      }),
    refused: '400 invalid_grant',
  },
  {
    path: 'client_credentials',
    token: 'agent',
    parties: [PARTIES.agentClient],
    attempt: () =>
      tokenEndpoint({
        grant_type: 'client_credentials',
        client_id: agentA.clientId,
        client_secret: agentA.clientSecret,
      }),
    refused: '401 invalid_client',
  },
  {
    path: 'client_credentials',
    token: 'API client',
    parties: [PARTIES.owner],
    attempt: () =>
      tokenEndpoint({ grant_type: 'client_credentials', client_id: api.clientId, client_secret: api.secret }),
    refused: '400 invalid_grant',
  },
  {
    path: 'refresh_token',
    token: 'login',
    parties: [PARTIES.loginClient],
    attempt: () =>
      tokenEndpoint({ grant_type: 'refresh_token', refresh_token: tokens.refresh!, client_id: login.client.clientId }),
    refused: '401 invalid_client',
  },
];

beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '64', 20);
  app = await provisioningApp(service);
  numberN = await call<ProvisionNumberRequest, ProgrammableNumber>(
    app.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName: 'N' }),
    app.token,
  );
  agentA = await agents<CreateAgentRequest, CreateAgentResponse>(
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName: 'A', scope: 'openid messaging' }),
  );
  dependentD = await agents<CreateDependentAgentRequest, Agent>(
    'createDependentAgent',
    CreateDependentAgentRequest.fromPartial({
      displayName: 'D',
      ownerSvcnumId: agentA.agent!.svcnumId,
      scope: 'openid messaging',
    }),
  );
  const created = await service.core.registration.createApiClient({
    name: 'Partner of B',
    scope: 'messaging',
    ownerId: app.owner.svcnumId,
  });
  api = { clientId: created.client.clientId, secret: created.clientSecret! };
  const person = await createUser(service);
  login = {
    client: await createLoginClient(service),
    email: person.email,
    password: person.password,
    svcnumId: person.user.svcnumId,
  };

  const { code, verifier } = await obtainCode(service, login.client, login);
  const redeemed = await redeemCode(service, login.client, code, verifier);
  tokens.login = String(redeemed.json.access_token);
  tokens.refresh = String(redeemed.json.refresh_token);
  tokens.api = await clientCredentialsToken(service, api.clientId, api.secret);
  tokens.provisioning = app.token;
  tokens.agent = await agentOwnToken();
  tokens.lent = (await lend(tokens.agent)).accessToken;
  tokens.dependentThroughAgent = await dependentToken(tokens.agent);
  tokens.dependentByApp = await dependentToken();
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

describe('disabled means disabled: every path, every kind of token, every party', () => {
  it('every case works before anything is disabled', async () => {
    for (const each of CASES) expect(await each.attempt(), `${each.path} with a ${each.token} token`).toBe('ok');
  });

  for (const each of CASES) {
    for (const party of each.parties) {
      it(`${each.path}, ${each.token} token: refused within 30 s of disabling the ${party.name}; enabled again, works at once`, async () => {
        // Every process caches what it read: a first use warms the caches with the enabled records.
        expect(await each.attempt()).toBe('ok');
        await setEnabled(party, false);
        service.clock.advance(RECORD_CACHE_TTL);
        expect(await each.attempt()).toBe(each.refused);
        // Refused twice: the refusal is read again, and stays a refusal.
        expect(await each.attempt()).toBe(each.refused);
        await setEnabled(party, true);
        expect(await each.attempt()).toBe('ok');
      });
    }
  }
});
