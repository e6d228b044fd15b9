import { telemetrySettings, type LogLevel, type TelemetrySettings } from './telemetry-settings';

// Structured logs: one JSON object per line on stdout (CloudWatch Logs takes a Lambda's and the
// task's stdout as they are). Each line is `level`, `message`, `timestamp` (ISO), `service`, then
// the logger's keys (a request's ids), then the call's fields. Callers pass only safe fields:
// never a token, code, secret, password, cookie, query string or body.
//
// Our own instead of a library (docs/decisions.md): a line costs one object and one
// JSON.stringify, a disabled level nothing, and the settings are read once per process, not per call.

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** Whether lines of `level` are written: fields that cost something to build are built only then. */
  enabled(level: Exclude<LogLevel, 'SILENT'>): boolean;
  /**
   * A logger whose lines carry `keys` too (after this one's): one per request, so concurrent
   * requests keep their own ids.
   */
  child(keys: LogFields): Logger;
}

const RANK: Record<LogLevel, number> = { DEBUG: 0, INFO: 1, WARN: 2, ERROR: 3, SILENT: 4 };

/** Settings whose refused LOG_LEVEL was said already: the process's once per process. */
const problemsSaid = new WeakSet<TelemetrySettings>();

/** An Error as plain JSON (JSON.stringify makes `{}` of one); its causes too, a few deep. */
function serializeError(error: Error, depth = 0): LogFields {
  const cause = (error as { cause?: unknown }).cause;
  return {
    name: error.name,
    message: error.message,
    stack: error.stack,
    ...(cause === undefined ? {} : { cause: serializeCause(cause, depth) }),
  };
}

function serializeCause(cause: unknown, depth: number): unknown {
  if (!(cause instanceof Error)) return cause;
  return depth < 3 ? serializeError(cause, depth + 1) : cause.message;
}

class JsonLogger implements Logger {
  constructor(
    private readonly service: string,
    private readonly threshold: number,
    private readonly keys: LogFields | undefined,
  ) {}

  debug(message: string, fields?: LogFields) {
    if (this.threshold <= RANK.DEBUG) this.write('DEBUG', message, fields);
  }

  info(message: string, fields?: LogFields) {
    if (this.threshold <= RANK.INFO) this.write('INFO', message, fields);
  }

  warn(message: string, fields?: LogFields) {
    if (this.threshold <= RANK.WARN) this.write('WARN', message, fields);
  }

  error(message: string, fields?: LogFields) {
    if (this.threshold <= RANK.ERROR) this.write('ERROR', message, fields);
  }

  enabled(level: Exclude<LogLevel, 'SILENT'>): boolean {
    return this.threshold <= RANK[level];
  }

  child(keys: LogFields): Logger {
    return new JsonLogger(this.service, this.threshold, this.keys ? { ...this.keys, ...keys } : keys);
  }

  private write(level: LogLevel, message: string, fields: LogFields | undefined) {
    const timestamp = new Date().toISOString();
    const line: LogFields = { level, message, timestamp, service: this.service, ...this.keys, ...fields };
    // The first four are the line's own: a key or field of the same name does not replace them.
    line.level = level;
    line.message = message;
    line.timestamp = timestamp;
    line.service = this.service;
    if (fields?.error instanceof Error) line.error = serializeError(fields.error);
    let text: string;
    try {
      text = JSON.stringify(line);
    } catch {
      // A cycle or a BigInt among the fields: the line still says what happened, logging never throws.
      const logError = 'the fields could not be serialized';
      text = JSON.stringify({ level, message, timestamp, service: this.service, logError });
    }
    process.stdout.write(`${text}\n`);
  }
}

/**
 * A logger of `defaultService` (SERVICE_NAME, when set, names every logger's service instead) at
 * the process's LOG_LEVEL. `settings`: given instead of this process's (tests).
 */
export function createLogger(defaultService: string, settings: TelemetrySettings = telemetrySettings()): Logger {
  const logger = new JsonLogger(settings.serviceName ?? defaultService, RANK[settings.logLevel], undefined);
  // A refused LOG_LEVEL is said once per process, on its first line.
  if (settings.problem && !problemsSaid.has(settings)) {
    problemsSaid.add(settings);
    logger.warn(settings.problem);
  }
  return logger;
}
