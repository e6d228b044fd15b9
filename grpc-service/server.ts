import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { ServerCredentials, type ChannelOptions, type Server } from '@grpc/grpc-js';
import { HealthImplementation, service as healthService, type ServingStatus } from 'grpc-health-check';
import { setMaxListeners } from 'node:events';
import type { ReflectionAccess } from '../core/adapters/runtime-config';
import { provisioningScopes, type ProvisioningScope } from '../core/kernel/scopes';
import {
  accountsModule,
  authenticationModule,
  directoryModule,
  messagingModule,
  oauthModule,
  provisioningModule,
  tokenExchangeModule,
  type ModulesOf,
} from '../core/registry';
import { AgentServiceService } from './gen/svcnum/provisioning/v1alpha1/agent_service';
import { AliasServiceService } from './gen/svcnum/provisioning/v1alpha1/alias_service';
import { MaskServiceService } from './gen/svcnum/provisioning/v1alpha1/mask_service';
import { NumberServiceService } from './gen/svcnum/provisioning/v1alpha1/number_service';
import { authenticate, authenticateCalls, logCalls, logger, type CallScope } from './calls';
import { addReflection, readDescriptorSet, type AdmittedCall } from './reflection';
import { agentService } from './services/agents';
import { ALIAS_SCOPES, aliasService } from './services/aliases';
import { maskService } from './services/masks';
import { numberService } from './services/numbers';
import { StrictServer } from './strict-requests';

// The provisioning gRPC server: our services (numbers, masks, agents, aliases), grpc.health.v1 and server reflection.

export const SERVICE_NAMES = [
  'svcnum.provisioning.v1alpha1.NumberService',
  'svcnum.provisioning.v1alpha1.MaskService',
  'svcnum.provisioning.v1alpha1.AgentService',
  'svcnum.provisioning.v1alpha1.AliasService',
] as const;

/** Concurrent calls (HTTP/2 streams) one connection may hold open; a client opens more channels for more. */
export const MAX_STREAMS_PER_CONNECTION = 100;

/**
 * The largest request a call may send, in bytes. Ours are small: the largest legitimate ones are
 * an ExchangeTokenRequest (two of our tokens, about 1 KB each, and short strings) and a
 * ProvisionNumberRequest (an auto_reply of at most 1,000 characters: 4 KB of UTF-8). A larger one
 * ends its call with RESOURCE_EXHAUSTED before it is read whole, so a call never holds more.
 */
export const MAX_REQUEST_BYTES = 64 * 1024;

/**
 * Connection management behind an AWS NLB, which silently drops flows idle for 350 s: the server
 * pings every 60 s (also without calls), so long-lived streams and idle channels stay open, and
 * a peer that stops answering is dropped after 20 s. Connections are recycled after 30 minutes
 * (with a grace for calls in flight) so new tasks get their share after a scale-out. What one
 * connection may hold is bounded: streams and request size here, reflection in reflection.ts
 * (docs/grpc-api.md#limits).
 */
export const serverOptions: ChannelOptions = {
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.max_connection_age_ms': 30 * 60_000,
  'grpc.max_connection_age_grace_ms': 5 * 60_000,
  'grpc.max_concurrent_streams': MAX_STREAMS_PER_CONNECTION,
  'grpc.max_receive_message_length': MAX_REQUEST_BYTES,
};

/** A gRPC bind target; an IPv6 literal goes in brackets (`[::]:50051`). */
const bindTarget = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

export interface RunningGrpcServer {
  port: number;
  server: Server;
  /** The overall grpc.health.v1 status (service ''): what the HTTP health endpoint answers (health-endpoint.ts). */
  healthStatus(): ServingStatus;
  /** Graceful drain: NOT_SERVING at once, then let calls finish for up to `graceMs`, then stop. */
  drain(graceMs?: number): Promise<void>;
}

/** The modules the gRPC services and interceptors use (and what they need): no token endpoint, no browser flow. */
export const grpcModules = [
  oauthModule,
  authenticationModule,
  accountsModule,
  tokenExchangeModule,
  provisioningModule,
  messagingModule,
  directoryModule,
] as const;

/**
 * A reflection stream in `token` mode: a provisioning client's token with any prov:* scope, checked as for our RPCs.
 */
const ANY_PROVISIONING_SCOPE = Object.keys(provisioningScopes) as ProvisioningScope[];

export async function startGrpcServer(
  modules: ModulesOf<typeof grpcModules>,
  /** `reflection`: GRPC_REFLECTION (default open). */
  options: { port: number; host?: string; reflection?: ReflectionAccess },
): Promise<RunningGrpcServer> {
  const descriptorSet = readDescriptorSet();
  const closing = new AbortController();
  // Every open stream listens for the drain: no listener limit on this signal.
  setMaxListeners(0, closing.signal);
  // Our services and the scope each one's calls need.
  const ours = [
    [NumberServiceService, numberService(modules, closing.signal), 'prov:numbers'],
    [MaskServiceService, maskService(modules), 'prov:masks'],
    [AgentServiceService, agentService(modules), 'prov:agents'],
    [AliasServiceService, aliasService(modules), ALIAS_SCOPES],
  ] as const;
  /**
   * Every method of ours by path: only these are authenticated here (health is open; reflection admits its own
   * streams).
   */
  const scopes = new Map<string, CallScope>(
    ours.flatMap(([definition, , scope]) => Object.values(definition).map((method) => [method.path, scope] as const)),
  );
  // Requests that are protobuf but not the method's message answer INVALID_ARGUMENT (strict-requests.ts);
  // the log sees every call, refused ones included; authentication sees only requests that fit.
  const server = new StrictServer(
    createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet)),
    {
      ...serverOptions,
      interceptors: [authenticateCalls(modules, scopes)],
    },
    [logCalls],
  );
  for (const [definition, implementation] of ours) server.addService(definition, implementation);
  const health = new HealthImplementation({
    '': 'SERVING',
    ...Object.fromEntries(SERVICE_NAMES.map((name) => [name, 'SERVING' as const])),
  });
  health.addToServer(server);
  let overall: ServingStatus = 'SERVING';
  addReflection(server, descriptorSet, [...ours.map(([definition]) => definition), healthService], {
    closing: closing.signal,
    ...(options.reflection === 'token'
      ? {
          admit: (call: AdmittedCall) =>
            authenticate(modules, call, ANY_PROVISIONING_SCOPE, 'ServerReflection.ServerReflectionInfo'),
        }
      : {}),
  });

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      bindTarget(options.host ?? '0.0.0.0', options.port),
      ServerCredentials.createInsecure(),
      (error, bound) => (error ? reject(error) : resolve(bound)),
    );
  });
  return {
    port,
    server,
    healthStatus: () => overall,
    drain(graceMs = 25_000) {
      overall = 'NOT_SERVING';
      for (const name of ['', ...SERVICE_NAMES]) health.setStatus(name, overall);
      // Open message streams end now (clients resume with their cursor on another task).
      closing.abort();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          logger.warn('drain timed out; closing remaining calls', { graceMs });
          server.forceShutdown();
          resolve();
        }, graceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
