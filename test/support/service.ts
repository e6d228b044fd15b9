import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocal, type LocalOptions, type LocalService } from '../../local/runner';
import { TestClock } from './clock';

export interface TestService extends LocalService {
  clock: TestClock;
  dataDir: string;
}

/** The local runner on free ports with a fresh data folder and a hand-moved clock. */
export async function startTestService(
  options: Pick<LocalOptions, 'provisioning' | 'wrapStore' | 'signIn' | 'publicRateLimit' | 'wakeupEngine' | 'messagePolling' | 'issuer'> = {},
): Promise<TestService> {
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-test-'));
  const clock = new TestClock();
  const service = await startLocal({ dataDir, port: 0, dynamoPort: 0, grpcPort: 0, clock, ...options });
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
