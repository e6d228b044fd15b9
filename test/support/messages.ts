import { Metadata, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import {
  ProvisionNumberRequest,
  StreamAllMessagesRequest,
  type IncomingMessage,
  type ProgrammableConfig,
  type ProgrammableNumber,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, clientCredentialsToken, provisioningApp, type ProvisioningApp } from './grpc';
import type { TestService } from './service';

// The message path as a test drives it: send over HTTP, receive on StreamAllMessages.

/** An owner account: its provisioning app (streams, numbers) and an External API client token with `messaging`. */
export interface MessagingAccount {
  app: ProvisioningApp;
  api: string;
  apiClientId: string;
}

/** A new owner account; its app is added to `apps`, which the test closes. */
export async function messagingAccount(
  service: TestService,
  apps: ProvisioningApp[],
  accountType: 'business' | 'person' = 'business',
): Promise<MessagingAccount> {
  const app = await provisioningApp(service, accountType === 'business' ? {} : { accountType, scope: 'prov:agents' });
  apps.push(app);
  const { client, clientSecret } = await service.core.registration.createApiClient({
    name: 'Messaging app',
    scope: 'messaging',
    ownerId: app.owner.svcnumId,
  });
  return {
    app,
    api: await clientCredentialsToken(service, client.clientId, clientSecret!),
    apiClientId: client.clientId,
  };
}

/** ProvisionNumber for `owner`, through its own task's client unless `numbers` names another's. */
export const provisionNumber = (
  owner: MessagingAccount,
  displayName: string,
  config: Partial<ProgrammableConfig> = {},
  numbers = owner.app.numbers,
) =>
  call<ProvisionNumberRequest, ProgrammableNumber>(
    numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ displayName, config: { autoReply: '', forwardToSvcnumId: '', ...config } }),
    owner.app.token,
  );

export async function sendMessage(service: TestService, token: string, body: Record<string, unknown>) {
  const response = await fetch(`${service.issuer}/api/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    json: (await response.json()) as Record<string, unknown>,
    headers: response.headers,
  };
}

export interface OpenStream {
  messages: IncomingMessage[];
  error?: ServiceError;
  ended: boolean;
  /** Resolves once at least `count` messages arrived (or rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<IncomingMessage[]>;
  cancel(): void;
}

export function openStream(
  app: Pick<ProvisioningApp, 'numbers' | 'token'>,
  resumeCursor = '',
  token = app.token,
): OpenStream {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  const call: ClientReadableStream<IncomingMessage> = app.numbers.streamAllMessages(
    StreamAllMessagesRequest.fromPartial({ resumeCursor }),
    metadata,
  );
  const stream: OpenStream = {
    messages: [],
    ended: false,
    async waitFor(count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (stream.messages.length < count) {
        if (stream.error) throw stream.error;
        if (Date.now() > deadline) throw new Error(`stream got ${stream.messages.length} of ${count} messages`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return stream.messages;
    },
    cancel: () => call.cancel(),
  };
  call.on('data', (message: IncomingMessage) => stream.messages.push(message));
  call.on('error', (error: ServiceError) => {
    stream.error = error;
  });
  call.on('end', () => {
    stream.ended = true;
  });
  return stream;
}
