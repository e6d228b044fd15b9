import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import { DAY, serviceConfig } from '../config';
import type { MacKey } from '../ports';
import { defaultProvisioningConfig } from '../provisioning/config';
import { createCore, type Core } from '../service';
import { signInLimitsFromEnvironment } from '../sign-in-guard';
import { tableNames } from '../tables';
import { createDynamoStore } from './dynamo-store';
import { documentClient } from './dynamo-schema';
import { createKmsKeyRing, createKmsMacKey } from './kms-keys';
import { systemClock, systemRandom } from './system';

// How a process in AWS (a Lambda container, a Fargate task) builds the core: once, from its
// environment, on first use.
//   ISSUER               the issuer URL (https://…)
//   TABLE_PREFIX         physical table name prefix of the environment
//   KMS_KEY_ID           the KMS key (id, ARN or alias) that signs
//   KMS_VERIFY_KEY_IDS   comma-separated further keys published in the JWKS (rotation)
//   MAC_KEY_ID           the KMS HMAC key (HMAC_256): signs sign-in CSRF tokens and device cookies (browser function);
//                        the page-token key is derived from it (public function, gRPC task: core/kernel/page-token.ts)
//   SIGN_IN_*            sign-in limits per process (core/sign-in-guard.ts)
//   NUMBER_COOL_OFF_DAYS cool-off of retired numbers (default 90)
//   MESSAGE_POLL_INTERVAL_MS how often open message streams poll their inboxes (default 250)
//   AGENT_QUOTA_INDEPENDENT, AGENT_QUOTA_DEPENDENT default agent quotas (10, 10)

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is not set`);
  return value;
}

export function coolOffFromEnvironment(): number {
  const days = process.env.NUMBER_COOL_OFF_DAYS;
  if (days === undefined || days === '') return defaultProvisioningConfig.coolOff;
  const parsed = Number(days);
  if (!Number.isFinite(parsed) || parsed < 0) throw new Error(`NUMBER_COOL_OFF_DAYS must be a non-negative number, got '${days}'`);
  return parsed * DAY;
}

export function pollIntervalFromEnvironment(): number | undefined {
  const value = process.env.MESSAGE_POLL_INTERVAL_MS;
  if (value === undefined || value === '') return undefined;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 20 || parsed > 60_000) throw new Error(`MESSAGE_POLL_INTERVAL_MS must be 20-60000, got '${value}'`);
  return parsed;
}

function quotaFromEnvironment(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === '') return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 100_000) throw new Error(`${name} must be a whole number 0-100000, got '${value}'`);
  return parsed;
}

/**
 * Only the units that use the MAC key have MAC_KEY_ID (lib/access.ts `mac`); elsewhere the key is
 * never asked for, and says what is missing if it is.
 */
function macKeyFromEnvironment(client: KMSClient): MacKey {
  const keyId = process.env.MAC_KEY_ID;
  if (keyId) return createKmsMacKey({ client, keyId });
  const missing = () => Promise.reject(new Error('environment variable MAC_KEY_ID is not set'));
  return { mac: missing, verify: missing };
}

let core: Core | undefined;

export function coreFromEnvironment(): Core {
  if (core) return core;
  const kms = new KMSClient({});
  const keys = createKmsKeyRing({
    client: kms,
    activeKeyId: required('KMS_KEY_ID'),
    additionalKeyIds: (process.env.KMS_VERIFY_KEY_IDS ?? '').split(',').map((id) => id.trim()).filter(Boolean),
  });
  core = createCore({
    store: createDynamoStore(documentClient(new DynamoDBClient({})), tableNames(required('TABLE_PREFIX'))),
    keys,
    macKey: macKeyFromEnvironment(kms),
    signIn: signInLimitsFromEnvironment(),
    clock: systemClock,
    random: systemRandom,
    config: serviceConfig(required('ISSUER')),
    provisioning: {
      ...defaultProvisioningConfig,
      coolOff: coolOffFromEnvironment(),
      independentAgentQuota: quotaFromEnvironment('AGENT_QUOTA_INDEPENDENT', defaultProvisioningConfig.independentAgentQuota),
      dependentAgentQuota: quotaFromEnvironment('AGENT_QUOTA_DEPENDENT', defaultProvisioningConfig.dependentAgentQuota),
    },
    ...(pollIntervalFromEnvironment() ? { messagePollIntervalMs: pollIntervalFromEnvironment()! } : {}),
  });
  return core;
}
