// The core of a further service process in tests (another Fargate task, a Lambda container):
// built like the runner's, against a running test service's embedded DynamoDB (DYNAMO_ENDPOINT)
// and its key folder (DATA_DIR/keys, so tokens verify and sign-in tokens open in every process).
// With VALKEY_URL, its streams and writers use that pub/sub engine for inbox wake-ups
// (MESSAGE_SAFETY_POLL_MS, MESSAGE_ENGINE_LOST_POLL_MS and MESSAGE_RELIST_MS apply), as a task in AWS does.

import { join } from 'node:path';
import { documentClient } from '../../core/adapters/dynamo-schema';
import { readRuntimeConfig } from '../../core/adapters/runtime-config';
import { engineWakeups } from '../../core/adapters/valkey-wakeups';
import { createDynamoStore } from '../../core/adapters/dynamo-store';
import { openLocalKeyRing, openLocalMacKey, PAGE_TOKEN_KEY_FILE } from '../../core/adapters/local-keys';
import { systemClock, systemRandom } from '../../core/adapters/system';
import { serviceConfig } from '../../core/kernel/config';
import { defaultProvisioningConfig, type ProvisioningConfig } from '../../core/provisioning/config';
import type { Store } from '../../core/store';
import { tableNames } from '../../core/tables';
import { localDynamoClient } from '../../local/embedded-dynamo';
import { LOCAL_TABLE_PREFIX, localCore, modulesOfCore } from '../../local/runner';
import { ROOMY_POOL_LIMITS } from './service';

export function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

export async function processCore(
  options: { wrapStore?: (store: Store) => Store; provisioning?: ProvisioningConfig } = {},
) {
  const client = localDynamoClient(need('DYNAMO_ENDPOINT'));
  const store = createDynamoStore(documentClient(client), tableNames(LOCAL_TABLE_PREFIX));
  const keys = join(need('DATA_DIR'), 'keys');
  const { VALKEY_URL, MESSAGE_SAFETY_POLL_MS, MESSAGE_ENGINE_LOST_POLL_MS, MESSAGE_RELIST_MS } = process.env;
  const settings = readRuntimeConfig('local', {
    VALKEY_URL,
    MESSAGE_SAFETY_POLL_MS,
    MESSAGE_ENGINE_LOST_POLL_MS,
    MESSAGE_RELIST_MS,
  }).service;
  const inboxWakeups = engineWakeups(settings);
  const core = localCore({
    store: options.wrapStore ? options.wrapStore(store) : store,
    keys: await openLocalKeyRing(keys),
    macKey: await openLocalMacKey(keys),
    pageTokenKey: await openLocalMacKey(keys, PAGE_TOKEN_KEY_FILE),
    clock: systemClock,
    random: systemRandom,
    config: serviceConfig(need('ISSUER')),
    // As startTestService: the per-owner limits out of reach unless a test sets the provisioning config.
    provisioning: options.provisioning ?? { ...defaultProvisioningConfig, ...ROOMY_POOL_LIMITS },
    messagePolling: settings.messagePolling,
    ...(inboxWakeups ? { inboxWakeups } : {}),
  });
  return { core, modules: modulesOfCore(core), client, inboxWakeups };
}
