// The service under load, in its own process (spawned by bench/run.ts through bench/server-process.ts):
// a load generator sharing the event loop with the server would measure itself.
//
// Starts the local runner on free ports in DATA_DIR (created and removed by the parent), creates
// one login client and one user (sign-in benchmarks), a business owner with a provisioning
// client and a few mask participants (provisioning benchmarks), seeds BENCH_POOL_NUMBERS numbers
// into the pool through the core (timed), and prints a single JSON line on stdout:
//   {"ready":true,"issuer":…,"clientId":…,"redirectUri":…,"scope":…,"email":…,"password":…,
//    "grpcPort":…,"provisioning":{"clientId":…,"clientSecret":…,"scope":…,"ownerId":…,"participants":[…],"pool":{…}}}
// It stops on SIGTERM/SIGINT, and also when its stdin closes, so it never outlives the bench
// (then it removes DATA_DIR itself, since the parent is gone).

process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { BenchPoolInfo, BenchServerInfo } from './server-process';

const REDIRECT_URI = 'https://client.example/callback';
const SCOPE = 'openid profile email';
const PROVISIONING_SCOPE = 'prov:numbers prov:masks prov:agents';
/** Mask participants: person accounts, paired round-robin by the mask benchmark. */
const PARTICIPANTS = 4;
/** First number of the seeded range (11 digits, like every user number; a clash is only skipped). */
const POOL_FIRST = '79000000000';
/** seed() adds numbers one at a time; this many ranges are seeded side by side. */
const SEED_CONCURRENCY = 16;
/** seed() takes at most this many numbers per call. */
const SEED_MAX_PER_CALL = 100_000;

/** Seeds `count` numbers from POOL_FIRST through the core, in SEED_CONCURRENCY ranges at once. */
async function seedPool(seed: (first: string, count: number) => Promise<{ added: number; skipped: number }>, count: number): Promise<BenchPoolInfo> {
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
  await Promise.all(Array.from({ length: Math.min(SEED_CONCURRENCY, ranges.length) }, async () => {
    for (let range = ranges[next++]; range; range = ranges[next++]) {
      const result = await seed(range.first, range.count);
      added += result.added;
      skipped += result.skipped;
    }
  }));
  const seconds = (performance.now() - started) / 1000;
  return {
    first: POOL_FIRST, requested: count, added, skipped, concurrency: Math.min(SEED_CONCURRENCY, ranges.length),
    seconds: Math.round(seconds * 100) / 100, numbersPerSecond: Math.round(count / seconds),
  };
}

async function main() {
  const dataDir = process.env.DATA_DIR;
  if (!dataDir) throw new Error('DATA_DIR is required');
  const poolNumbers = Number(process.env.BENCH_POOL_NUMBERS ?? '0');
  if (!Number.isInteger(poolNumbers) || poolNumbers < 0) throw new Error(`BENCH_POOL_NUMBERS must be a whole number, got '${process.env.BENCH_POOL_NUMBERS}'`);
  // Imported after the environment is set: the handlers build their logger at load time.
  const { startLocal } = await import('../local/runner');
  const service = await startLocal({ dataDir, port: 0, dynamoPort: 0, grpcPort: 0 });

  let stopping = false;
  /** `orphaned`: the parent is gone (stdin closed), so nobody else will remove DATA_DIR. */
  const stop = (orphaned: boolean) => {
    if (stopping) return;
    stopping = true;
    const timer = setTimeout(() => process.exit(1), 3000);
    timer.unref();
    service.close()
      .then(() => (orphaned ? rm(dataDir, { recursive: true, force: true }) : undefined))
      .then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGTERM', () => stop(false));
  process.on('SIGINT', () => stop(false));
  process.stdin.on('end', () => stop(true));
  process.stdin.on('close', () => stop(true));
  process.stdin.resume();

  const { client } = await service.core.accounts.createLoginClient({ name: 'Bench app', scope: SCOPE, redirectUris: [REDIRECT_URI] });
  const email = `bench-${Date.now()}@example.com`;
  const password = randomBytes(12).toString('base64url');
  await service.core.accounts.createUser({ email, password });

  // Provisioning: a business owner (it may hold every prov:* scope), its provisioning client,
  // and the people the masks bridge.
  const owner = await service.core.accounts.createUser({ email: `bench-owner-${Date.now()}@example.com`, password: randomBytes(12).toString('base64url'), accountType: 'business' });
  const provisioning = await service.core.accounts.createProvisioningClient({ name: 'Bench provisioning app', scope: PROVISIONING_SCOPE, ownerId: owner.svcnumId });
  const participants: string[] = [];
  for (let index = 0; index < PARTICIPANTS; index++) participants.push((await service.core.accounts.createUser({})).svcnumId);
  const pool = poolNumbers > 0
    ? await seedPool((first, count) => service.core.provisioning.lifecycle.seed(first, count), poolNumbers)
    : { first: POOL_FIRST, requested: 0, added: 0, skipped: 0, concurrency: 0, seconds: 0, numbersPerSecond: 0 };

  const info: BenchServerInfo = {
    ready: true, pid: process.pid, issuer: service.issuer, clientId: client.clientId, redirectUri: REDIRECT_URI, scope: SCOPE, email, password,
    grpcPort: service.grpcPort,
    provisioning: { clientId: provisioning.client.clientId, clientSecret: provisioning.clientSecret!, scope: PROVISIONING_SCOPE, ownerId: owner.svcnumId, participants, pool },
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench server failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
