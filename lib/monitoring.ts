import { ArnFormat, AspectPriority, Aspects, Duration, Stack, type IAspect } from 'aws-cdk-lib';
import type { RestApi } from 'aws-cdk-lib/aws-apigateway';
import {
  Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  CompositeAlarm,
  Dashboard,
  GraphWidget,
  MathExpression,
  Metric,
  TextWidget,
  TreatMissingData,
  type IAlarmAction,
  type IMetric,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import type { FargateService } from 'aws-cdk-lib/aws-ecs';
import type { NetworkLoadBalancer, NetworkTargetGroup } from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import { Rule } from 'aws-cdk-lib/aws-events';
import { SnsTopic } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { FilterPattern, MetricFilter, type ILogGroup } from 'aws-cdk-lib/aws-logs';
import { type ITopic, SubscriptionProtocol, Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription, UrlSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct, type IConstruct } from 'constructs';
import type { TableKey } from '../core/tables';
import type { RouteGroup } from '../lambdas/manifest';
import type { EnvironmentConfig } from './config';
import { statefulRemovalPolicy } from './util';
import type { WakeupEngine } from './wakeup-engine';

// Alarms and one dashboard per environment. Every alarm of the stack, wherever it is defined,
// notifies one encrypted SNS topic (and the existing topics of the settings) on ALARM and on OK
// (notifyOperators below); the topic mails the settings' addresses and calls their HTTPS endpoints.
// ElastiCache's events reach the same topic through EventBridge.

export interface MonitoringProps {
  readonly config: EnvironmentConfig;
  readonly api: RestApi;
  readonly functions: Record<RouteGroup, IFunction>;
  readonly tables: Record<TableKey, Table>;
  readonly service: FargateService;
  readonly loadBalancer: NetworkLoadBalancer;
  readonly targetGroup: NetworkTargetGroup;
  /** METRICS_NAMESPACE of the processes (their EMF metrics, core/adapters/metrics.ts). */
  readonly metricsNamespace: string;
  /** SERVICE_NAME of every process that calls KMS (each route group's function, the gRPC task). */
  readonly kmsServices: readonly string[];
  /**
   * The gRPC task's log group: the awslogs driver does not have CloudWatch extract EMF, so the
   * task's EMF lines (TASK_EMF_METRICS) become metrics through metric filters on it.
   */
  readonly taskLogs: ILogGroup;
  readonly wakeups: {
    readonly engine: WakeupEngine;
    /** The wake-up relay function. */
    readonly relay: IFunction;
    /**
     * SERVICE_NAME of every process that publishes wake-ups (WakeupPublishFailures, core/adapters/valkey-wakeups.ts).
     */
    readonly publishers: readonly string[];
    /**
     * SERVICE_NAME of every process that sends derived messages (DerivedMessageFailures,
     * core/adapters/derived-failures.ts).
     */
    readonly derivedMessageSenders: readonly string[];
  };
  /**
   * SERVICE_NAME of the process that allocates numbers and reports the free pool (FreeNumbers,
   * core/adapters/metrics.ts): the gRPC task.
   */
  readonly poolAllocator: string;
}

/** The `kind` dimension of DerivedMessageFailures (core/messaging/send.ts DerivedMessageFailure['kind']). */
export const DERIVED_MESSAGE_KINDS = ['auto_reply', 'forward'] as const;
/**
 * The EMF metrics the gRPC task writes (core/adapters/metrics.ts: KmsThrottles from its KMS client,
 * WakeupPublishFailures from its wake-ups, DerivedMessageFailures from its sends, FreeNumbers from
 * its pool queries), each with the
 * dimensions its lines carry besides `service`. A Lambda's EMF lines become metrics on their own;
 * the task's only through a metric filter per metric (test/infra/metric-producers.test.ts matches
 * every alarm's metric to its producer). A new metric the task writes and an alarm watches goes here.
 */
export const TASK_EMF_METRICS: Readonly<
  Record<string, { readonly dimensions: readonly string[]; readonly gauge?: true }>
> = {
  KmsThrottles: { dimensions: [] },
  WakeupPublishFailures: { dimensions: [] },
  DerivedMessageFailures: { dimensions: ['kind'] },
  // A reading, not a count: every line is a data point, 0 included (FreeNumbers from its pool queries).
  FreeNumbers: { dimensions: [], gauge: true },
};

/** ElastiCache's connection limit per node (maxclients, not configurable): alarmed on at 80 %. */
const ENGINE_MAX_CONNECTIONS = 65_000;

/**
 * What ElastiCache sends EventBridge directly (failovers and node replacements arrive as "Cache
 * Updated"); not the snapshot events (the engine keeps none) nor CloudTrail's API calls.
 */
export const ENGINE_EVENT_TYPES = [
  'Cache Created',
  'Cache Creation Failed',
  'Cache Updated',
  'Cache Update Failed',
  'Cache Deleted',
  'Cache Limit Approaching',
] as const;

/**
 * Makes every CloudWatch alarm in `scope` notify `actions` on ALARM and on OK: the alarms of
 * lib/monitoring.ts and any other construct's, defined before or after (an aspect, applied at
 * synth). Monitoring applies it to the whole stack with the alarm topic: an alarm defined
 * anywhere else needs nothing more, and must not add the topic itself (the action would repeat).
 */
export function notifyOperators(scope: IConstruct, actions: readonly IAlarmAction[]): void {
  Aspects.of(scope).add(new NotifyOperators(actions), { priority: AspectPriority.MUTATING });
}

class NotifyOperators implements IAspect {
  private readonly notified = new WeakSet<IConstruct>();
  constructor(private readonly actions: readonly IAlarmAction[]) {}
  visit(node: IConstruct): void {
    if (!(node instanceof Alarm || node instanceof CompositeAlarm) || this.notified.has(node)) return;
    this.notified.add(node);
    node.addAlarmAction(...this.actions);
    node.addOkAction(...this.actions);
  }
}

const FIVE_MINUTES = Duration.minutes(5);
const ONE_MINUTE = Duration.minutes(1);

interface AlarmOptions {
  periods?: number;
  datapoints?: number;
  below?: boolean;
  missing?: TreatMissingData;
}

/** One expression over a metric per series (the busiest node, a sum over processes): ids `${id}0`, `${id}1`, …. */
function overSeries<T>(
  id: string,
  series: readonly T[],
  metricOf: (item: T) => Metric,
  combine: (ids: string[]) => string,
  label: string,
): MathExpression {
  const ids = series.map((_, index) => `${id}${index}`);
  return new MathExpression({
    expression: combine(ids),
    usingMetrics: Object.fromEntries(series.map((item, index) => [ids[index], metricOf(item)])),
    label,
    period: FIVE_MINUTES,
  });
}

/** What the dashboard graphs that the alarms defined first. */
interface Watched {
  api5xxPercent: MathExpression;
  tokenLatency: Metric;
  tableThrottles: IMetric[];
  kmsThrottles: MathExpression;
  wakeups: {
    engineCpu: MathExpression;
    engineMemory: MathExpression;
    engineConnections: MathExpression;
    iteratorAge: Metric;
    publishFailures: MathExpression;
    derivedFailures: MathExpression;
  };
  targets: { healthy: Metric; unhealthy: Metric };
}

export class Monitoring extends Construct {
  readonly topic: Topic;
  /** What every alarm of the stack notifies (notifyOperators): the topic, then the settings' existing topics. */
  readonly actions: readonly IAlarmAction[];
  readonly alarms: Alarm[] = [];
  readonly dashboard: Dashboard;
  private readonly prefix: string;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    this.prefix = `svcnum-${props.config.name}`;
    const existingTopics = props.config.alarms.topicArns.map((arn, index) =>
      Topic.fromTopicArn(this, `ExtraTopic${index}`, arn),
    );
    this.topic = this.alarmTopic(props.config);
    this.actions = [this.topic, ...existingTopics].map((topic) => new SnsAction(topic));
    notifyOperators(Stack.of(this), this.actions);
    this.engineEvents([this.topic, ...existingTopics]);

    const { api5xxPercent, tokenLatency } = this.httpAlarms(props);
    this.functionAlarms(props);
    const tableThrottles = this.tableAlarms(props);
    const kmsThrottles = this.kmsAlarm(props);
    const wakeups = this.wakeupAlarms(props);
    this.freeNumbersAlarm(props);
    const targets = this.grpcAlarms(props);
    this.dashboard = this.createDashboard(props, {
      api5xxPercent,
      tokenLatency,
      tableThrottles,
      kmsThrottles,
      wakeups,
      targets,
    });
  }

  private addAlarm(id: string, description: string, metric: IMetric, threshold: number, options: AlarmOptions = {}) {
    const created = new Alarm(this, id, {
      alarmName: `${this.prefix}-${id}`,
      alarmDescription: description,
      metric,
      threshold,
      evaluationPeriods: options.periods ?? 1,
      datapointsToAlarm: options.datapoints ?? options.periods ?? 1,
      comparisonOperator: options.below
        ? ComparisonOperator.LESS_THAN_THRESHOLD
        : ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData:
        options.missing ?? (options.below ? TreatMissingData.BREACHING : TreatMissingData.NOT_BREACHING),
    });
    this.alarms.push(created);
    return created;
  }

  /** The encrypted topic every alarm notifies, with the settings' subscriptions. */
  private alarmTopic(config: EnvironmentConfig): Topic {
    // SNS encrypts with a key of ours: CloudWatch cannot use the AWS-managed SNS key. CloudWatch
    // may use the key, and publish to the topic, for this account's alarms in this region only.
    const stack = Stack.of(this);
    const fromOurAlarms = {
      StringEquals: { 'aws:SourceAccount': stack.account },
      ArnLike: {
        'aws:SourceArn': stack.formatArn({
          service: 'cloudwatch',
          resource: 'alarm',
          resourceName: '*',
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      },
    };
    const topicKey = new Key(this, 'TopicKey', {
      description: `${this.prefix}: encrypts the alarm topic`,
      enableKeyRotation: true,
      removalPolicy: statefulRemovalPolicy(config.retainData),
    });
    topicKey.addToResourcePolicy(
      new PolicyStatement({
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromOurAlarms,
      }),
    );
    const topic = new Topic(this, 'AlarmTopic', {
      topicName: `${this.prefix}-alarms`,
      masterKey: topicKey,
      enforceSSL: true,
    });
    // The topic's policy replaces SNS's default one (which lets the account's principals publish):
    // without this statement no alarm could publish.
    topic.addToResourcePolicy(
      new PolicyStatement({
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: fromOurAlarms,
      }),
    );
    // SNS decrypts before it delivers: mail and HTTPS subscribers need no key access. Each
    // subscription waits for its confirmation (docs/deploying.md, "Alarms reach people").
    for (const email of config.alarms.emails) topic.addSubscription(new EmailSubscription(email));
    for (const url of config.alarms.httpsEndpoints)
      topic.addSubscription(new UrlSubscription(url, { protocol: SubscriptionProtocol.HTTPS }));
    return topic;
  }

  /**
   * ElastiCache cannot publish its notifications to an encrypted topic (its notification topic
   * would show "inactive"); its events reach EventBridge, which can. Every target gets them.
   */
  private engineEvents(topics: readonly ITopic[]): void {
    new Rule(this, 'WakeupEngineEvents', {
      ruleName: `${this.prefix}-wakeup-engine-events`,
      description: `${this.prefix}: ElastiCache events (failover, node replacement, limits) to the alarm topic`,
      eventPattern: { source: ['aws.elasticache'], detailType: [...ENGINE_EVENT_TYPES] },
      // EventBridge publishes with a role of this rule (its policy: publish to these topics, use the
      // topic's key), so neither the topic nor its key has to trust EventBridge of any account.
      targets: topics.map((topic) => new SnsTopic(topic, { authorizeUsingRole: true })),
    });
  }

  /** HTTP: the share of 5xx answers, and the token endpoint's p99 latency. */
  private httpAlarms({ config, api }: MonitoringProps) {
    const api5xxPercent = new MathExpression({
      expression: '100 * errors',
      usingMetrics: { errors: api.metricServerError({ statistic: 'Average', period: FIVE_MINUTES }) },
      label: '5xx, % of requests',
      period: FIVE_MINUTES,
    });
    this.addAlarm(
      'Api5xxRate',
      `More than ${config.alarms.api5xxPercent}% of API requests answered 5xx`,
      api5xxPercent,
      config.alarms.api5xxPercent,
      { periods: 3, datapoints: 2 },
    );
    const tokenLatency = new Metric({
      namespace: 'AWS/ApiGateway',
      metricName: 'Latency',
      dimensionsMap: {
        ApiName: api.restApiName,
        Stage: api.deploymentStage.stageName,
        Resource: '/oauth/token',
        Method: 'POST',
      },
      statistic: 'p99',
      period: FIVE_MINUTES,
      label: 'POST /oauth/token p99 (ms)',
    });
    this.addAlarm(
      'TokenLatencyP99',
      `p99 latency of POST /oauth/token above ${config.alarms.tokenP99Ms} ms`,
      tokenLatency,
      config.alarms.tokenP99Ms,
      { periods: 3, datapoints: 2 },
    );
    return { api5xxPercent, tokenLatency };
  }

  /** Lambda: errors and throttles of every function. */
  private functionAlarms({ config, functions }: MonitoringProps): void {
    for (const [group, fn] of Object.entries(functions)) {
      const name = group[0]!.toUpperCase() + group.slice(1);
      this.addAlarm(
        `${name}Errors`,
        `The ${group} function failed ${config.alarms.lambdaErrors}+ times in 5 minutes`,
        fn.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' }),
        config.alarms.lambdaErrors,
      );
      this.addAlarm(
        `${name}Throttles`,
        `The ${group} function was throttled`,
        fn.metricThrottles({ period: FIVE_MINUTES, statistic: 'Sum' }),
        1,
      );
    }
  }

  /**
   * DynamoDB: throttled reads or writes on any table (on-demand tables throttle on hot partitions or
   * account limits).
   */
  private tableAlarms({ tables }: MonitoringProps): IMetric[] {
    return Object.entries(tables).map(([key, table]) => {
      const name = key[0]!.toUpperCase() + key.slice(1);
      const throttles = new MathExpression({
        // Ids unique per table: the dashboard graphs every table's expression together.
        expression: `FILL(reads_${key}, 0) + FILL(writes_${key}, 0)`,
        usingMetrics: {
          [`reads_${key}`]: table.metric('ReadThrottleEvents', { statistic: 'Sum', period: FIVE_MINUTES }),
          [`writes_${key}`]: table.metric('WriteThrottleEvents', { statistic: 'Sum', period: FIVE_MINUTES }),
        },
        label: key,
        period: FIVE_MINUTES,
      });
      this.addAlarm(`${name}TableThrottles`, `DynamoDB throttled requests on ${table.tableName}`, throttles, 1);
      return throttles;
    });
  }

  /**
   * KMS: throttled calls of every process (EMF KmsThrottles by service, core/adapters/kms-client.ts).
   * Each is retried with backoff, but throttles mean signing nears the account's KMS request quota
   * (docs/deploying.md, "KMS request quotas"); requests still throttled after the retries answer 503.
   */
  private kmsAlarm(props: MonitoringProps): MathExpression {
    // At most 10 metrics per alarm: 7 route groups and the task today.
    const kmsThrottles = this.emfSum(
      props,
      'kms',
      'KmsThrottles',
      'KMS throttles',
      props.kmsServices.map((service) => ({ service })),
    );
    this.addAlarm(
      'KmsThrottles',
      "KMS throttled calls (signing near the account's KMS request quota; see docs/deploying.md)",
      kmsThrottles,
      1,
    );
    return kmsThrottles;
  }

  /** The sum of one EMF metric of the processes over `series` (their dimensions); none missing counts as 0. */
  private emfSum(
    props: MonitoringProps,
    id: string,
    metricName: string,
    label: string,
    series: ReadonlyArray<Record<string, string>>,
  ): MathExpression {
    const metricOf = (dimensionsMap: Record<string, string>) =>
      new Metric({
        namespace: props.metricsNamespace,
        metricName,
        dimensionsMap,
        statistic: 'Sum',
        period: FIVE_MINUTES,
      });
    return overSeries(id, series, metricOf, (ids) => ids.map((one) => `FILL(${one}, 0)`).join(' + '), label);
  }

  /**
   * Wake-ups: the engine's nodes (the busiest one counts), the relay, and what writers could not
   * publish or send. None of these loses a message (DynamoDB has it); they slow delivery to the
   * safety-net poll, or (derived messages) an auto-reply or forward was not stored.
   */
  private wakeupAlarms(props: MonitoringProps): Watched['wakeups'] {
    const { config } = props;
    const { relay } = props.wakeups;
    const { engineCpu, engineMemory, engineConnections } = this.engineAlarms(props);
    this.addAlarm(
      'WakeupRelayErrors',
      `The wake-up relay failed ${config.alarms.lambdaErrors}+ times in 5 minutes (its batches are retried twice, ` +
        `then dropped)`,
      relay.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' }),
      config.alarms.lambdaErrors,
    );
    const iteratorAge = relay.metric('IteratorAge', {
      period: ONE_MINUTE,
      statistic: 'Maximum',
      label: 'relay iterator age (ms)',
    });
    this.addAlarm(
      'WakeupRelayIteratorAge',
      'The wake-up relay lags the messages stream by 30 s+ (wake-ups of HTTP-sent messages arrive after the ' +
        'safety-net poll)',
      iteratorAge,
      30_000,
      { periods: 3, datapoints: 2 },
    );
    this.taskMetricFilters(props);
    const { publishFailures, derivedFailures } = this.writerAlarms(props);
    return { engineCpu, engineMemory, engineConnections, iteratorAge, publishFailures, derivedFailures };
  }

  /** The engine's busiest node: CPU, memory and connections. */
  private engineAlarms({ config, wakeups: { engine } }: MonitoringProps) {
    const nodes = Array.from(
      { length: 1 + config.wakeups.replicas },
      (_, index) => `${engine.replicationGroupId}-${String(index + 1).padStart(3, '0')}`,
    );
    // Ids unique per metric: the dashboard graphs several of these expressions together.
    const busiestNode = (id: string, metricName: string, label: string, statistic = 'Average') =>
      overSeries(
        id,
        nodes,
        (node) =>
          new Metric({
            namespace: 'AWS/ElastiCache',
            metricName,
            dimensionsMap: { CacheClusterId: node },
            statistic,
            period: FIVE_MINUTES,
          }),
        (ids) => (ids.length === 1 ? ids[0]! : `MAX([${ids.join(', ')}])`),
        label,
      );
    const engineCpu = busiestNode('cpu', 'EngineCPUUtilization', 'engine CPU %');
    const engineMemory = busiestNode('memory', 'DatabaseMemoryUsagePercentage', 'engine memory %', 'Maximum');
    const engineConnections = busiestNode('connections', 'CurrConnections', 'engine connections', 'Maximum');
    this.addAlarm(
      'WakeupEngineCpu',
      "The wake-up engine's busiest node uses 80%+ of its engine thread",
      engineCpu,
      80,
      {
        periods: 3,
        datapoints: 2,
      },
    );
    this.addAlarm(
      'WakeupEngineMemory',
      'The wake-up engine uses 80%+ of its memory (it stores nothing: output buffers of slow subscribers?)',
      engineMemory,
      80,
      { periods: 2 },
    );
    this.addAlarm(
      'WakeupEngineConnections',
      `The wake-up engine nears its connection limit (${ENGINE_MAX_CONNECTIONS} per node)`,
      engineConnections,
      ENGINE_MAX_CONNECTIONS * 0.8,
    );
    return { engineCpu, engineMemory, engineConnections };
  }

  /** The task's EMF lines, as the same metrics (name, namespace, dimensions) as a Lambda's. */
  private taskMetricFilters(props: MonitoringProps): void {
    for (const [metricName, { dimensions, gauge }] of Object.entries(TASK_EMF_METRICS)) {
      new MetricFilter(this, `Task${metricName}`, {
        logGroup: props.taskLogs,
        filterPattern: FilterPattern.numberValue(`$.${metricName}`, gauge ? '>=' : '>', 0),
        metricNamespace: props.metricsNamespace,
        metricName,
        metricValue: `$.${metricName}`,
        dimensions: Object.fromEntries(['service', ...dimensions].map((dimension) => [dimension, `$.${dimension}`])),
      });
    }
  }

  /** What writers could not publish (wake-ups) or store (derived messages). */
  private writerAlarms(props: MonitoringProps) {
    const publishFailures = this.emfSum(
      props,
      'published',
      'WakeupPublishFailures',
      'wake-ups not published',
      props.wakeups.publishers.map((service) => ({ service })),
    );
    this.addAlarm(
      'WakeupPublishFailures',
      'Wake-ups could not be published (engine out or failing over): streams deliver at their safety-net poll',
      publishFailures,
      1,
      { periods: 3, datapoints: 2 },
    );
    const derivedFailures = this.emfSum(
      props,
      'derived',
      'DerivedMessageFailures',
      'derived messages failed',
      props.wakeups.derivedMessageSenders.flatMap((service) =>
        DERIVED_MESSAGE_KINDS.map((kind) => ({ service, kind })),
      ),
    );
    this.addAlarm(
      'DerivedMessageFailures',
      'An auto-reply or forward could not be stored (the original message was; see the log line "derived message ' +
        'failed")',
      derivedFailures,
      1,
    );
    return { publishFailures, derivedFailures };
  }

  /**
   * The free pool, as the task's pool queries see it (each allocation that needs a query reports
   * it): below the setting, every owner may soon be refused numbers. No reading means no
   * allocation, so the pool did not shrink: the alarm keeps its state. Its producer: the task's
   * metric filter (TASK_EMF_METRICS).
   */
  private freeNumbersAlarm(props: MonitoringProps): void {
    const freeNumbers = new Metric({
      namespace: props.metricsNamespace,
      metricName: 'FreeNumbers',
      dimensionsMap: { service: props.poolAllocator },
      statistic: 'Minimum',
      period: FIVE_MINUTES,
    });
    this.addAlarm(
      'FreeNumbersLow',
      `Fewer than ${props.config.numberPool.lowAlarm} numbers are free in the pool: seed more (admin number seed) ` +
        `before creates fail with "no number is free"`,
      freeNumbers,
      props.config.numberPool.lowAlarm,
      { below: true, missing: TreatMissingData.IGNORE },
    );
  }

  /** gRPC: unhealthy targets, and no healthy target at all. */
  private grpcAlarms({ targetGroup }: MonitoringProps): Watched['targets'] {
    const unhealthy = targetGroup.metrics.unHealthyHostCount({ statistic: 'Maximum', period: ONE_MINUTE });
    const healthy = targetGroup.metrics.healthyHostCount({ statistic: 'Minimum', period: ONE_MINUTE });
    this.addAlarm('GrpcUnhealthyTargets', 'A gRPC task fails the NLB health check', unhealthy, 1, {
      periods: 3,
      datapoints: 2,
    });
    this.addAlarm('GrpcNoHealthyTargets', 'No gRPC task is healthy: the provisioning API is down', healthy, 1, {
      periods: 2,
      below: true,
    });
    return { healthy, unhealthy };
  }

  private createDashboard(props: MonitoringProps, watched: Watched): Dashboard {
    return new Dashboard(this, 'Dashboard', {
      dashboardName: this.prefix,
      defaultInterval: Duration.hours(3),
      widgets: [
        [
          new TextWidget({
            markdown:
              `# svcnum ${props.config.name}\n` +
              'HTTP (API Gateway → Lambda), gRPC (NLB → Fargate), DynamoDB, alarms.',
            width: 24,
            height: 2,
          }),
        ],
        [new AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24, height: 4 })],
        httpWidgets(props, watched),
        functionWidgets(props),
        grpcWidgets(props, watched),
        storeWidgets(props, watched),
        wakeupWidgets(props, watched),
      ],
    });
  }
}

