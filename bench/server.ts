// The service under load, in its own process (spawned by bench/run.ts through bench/server-process.ts):
// a load generator sharing the event loop with the server would measure itself.
//
// Two roles (BENCH_ROLE):
//   runner (default)  Starts the local runner on free ports in DATA_DIR (created and removed by the
//                     parent), creates one login client and one user (sign-in benchmarks), an External
//                     API client without an owner (client_credentials, bench/hot-paths.ts), a business
//                     owner with a provisioning client and a few mask participants (provisioning and
//                     messages benchmarks), seeds BENCH_POOL_NUMBERS numbers into the pool through the
//                     core (timed), and prints a single JSON line on stdout:
//     {"ready":true,"role":"runner","issuer":…,"clientId":…,"redirectUri":…,"scope":…,"email":…,"password":…,
//      "apiClient":{"clientId":…,"clientSecret":…,"scope":…},
//      "grpcPort":…,"dynamoEndpoint":…,"dataDir":…,
//      "provisioning":{"clientId":…,"clientSecret":…,"scope":…,"ownerId":…,"participants":[…],"pool":{…}}}
//   grpc              A second gRPC task: only the gRPC server, with a core built against a runner's
//                     embedded DynamoDB (BENCH_DYNAMO_ENDPOINT), the runner's signing keys (DATA_DIR/keys)
//                     and issuer (BENCH_ISSUER), as a Fargate task shares the tables with the Lambdas.
//     {"ready":true,"role":"grpc","pid":…,"grpcPort":…}
// With VALKEY_URL (either role) the process wakes and is woken through that pub/sub engine. The grpc
// role also reads the hub's intervals (MESSAGE_POLL_INTERVAL_MS, MESSAGE_SAFETY_POLL_MS,
// MESSAGE_ENGINE_LOST_POLL_MS, MESSAGE_RELIST_MS) as a task does; the idle-reads phase scales them.
// Both answer stats requests on stdin: a line {"id":n,"cmd":"stats","gc":true} is answered on stdout
// with {"reply":n,"stats":{pid, memory: process.memoryUsage() (after a full GC when asked; the
// child runs with --expose-gc), eventLoop: main-thread active/idle ms, cpu: process.cpuUsage(),
// hub: watched inboxes, poll interval and whether the engine's subscriptions are in force, store:
// every store call, counted (bench/store-counters.ts)}}.
// It stops on SIGTERM/SIGINT, and also when its stdin closes, so it never outlives the bench
// (then the runner removes DATA_DIR itself, since the parent is gone; a grpc child never does).

process.env.LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Modules } from '../core/registry';
import { answerStats, lifetime } from './child';
import type { BenchGrpcInfo, BenchPoolInfo, BenchServerInfo } from './server-process';
import { countingStore, snapshotCounters, type StoreCounters } from './store-counters';

const REDIRECT_URI = 'https://client.example/callback';
const SCOPE = 'openid profile email';
const PROVISIONING_SCOPE = 'prov:numbers prov:masks prov:agents';
/** The External API client's scope (client_credentials). */
const API_SCOPE = 'messaging';
/** Mask participants: person accounts, paired round-robin by the mask benchmark. */
const PARTICIPANTS = 4;
/** First number of the seeded range (11 digits, like every user number; a clash is only skipped). */
const POOL_FIRST = '79000000000';
/** seed() adds numbers one at a time; this many ranges are seeded side by side. */
const SEED_CONCURRENCY = 16;
/** seed() takes at most this many numbers per call. */
const SEED_MAX_PER_CALL = 100_000;

