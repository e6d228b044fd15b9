import { status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECOND } from '../core/kernel/config';
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
import { send, verifyWithJwks } from './support/flow';
import { call, clientCredentialsToken, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// AgentService.ExchangeToken (RFC 8693) end to end over gRPC: lending a number to an agent, and
// issuing a dependent agent's token; scopes only narrow, the token never outlives its actor token,
// and every refusal carries its OAuth error code in the message and the `oauth-error` trailer.

const SVCNUM_ID = 'urn:svcnum:params:oauth:token-type:svcnum-id';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

let service: TestService;
let app: ProvisioningApp;
let other: ProvisioningApp;
/** A programmable number of the app's business account. */
let number: ProgrammableNumber;
/** Independent agents: A owns the dependent D; B is a bystander. */
let agentA: CreateAgentResponse;
let agentB: CreateAgentResponse;
/** D: dependent of A (scope "openid messaging"); E: dependent of the account itself. */
let dependentD: Agent;
let dependentE: Agent;
/** Another business account's number and agent. */
let theirNumber: ProgrammableNumber;
let theirAgent: CreateAgentResponse;

const createAgent = (owner: ProvisioningApp, fields: Partial<CreateAgentRequest>) =>
  call<CreateAgentRequest, CreateAgentResponse>(
    owner.agents,
    'createAgent',
    CreateAgentRequest.fromPartial(fields),
    owner.token,
  );
const createDependent = (owner: ProvisioningApp, fields: Partial<CreateDependentAgentRequest>) =>
  call<CreateDependentAgentRequest, Agent>(
    owner.agents,
    'createDependentAgent',
    CreateDependentAgentRequest.fromPartial(fields),
    owner.token,
  );
const provisionNumber = (owner: ProvisioningApp, displayName: string) =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    owner.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName }),
    owner.token,
  );
const agentToken = async (owner: ProvisioningApp, svcnumId: string, scope = '') =>
  (
    await call<IssueAgentTokenRequest, AccessToken>(
      owner.agents,
      'issueAgentToken',
      IssueAgentTokenRequest.fromPartial({ svcnumId, scope }),
      owner.token,
    )
  ).accessToken;
const exchange = (fields: Partial<ExchangeTokenRequest>, caller: ProvisioningApp = app) =>
  call<ExchangeTokenRequest, ExchangeTokenResponse>(
    caller.agents,
    'exchangeToken',
    ExchangeTokenRequest.fromPartial(fields),
    caller.token,
  );
const claimsOf = async (token: string) =>
  (await verifyWithJwks(service, token, { audience: service.issuer, typ: 'at+jwt' })).payload;

/** Lending `subject` to the agent behind `actorToken`. */
const lend = (subject: string, actorToken: string, extra: Partial<ExchangeTokenRequest> = {}) =>
  exchange({ subjectToken: subject, subjectTokenType: SVCNUM_ID, actorToken, actorTokenType: ACCESS_TOKEN, ...extra });

/** A refused exchange: its status, and the OAuth code both in the message and in the trailer. */
async function refused(promise: Promise<unknown>, code: status, oauthError: string): Promise<ServiceError> {
  const error = await failure(promise);
  expect(error.code, error.details).toBe(code);
  expect(error.details.startsWith(`${oauthError}: `), error.details).toBe(true);
  expect(error.metadata.get('oauth-error')).toEqual([oauthError]);
  return error;
}

/** New provisioning tokens for both apps, after the clock moved. */
async function refreshAppTokens() {
  app.token = await clientCredentialsToken(service, app.clientId, app.clientSecret);
  other.token = await clientCredentialsToken(service, other.clientId, other.clientSecret);
}

beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '75', 80);
  [app, other] = await Promise.all([provisioningApp(service), provisioningApp(service)]);
  number = await provisionNumber(app, 'Shop line');
  agentA = await createAgent(app, { displayName: 'Agent A' });
  agentB = await createAgent(app, { displayName: 'Agent B' });
  dependentD = await createDependent(app, {
    displayName: 'Dependent D',
    ownerSvcnumId: agentA.agent!.svcnumId,
    scope: 'openid messaging',
  });
  dependentE = await createDependent(app, { displayName: 'Dependent E' });
  theirNumber = await provisionNumber(other, 'Their line');
  theirAgent = await createAgent(other, { displayName: 'Their agent' });
});
afterAll(async () => {
  app?.close();
  other?.close();
  await service?.close();
});

