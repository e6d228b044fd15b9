import { telemetrySettings, type TelemetrySettings } from './telemetry-settings';

// CloudWatch metrics of the Lambda edge as Embedded Metric Format lines on stdout
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/
// CloudWatch_Embedded_Metric_Format_Specification.html):
// CloudWatch Logs turns each line into metrics, no API call. Per request: `Requests` and one of
// `Successes` / `ClientErrors` / `ServerErrors`, Count, by the dimensions service and route.
// Written only when METRICS_NAMESPACE is set (the stack sets it; the local runner, tests and bench
// do not).

const OUTCOMES = ['Successes', 'ClientErrors', 'ServerErrors'] as const;
type Outcome = (typeof OUTCOMES)[number];

export interface RequestMetrics {
  /** One EMF line: this request of `route` and its outcome by `status`. */
  record(route: string, status: number): void;
}

const outcomeOf = (status: number): Outcome =>
  status >= 500 ? 'ServerErrors' : status >= 400 ? 'ClientErrors' : 'Successes';

/** The start of an EMF line up to its first member: `{"_aws":{…, the directive},"service":…`. */
const emfHead = (directive: string, service: string) =>
  `{"_aws":{"Timestamp":${Date.now()},"CloudWatchMetrics":[${directive}]},"service":${service}`;

/** The request metrics of `defaultService` (SERVICE_NAME, when set, instead), in the process's METRICS_NAMESPACE. */
export function createRequestMetrics(
  defaultService: string,
  settings: TelemetrySettings = telemetrySettings(),
): RequestMetrics {
  const namespace = settings.metricsNamespace;
  if (!namespace) return { record: () => undefined };
  // What never changes is serialized once; a line adds the timestamp and the route.
  const directives = Object.fromEntries(
    OUTCOMES.map((outcome) => [
      outcome,
      JSON.stringify({
        Namespace: namespace,
        Dimensions: [['service', 'route']],
        Metrics: [
          { Name: 'Requests', Unit: 'Count' },
          { Name: outcome, Unit: 'Count' },
        ],
      }),
    ]),
  ) as Record<Outcome, string>;
  const service = JSON.stringify(settings.serviceName ?? defaultService);
  return {
    record(route, status) {
      const outcome = outcomeOf(status);
      const head = emfHead(directives[outcome], service);
      process.stdout.write(`${head},"route":${JSON.stringify(route)},"Requests":1,"${outcome}":1}\n`);
    },
  };
}

/**
 * A counter: one EMF line per event, `metric` = the count given (1 by default), Count, by the
 * dimension service and the dimensions named (their values given per event), in the process's
 * METRICS_NAMESPACE; nothing without one.
 */
export function createEventCounter<const D extends readonly string[] = []>(
  metric: string,
  defaultService: string,
  dimensions: D = [] as unknown as D,
  settings: TelemetrySettings = telemetrySettings(),
): (values?: { [K in D[number]]: string }, count?: number) => void {
  const namespace = settings.metricsNamespace;
  if (!namespace) return () => undefined;
  const directive = JSON.stringify({
    Namespace: namespace,
    Dimensions: [['service', ...dimensions]],
    Metrics: [{ Name: metric, Unit: 'Count' }],
  });
  const service = JSON.stringify(settings.serviceName ?? defaultService);
  const name = JSON.stringify(metric);
  return (values, count = 1) => {
    const quotedValue = (dimension: string) => JSON.stringify((values as Record<string, string>)[dimension]);
    const given = dimensions.map((dimension) => `,${JSON.stringify(dimension)}:${quotedValue(dimension)}`).join('');
    process.stdout.write(`${emfHead(directive, service)}${given},${name}:${count}}\n`);
  };
}

/** The metric of a KMS call throttled (core/adapters/kms-client.ts), alarmed on by lib/monitoring.ts. */
export const KMS_THROTTLES_METRIC = 'KmsThrottles';

/** One EMF line per throttled KMS attempt (retried or not): `KmsThrottles` by service. */
export function createKmsThrottleCounter(
  defaultService: string,
  settings: TelemetrySettings = telemetrySettings(),
): () => void {
  const count = createEventCounter(KMS_THROTTLES_METRIC, defaultService, [], settings);
  return () => count();
}

/** The gauge of the free number pool (core/provisioning/pool.ts FreeNumbersReport), alarmed on by lib/monitoring.ts. */
export const FREE_NUMBERS_METRIC = 'FreeNumbers';

/**
 * One EMF line per pool query: `FreeNumbers` = the allocatable numbers it saw (up to 100), Count,
 * by service; nothing without METRICS_NAMESPACE.
 */
export function createFreeNumbersGauge(
  defaultService: string,
  settings: TelemetrySettings = telemetrySettings(),
): (count: number) => void {
  const namespace = settings.metricsNamespace;
  if (!namespace) return () => undefined;
  const directive = JSON.stringify({
    Namespace: namespace,
    Dimensions: [['service']],
    Metrics: [{ Name: FREE_NUMBERS_METRIC, Unit: 'Count' }],
  });
  const service = JSON.stringify(settings.serviceName ?? defaultService);
  return (count) => {
    process.stdout.write(`${emfHead(directive, service)},"${FREE_NUMBERS_METRIC}":${count}}\n`);
  };
}

/** The metric of a derived message (auto-reply, forward) that failed (core/adapters/derived-failures.ts). */
export const DERIVED_MESSAGE_FAILURES_METRIC = 'DerivedMessageFailures';

/** The metric of inbox wake-ups a writer could not publish to the pub/sub engine (core/adapters/valkey-wakeups.ts). */
export const WAKEUP_PUBLISH_FAILURES_METRIC = 'WakeupPublishFailures';
