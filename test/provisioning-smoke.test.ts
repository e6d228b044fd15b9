import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CreateAgentRequest,
  type CreateAgentResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { NumberState } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import { CreateMaskRequest, type Mask } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  ListNumbersRequest,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, failure, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

let service: TestService;
let app: ProvisioningApp;
beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '71', 20);
  app = await provisioningApp(service);
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

describe('provisioning API over gRPC (smoke)', () => {
  it('provisions a number, a mask and an agent for an authenticated provisioning client', async () => {
    const number = await call<ProvisionNumberRequest, ProgrammableNumber>(
      app.numbers,
      'provisionNumber',
      ProvisionNumberRequest.fromPartial({ displayName: 'Support line' }),
      app.token,
    );
    expect(number.svcnum).toMatch(/^71\d{9}$/);
    expect(number.state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    const person = await service.core.registration.createUser({
      email: `p-${Date.now()}@example.com`,
      password: 'password 1234',
    });
    const mask = await call<CreateMaskRequest, Mask>(
      app.masks,
      'createMask',
      CreateMaskRequest.fromPartial({
        ttlSeconds: 3600,
        participantA: number.svcnumId,
        participantB: person.svcnumId,
        scope: 'delivery',
      }),
      app.token,
    );
    expect(mask.state).toBe(NumberState.NUMBER_STATE_ACTIVE);
    expect(mask.expireTime!.getTime() - mask.createTime!.getTime()).toBe(3_600_000);
    const agent = await call<CreateAgentRequest, CreateAgentResponse>(
      app.agents,
      'createAgent',
      CreateAgentRequest.fromPartial({ displayName: 'Helper', capabilities: ['booking'] }),
      app.token,
    );
    expect(agent.clientSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(agent.agent!.svcnum).toMatch(/^71\d{9}$/);
  });

  it('refuses a call without a token (UNAUTHENTICATED) and without the scope (PERMISSION_DENIED)', async () => {
    expect((await failure(call(app.numbers, 'listNumbers', ListNumbersRequest.fromPartial({})))).code).toBe(
      status.UNAUTHENTICATED,
    );
    const person = await provisioningApp(service, { accountType: 'person' });
    try {
      const denied = await failure(
        call(person.numbers, 'listNumbers', ListNumbersRequest.fromPartial({}), person.token),
      );
      expect(denied.code).toBe(status.PERMISSION_DENIED);
      expect(denied.details).toContain('prov:numbers');
    } finally {
      person.close();
    }
  });
});