function httpWidgets({ api }: MonitoringProps, { api5xxPercent, tokenLatency }: Watched): GraphWidget[] {
  return [
    new GraphWidget({
      title: 'API requests',
      left: [api.metricCount({ period: ONE_MINUTE })],
      right: [api.metricClientError({ period: ONE_MINUTE }), api.metricServerError({ period: ONE_MINUTE })],
      width: 8,
    }),
    new GraphWidget({ title: 'API 5xx %', left: [api5xxPercent], width: 8 }),
    new GraphWidget({
      title: 'Token endpoint latency',
      left: [tokenLatency, tokenLatency.with({ statistic: 'p50', label: 'p50 (ms)' })],
      width: 8,
    }),
  ];
}

function functionWidgets({ functions }: MonitoringProps): GraphWidget[] {
  const fns = Object.entries(functions);
  return [
    new GraphWidget({
      title: 'Lambda invocations',
      left: fns.map(([group, fn]) => fn.metricInvocations({ period: ONE_MINUTE, label: group })),
      width: 8,
    }),
    new GraphWidget({
      title: 'Lambda errors / throttles',
      left: fns.map(([group, fn]) => fn.metricErrors({ period: ONE_MINUTE, label: `${group} errors` })),
      right: fns.map(([group, fn]) => fn.metricThrottles({ period: ONE_MINUTE, label: `${group} throttles` })),
      width: 8,
    }),
    new GraphWidget({
      title: 'Lambda duration p99 (ms)',
      left: fns.map(([group, fn]) => fn.metricDuration({ period: ONE_MINUTE, statistic: 'p99', label: group })),
      width: 8,
    }),
  ];
}

