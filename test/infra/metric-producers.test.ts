import { describe, expect, it, vi } from 'vitest';
import { createDerivedFailureReport } from '../../core/adapters/derived-failures';
import * as metrics from '../../core/adapters/metrics';
import type { TelemetrySettings } from '../../core/adapters/runtime-config';
import { environmentNames, type EnvironmentName } from '../../lib/config';
import { TASK_EMF_METRICS } from '../../lib/monitoring';
import { TASK_SERVICE_NAME } from '../../lib/provisioning';
import { list, logicalId, resources, synthesizeForFile, type Json } from './support';

// Every metric an alarm or the dashboard watches has a producer that reaches CloudWatch:
// - an AWS service's own metric (namespace AWS/…; API Gateway's per-method metrics only where the
//   stage enables them for that method);
// - an EMF line of a Lambda function whose METRICS_NAMESPACE and SERVICE_NAME are the metric's
//   (Lambda's log path extracts EMF), of a metric the code writes with exactly those dimensions;
// - a metric filter that makes exactly (namespace, name, dimensions) from the lines of a log group
//   whose writer's SERVICE_NAME is the metric's `service` (the gRPC task: awslogs extracts no EMF).
// What the code writes is read from the code itself: its EMF producers run here, stdout captured.

const synth = synthesizeForFile({ bundle: false });

interface WatchedMetric {
  readonly namespace: string;
  readonly name: string;
  readonly dimensions: Record<string, unknown>;
}

interface EmfLine extends Record<string, unknown> {
  _aws: { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string }> }> };
}

const telemetry: TelemetrySettings = { logLevel: 'INFO', serviceName: 'svcnum-emf-test', metricsNamespace: 'svcnum' };

/** The EMF lines of every producer in the code, as each writes them. */
function emfLines(): EmfLine[] {
  const written: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  try {
    // lambdas/edge.ts: one line per request and outcome.
    const requests = metrics.createRequestMetrics('svcnum', telemetry);
    for (const status of [200, 404, 500]) requests.record('/oauth/token', status);
    // core/adapters/aws-environment.ts: the KMS client of every process.
    metrics.createKmsThrottleCounter('svcnum', telemetry)();
    // The messages Lambda and the task: a failed auto-reply or forward.
    createDerivedFailureReport(
      'svcnum',
      telemetry,
    )({
      kind: 'forward',
      inboxId: 'inbox',
      seq: 1,
      messageId: 'message',
      target: 'target',
      error: new Error('failed'),
    });
    // core/adapters/valkey-wakeups.ts and lambdas/wakeup-relay.ts count unpublished wake-ups with these arguments.
    metrics.createEventCounter(metrics.WAKEUP_PUBLISH_FAILURES_METRIC, 'svcnum', [], telemetry)(undefined, 2);
    // core/provisioning/pool.ts (the task): the free pool a query saw, 0 included.
    metrics.createFreeNumbersGauge('svcnum', telemetry)(0);
  } finally {
    spy.mockRestore();
  }
  return written
    .flatMap((chunk) => chunk.split('\n'))
    .filter((text) => text.includes('"_aws"'))
    .map((text) => JSON.parse(text) as EmfLine);
}

/** Metric name → its dimension names (sorted), for every metric the code writes as EMF. */
function emfCatalog(lines: readonly EmfLine[]): Map<string, string> {
  const catalog = new Map<string, string>();
  for (const line of lines) {
    for (const directive of line._aws.CloudWatchMetrics) {
      expect(directive.Namespace).toBe(telemetry.metricsNamespace);
      for (const metric of directive.Metrics) {
        for (const dimensions of directive.Dimensions) catalog.set(metric.Name, [...dimensions].sort().join(','));
      }
    }
  }
  return catalog;
}

const dimensionsOf = (dimensions: unknown) =>
  Object.fromEntries(
    list(dimensions as Array<{ Name: string; Value: unknown }> | undefined).map((dimension) => [
      dimension.Name,
      dimension.Value,
    ]),
  );

/** The metrics an alarm watches (its own, or those of its metric math). */
function alarmMetrics(alarm: Json): WatchedMetric[] {
  if (alarm.MetricName)
    return [
      {
        namespace: alarm.Namespace as string,
        name: alarm.MetricName as string,
        dimensions: dimensionsOf(alarm.Dimensions),
      },
    ];
  const queries = list(
    alarm.Metrics as Array<{
      Expression?: string;
      MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions?: unknown } };
    }>,
  );
  for (const query of queries) {
    // A search finds metrics at run time: nothing here could tell whether any exists.
    expect(query.Expression ?? '', `${String(alarm.AlarmName)}: ${query.Expression}`).not.toMatch(/SEARCH\(|SELECT /i);
  }
  return queries
    .filter((query) => query.MetricStat)
    .map((query) => ({
      namespace: query.MetricStat!.Metric.Namespace,
      name: query.MetricStat!.Metric.MetricName,
      dimensions: dimensionsOf(query.MetricStat!.Metric.Dimensions),
    }));
}