describe('ExchangeToken (a): lending a number to an agent', () => {
  it('issues a token whose sub is the number and act.sub the agent, within messaging, that never outlives the actor token', async () => {
    const actorToken = await agentToken(app, agentA.agent!.svcnumId);
    const actor = await claimsOf(actorToken);
    service.clock.advance(1800 * SECOND);
    await refreshAppTokens();

    const issued = await lend(number.svcnumId, actorToken);
    expect(issued.issuedTokenType).toBe(ACCESS_TOKEN);
    expect(issued.tokenType).toBe('Bearer');
    expect(issued.scope).toBe('messaging');
    expect(issued.expiresIn).toBeLessThanOrEqual(1800);
    expect(issued.expiresIn).toBeGreaterThan(1790);
    const claims = await claimsOf(issued.accessToken);
    expect(claims).toMatchObject({
      iss: service.issuer,
      aud: service.issuer,
      sub: number.svcnumId,
      act: { sub: agentA.agent!.svcnumId },
      client_id: agentA.clientId,
    });
    expect(claims.scope).toBe('messaging');
    expect(claims.exp!).toBeLessThanOrEqual(actor.exp!);
    expect(claims.exp! - claims.iat!).toBe(issued.expiresIn);
    expect(claims.jti).not.toBe(actor.jti);

    // Explicit narrowing to messaging, the default requested type and our own audience are accepted.
    const explicit = await lend(number.svcnumId, actorToken, {
      scope: 'messaging',
      requestedTokenType: ACCESS_TOKEN,
      audience: service.issuer,
    });
    expect(explicit.scope).toBe('messaging');
    // A fresh actor token gives up to the full hour. Both are issued in the same second (the clock
    // stands still): otherwise the actor's expiry, a second earlier, would cap the lent token.
    service.clock.freeze();
    const fresh = await lend(number.svcnumId, await agentToken(app, agentA.agent!.svcnumId)).finally(() =>
      service.clock.release(),
    );
    expect(fresh.expiresIn).toBe(3600);
  });

  it('never widens the scope: invalid_scope with the oauth-error trailer', async () => {
    const actorToken = await agentToken(app, agentA.agent!.svcnumId);
    const wider = await refused(
      lend(number.svcnumId, actorToken, { scope: 'messaging openid' }),
      status.INVALID_ARGUMENT,
      'invalid_scope',
    );
    expect(wider.details).toContain('messaging');
    await refused(lend(number.svcnumId, actorToken, { scope: 'poll' }), status.INVALID_ARGUMENT, 'invalid_scope');
    // An actor token without messaging has nothing to delegate.
    const withoutMessaging = await agentToken(app, agentA.agent!.svcnumId, 'openid profile');
    await refused(lend(number.svcnumId, withoutMessaging), status.INVALID_ARGUMENT, 'invalid_scope');
    await refused(
      lend(number.svcnumId, withoutMessaging, { scope: 'messaging' }),
      status.INVALID_ARGUMENT,
      'invalid_scope',
    );
  });

  it("needs a valid actor token of one of the caller's agents (invalid_request)", async () => {
    const actorToken = await agentToken(app, agentA.agent!.svcnumId);
    const missing = await refused(
      exchange({ subjectToken: number.svcnumId, subjectTokenType: SVCNUM_ID }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    expect(missing.details).toContain('actor_token');
    // Type without token, token without (or with the wrong) type.
    await refused(
      exchange({ subjectToken: number.svcnumId, subjectTokenType: SVCNUM_ID, actorTokenType: ACCESS_TOKEN }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    await refused(
      exchange({ subjectToken: number.svcnumId, subjectTokenType: SVCNUM_ID, actorToken }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    await refused(
      lend(number.svcnumId, actorToken, { actorTokenType: 'urn:ietf:params:oauth:token-type:jwt' }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    // Not a token, a tampered token, another account's agent, and a token that is not an agent's.
    await refused(lend(number.svcnumId, 'not-a-token'), status.INVALID_ARGUMENT, 'invalid_request');
    await refused(lend(number.svcnumId, `${actorToken.slice(0, -4)}AAAA`), status.INVALID_ARGUMENT, 'invalid_request');
    await refused(
      lend(number.svcnumId, await agentToken(other, theirAgent.agent!.svcnumId)),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    await refused(lend(number.svcnumId, app.token), status.INVALID_ARGUMENT, 'invalid_request');
  });

  it('refuses an expired actor token (invalid_request)', async () => {
    const actorToken = await agentToken(app, agentB.agent!.svcnumId);
    service.clock.advance(3601 * SECOND);
    await refreshAppTokens();
    const error = await refused(lend(number.svcnumId, actorToken), status.INVALID_ARGUMENT, 'invalid_request');
    expect(error.details).toContain('actor_token');
  });

  it('refuses wrong token types and audiences with the right codes', async () => {
    const actorToken = await agentToken(app, agentA.agent!.svcnumId);
    await refused(
      lend(number.svcnumId, actorToken, { subjectTokenType: ACCESS_TOKEN }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    await refused(
      exchange({ subjectToken: number.svcnumId, actorToken, actorTokenType: ACCESS_TOKEN }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    await refused(
      exchange({ subjectTokenType: SVCNUM_ID, actorToken, actorTokenType: ACCESS_TOKEN }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    const requested = await refused(
      lend(number.svcnumId, actorToken, { requestedTokenType: 'urn:ietf:params:oauth:token-type:id_token' }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    expect(requested.details).toContain('requested_token_type');
    await refused(
      lend(number.svcnumId, actorToken, { requestedTokenType: 'urn:ietf:params:oauth:token-type:refresh_token' }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    const target = await refused(
      lend(number.svcnumId, actorToken, { audience: 'https://elsewhere.example' }),
      status.INVALID_ARGUMENT,
      'invalid_target',
    );
    expect(target.details).toContain('audience');
    await refused(
      lend(number.svcnumId, actorToken, { audience: 'messaging-api' }),
      status.INVALID_ARGUMENT,
      'invalid_target',
    );
  });

  it("refuses subjects that are not the caller's programmable numbers or dependents (NOT_FOUND)", async () => {
    const actorToken = await agentToken(app, agentA.agent!.svcnumId);
    await refused(lend(theirNumber.svcnumId, actorToken), status.NOT_FOUND, 'invalid_request');
    // Lending their number with their own agent works for them, not for us.
    expect(
      (
        await exchange(
          {
            subjectToken: theirNumber.svcnumId,
            subjectTokenType: SVCNUM_ID,
            actorToken: await agentToken(other, theirAgent.agent!.svcnumId),
            actorTokenType: ACCESS_TOKEN,
          },
          other,
        )
      ).scope,
    ).toBe('messaging');
    await refused(lend('01ARZ3NDEKTSV4RRFFQ69G5FAV', actorToken), status.NOT_FOUND, 'invalid_request');
    await refused(lend('no such thing', actorToken), status.NOT_FOUND, 'invalid_request');
    // The owner account itself is no subject.
    await refused(lend(app.owner.svcnumId, actorToken), status.NOT_FOUND, 'invalid_request');
    // An independent agent gets its own tokens (IssueAgentToken), never by exchange.
    const independent = await refused(
      exchange({ subjectToken: agentB.agent!.svcnumId, subjectTokenType: SVCNUM_ID }),
      status.NOT_FOUND,
      'invalid_request',
    );
    expect(independent.details).toContain('IssueAgentToken');
    await refused(lend(agentB.agent!.svcnumId, actorToken), status.NOT_FOUND, 'invalid_request');
    // Another owner's dependent.
    const theirDependent = await createDependent(other, { displayName: 'Their dependent' });
    await refused(
      exchange({ subjectToken: theirDependent.svcnumId, subjectTokenType: SVCNUM_ID }),
      status.NOT_FOUND,
      'invalid_request',
    );
  });

  it('refuses a suspended number or a suspended acting agent (FAILED_PRECONDITION)', async () => {
    const line = await provisionNumber(app, 'Suspended line');
    const actor = await createAgent(app, { displayName: 'Soon suspended' });
    const actorToken = await agentToken(app, actor.agent!.svcnumId);
    expect((await lend(line.svcnumId, actorToken)).scope).toBe('messaging');

    await service.core.provisioning.lifecycle.suspend(line.svcnum);
    await refused(lend(line.svcnumId, actorToken), status.FAILED_PRECONDITION, 'invalid_request');
    await service.core.provisioning.lifecycle.reactivate(line.svcnum);
    expect((await lend(line.svcnumId, actorToken)).scope).toBe('messaging');

    // The actor token is still unexpired, but its agent was suspended meanwhile.
    await service.core.provisioning.lifecycle.suspend(actor.agent!.svcnum);
    await refused(lend(line.svcnumId, actorToken), status.FAILED_PRECONDITION, 'invalid_request');
  });
});

describe("ExchangeToken (b): a dependent agent's token", () => {
  it("issues the dependent's token with act.sub = its owner agent, with or without the owner's actor token", async () => {
    const owner = agentA.agent!.svcnumId;
    const plain = await exchange({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID });
    expect(plain.scope).toBe('openid messaging');
    expect(plain.expiresIn).toBe(3600);
    const claims = await claimsOf(plain.accessToken);
    expect(claims).toMatchObject({ sub: dependentD.svcnumId, act: { sub: owner }, scope: 'openid messaging' });

    // The dependent's token works at UserInfo as the dependent.
    const info = await send(`${service.issuer}/oauth/userinfo`, {
      method: 'GET',
      headers: { Authorization: `Bearer ${plain.accessToken}` },
    });
    expect(info.status).toBe(200);
    expect(info.json).toMatchObject({ sub: dependentD.svcnumId, svcnum: dependentD.svcnum, account_type: 'ai_agent' });

    // With the owner agent's token as actor: its client, its scope and its lifetime bound the result.
    const ownerToken = await agentToken(app, owner, 'messaging profile');
    const ownerClaims = await claimsOf(ownerToken);
    service.clock.advance(600 * SECOND);
    await refreshAppTokens();
    const acted = await exchange({
      subjectToken: dependentD.svcnumId,
      subjectTokenType: SVCNUM_ID,
      actorToken: ownerToken,
      actorTokenType: ACCESS_TOKEN,
    });
    expect(acted.scope).toBe('messaging');
    expect(acted.expiresIn).toBeLessThanOrEqual(3000);
    const actedClaims = await claimsOf(acted.accessToken);
    expect(actedClaims).toMatchObject({
      sub: dependentD.svcnumId,
      act: { sub: owner },
      client_id: agentA.clientId,
      scope: 'messaging',
    });
    expect(actedClaims.exp!).toBeLessThanOrEqual(ownerClaims.exp!);

    // Narrowing works; widening beyond the dependent's own scope does not.
    expect(
      (await exchange({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID, scope: 'openid' })).scope,
    ).toBe('openid');
    await refused(
      exchange({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID, scope: 'openid profile' }),
      status.INVALID_ARGUMENT,
      'invalid_scope',
    );
    await refused(
      exchange({
        subjectToken: dependentD.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: ownerToken,
        actorTokenType: ACCESS_TOKEN,
        scope: 'openid',
      }),
      status.INVALID_ARGUMENT,
      'invalid_scope',
    );
  });

  it('a dependent of the account acts for the account', async () => {
    const issued = await exchange({ subjectToken: dependentE.svcnumId, subjectTokenType: SVCNUM_ID });
    expect(issued.scope).toBe('openid profile messaging');
    expect(await claimsOf(issued.accessToken)).toMatchObject({
      sub: dependentE.svcnumId,
      act: { sub: app.owner.svcnumId },
    });
    // No agent owns E, so no agent's token may act for it.
    await refused(
      exchange({
        subjectToken: dependentE.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: await agentToken(app, agentA.agent!.svcnumId),
        actorTokenType: ACCESS_TOKEN,
      }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
  });

  it("refuses an actor token of an agent that is not the dependent's owner (invalid_request)", async () => {
    const error = await refused(
      exchange({
        subjectToken: dependentD.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: await agentToken(app, agentB.agent!.svcnumId),
        actorTokenType: ACCESS_TOKEN,
      }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    expect(error.details).toContain('owner');
    await refused(
      exchange({
        subjectToken: dependentD.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: await agentToken(other, theirAgent.agent!.svcnumId),
        actorTokenType: ACCESS_TOKEN,
      }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
    // The dependent's own exchanged token cannot act for it either.
    const own = (await exchange({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID })).accessToken;
    await refused(
      exchange({
        subjectToken: dependentD.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: own,
        actorTokenType: ACCESS_TOKEN,
      }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
  });

  it('refuses an exchanged token as the actor (invalid_request): delegation does not chain, act never nests', async () => {
    const dependentToken = (
      await exchange({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID, scope: 'messaging' })
    ).accessToken;
    const error = await refused(lend(number.svcnumId, dependentToken), status.INVALID_ARGUMENT, 'invalid_request');
    expect(error.details).toContain('own access token');
    // A lent number's token cannot act either.
    const lent = (await lend(number.svcnumId, await agentToken(app, agentA.agent!.svcnumId))).accessToken;
    await refused(lend(number.svcnumId, lent), status.INVALID_ARGUMENT, 'invalid_request');
    await refused(
      exchange({
        subjectToken: dependentD.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: lent,
        actorTokenType: ACCESS_TOKEN,
      }),
      status.INVALID_ARGUMENT,
      'invalid_request',
    );
  });

  it('refuses when the dependent or its owner agent is not active (FAILED_PRECONDITION)', async () => {
    const owner = await createAgent(app, { displayName: 'Suspendable owner' });
    const dependent = await createDependent(app, {
      displayName: 'Suspendable dependent',
      ownerSvcnumId: owner.agent!.svcnumId,
    });
    const ownerToken = await agentToken(app, owner.agent!.svcnumId);
    expect((await exchange({ subjectToken: dependent.svcnumId, subjectTokenType: SVCNUM_ID })).scope).toBe(
      'openid profile messaging',
    );

    await service.core.provisioning.lifecycle.suspend(dependent.svcnum);
    await refused(
      exchange({ subjectToken: dependent.svcnumId, subjectTokenType: SVCNUM_ID }),
      status.FAILED_PRECONDITION,
      'invalid_request',
    );
    await service.core.provisioning.lifecycle.reactivate(dependent.svcnum);

    // The owner agent acts in the issued token (act.sub), with or without its actor token.
    await service.core.provisioning.lifecycle.suspend(owner.agent!.svcnum);
    await refused(
      exchange({
        subjectToken: dependent.svcnumId,
        subjectTokenType: SVCNUM_ID,
        actorToken: ownerToken,
        actorTokenType: ACCESS_TOKEN,
      }),
      status.FAILED_PRECONDITION,
      'invalid_request',
    );
    await refused(
      exchange({ subjectToken: dependent.svcnumId, subjectTokenType: SVCNUM_ID }),
      status.FAILED_PRECONDITION,
      'invalid_request',
    );
  });

  it('needs the prov:agents scope and a provisioning token', async () => {
    const noToken = await failure(
      call(
        app.agents,
        'exchangeToken',
        ExchangeTokenRequest.fromPartial({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID }),
      ),
    );
    expect(noToken.code).toBe(status.UNAUTHENTICATED);
    // An agent's own token is no provisioning credential.
    const agentOwn = await agentToken(app, agentA.agent!.svcnumId);
    const asAgent = await failure(
      call(
        app.agents,
        'exchangeToken',
        ExchangeTokenRequest.fromPartial({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID }),
        agentOwn,
      ),
    );
    expect(asAgent.code).toBe(status.UNAUTHENTICATED);
    const numbersOnly = await provisioningApp(service, { scope: 'prov:numbers' });
    try {
      const denied = await failure(
        call(
          numbersOnly.agents,
          'exchangeToken',
          ExchangeTokenRequest.fromPartial({ subjectToken: dependentD.svcnumId, subjectTokenType: SVCNUM_ID }),
          numbersOnly.token,
        ),
      );
      expect(denied.code).toBe(status.PERMISSION_DENIED);
    } finally {
      numbersOnly.close();
    }
  });
});
