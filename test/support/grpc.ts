import { credentials, Metadata, status, type Client as GrpcClient, type ServiceError } from '@grpc/grpc-js';
import { expect } from 'vitest';
import type { Caller } from '../../core/provisioning/programmable';
import { AgentServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { MaskServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import { NumberServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import type { AccountType, User } from '../../core/kernel/model';
import { postForm } from './flow';
import type { TestService } from './service';

// A provisioning app as a test sees it: an owner account, a provisioning client registered for
// it, a client_credentials token, and the generated gRPC clients on loopback.

let counter = 0;

/**
 * Calls a unary RPC of a generated client and resolves with its response (or rejects with the
 * ServiceError). Build requests with the generated `X.fromPartial({...})`: the encoder needs every field.
 */
export function call<Request, Response>(
  client: GrpcClient,
  method: string,
  request: Request,
  token?: string,
): Promise<Response> {
  const metadata = new Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) => {
    const rpc = (client as unknown as Record<string, (...args: unknown[]) => unknown>)[method]!.bind(client);
    rpc(request, metadata, (error: ServiceError | null, response: Response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

/** The failure of a call that must fail: its status code, details and trailers. */
export async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error('expected the call to fail');
}

/** The call fails with exactly `code`, and (if given) a message matching `message`. */
export async function rejects(promise: Promise<unknown>, code: status, message?: RegExp): Promise<ServiceError> {
  const error = await failure(promise);
  expect({ code: status[error.code], details: error.details }).toMatchObject({ code: status[code] });
  if (message) expect(error.details).toMatch(message);
  return error;
}

export async function clientCredentialsToken(
  service: TestService,
  clientId: string,
  clientSecret: string,
  scope?: string,
): Promise<string> {
  const reply = await postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'client_credentials',
    client_id: clientId,
    client_secret: clientSecret,
    ...(scope ? { scope } : {}),
  });
  if (reply.status !== 200) throw new Error(`token: ${reply.text}`);
  return String(reply.json.access_token);
}

export interface ProvisioningApp {
  owner: User;
  clientId: string;
  clientSecret: string;
  token: string;
  numbers: NumberServiceClient;
  masks: MaskServiceClient;
  agents: AgentServiceClient;
  close(): void;
}

/**
 * An owner account (business by default: it may hold every prov:* scope) with a provisioning
 * client and its token, plus generated clients connected to the service's gRPC port.
 */
export async function provisioningApp(
  service: TestService,
  options: { accountType?: AccountType; scope?: string } = {},
): Promise<ProvisioningApp> {
  const accountType = options.accountType ?? 'business';
  // No password: the owner never signs in here, and each hash (scrypt) costs about 0.4 s of CPU.
  const owner = await service.core.registration.createUser({
    email: `owner${++counter}-${Date.now()}@example.com`,
    accountType,
  });
  const scope = options.scope ?? (accountType === 'business' ? 'prov:numbers prov:masks prov:agents' : 'prov:agents');
  const { client, clientSecret } = await service.core.registration.createProvisioningClient({
    name: `Provisioning app ${counter}`,
    scope,
    ownerId: owner.svcnumId,
  });
  const token = await clientCredentialsToken(service, client.clientId, clientSecret!);
  const address = `127.0.0.1:${service.grpcPort}`;
  const insecure = credentials.createInsecure();
  const numbers = new NumberServiceClient(address, insecure);
  const masks = new MaskServiceClient(address, insecure);
  const agents = new AgentServiceClient(address, insecure);
  return {
    owner,
    clientId: client.clientId,
    clientSecret: clientSecret!,
    token,
    numbers,
    masks,
    agents,
    close() {
      numbers.close();
      masks.close();
      agents.close();
    },
  };
}

/** The core's view of an app's calls. */
export const callerOf = (app: ProvisioningApp): Caller => ({ ownerId: app.owner.svcnumId, clientId: app.clientId });

/** Adds `count` numbers to the pool, from a range no other test file uses (`prefix` picks it). */
export async function seedPool(service: TestService, prefix: string, count: number) {
  return service.core.provisioning.lifecycle.seed(`${prefix}${'0'.repeat(11 - prefix.length)}`, count);
}

const tokenIssuedAt = new WeakMap<ProvisioningApp, number>();

/**
 * The app's token, fetched again when the service clock has moved on (tests jump the clock by
 * hours and days, and tokens live one hour).
 */
export async function currentToken(service: TestService, app: ProvisioningApp): Promise<string> {
  const at = tokenIssuedAt.get(app);
  const now = service.clock.now();
  if (at === undefined || now - at > 30 * 60_000 || now < at) {
    app.token = await clientCredentialsToken(service, app.clientId, app.clientSecret);
    tokenIssuedAt.set(app, service.clock.now());
  }
  return app.token;
}

/** Metadata as the call `authenticate` judges (grpc-service/calls.ts): a path and an authority besides. */
export const asCall = (metadata: Metadata, path = '/svcnum.provisioning.v1alpha1.NumberService/ListNumbers') => ({
  metadata,
  getPath: () => path,
  getHost: () => 'localhost',
});
