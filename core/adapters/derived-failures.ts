import { DomainError } from '../kernel/errors';
import type { DerivedFailureReport } from '../messaging/send';
import { createLogger } from './log';
import { createEventCounter, DERIVED_MESSAGE_FAILURES_METRIC } from './metrics';
import { telemetrySettings, type TelemetrySettings } from './telemetry-settings';

// A derived message (auto-reply, forward) that failed is not the sender's error (its message is
// stored and accepted), so nothing else would ever tell of it. Each one is one log line (ids and
// the error, never the text) and one `DerivedMessageFailures` count by service and kind.

/** How a process (the messages Lambda, the gRPC task, the local runner) reports failed derived messages. */
export function createDerivedFailureReport(
  defaultService: string,
  settings: TelemetrySettings = telemetrySettings(),
): DerivedFailureReport {
  const logger = createLogger(defaultService, settings);
  const count = createEventCounter(DERIVED_MESSAGE_FAILURES_METRIC, defaultService, ['kind'], settings);
  return ({ kind, inboxId, seq, messageId, target, error }) => {
    // A refusal (the target cannot receive now) is the domain's answer, a warning; anything else is a fault.
    if (error instanceof DomainError)
      logger.warn('derived message failed', {
        kind,
        inboxId,
        seq,
        messageId,
        target,
        refusal: error.kind,
        reason: error.message,
      });
    else
      logger.error('derived message failed', {
        kind,
        inboxId,
        seq,
        messageId,
        target,
        error: error instanceof Error ? error : new Error(String(error)),
      });
    count({ kind });
  };
}
