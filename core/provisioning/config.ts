import { DAY, MINUTE, SECOND } from '../kernel/config';

export interface ProvisioningConfig {
  /** How long a retired number cools off before it can be allocated again (default 90 days). */
  coolOff: number;
  /** How long an uncommitted claim (number, quota slot, request) holds before others may take it. */
  lease: number;
  /** Default agent quotas; an owner record may override them. */
  independentAgentQuota: number;
  dependentAgentQuota: number;
  /**
   * Default limits per owner of live masks and of programmable numbers (not deactivated); an owner
   * record may override them.
   */
  maskQuota: number;
  numberQuota: number;
}

export const defaultProvisioningConfig: ProvisioningConfig = {
  coolOff: 90 * DAY,
  lease: MINUTE,
  independentAgentQuota: 10,
  dependentAgentQuota: 10,
  maskQuota: 10,
  numberQuota: 10,
};

export const provisioningLimits = {
  maskTtlMin: 60 * SECOND,
  maskTtlMax: 30 * DAY,
  autoReplyMax: 1000,
  displayNameMax: 100,
  requestIdMax: 64,
  /** Idempotency records are kept this long: a retry within it gets the first answer. */
  requestRetention: DAY,
} as const;
