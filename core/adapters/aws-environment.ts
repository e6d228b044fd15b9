import type { KMSClient } from '@aws-sdk/client-kms';
import { serviceConfig } from '../kernel/config';
import { combinedKeyRing } from '../kernel/key-rings';
import type { MacKey, SigningAlg } from '../kernel/ports';
import type { InboxWakeups } from '../messaging/wakeups';
import { buildModules, modulePorts, type AnyModuleDefinition, type ModulesOf, type StoreOf } from '../registry';
import type { Store } from '../store';
import { createDerivedFailureReport } from './derived-failures';
import type { StoreFactory } from './dynamo-store';
import { createKmsClient } from './kms-client';
import { createKmsKeyRing, createKmsMacKey } from './kms-keys';
import { createFreeNumbersGauge, createKmsThrottleCounter } from './metrics';
import type { AwsRuntimeConfig } from './runtime-config';
import { systemClock, systemRandom } from './system';

// How a process in AWS (a Lambda container, a Fargate task) builds its modules from its configuration
// (its environment, read and validated by runtime-config.ts). Its caller builds it once, on first use.

/**
 * Only the units that use a MAC key have its variable (lib/access.ts `mac`, `pageTokenMac`);
 * elsewhere the key is never asked for, and says what is missing if it is.
 */
function macKeyFromEnvironment(
  client: KMSClient,
  keyId: string | undefined,
  variable: 'MAC_KEY_ID' | 'PAGE_TOKEN_KEY_ID',
): MacKey {
  if (keyId) return createKmsMacKey({ client, keyId });
  const missing = () => Promise.reject(new Error(`environment variable ${variable} is not set`));
  return { mac: missing, verify: missing };
}

/**
 * A process's store: the DynamoDB slices its modules' ports need (`StoreOf`), or none where they
 * need none (discovery), so that its bundle holds no DynamoDB client.
 */
export type StoreOption<D extends readonly AnyModuleDefinition[]> = keyof StoreOf<D> extends never
  ? { store?: undefined }
  : { store: StoreFactory<StoreOf<D>> };

/**
 * The modules `definitions` name (and what they need), built from this process's configuration.
 * `inboxWakeups`: the pub/sub engine's (core/adapters/valkey-wakeups.ts), given by the entry points
 * that stream messages, so that no other bundle holds its client.
 */
export function modulesFromEnvironment<const D extends readonly AnyModuleDefinition[]>(
  config: AwsRuntimeConfig,
  definitions: D,
  { store }: StoreOption<D>,
  inboxWakeups?: InboxWakeups,
): ModulesOf<D> {
  // Every throttled KMS attempt is counted (KmsThrottles), retried or not. The stack always names the service
  // (SERVICE_NAME).
  const kms = createKmsClient({ onThrottle: createKmsThrottleCounter('svcnum') });
  const ring = (activeKeyId: string, additionalKeyIds: string[], alg: SigningAlg) =>
    createKmsKeyRing({ client: kms, activeKeyId, additionalKeyIds, publicKeys: config.kmsPublicKeys, alg });
  // The RSA ring only where the stack gives its key (lib/access.ts `rsaKey`).
  const keys = combinedKeyRing(
    ring(config.kmsKeyId, config.kmsVerifyKeyIds, 'EdDSA'),
    config.kmsRsaKeyId ? ring(config.kmsRsaKeyId, config.kmsRsaVerifyKeyIds, 'RS256') : undefined,
  );
  return buildModules(
    modulePorts({
      // Typed by StoreOption: the slices given serve every method these modules call.
      store: (store ? store(config.tablePrefix) : {}) as Store,
      keys,
      macKey: macKeyFromEnvironment(kms, config.macKeyId, 'MAC_KEY_ID'),
      pageTokenKey: macKeyFromEnvironment(kms, config.pageTokenKeyId, 'PAGE_TOKEN_KEY_ID'),
      signIn: config.service.signIn,
      dpopNonces: config.service.dpopNonces,
      clock: systemClock,
      random: systemRandom,
      config: serviceConfig(config.issuer, config.grpcOrigin),
      provisioning: config.service.provisioning,
      reportDerivedFailure: createDerivedFailureReport('svcnum'),
      reportFreeNumbers: createFreeNumbersGauge('svcnum'),
      messagePolling: config.service.messagePolling,
      ...(inboxWakeups ? { inboxWakeups } : {}),
    }),
    definitions,
  );
}