/** The metrics the dashboard graphs: its body with each token as a placeholder string. */
function dashboardMetrics(dashboard: Json): WatchedMetric[] {
  const body = dashboard.DashboardBody as string | { 'Fn::Join': [string, unknown[]] };
  const text =
    typeof body === 'string'
      ? body
      : body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : '<token>')).join('');
  const widgets = (JSON.parse(text) as { widgets: Array<{ properties: { metrics?: unknown[][] } }> }).widgets;
  return widgets
    .flatMap((widget) => widget.properties.metrics ?? [])
    .filter((metric) => typeof metric[0] === 'string')
    .map((metric) => {
      const fields = metric.filter((part) => typeof part === 'string') as string[];
      const dimensions: Record<string, unknown> = {};
      for (let index = 2; index + 1 < fields.length; index += 2) dimensions[fields[index]!] = fields[index + 1];
      return { namespace: fields[0]!, name: fields[1]!, dimensions };
    });
}

const describeMetric = (metric: WatchedMetric) =>
  `${metric.namespace} ${metric.name} ${JSON.stringify(metric.dimensions)}`;

describe("the code's EMF metrics", () => {
  it('include every metric name core/adapters/metrics.ts declares, each with the dimensions its lines carry', () => {
    const lines = emfLines();
    const catalog = emfCatalog(lines);
    const declared = Object.entries(metrics)
      .filter(([name]) => name.endsWith('_METRIC'))
      .map(([, value]) => value as string);
    expect(declared.length).toBeGreaterThan(0);
    for (const name of declared) expect(catalog.has(name), `${name}: add its producer to emfLines()`).toBe(true);
    // Each line carries the value of every dimension it declares, and the metric's value.
    for (const line of lines) {
      for (const directive of line._aws.CloudWatchMetrics) {
        for (const key of directive.Dimensions.flat()) expect(typeof line[key], key).toBe('string');
        for (const metric of directive.Metrics) expect(typeof line[metric.Name], metric.Name).toBe('number');
      }
    }
  });
});

