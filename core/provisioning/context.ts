import type { PageTokenCodec } from '../kernel/page-token';
import type { Clock } from '../kernel/ports';
import type { ProvisioningConfig } from './config';
import type { NumberPool } from './pool';
import type { Quota } from './quota';
import type { RequestLog } from './requests';
import type { ProvisioningPort } from './store';

/**
 * What every kind of provisioned thing (programmable numbers, masks, agents) works with: the
 * store, the number pool, the quotas and the request log that makes creates idempotent. Each
 * kind's operations are top-level functions of its own context, which adds what only it needs.
 */
export interface ProvisioningParts {
  store: ProvisioningPort;
  clock: Clock;
  pool: NumberPool;
  quota: Quota;
  once: RequestLog;
  config: ProvisioningConfig;
  pageTokens: PageTokenCodec;
}
