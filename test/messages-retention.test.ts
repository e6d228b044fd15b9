import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentClient } from '../core/adapters/dynamo-schema';
import { seqKey } from '../core/adapters/dynamo-messaging-store';
import { DAY } from '../core/kernel/config';
import { MESSAGE_RETENTION_MS } from '../core/messaging/send';
import { isTombstone } from '../core/messaging/store';
import { tableNames } from '../core/tables';
import {
  CreateAgentRequest,
  IssueAgentTokenRequest,
  type CreateAgentResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import type { AccessToken } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { localDynamoClient } from '../local/embedded-dynamo';
import { LOCAL_TABLE_PREFIX } from '../local/runner';
import { call, currentToken, provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { openStream, sendMessage } from './support/messages';
import { startTestService, type TestService } from './support/service';

// Messages are kept 30 days. Every read checks that: an expired message is passed over even if
// DynamoDB has not swept it, and a hole the sweeper left is skipped at once, without tombstones.

let service: TestService;
let app: ProvisioningApp;
beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '77', 10);
  app = await provisioningApp(service);
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

async function sender() {
  const token = await currentToken(service, app);
  const agent = await call<CreateAgentRequest, CreateAgentResponse>(
    app.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ displayName: 'Sender' }),
    token,
  );
  return async () =>
    (
      await call<IssueAgentTokenRequest, AccessToken>(
        app.agents,
        'issueAgentToken',
        IssueAgentTokenRequest.fromPartial({ svcnumId: agent.agent!.svcnumId }),
        await currentToken(service, app),
      )
    ).accessToken;
}

describe('message retention', () => {
  it('passes over expired messages, and skips a swept hole at once without writing tombstones', async () => {
    const number = await call<ProvisionNumberRequest, ProgrammableNumber>(
      app.numbers,
      'provisionNumber',
      ProvisionNumberRequest.fromPartial({ displayName: 'Inbox' }),
      await currentToken(service, app),
    );
    const agentToken = await sender();
    for (const text of ['old 1', 'old 2', 'old 3'])
      expect((await sendMessage(service, await agentToken(), { to: number.svcnum, text })).status).toBe(202);
    service.clock.advance(MESSAGE_RETENTION_MS + DAY);
    expect((await sendMessage(service, await agentToken(), { to: number.svcnum, text: 'fresh' })).status).toBe(202);

    // Not yet swept: the expired messages are still stored, and no stream delivers them.
    const first = openStream({ numbers: app.numbers, token: await currentToken(service, app) });
    const [fresh] = await first.waitFor(1);
    expect(fresh!.text).toBe('fresh');
    first.cancel();

    // The sweeper removes the first two (as DynamoDB TTL would): a hole before old 3.
    const db = documentClient(localDynamoClient(service.dynamoEndpoint));
    for (const seq of [1, 2])
      await db.send(
        new DeleteCommand({
          TableName: tableNames(LOCAL_TABLE_PREFIX).messages,
          Key: { inboxId: number.svcnumId, seq: seqKey(seq) },
        }),
      );
    db.destroy();
    // The test clock stands still: were the hole taken for a gap, its grace would never pass, and
    // `fresh` would never come (nor would a tombstone be written for it).
    service.clock.freeze();
    const second = openStream({ numbers: app.numbers, token: await currentToken(service, app) });
    const [again] = await second.waitFor(1).finally(() => service.clock.release());
    expect(again!.text).toBe('fresh');
    second.cancel();
    const entries = await service.core.store.readInbox(number.svcnumId, 0, 100);
    expect(entries.filter(isTombstone)).toEqual([]);
  });
});
