import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import type { Context } from 'aws-lambda';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient } from '../core/adapters/dynamo-schema';
import { createKmsKeyRing } from '../core/adapters/kms-keys';
import { systemClock, systemRandom } from '../core/adapters/system';
import { serviceConfig } from '../core/config';
import { createCore, type Core } from '../core/service';
import { tableNames } from '../core/tables';
import type { HttpEvent, HttpResult } from './http';

// How a Lambda container builds the core: once, from its environment, on first use.
//   ISSUER            the issuer URL (https://…)
//   TABLE_PREFIX      physical table name prefix of the environment
//   KMS_KEY_ID        the KMS key (id, ARN or alias) that signs
//   KMS_VERIFY_KEY_IDS comma-separated further keys published in the JWKS (rotation)

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is not set`);
  return value;
}

let core: Core | undefined;

export function coreFromEnvironment(): Core {
  if (core) return core;
  const dynamo = new DynamoDBClient({});
  const keys = createKmsKeyRing({
    client: new KMSClient({}),
    activeKeyId: required('KMS_KEY_ID'),
    additionalKeyIds: (process.env.KMS_VERIFY_KEY_IDS ?? '').split(',').map((id) => id.trim()).filter(Boolean),
  });
  core = createCore({
    store: createDynamoStore(documentClient(dynamo), tableNames(required('TABLE_PREFIX'))),
    keys,
    clock: systemClock,
    random: systemRandom,
    config: serviceConfig(required('ISSUER')),
  });
  return core;
}

type Handler = (event: HttpEvent, context: Context) => Promise<HttpResult>;

/** The exported Lambda handler of a route group: built on the first invocation, then reused. */
export function lazyHandler(create: (core: Core) => Handler): Handler {
  let built: Handler | undefined;
  return (event, context) => {
    built ??= create(coreFromEnvironment());
    return built(event, context);
  };
}
