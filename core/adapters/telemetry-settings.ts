// How a process logs and measures: LOG_LEVEL, SERVICE_NAME and METRICS_NAMESPACE. Every kind of
// process reads them, and none stops over them. Their own module, below everything else in
// core/adapters: log.ts and metrics.ts depend on it, runtime-config.ts only re-exports it (the
// reference of every variable), so the utilities never import the configuration.

export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The variables read here (runtime-config.ts lists them among what a process reads). */
export type TelemetryVariable = 'LOG_LEVEL' | 'SERVICE_NAME' | 'METRICS_NAMESPACE';

/** How a process logs and measures (core/adapters/log.ts, metrics.ts). */
export interface TelemetrySettings {
  /** LOG_LEVEL (any case): DEBUG, INFO (default), WARN, ERROR or SILENT. */
  logLevel: LogLevel;
  /** SERVICE_NAME: the `service` of every line; unset, each logger's own default. */
  serviceName?: string;
  /** METRICS_NAMESPACE: the CloudWatch namespace of the Lambda metrics; unset, none are written. */
  metricsNamespace?: string;
  /** A refused LOG_LEVEL, said on the first line the process logs. */
  problem?: string;
}

/**
 * LOG_LEVEL, SERVICE_NAME and METRICS_NAMESPACE from `env` (trimmed; blank counts as unset). Never
 * throws: an unknown level is INFO and named in `problem` (no process stops over how much it logs).
 * Read once per process (`telemetrySettings`).
 */
export function readTelemetrySettings(
  env: Readonly<Partial<Record<TelemetryVariable, string | undefined>>> = process.env,
): TelemetrySettings {
  const given = (name: TelemetryVariable) => env[name]?.trim() || undefined;
  const levelGiven = given('LOG_LEVEL');
  const level = levelGiven?.toUpperCase();
  const known = (LOG_LEVELS as readonly string[]).includes(level ?? '');
  const serviceName = given('SERVICE_NAME');
  const metricsNamespace = given('METRICS_NAMESPACE');
  const problem =
    `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, ` + `got '${levelGiven?.slice(0, 40)}'; logging at INFO`;
  return {
    logLevel: known ? (level as LogLevel) : 'INFO',
    ...(serviceName ? { serviceName } : {}),
    ...(metricsNamespace ? { metricsNamespace } : {}),
    ...(levelGiven !== undefined && !known ? { problem } : {}),
  };
}

let processSettings: TelemetrySettings | undefined;

/** This process's logging and metrics settings: read from its environment on first use, then kept. */
export function telemetrySettings(): TelemetrySettings {
  processSettings ??= readTelemetrySettings(process.env);
  return processSettings;
}