/** Seeds `count` numbers from POOL_FIRST through the core, in SEED_CONCURRENCY ranges at once. */
async function seedPool(
  seed: (first: string, count: number) => Promise<{ added: number; skipped: number }>,
  count: number,
): Promise<BenchPoolInfo> {
  const started = performance.now();
  const chunks = Math.min(count, Math.max(SEED_CONCURRENCY, Math.ceil(count / SEED_MAX_PER_CALL)));
  const base = BigInt(POOL_FIRST);
  const ranges = Array.from({ length: chunks }, (_, index) => {
    const from = Math.floor((count * index) / chunks);
    const to = Math.floor((count * (index + 1)) / chunks);
    return { first: (base + BigInt(from)).toString().padStart(POOL_FIRST.length, '0'), count: to - from };
  });
  let next = 0;
  let added = 0;
  let skipped = 0;
  await Promise.all(
    Array.from({ length: Math.min(SEED_CONCURRENCY, ranges.length) }, async () => {
      for (let range = ranges[next++]; range; range = ranges[next++]) {
        const result = await seed(range.first, range.count);
        added += result.added;
        skipped += result.skipped;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    first: POOL_FIRST,
    requested: count,
    added,
    skipped,
    concurrency: Math.min(SEED_CONCURRENCY, ranges.length),
    seconds: Math.round(seconds * 100) / 100,
    numbersPerSecond: Math.round(count / seconds),
  };
}

/** The runner's and the grpc child's stats reply: the common figures, the MessageHub and the store counters. */
function answerRunnerStats({ messaging }: Pick<Modules, 'messaging'>, counters: StoreCounters) {
  answerStats(() => ({
    hub: {
      watchedInboxes: messaging.hub.watchedInboxes(),
      pollIntervalMs: messaging.hub.pollIntervalMs(),
      engineReady: messaging.wakeups.ready(),
    },
    store: snapshotCounters(counters),
  }));
}

/**
 * The pub/sub engine VALKEY_URL names and the hub's intervals (MESSAGE_*), as a task reads them
 * (core/adapters/runtime-config.ts).
 */
async function messagingFromEnvironment() {
  const { readRuntimeConfig } = await import('../core/adapters/runtime-config');
  const {
    VALKEY_URL,
    MESSAGE_POLL_INTERVAL_MS,
    MESSAGE_SAFETY_POLL_MS,
    MESSAGE_ENGINE_LOST_POLL_MS,
    MESSAGE_ENGINE_CHECK_MS,
    MESSAGE_RELIST_MS,
  } = process.env;
  const settings = readRuntimeConfig('local', {
    VALKEY_URL,
    MESSAGE_POLL_INTERVAL_MS,
    MESSAGE_SAFETY_POLL_MS,
    MESSAGE_ENGINE_LOST_POLL_MS,
    MESSAGE_ENGINE_CHECK_MS,
    MESSAGE_RELIST_MS,
  }).service;
  // The engine's client only when asked for (the process's memory is measured without it).
  const inboxWakeups = settings.wakeupEngine
    ? (await import('../core/adapters/valkey-wakeups')).engineWakeups(settings)
    : undefined;
  return {
    ...(inboxWakeups ? { inboxWakeups } : {}),
    messagePolling: settings.messagePolling,
  };
}

/** The grpc role: a gRPC server process sharing a runner's tables, keys and issuer. */
async function grpcMain(dataDir: string) {
  const endpoint = process.env.BENCH_DYNAMO_ENDPOINT;
  const issuer = process.env.BENCH_ISSUER;
  const tablePrefix = process.env.BENCH_TABLE_PREFIX;
  if (!endpoint || !issuer || !tablePrefix)
    throw new Error('BENCH_DYNAMO_ENDPOINT, BENCH_ISSUER and BENCH_TABLE_PREFIX are required for BENCH_ROLE=grpc');
  // Only what a gRPC task loads (not local/runner, which pulls in every Lambda handler, nor
  // dynalite): the process's memory is one of the measurements.
  const [
    { DynamoDBClient },
    { createDynamoStore },
    { documentClient },
    { openLocalKeyStore, openLocalMacKey, PAGE_TOKEN_KEY_FILE },
    { systemClock, systemRandom },
    { serviceConfig },
    { buildModules, modulePorts },
    { tableNames },
    { startGrpcServer, grpcModules },
    { createDerivedFailureReport },
  ] = await Promise.all([
    import('@aws-sdk/client-dynamodb'),
    import('../core/adapters/dynamo-store'),
    import('../core/adapters/dynamo-schema'),
    import('../core/adapters/local-keys'),
    import('../core/adapters/system'),
    import('../core/kernel/config'),
    import('../core/registry'),
    import('../core/tables'),
    import('../grpc-service/server'),
    import('../core/adapters/derived-failures'),
  ]);
  // As local/embedded-dynamo.ts localDynamoClient (not imported: it loads dynalite).
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
  });
  const { store, counters } = countingStore(createDynamoStore(documentClient(client), tableNames(tablePrefix)));
  // The runner's key folder: tokens it issued verify here (the folder is only read: it already has its key).
  const keys = await openLocalKeyStore(join(dataDir, 'keys'));
  const macKey = await openLocalMacKey(join(dataDir, 'keys'));
  const pageTokenKey = await openLocalMacKey(join(dataDir, 'keys'), PAGE_TOKEN_KEY_FILE);
  const messaging = await messagingFromEnvironment();
  const { inboxWakeups } = messaging;
  const modules = buildModules(
    modulePorts({
      store,
      keys,
      macKey,
      pageTokenKey,
      clock: systemClock,
      random: systemRandom,
      config: serviceConfig(issuer),
      reportDerivedFailure: createDerivedFailureReport('svcnum'),
      ...messaging,
    }),
    grpcModules,
  );
  const grpc = await startGrpcServer(modules, { port: 0, host: '127.0.0.1' });
  lifetime(async () => {
    await grpc.drain(2_000);
    modules.messaging.hub.close();
    await inboxWakeups?.close();
    client.destroy();
  });
  answerRunnerStats(modules, counters);
  const info: BenchGrpcInfo = { ready: true, role: 'grpc', pid: process.pid, grpcPort: grpc.port };
  process.stdout.write(`${JSON.stringify(info)}\n`);
}

async function main() {
  const dataDir = process.env.DATA_DIR;
  if (!dataDir) throw new Error('DATA_DIR is required');
  if ((process.env.BENCH_ROLE ?? 'runner') === 'grpc') return grpcMain(dataDir);
  const poolNumbers = Number(process.env.BENCH_POOL_NUMBERS ?? '0');
  if (!Number.isInteger(poolNumbers) || poolNumbers < 0)
    throw new Error(`BENCH_POOL_NUMBERS must be a whole number, got '${process.env.BENCH_POOL_NUMBERS}'`);
  // Imported after the environment is set: the handlers build their logger at load time.
  const { startLocal, LOCAL_TABLE_PREFIX } = await import('../local/runner');
  let counters: StoreCounters | undefined;
  const { readRuntimeConfig } = await import('../core/adapters/runtime-config');
  const { wakeupEngine } = readRuntimeConfig('local', { VALKEY_URL: process.env.VALKEY_URL }).service;
  const service = await startLocal({
    dataDir,
    port: 0,
    dynamoPort: 0,
    grpcPort: 0,
    ...(wakeupEngine ? { wakeupEngine } : {}),
    wrapStore: (store) => {
      const counted = countingStore(store);
      counters = counted.counters;
      return counted.store;
    },
  });
  lifetime(
    () => service.close(),
    () => rm(dataDir, { recursive: true, force: true }),
  );
  answerRunnerStats(service.core, counters!);
  const { client } = await service.core.registration.createLoginClient({
    name: 'Bench app',
    scope: SCOPE,
    redirectUris: [REDIRECT_URI],
  });
  const email = `bench-${Date.now()}@example.com`;
  const password = randomBytes(12).toString('base64url');
  await service.core.registration.createUser({ email, password });
  // A confidential client with no owner: its client_credentials grant reads nothing but the client.
  const api = await service.core.registration.createApiClient({ name: 'Bench API app', scope: API_SCOPE });

  // Provisioning: a business owner (it may hold every prov:* scope), its provisioning client,
  // and the people the masks bridge.
  const owner = await service.core.registration.createUser({
    email: `bench-owner-${Date.now()}@example.com`,
    password: randomBytes(12).toString('base64url'),
    accountType: 'business',
  });
  const provisioning = await service.core.registration.createProvisioningClient({
    name: 'Bench provisioning app',
    scope: PROVISIONING_SCOPE,
    ownerId: owner.svcnumId,
  });
  // The bench measures throughput, not the per-owner limits (10 live masks, 10 numbers): this owner's are out of reach.
  await service.core.store.setQuotaOverrides(owner.svcnumId, { maskQuota: 1_000_000, numberQuota: 1_000_000 });
  const participants: string[] = [];
  for (let index = 0; index < PARTICIPANTS; index++)
    participants.push((await service.core.registration.createUser({})).svcnumId);
  const pool =
    poolNumbers > 0
      ? await seedPool((first, count) => service.core.provisioning.lifecycle.seed(first, count), poolNumbers)
      : { first: POOL_FIRST, requested: 0, added: 0, skipped: 0, concurrency: 0, seconds: 0, numbersPerSecond: 0 };

  const info: BenchServerInfo = {
    ready: true,
    role: 'runner',
    pid: process.pid,
    issuer: service.issuer,
    clientId: client.clientId,
    redirectUri: REDIRECT_URI,
    scope: SCOPE,
    email,
    password,
    apiClient: { clientId: api.client.clientId, clientSecret: api.clientSecret!, scope: API_SCOPE },
    grpcPort: service.grpcPort,
    dynamoEndpoint: service.dynamoEndpoint,
    tablePrefix: LOCAL_TABLE_PREFIX,
    dataDir,
    provisioning: {
      clientId: provisioning.client.clientId,
      clientSecret: provisioning.clientSecret!,
      scope: PROVISIONING_SCOPE,
      ownerId: owner.svcnumId,
      participants,
      pool,
    },
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench server failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
