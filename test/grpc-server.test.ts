import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RECORD_CACHE_TTL } from '../core/accounts';
import { authenticate, logger } from '../grpc-service/calls';
import { SERVICE_NAMES, serverOptions, startGrpcServer } from '../grpc-service/server';
import {
  HealthClient,
  healthCheckResponse_ServingStatusToJSON as statusName,
  type HealthCheckResponse,
} from '../grpc-service/gen/grpc/health/v1/health';
import {
  AgentServiceClient,
  CreateAgentRequest,
  type CreateAgentResponse,
  ListAgentsRequest,
  type ListAgentsResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  ListNumbersRequest,
  ProvisionNumberRequest,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { StoreFaults } from './support/faults';
import { createLoginClient, createUser, exchange, obtainCode, postForm } from './support/flow';
import {
  asCall,
  call,
  clientCredentialsToken,
  failure,
  provisioningApp,
  seedPool,
  type ProvisioningApp,
} from './support/grpc';
import { startTestService, type TestService } from './support/service';

// The gRPC server as infrastructure sees it: grpc.health.v1, keepalive options behind the NLB,
// graceful drain; and the call wrapper: authentication edge cases and errors that never leak
// internals. Server reflection: test/grpc-reflection.test.ts.

const healthClient = (port: number) => new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());

/** The serving status of `service` by name ("SERVING", "NOT_SERVING", ...). */
function check(client: HealthClient, service: string): Promise<string> {
  return new Promise((resolve, reject) =>
    client.check({ service }, (error, response) => (error ? reject(error) : resolve(statusName(response.status)))),
  );
}

