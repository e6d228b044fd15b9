import type { Server } from 'node:http';
import { join } from 'node:path';
import { createDerivedFailureReport } from '../core/adapters/derived-failures';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient, ensureTables } from '../core/adapters/dynamo-schema';
import type { ReflectionAccess } from '../core/adapters/runtime-config';
import { openLocalKeyRing, openLocalMacKey, PAGE_TOKEN_KEY_FILE } from '../core/adapters/local-keys';
import { systemClock, systemRandom } from '../core/adapters/system';
import { engineWakeups, type ValkeyWakeupsOptions, type WakeupEngine } from '../core/adapters/valkey-wakeups';
import { serviceConfig } from '../core/kernel/config';
import type { Clock, Random } from '../core/kernel/ports';
import type { ProvisioningConfig } from '../core/provisioning/config';
import {
  allModules,
  buildModules,
  modulePorts,
  pickModules,
  type Infrastructure,
  type Modules,
} from '../core/registry';
import type { HubPolling } from '../core/messaging/hub-polling';
import type { RateLimitConfig } from '../core/kernel/rate-limit';
import type { SignInLimits } from '../core/oauth/sign-in-guard';
import type { ScryptCost } from '../core/kernel/secrets';
import type { Store } from '../core/store';
import { startGrpcServer, type RunningGrpcServer } from '../grpc-service/server';
import { tableNames } from '../core/tables';
import { modulesOf, routeGroups } from '../lambdas/routes';
import { localDynamoClient, startEmbeddedDynamo, type EmbeddedDynamo } from './embedded-dynamo';
import { announceRunning, LOCAL_TABLE_PREFIX, withdrawRunning } from './running';
import { ensurePortsFree } from './start-errors';
import { startHttpServer, type LambdaHandler, type LocalExtra, type LocalRoute } from './http-server';

// The whole service on one machine: embedded DynamoDB, a local signing key, and every Lambda
// handler served over HTTP. Used by `npm start`, the tests and the benchmarks.

export { LOCAL_TABLE_PREFIX } from './running';

export interface LocalOptions {
  dataDir: string;
  /** HTTP port; 0 picks a free one. */
  port: number;
  /** Address the HTTP and gRPC servers listen on (default 127.0.0.1: only this machine). */
  host?: string;
  /** Embedded DynamoDB port; 0 picks a free one. */
  dynamoPort: number;
  /** gRPC port of the provisioning API; 0 picks a free one. */
  grpcPort: number;
  /** Who may use gRPC server reflection (GRPC_REFLECTION; default open). */
  grpcReflection?: ReflectionAccess;
  /** Cool-off, leases and quotas of the provisioning API. */
  provisioning?: ProvisioningConfig;
  /** Sign-in limits (default: core/oauth/sign-in-guard.ts; `npm start` passes its configuration's). */
  signIn?: SignInLimits;
  /** scrypt cost of new password hashes (default OWASP's; only the tests' service lowers it). */
  passwordCost?: ScryptCost;
  /** Per-IP limit of the public endpoints (default: core/kernel/rate-limit.ts). */
  publicRateLimit?: RateLimitConfig;
  /** DPOP_NONCES: DPoP proofs must carry a server nonce (default off). */
  dpopNonces?: boolean;
  /**
   * A pub/sub engine (VALKEY_URL) for inbox wake-ups: several processes on one engine wake each
   * other's streams (tests, benches). Without, wake-ups stay in this process and streams poll.
   */
  wakeupEngine?: WakeupEngine;
  /** The engine adapter's options (tests: its command timeout). */
  wakeupOptions?: Pick<ValkeyWakeupsOptions, 'commandTimeoutMs'>;
  /**
   * How open message streams poll, each interval not given at its default (core/messaging/hub-polling.ts HubPolling).
   */
  messagePolling?: Partial<HubPolling>;
  /** Wraps the store (tests inject failures between the steps of an operation). */
  wrapStore?: (store: Store) => Store;
  /** Defaults to http://localhost:<port>. */
  issuer?: string;
  clock?: Clock;
  random?: Random;
  /** Extra non-Lambda routes (the demo client). */
  extra?: (core: LocalCore, issuer: string) => LocalExtra;
}

/**
 * Every module of the local process, with the store, clock, keys and random source beside them:
 * for tests, the admin-style set-up of `npm start` and the benchmarks. Edges never get this (each
 * route group gets only its modules).
 */
export type LocalCore = Modules & Pick<Infrastructure, 'store' | 'clock' | 'random' | 'keys'>;

