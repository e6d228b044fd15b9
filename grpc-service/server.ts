import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { ServerCredentials, type ChannelOptions, type Server } from '@grpc/grpc-js';
import { HealthImplementation, service as healthService, type ServingStatus } from 'grpc-health-check';
import { setMaxListeners } from 'node:events';
import {
  accountsModule, directoryModule, messagingModule, oauthModule, provisioningModule, tokenExchangeModule, type ModulesOf,
} from '../core/registry';
import { AgentServiceService } from './gen/svcnum/provisioning/v1alpha1/agent_service';
import { AliasServiceService } from './gen/svcnum/provisioning/v1alpha1/alias_service';
import { MaskServiceService } from './gen/svcnum/provisioning/v1alpha1/mask_service';
import { NumberServiceService } from './gen/svcnum/provisioning/v1alpha1/number_service';
import { authenticateCalls, logCalls, logger, type CallScope } from './calls';
import { addReflection, readDescriptorSet } from './reflection';
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

/**
 * Connection management behind an AWS NLB, which silently drops flows idle for 350 s: the server
 * pings every 60 s (also without calls), so long-lived streams and idle channels stay open, and
 * a peer that stops answering is dropped after 20 s. Connections are recycled after 30 minutes
 * (with a grace for calls in flight) so new tasks get their share after a scale-out.
 */
export const serverOptions: ChannelOptions = {
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.max_connection_age_ms': 30 * 60_000,
  'grpc.max_connection_age_grace_ms': 5 * 60_000,
  'grpc.max_receive_message_length': 1024 * 1024,
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
export const grpcModules = [oauthModule, accountsModule, tokenExchangeModule, provisioningModule, messagingModule, directoryModule] as const;

export async function startGrpcServer(modules: ModulesOf<typeof grpcModules>, options: { port: number; host?: string }): Promise<RunningGrpcServer> {
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
  /** Every method of ours by path: only these are authenticated (health and reflection are open). */
  const scopes = new Map<string, CallScope>(ours.flatMap(([definition, , scope]) => Object.values(definition).map((method) => [method.path, scope] as const)));
  // Requests that are protobuf but not the method's message answer INVALID_ARGUMENT (strict-requests.ts);
  // the log sees every call, refused ones included; authentication sees only requests that fit.
  const server = new StrictServer(createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet)), {
    ...serverOptions, interceptors: [authenticateCalls(modules, scopes)],
  }, [logCalls]);
  for (const [definition, implementation] of ours) server.addService(definition, implementation);
  const health = new HealthImplementation({ '': 'SERVING', ...Object.fromEntries(SERVICE_NAMES.map((name) => [name, 'SERVING' as const])) });
  health.addToServer(server);
  let overall: ServingStatus = 'SERVING';
  addReflection(server, descriptorSet, [...ours.map(([definition]) => definition), healthService], { closing: closing.signal });

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(bindTarget(options.host ?? '0.0.0.0', options.port), ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
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