const faults = new StoreFaults();
let service: TestService;
let app: ProvisioningApp;
beforeAll(async () => {
  service = await startTestService({ wrapStore: faults.wrap });
  await seedPool(service, '72', 4);
  app = await provisioningApp(service);
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

describe('grpc.health.v1', () => {
  it('reports SERVING overall and for each of our services; NOT_FOUND for an unknown one', async () => {
    const health = healthClient(service.grpcPort);
    try {
      expect(await check(health, '')).toBe('SERVING');
      for (const name of SERVICE_NAMES) expect(await check(health, name), name).toBe('SERVING');
      expect(SERVICE_NAMES).toEqual([
        'svcnum.provisioning.v1alpha1.NumberService',
        'svcnum.provisioning.v1alpha1.MaskService',
        'svcnum.provisioning.v1alpha1.AgentService',
        'svcnum.provisioning.v1alpha1.AliasService',
      ]);
      expect((await failure(check(health, 'svcnum.provisioning.v1alpha1.Nope'))).code).toBe(status.NOT_FOUND);
    } finally {
      health.close();
    }
  });
});

describe('connection management behind the NLB', () => {
  it('pings idle connections well inside the NLB idle timeout of 350 s, also without calls', async () => {
    const NLB_IDLE_MS = 350_000;
    // The server is built with these options (grpc-js keeps them as given, plus the interceptor of strict-requests.ts).
    const running = await startGrpcServer(service.core, { port: 0, host: '127.0.0.1' });
    try {
      const internals = running.server as unknown as {
        options: typeof serverOptions;
        keepaliveTimeMs: number;
        keepaliveTimeoutMs: number;
      };
      expect(internals.options).toMatchObject(serverOptions);
      expect(internals.keepaliveTimeMs).toBe(60_000);
      expect(internals.keepaliveTimeoutMs).toBe(20_000);
    } finally {
      running.server.forceShutdown();
    }
    expect(serverOptions['grpc.keepalive_time_ms']).toBe(60_000);
    expect(serverOptions['grpc.keepalive_time_ms']! + serverOptions['grpc.keepalive_timeout_ms']!).toBeLessThan(
      NLB_IDLE_MS,
    );
    expect(serverOptions['grpc.keepalive_permit_without_calls']).toBe(1);
    // Connections are recycled, with a grace for calls in flight.
    expect(serverOptions['grpc.max_connection_age_ms']).toBeGreaterThan(0);
    expect(serverOptions['grpc.max_connection_age_grace_ms']).toBeGreaterThan(0);
  });

  it('drains: NOT_SERVING at once, the call in flight completes, then no new calls are accepted', async () => {
    const running = await startGrpcServer(service.core, { port: 0, host: '127.0.0.1' });
    const address = `127.0.0.1:${running.port}`;
    const agents = new AgentServiceClient(address, credentials.createInsecure());
    const health = healthClient(running.port);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    try {
      expect(await check(health, '')).toBe('SERVING');
      // A health watcher (what a client-side health checker keeps open) sees the switch.
      const watch = health.watch({ service: '' });
      const statuses: string[] = [];
      let serving!: () => void;
      const watching = new Promise<void>((resolve) => {
        serving = resolve;
      });
      const notServing = new Promise<void>((resolve) =>
        watch.on('data', (update: HealthCheckResponse) => {
          const name = statusName(update.status);
          statuses.push(name);
          if (name === 'SERVING') serving();
          if (name === 'NOT_SERVING') resolve();
        }),
      );
      watch.on('error', () => undefined);
      await watching;

      // A call that is held inside the store until the test lets it go.
      faults.before('listOwned', async () => {
        entered();
        await gate;
      });
      const inFlight = call<ListAgentsRequest, ListAgentsResponse>(
        agents,
        'listAgents',
        ListAgentsRequest.fromPartial({}),
        app.token,
      );
      await inside;

      let drained = false;
      const draining = running.drain(10_000).then(() => {
        drained = true;
      });
      await notServing;
      expect(statuses).toEqual(['SERVING', 'NOT_SERVING']);
      watch.cancel();

      // New calls are refused while the old one is still running...
      const fresh = new AgentServiceClient(address, credentials.createInsecure());
      try {
        expect((await failure(call(fresh, 'listAgents', ListAgentsRequest.fromPartial({}), app.token))).code).toBe(
          status.UNAVAILABLE,
        );
      } finally {
        fresh.close();
      }
      expect(drained).toBe(false);

      // ...which completes normally, and only then is the server gone.
      release();
      expect((await inFlight).agents).toEqual([]);
      await draining;
      expect(drained).toBe(true);
      const after = healthClient(running.port);
      try {
        expect((await failure(check(after, ''))).code).toBe(status.UNAVAILABLE);
      } finally {
        after.close();
      }
    } finally {
      release();
      faults.reset();
      agents.close();
      health.close();
      running.server.forceShutdown();
    }
  });

  it('drain gives up after the grace period and closes a call that does not finish', async () => {
    const running = await startGrpcServer(service.core, { port: 0, host: '127.0.0.1' });
    const agents = new AgentServiceClient(`127.0.0.1:${running.port}`, credentials.createInsecure());
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    try {
      faults.before('listOwned', async () => {
        entered();
        await gate;
      });
      const stuck = failure(call(agents, 'listAgents', ListAgentsRequest.fromPartial({}), app.token));
      await inside;
      // The handler stays stuck (its gate opens only in `finally`): drain returns on its own grace.
      await running.drain(300);
      expect([status.CANCELLED, status.UNAVAILABLE]).toContain((await stuck).code);
    } finally {
      release();
      faults.reset();
      agents.close();
      running.server.forceShutdown();
    }
  });
});

describe('authentication of provisioning calls', () => {
  const listNumbers = (metadata: Metadata) =>
    new Promise<void>((resolve, reject) => {
      app.numbers.listNumbers(ListNumbersRequest.fromPartial({}), metadata, (error) =>
        error ? reject(error) : resolve(),
      );
    });
  const withHeaders = (...values: string[]) => {
    const metadata = new Metadata();
    for (const value of values) metadata.add('authorization', value);
    return metadata;
  };

  it("accepts the provisioning client's own token (baseline)", async () => {
    await expect(listNumbers(withHeaders(`Bearer ${app.token}`))).resolves.toBeUndefined();
    // The scheme is case-insensitive (RFC 7235).
    await expect(listNumbers(withHeaders(`bearer ${app.token}`))).resolves.toBeUndefined();
  });

  it('refuses missing, malformed and garbage credentials with UNAUTHENTICATED', async () => {
    const cases: Array<[string, Metadata]> = [
      ['no header', new Metadata()],
      ['empty header', withHeaders('')],
      ['Basic scheme', withHeaders('Basic x')],
      [
        'Basic with client credentials',
        withHeaders(`Basic ${Buffer.from(`${app.clientId}:${app.clientSecret}`).toString('base64')}`),
      ],
      ['bare token without scheme', withHeaders(app.token)],
      ['Bearer without token', withHeaders('Bearer ')],
      ['garbage token', withHeaders('Bearer garbage')],
      ['garbage JWT shape', withHeaders('Bearer aaa.bbb.ccc')],
      [
        'token with a flipped signature',
        withHeaders(`Bearer ${app.token.slice(0, -4)}${app.token.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`),
      ],
      ['two tokens in one header', withHeaders(`Bearer ${app.token}, Bearer ${app.token}`)],
    ];
    for (const [name, metadata] of cases) {
      const refused = await failure(listNumbers(metadata));
      expect(refused.code, name).toBe(status.UNAUTHENTICATED);
      expect(refused.details, name).not.toContain(app.token);
      // UNAUTHENTICATED alone says it; no `oauth-error` trailer (that is for token exchange refusals).
      expect(refused.metadata.get('oauth-error'), name).toEqual([]);
    }
    // No credential, or another scheme: the message asks for one and claims no invalid token (RFC 6750 §3.1).
    for (const [name, metadata] of cases.slice(0, 5)) {
      expect((await failure(listNumbers(metadata))).details, name).toMatch(
        /^(send one "authorization: Bearer|the authorization header must be "Bearer)/,
      );
    }
  });

  it('refuses two authorization headers', async () => {
    // On the wire two `authorization` fields never reach the handler: grpc-js refuses to send a
    // second one (Node's HTTP/2 treats it as a single-value header and the call fails locally),
    // and a Node HTTP/2 server keeps only the first. Whatever happens, it is not a success.
    const wire = await listNumbers(withHeaders('Basic x', `Bearer ${app.token}`)).then(
      () => 'OK',
      (error: ServiceError) => status[error.code],
    );
    expect(wire).not.toBe('OK');
    // The check itself: more than one value is refused before any token is looked at.
    for (const values of [
      [`Bearer ${app.token}`, `Bearer ${app.token}`],
      ['Basic x', `Bearer ${app.token}`],
      [`Bearer ${app.token}`, 'Basic x'],
    ]) {
      const refused = await authenticate(service.core, asCall(withHeaders(...values)), 'prov:numbers').then(
        () => undefined,
        (error: { code: number; message: string }) => error,
      );
      expect(refused?.code).toBe(status.UNAUTHENTICATED);
      expect(refused?.message).toMatch(/one "authorization: Bearer/);
    }
  });

  it("refuses tokens of other kinds of clients: External API client, an agent's own token, a login user's token", async () => {
    // External API client (client_credentials, messaging).
    const { client: apiClient, clientSecret } = await service.core.registration.createApiClient({
      name: 'Messenger',
      scope: 'messaging poll',
    });
    const apiToken = await clientCredentialsToken(service, apiClient.clientId, clientSecret!);

    // An independent agent's own token (IssueAgentToken) and its client_credentials token.
    const created = await call<CreateAgentRequest, CreateAgentResponse>(
      app.agents,
      'createAgent',
      CreateAgentRequest.fromPartial({ displayName: 'Own token' }),
      app.token,
    );
    const issued = await service.core.provisioning.agents.issueToken(
      { ownerId: app.owner.svcnumId, clientId: app.clientId },
      { svcnumId: created.agent!.svcnumId },
    );
    const agentCredentialsToken = await clientCredentialsToken(service, created.clientId, created.clientSecret);

    // A login user's access token from the authorization code flow.
    const loginClient = await createLoginClient(service);
    const { email, password } = await createUser(service);
    const { code, verifier } = await obtainCode(service, loginClient, { email, password });
    const tokens = await exchange(service, loginClient, code, verifier);
    expect(tokens.status).toBe(200);
    const userToken = String(tokens.json.access_token);

    for (const [name, token] of [
      ['api client', apiToken],
      ['agent (issued)', issued.accessToken],
      ['agent (client_credentials)', agentCredentialsToken],
      ['login user', userToken],
    ] as const) {
      const refused = await failure(call(app.agents, 'listAgents', ListAgentsRequest.fromPartial({}), token));
      expect(refused.code, name).toBe(status.UNAUTHENTICATED);
      expect(refused.details, name).toMatch(/provisioning client/);
    }
    // The provisioning client's token still works, and the token endpoint is not confused either.
    expect(await call(app.agents, 'listAgents', ListAgentsRequest.fromPartial({}), app.token)).toBeDefined();
    expect(
      (
        await postForm(`${service.issuer}/oauth/token`, {
          grant_type: 'client_credentials',
          client_id: apiClient.clientId,
          client_secret: 'wrong',
        })
      ).status,
    ).toBe(401);
  });
});

describe('the call interceptors', () => {
  it('log one line per call, refused ones included, never with a token; a misfit request is INVALID_ARGUMENT before any authentication', async () => {
    const info = vi.spyOn(logger, 'info');
    const raw = new Client(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure());
    const health = healthClient(service.grpcPort);
    try {
      const listNumbers = ListNumbersRequest.fromPartial({});
      await call(app.numbers, 'listNumbers', listNumbers, app.token);
      expect((await failure(call(app.numbers, 'listNumbers', listNumbers, 'garbage'))).code).toBe(
        status.UNAUTHENTICATED,
      );
      expect((await failure(call(app.numbers, 'listNumbers', listNumbers))).code).toBe(status.UNAUTHENTICATED);
      // page_token (field 2, a string) sent as a varint, and no credential: the schema check answers.
      const misfit = await failure(
        new Promise((resolve, reject) => {
          raw.makeUnaryRequest(
            '/svcnum.provisioning.v1alpha1.NumberService/ListNumbers',
            (bytes: Buffer) => bytes,
            (bytes: Buffer) => bytes,
            Buffer.from([0x10, 0x01]),
            new Metadata(),
            (error, response) => (error ? reject(error) : resolve(response)),
          );
        }),
      );
      expect(misfit.code).toBe(status.INVALID_ARGUMENT);
      expect(await check(health, '')).toBe('SERVING');

      const lines = info.mock.calls
        .filter(([message]) => message === 'call')
        .map(([, fields]) => fields as unknown as { method: string; code: string; durationMs: number });
      expect(lines.map(({ method, code }) => [method, code])).toEqual([
        ['NumberService.ListNumbers', 'OK'],
        ['NumberService.ListNumbers', 'UNAUTHENTICATED'],
        ['NumberService.ListNumbers', 'UNAUTHENTICATED'],
        ['NumberService.ListNumbers', 'INVALID_ARGUMENT'],
        ['Health.Check', 'OK'],
      ]);
      for (const line of lines) expect(line.durationMs).toEqual(expect.any(Number));
      expect(JSON.stringify(info.mock.calls)).not.toContain(app.token);
    } finally {
      info.mockRestore();
      raw.close();
      health.close();
    }
  });
});

describe('the owner account behind a provisioning client', () => {
  it('stops the client when the owner account is disabled (UNAUTHENTICATED: its token is no longer in force), within the 30 s the status is cached', async () => {
    const other = await provisioningApp(service);
    try {
      await service.core.registration.disableUser(other.owner.svcnumId);
      // Getting its token read the owner's status, which is trusted for up to 30 s.
      service.clock.advance(RECORD_CACHE_TTL);
      for (const [client, method, request] of [
        [other.numbers, 'provisionNumber', ProvisionNumberRequest.fromPartial({ displayName: 'After disabling' })],
        [other.numbers, 'listNumbers', ListNumbersRequest.fromPartial({})],
        [other.agents, 'listAgents', ListAgentsRequest.fromPartial({})],
      ] as const) {
        const denied = await failure(call(client, method, request, other.token));
        expect(denied.code, method).toBe(status.UNAUTHENTICATED);
        expect(denied.details).toBe('this token can no longer be used: its owner account is not active');
      }
      expect((await service.core.store.listOwned(other.owner.svcnumId, 'programmable', 10)).items).toEqual([]);
    } finally {
      other.close();
    }
  });
});

describe('errors never leak internals', () => {
  it('maps an unexpected failure to INTERNAL with a generic message, logged on the server only', async () => {
    const logged = vi.spyOn(logger, 'error');
    try {
      const weird = Object.assign(new Error('secret internal detail: table local-users at 10.0.0.7'), {
        name: 'WeirdError',
        code: 'EWEIRD',
        $metadata: { httpStatusCode: 500 },
      });
      faults.failOn('listOwned', 1, () => weird);
      const failed = await failure(call(app.agents, 'listAgents', ListAgentsRequest.fromPartial({}), app.token));
      expect(failed.code).toBe(status.INTERNAL);
      expect(failed.details).toBe('the service failed; retry the call');
      const everything = JSON.stringify({
        details: failed.details,
        message: failed.message,
        metadata: failed.metadata?.toJSON(),
      });
      expect(everything).not.toMatch(/secret|internal detail|10\.0\.0\.7|WeirdError|EWEIRD|local-users|at .*\.ts/);
      expect(logged).toHaveBeenCalledWith(
        'call failed',
        expect.objectContaining({ method: 'AgentService.ListAgents', error: weird }),
      );

      // Any other read of the call (here: the owner account) is no different.
      faults.reset();
      faults.failOn('getUser', 1, () => weird);
      const owner = await failure(
        call(app.agents, 'createAgent', CreateAgentRequest.fromPartial({ displayName: 'X' }), app.token),
      );
      expect(owner.code).toBe(status.INTERNAL);
      expect(owner.details).toBe('the service failed; retry the call');

      // A thrown non-Error value too.
      faults.reset();
      faults.failOn('listOwned', 1, () => 'secret string thrown' as unknown as Error);
      const thrown = await failure(call(app.agents, 'listAgents', ListAgentsRequest.fromPartial({}), app.token));
      expect(thrown.code).toBe(status.INTERNAL);
      expect(thrown.details).not.toContain('secret');
    } finally {
      faults.reset();
      logged.mockRestore();
    }
  });
});