describe.each(environmentNames)('%s stack', (environment: EnvironmentName) => {
  const template = () => synth.templates[environment];
  const stack = () => synth.stacks[environment];
  let catalog: Map<string, string> | undefined;

  /** SERVICE_NAME and METRICS_NAMESPACE of every Lambda function, and the log group each writes to. */
  const lambdaWriters = () =>
    Object.values(resources(template(), 'AWS::Lambda::Function')).map((fn) => {
      const variables = (fn.Properties!.Environment as { Variables?: Json } | undefined)?.Variables ?? {};
      return {
        service: variables.SERVICE_NAME,
        namespace: variables.METRICS_NAMESPACE,
        logGroup: JSON.stringify((fn.Properties!.LoggingConfig as Json | undefined)?.LogGroup),
      };
    });
  /** The containers of every task definition: SERVICE_NAME and their awslogs group. */
  const containerWriters = () =>
    Object.values(resources(template(), 'AWS::ECS::TaskDefinition')).flatMap((task) =>
      (task.Properties!.ContainerDefinitions as Json[]).map((container) => ({
        service: (container.Environment as Array<{ Name: string; Value: unknown }>).find(
          (variable) => variable.Name === 'SERVICE_NAME',
        )?.Value,
        logGroup: JSON.stringify(
          (container.LogConfiguration as { Options?: Json } | undefined)?.Options?.['awslogs-group'],
        ),
      })),
    );
  const writersOf = (logGroup: unknown) =>
    [...lambdaWriters(), ...containerWriters()]
      .filter((writer) => writer.logGroup === JSON.stringify(logGroup))
      .map((writer) => writer.service);

  const filters = () =>
    Object.values(resources(template(), 'AWS::Logs::MetricFilter')).flatMap((filter) =>
      (
        filter.Properties!.MetricTransformations as Array<{
          MetricNamespace: string;
          MetricName: string;
          MetricValue: string;
          Dimensions?: Array<{ Key: string; Value: string }>;
        }>
      ).map((transformation) => ({
        logGroup: filter.Properties!.LogGroupName,
        pattern: filter.Properties!.FilterPattern as string,
        ...transformation,
      })),
    );

  /** What produces `metric`, or undefined. */
  const producerOf = (metric: WatchedMetric): string | undefined => {
    const keys = Object.keys(metric.dimensions).sort().join(',');
    if (metric.namespace.startsWith('AWS/')) {
      if (metric.namespace === 'AWS/ApiGateway' && metric.dimensions.Resource !== undefined) {
        // Per-method metrics exist only where the stage enables detailed metrics for that method.
        const path = `/${String(metric.dimensions.Resource).replaceAll('/', '~1')}`;
        const enabled = Object.values(resources(template(), 'AWS::ApiGateway::Stage')).some((stage) =>
          list(stage.Properties!.MethodSettings as Json[] | undefined).some(
            (setting) =>
              setting.MetricsEnabled === true &&
              setting.ResourcePath === path &&
              setting.HttpMethod === metric.dimensions.Method,
          ),
        );
        return enabled ? 'API Gateway detailed metrics of the method' : undefined;
      }
      return `${metric.namespace}, the service's own metric`;
    }
    const emf = lambdaWriters().find(
      (writer) => writer.namespace === metric.namespace && writer.service === metric.dimensions.service,
    );
    catalog ??= emfCatalog(emfLines());
    if (emf && catalog.get(metric.name) === keys)
      return `EMF of the Lambda function ${String(metric.dimensions.service)}`;
    const filter = filters().find(
      (candidate) =>
        candidate.MetricNamespace === metric.namespace &&
        candidate.MetricName === metric.name &&
        (candidate.Dimensions ?? [])
          .map((dimension) => dimension.Key)
          .sort()
          .join(',') === keys &&
        (candidate.Dimensions ?? []).every((dimension) => {
          const value = metric.dimensions[dimension.Key];
          if (!dimension.Value.startsWith('$.')) return dimension.Value === value;
          // `service` comes from the line: the log group's writer must be that service.
          return dimension.Key !== 'service' || writersOf(candidate.logGroup).includes(value);
        }),
    );
    return filter ? `metric filter on ${JSON.stringify(filter.logGroup)}` : undefined;
  };

  it("produces the metric of every alarm: an AWS service, a Lambda function's EMF, or a metric filter", () => {
    const alarms = Object.values(resources(template(), 'AWS::CloudWatch::Alarm')).map((alarm) => alarm.Properties!);
    expect(alarms.length).toBeGreaterThan(10);
    const orphans: string[] = [];
    let custom = 0;
    for (const alarm of alarms) {
      const watched = alarmMetrics(alarm);
      expect(watched.length, String(alarm.AlarmName)).toBeGreaterThan(0);
      for (const metric of watched) {
        if (!metric.namespace.startsWith('AWS/')) custom += 1;
        if (!producerOf(metric)) orphans.push(`${String(alarm.AlarmName)}: ${describeMetric(metric)}`);
      }
    }
    expect(orphans).toStrictEqual([]);
    expect(custom).toBeGreaterThan(0);
  });

  it('produces every metric the dashboard graphs', () => {
    const [dashboard] = Object.values(resources(template(), 'AWS::CloudWatch::Dashboard'));
    const graphed = dashboardMetrics(dashboard!.Properties!);
    expect(graphed.some((metric) => metric.dimensions.service === TASK_SERVICE_NAME)).toBe(true);
    expect(graphed.filter((metric) => !producerOf(metric)).map(describeMetric)).toStrictEqual([]);
  });

  it("turns each EMF line the task writes into the same metric a Lambda's line makes, by one metric filter per metric on the task's log group", () => {
    const taskLogs = { Ref: logicalId(stack().provisioning.taskLogs) };
    expect(writersOf(taskLogs)).toStrictEqual([TASK_SERVICE_NAME]);
    const onTaskLogs = filters().filter((filter) => JSON.stringify(filter.logGroup) === JSON.stringify(taskLogs));
    expect(onTaskLogs.map((filter) => filter.MetricName).sort()).toStrictEqual(Object.keys(TASK_EMF_METRICS).sort());
    const lines = emfLines();
    for (const filter of onTaskLogs) {
      // The filter, applied to the line the code writes (the pattern shapes used: `{ $.<field> > 0 }` for a
      // count, `{ $.<field> >= 0 }` for a gauge, whose 0 is a reading too).
      const line = lines.find((candidate) =>
        candidate._aws.CloudWatchMetrics.some((directive) =>
          directive.Metrics.some((metric) => metric.Name === filter.MetricName),
        ),
      );
      expect(line, filter.MetricName).toBeDefined();
      const [, field, operator] = /^\{ \$\.([A-Za-z0-9_]+) (>|>=) 0 \}$/.exec(filter.pattern) ?? [];
      expect(field, filter.pattern).toBe(filter.MetricName);
      expect(operator, filter.pattern).toBe(TASK_EMF_METRICS[filter.MetricName]!.gauge ? '>=' : '>');
      const value = Number(line![field!]);
      expect(operator === '>=' ? value >= 0 : value > 0, `${filter.pattern} on ${value}`).toBe(true);
      expect(filter.MetricValue).toBe(`$.${filter.MetricName}`);
      expect(filter.MetricNamespace).toBe('svcnum');
      const dimensions = Object.fromEntries(
        (filter.Dimensions ?? []).map((dimension) => [dimension.Key, line![dimension.Value.replace(/^\$\./, '')]]),
      );
      const directive = line!._aws.CloudWatchMetrics[0]!;
      expect(Object.keys(dimensions).sort(), filter.MetricName).toStrictEqual([...directive.Dimensions[0]!].sort());
      expect(
        Object.values(dimensions).every((value) => typeof value === 'string'),
        filter.MetricName,
      ).toBe(true);
    }
  });
});