function grpcWidgets({ loadBalancer, service }: MonitoringProps, { targets }: Watched): GraphWidget[] {
  return [
    new GraphWidget({
      title: 'gRPC targets',
      left: [targets.healthy.with({ label: 'healthy' }), targets.unhealthy.with({ label: 'unhealthy' })],
      width: 8,
    }),
    new GraphWidget({
      title: 'NLB flows',
      left: [
        loadBalancer.metrics.activeFlowCount({ period: ONE_MINUTE }),
        loadBalancer.metrics.newFlowCount({ period: ONE_MINUTE }),
      ],
      right: [loadBalancer.metrics.tcpTargetResetCount({ period: ONE_MINUTE })],
      width: 8,
    }),
    new GraphWidget({
      title: 'Fargate CPU / memory %',
      left: [
        service.metricCpuUtilization({ period: ONE_MINUTE }),
        service.metricMemoryUtilization({ period: ONE_MINUTE }),
      ],
      width: 8,
    }),
  ];
}

/** The tables whose consumed capacity the dashboard shows (the sign-in and token paths). */
const HOT_TABLES = ['codes', 'grants', 'users', 'sessions'] as const;

function storeWidgets({ tables }: MonitoringProps, { tableThrottles, kmsThrottles }: Watched): GraphWidget[] {
  const hot = HOT_TABLES.filter((key) => key in tables);
  return [
    new GraphWidget({ title: 'DynamoDB throttled requests', left: tableThrottles, right: [kmsThrottles], width: 12 }),
    new GraphWidget({
      title: 'DynamoDB consumed capacity (hot tables)',
      left: hot.map((key) => tables[key].metricConsumedReadCapacityUnits({ period: ONE_MINUTE, label: `${key} read` })),
      right: hot.map((key) =>
        tables[key].metricConsumedWriteCapacityUnits({ period: ONE_MINUTE, label: `${key} write` }),
      ),
      width: 12,
    }),
  ];
}

function wakeupWidgets({ wakeups: { relay } }: MonitoringProps, { wakeups }: Watched): GraphWidget[] {
  return [
    new GraphWidget({
      title: 'Wake-up engine (busiest node)',
      left: [wakeups.engineCpu, wakeups.engineMemory],
      right: [wakeups.engineConnections],
      width: 8,
    }),
    new GraphWidget({
      title: 'Wake-up relay',
      left: [relay.metricInvocations({ period: ONE_MINUTE }), relay.metricErrors({ period: ONE_MINUTE })],
      right: [wakeups.iteratorAge],
      width: 8,
    }),
    new GraphWidget({
      title: 'Wake-ups not published / derived messages failed',
      left: [wakeups.publishFailures, wakeups.derivedFailures],
      width: 8,
    }),
  ];
}
