import { randomUUID } from 'node:crypto';
import { fromEnv } from '@aws-sdk/credential-provider-env';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import type { CredentialsSupplier } from '../core/adapters/elasticache-iam';
import { createLogger } from '../core/adapters/log';
import { createEventCounter, WAKEUP_PUBLISH_FAILURES_METRIC } from '../core/adapters/metrics';
import { readRuntimeConfig, type TelemetrySettings } from '../core/adapters/runtime-config';
import { createEnginePublisher, type WakeupEngine } from '../core/adapters/valkey-wakeups';
import { tableDefinitions } from '../core/tables';

// The wake-up relay: a Lambda on the messages table's DynamoDB stream (KEYS_ONLY) that says "inbox X
// has sequence N" on the engine for messages written by a process that does not publish itself —
// the messages Lambda (POST /api/messages), which holds no engine client (its bundle's ceiling) and
// runs outside the VPC. Per batch, each inbox's highest inserted sequence is published once, through
// the same publisher as every other writer (core/adapters/valkey-wakeups.ts); it never subscribes.
//
// A publish that fails is logged (counts and stream positions, no inbox id, no content) and counted
// (WakeupPublishFailures, like every writer's), and the batch still succeeds: a retry would hold the
// shard back while the engine is out, and a wake-up is worth nothing once the streams' safety-net
// poll has read the message (MESSAGE_SAFETY_POLL_MS). Only a failure of the relay itself (its
// configuration) fails the batch, which the event source mapping retries a bounded number of times.
// Messages the gRPC task stores (auto-replies, forwards of gRPC-sent messages) are published by the
// task already; the relay publishes them again, which costs a stream a read that finds nothing new.

/** SERVICE_NAME of the relay (the stack sets the same): the `service` of its lines and metrics. */
export const RELAY_SERVICE_NAME = 'svcnum-wakeup-relay';
/** A cold start opens the TLS connection and signs in (IAM): the first publishes wait this long for it. */
const FIRST_CONNECT_MS = 3_000;

const { partitionKey, sortKey } = tableDefinitions.messages;

/** Each inbox's highest sequence among the batch's new items (INSERT); removals (TTL) and changes ignored. */
export function highestInserted(records: readonly DynamoDBRecord[]): Map<string, number> {
  const highest = new Map<string, number>();
  for (const record of records) {
    if (record.eventName !== 'INSERT') continue;
    const inboxId = record.dynamodb?.Keys?.[partitionKey]?.S;
    const seqKey = record.dynamodb?.Keys?.[sortKey!]?.S;
    // seqKey: zero-padded (core/adapters/dynamo-messaging-store.ts); anything else is not ours.
    if (!inboxId || !seqKey || !/^\d{1,15}$/.test(seqKey)) continue;
    const seq = Number(seqKey);
    if (seq > (highest.get(inboxId) ?? 0)) highest.set(inboxId, seq);
  }
  return highest;
}

export interface WakeupRelayOptions {
  /** Signs the IAM auth tokens (required when the engine signs in by IAM). */
  credentials?: CredentialsSupplier;
  /** This process's (tests give their own). */
  telemetry?: TelemetrySettings;
}

export function createWakeupRelay(engine: WakeupEngine, options: WakeupRelayOptions = {}) {
  const logger = createLogger(RELAY_SERVICE_NAME, options.telemetry);
  const countFailures = createEventCounter(WAKEUP_PUBLISH_FAILURES_METRIC, RELAY_SERVICE_NAME, [], options.telemetry);
  const publisher = createEnginePublisher(engine, {
    logger,
    firstConnectMs: FIRST_CONNECT_MS,
    ...(options.credentials ? { credentials: options.credentials } : {}),
  });
  // The relay's own listeners are none: any id tells subscribers the wake-up is not theirs.
  const self = randomUUID();
  return {
    async handler(event: DynamoDBStreamEvent): Promise<void> {
      const highest = highestInserted(event.Records);
      if (highest.size === 0) return;
      const results = await Promise.allSettled(
        [...highest].map(([inboxId, seq]) => publisher.wakeup(inboxId, seq, self)),
      );
      const failed = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (failed.length === 0) return;
      const reason: unknown = failed[0]!.reason;
      logger.warn('inbox wake-ups not published (streams see these messages at their next poll)', {
        engine: engine.address,
        failures: failed.length,
        inboxes: highest.size,
        records: event.Records.length,
        firstSequenceNumber: event.Records[0]?.dynamodb?.SequenceNumber,
        lastSequenceNumber: event.Records.at(-1)?.dynamodb?.SequenceNumber,
        error: reason instanceof Error ? reason.message : String(reason),
      });
      countFailures(undefined, failed.length);
    },
    close: () => publisher.close(),
  };
}

let relay: ReturnType<typeof createWakeupRelay> | undefined;

/** The Lambda entry: configured on the first batch (VALKEY_*, AWS_REGION), credentials from Lambda's environment. */
export const handler = (event: DynamoDBStreamEvent): Promise<void> => {
  relay ??= createWakeupRelay(readRuntimeConfig('relay').wakeupEngine, { credentials: fromEnv() });
  return relay.handler(event);
};
