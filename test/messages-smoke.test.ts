import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CreateAgentRequest,
  IssueAgentTokenRequest,
  type CreateAgentResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import type { AccessToken } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import { EntityType } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  MessageKind,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { openStream, sendMessage } from './support/messages';
import { startTestService, type TestService } from './support/service';

let service: TestService;
let app: ProvisioningApp;
beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '76', 30);
  app = await provisioningApp(service);
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

describe('message flow (smoke)', () => {
  it("an agent sends to a programmable number; the owner's stream receives it, and a resume cursor skips it", async () => {
    const number = await call<ProvisionNumberRequest, ProgrammableNumber>(
      app.numbers,
      'provisionNumber',
      ProvisionNumberRequest.fromPartial({ displayName: 'Inbox' }),
      app.token,
    );
    const agent = await call<CreateAgentRequest, CreateAgentResponse>(
      app.agents,
      'createAgent',
      CreateAgentRequest.fromPartial({ displayName: 'Sender' }),
      app.token,
    );
    const agentToken = await call<IssueAgentTokenRequest, AccessToken>(
      app.agents,
      'issueAgentToken',
      IssueAgentTokenRequest.fromPartial({ svcnumId: agent.agent!.svcnumId }),
      app.token,
    );

    const stream = openStream(app);
    const sent = await sendMessage(service, agentToken.accessToken, { to: number.svcnum, text: 'hello' });
    expect(sent.status).toBe(202);
    expect(sent.json).toMatchObject({ from: agent.agent!.svcnum, to: number.svcnum });
    const [received] = await stream.waitFor(1);
    expect(received).toMatchObject({
      messageId: sent.json.message_id,
      toSvcnumId: number.svcnumId,
      toSvcnum: number.svcnum,
      fromSvcnum: agent.agent!.svcnum,
      senderEntityType: EntityType.ENTITY_TYPE_AI_AGENT,
      kind: MessageKind.MESSAGE_KIND_MESSAGE,
      text: 'hello',
    });
    stream.cancel();

    await sendMessage(service, agentToken.accessToken, { to: number.svcnum, text: 'second' });
    const resumed = openStream(app, received!.cursor);
    const [next] = await resumed.waitFor(1);
    expect(next!.text).toBe('second');
    resumed.cancel();
  });
});