/** All modules of one process from its infrastructure, with the handle tests and set-up use. */
export function localCore(infrastructure: Infrastructure): LocalCore {
  const { store, clock, random, keys } = infrastructure;
  return { store, clock, random, keys, ...buildModules(modulePorts(infrastructure), allModules) };
}

/** The modules of a local core, without the store, clock and keys: what the gRPC server gets. */
export const modulesOfCore = (core: LocalCore): Modules => pickModules(core, allModules);

export interface LocalService {
  issuer: string;
  host: string;
  port: number;
  grpcPort: number;
  dynamoEndpoint: string;
  core: LocalCore;
  close(): Promise<void>;
}

export async function startLocal(options: LocalOptions): Promise<LocalService> {
  const host = options.host ?? '127.0.0.1';
  await ensurePortsFree([
    { port: options.port, host, variable: 'PORT' },
    { port: options.grpcPort, host, variable: 'GRPC_PORT' },
    { port: options.dynamoPort, host: '127.0.0.1', variable: 'DYNAMODB_PORT' },
  ]);
  const dynamo: EmbeddedDynamo = await startEmbeddedDynamo(options.dataDir, options.dynamoPort);
  const client = localDynamoClient(dynamo.endpoint);
  let server: Server | undefined;
  let grpc: RunningGrpcServer | undefined;
  const inboxWakeups = engineWakeups(options, options.wakeupOptions);
  try {
    const tables = tableNames(LOCAL_TABLE_PREFIX);
    await ensureTables(client, tables);
    const keys = await openLocalKeyRing(join(options.dataDir, 'keys'));
    const macKey = await openLocalMacKey(join(options.dataDir, 'keys'));
    const pageTokenKey = await openLocalMacKey(join(options.dataDir, 'keys'), PAGE_TOKEN_KEY_FILE);
    // The issuer embeds the port, which is only known after listening when port 0 is asked for:
    // routes are bound to modules built once the port is known.
    const routes = new Map<string, LocalRoute>();
    let extra: LocalExtra | undefined;
    const started = await startHttpServer(routes, { port: options.port, host }, (request, url, response) =>
      extra ? extra(request, url, response) : Promise.resolve(false),
    );
    server = started.server;
    const issuer = options.issuer ?? `http://localhost:${started.port}`;
    const store = createDynamoStore(documentClient(client), tables);
    const core = localCore({
      store: options.wrapStore ? options.wrapStore(store) : store,
      keys,
      macKey,
      pageTokenKey,
      ...(options.signIn ? { signIn: options.signIn } : {}),
      ...(options.passwordCost ? { passwordCost: options.passwordCost } : {}),
      ...(options.dpopNonces ? { dpopNonces: true } : {}),
      clock: options.clock ?? systemClock,
      random: options.random ?? systemRandom,
      config: serviceConfig(issuer),
      ...(options.provisioning ? { provisioning: options.provisioning } : {}),
      reportDerivedFailure: createDerivedFailureReport('svcnum'),
      ...(options.messagePolling ? { messagePolling: options.messagePolling } : {}),
      ...(inboxWakeups ? { inboxWakeups } : {}),
    });
    for (const [group, definition] of Object.entries(routeGroups)) {
      // Only the public group takes options: its per-IP limit.
      const handler = definition.create(
        modulesOf(group as keyof typeof routeGroups, core),
        options.publicRateLimit ? { rateLimit: options.publicRateLimit } : {},
      ) as LambdaHandler;
      for (const path of Object.keys(definition.routes)) routes.set(path, { handler, functionName: `local-${group}` });
    }
    extra = options.extra?.(core, issuer);
    grpc = await startGrpcServer(modulesOfCore(core), {
      port: options.grpcPort,
      host,
      ...(options.grpcReflection ? { reflection: options.grpcReflection } : {}),
    });
    const httpServer = started;
    const grpcServer = grpc;
    await announceRunning(options.dataDir, { pid: process.pid, dynamoEndpoint: dynamo.endpoint });
    return {
      issuer,
      host,
      port: started.port,
      grpcPort: grpc.port,
      dynamoEndpoint: dynamo.endpoint,
      core,
      async close() {
        await withdrawRunning(options.dataDir);
        await grpcServer.drain(2_000);
        await httpServer.close();
        core.messaging.hub.close();
        await inboxWakeups?.close();
        client.destroy();
        await dynamo.close();
      },
    };
  } catch (error) {
    grpc?.server.forceShutdown();
    server?.close();
    await inboxWakeups?.close();
    client.destroy();
    await dynamo.close();
    throw error;
  }
}
