import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocal, type LocalOptions, type LocalService } from '../../local/runner';
import { defaultProvisioningConfig } from '../../core/provisioning/config';
import { TestClock } from './clock';

export interface TestService extends LocalService {
  clock: TestClock;
  dataDir: string;
}

/**
 * Per-owner limits on masks and numbers out of reach: most tests make many of them for one owner
 * and test other things. test/provisioning-limits.test.ts runs with the real defaults.
 */
export const ROOMY_POOL_LIMITS = { maskQuota: 100_000, numberQuota: 100_000 } as const;

/**
 * The scrypt cost of the passwords the tests' service hashes: 1 MiB instead of 128 MiB, a few
 * milliseconds instead of about 0.4 s. The tests check the service around the KDF (one check per
 * attempt, the decoy, the gate); test/secrets.test.ts checks the production cost, which every
 * process started as users start it (`npm start`, the admin CLI, the Lambdas) uses.
 */
export const TEST_PASSWORD_COST = { N: 2 ** 10, r: 8, p: 1 } as const;

/**
 * The local runner on free ports with a fresh data folder and a hand-moved clock; `provisioning` defaults to the
 * defaults with ROOMY_POOL_LIMITS.
 */
export async function startTestService(
  options: Pick<
    LocalOptions,
    | 'provisioning'
    | 'wrapStore'
    | 'signIn'
    | 'publicRateLimit'
    | 'wakeupEngine'
    | 'wakeupOptions'
    | 'messagePolling'
    | 'issuer'
    | 'dpopNonces'
    | 'passwordCost'
  > = {},
): Promise<TestService> {
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-test-'));
  const clock = new TestClock();
  const service = await startLocal({
    dataDir,
    port: 0,
    dynamoPort: 0,
    grpcPort: 0,
    clock,
    provisioning: { ...defaultProvisioningConfig, ...ROOMY_POOL_LIMITS },
    passwordCost: TEST_PASSWORD_COST,
    ...options,
  });
  return {
    ...service,
    clock,
    dataDir,
    async close() {
      await service.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
