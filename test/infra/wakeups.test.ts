import { describe, expect, it } from 'vitest';
import { tableDefinitions } from '../../core/tables';
import { environmentNames, type EnvironmentName } from '../../lib/config';
import { DERIVED_MESSAGE_KINDS } from '../../lib/monitoring';
import { TASK_SERVICE_NAME } from '../../lib/provisioning';
import { WAKEUP_ENGINE_PORT, WAKEUP_ENGINE_VERSION, WAKEUP_USER_ACCESS_STRING } from '../../lib/wakeup-engine';
import { RELAY_SERVICE_NAME } from '../../lib/wakeup-relay';
import { iamStatements, list, logicalId, resources, synthesizeForFile, type Json } from './support';

// The pub/sub engine of inbox wake-ups and its relay, as both stacks build them
// (lib/wakeup-engine.ts, lib/wakeup-relay.ts): ElastiCache for Valkey in the VPC with TLS, IAM
// authentication and a security group open to the gRPC tasks and the relay only; the messages
// table's stream feeding the relay; least-privilege grants; the task's environment; the alarms.

const synth = synthesizeForFile({ bundle: false });

describe.each(environmentNames)('%s stack', (environment: EnvironmentName) => {
  const template = () => synth.templates[environment];
  const stack = () => synth.stacks[environment];
  const config = () => synth.configs[environment];
  const only = (type: string) => {
    const found = Object.entries(resources(template(), type));
    expect(found, type).toHaveLength(1);
    return found[0]!;
  };
  const groupId = (construct: { node: { defaultChild?: unknown } }) => ({
    'Fn::GetAtt': [logicalId(construct as never), 'GroupId'],
  });

  it('runs Valkey (cluster mode disabled) with TLS required, encryption at rest, its own port and nothing persisted', () => {
    const [, group] = only('AWS::ElastiCache::ReplicationGroup');
    const replicas = config().wakeups.replicas;
    expect(group.Properties).toMatchObject({
      ReplicationGroupId: `svcnum-${environment}-wakeups`,
      Engine: 'valkey',
      EngineVersion: WAKEUP_ENGINE_VERSION,
      CacheNodeType: config().wakeups.nodeType,
      NumCacheClusters: 1 + replicas,
      Port: WAKEUP_ENGINE_PORT,
      TransitEncryptionEnabled: true,
      TransitEncryptionMode: 'required',
      AtRestEncryptionEnabled: true,
      SnapshotRetentionLimit: 0,
      UserGroupIds: [`svcnum-${environment}-wakeups`],
      CacheSubnetGroupName: { Ref: Object.keys(resources(template(), 'AWS::ElastiCache::SubnetGroup'))[0] },
      SecurityGroupIds: [groupId(stack().wakeups.securityGroup)],
    });
    expect(WAKEUP_ENGINE_PORT).not.toBe(6379);
    // One shard: no NumNodeGroups / ReplicasPerNodeGroup (cluster mode), no AUTH token.
    expect(group.Properties!.NumNodeGroups).toBeUndefined();
    expect(group.Properties!.AuthToken).toBeUndefined();
    // Production: a replica in another AZ with automatic failover; the sandbox: one node.
    expect(group.Properties).toMatchObject(
      environment === 'production'
        ? { MultiAZEnabled: true, AutomaticFailoverEnabled: true, NumCacheClusters: 2 }
        : { MultiAZEnabled: false, AutomaticFailoverEnabled: false, NumCacheClusters: 1 },
    );
    // In the VPC's isolated subnets (the tasks'), never a public one.
    const [, subnets] = only('AWS::ElastiCache::SubnetGroup');
    const subnetIds = (subnets.Properties!.SubnetIds as Array<{ Ref: string }>).map((subnet) => subnet.Ref);
    expect(subnetIds).toHaveLength(2);
    for (const id of subnetIds) expect(id).toMatch(/^ProvisioningVpctasksSubnet/);
  });

  it('signs in by IAM only: a user of authentication type iam (id = name), the default user off, no password anywhere', () => {
    const users = Object.values(resources(template(), 'AWS::ElastiCache::User')).map((user) => user.Properties!);
    const userId = `svcnum-wakeups-${environment}`;
    expect(users).toStrictEqual(
      expect.arrayContaining([
        expect.objectContaining({
          UserId: userId,
          UserName: userId,
          Engine: 'redis',
          AuthenticationMode: { Type: 'iam' },
          AccessString: WAKEUP_USER_ACCESS_STRING,
        }),
        expect.objectContaining({
          UserId: `svcnum-${environment}-wakeups-default`,
          UserName: 'default',
          AccessString: 'off -@all',
        }),
      ]),
    );
    expect(users).toHaveLength(2);
    for (const user of users) expect(user.Passwords).toBeUndefined();
    // Keys: the inboxes' heads only; no other key pattern, no command category.
    expect(WAKEUP_USER_ACCESS_STRING.match(/[~%]\S*/g)).toStrictEqual(['~head:*']);
    expect(WAKEUP_USER_ACCESS_STRING).not.toMatch(/\+@|allkeys|allcommands/);
    const [, group] = only('AWS::ElastiCache::UserGroup');
    expect(group.Properties).toMatchObject({
      Engine: 'redis',
      UserGroupId: `svcnum-${environment}-wakeups`,
      UserIds: [`svcnum-${environment}-wakeups-default`, userId],
    });
  });

  it("lets only the gRPC tasks' and the relay's security groups reach the engine port; no CIDR at all", () => {
    const engineGroup = logicalId(stack().wakeups.securityGroup);
    const [, engineSg] = Object.entries(resources(template(), 'AWS::EC2::SecurityGroup')).find(
      ([id]) => id === engineGroup,
    )!;
    expect(engineSg.Properties!.SecurityGroupIngress).toBeUndefined();
    // No way out of the engine's group (CDK's placeholder rule that matches nothing).
    expect(engineSg.Properties!.SecurityGroupEgress).toStrictEqual([
      expect.objectContaining({ CidrIp: '255.255.255.255/32', Description: 'Disallow all traffic' }),
    ]);
    const ingress = Object.values(resources(template(), 'AWS::EC2::SecurityGroupIngress'))
      .map((rule) => rule.Properties!)
      .filter((rule) => JSON.stringify(rule.GroupId) === JSON.stringify({ 'Fn::GetAtt': [engineGroup, 'GroupId'] }));
    expect(
      ingress.map((rule) => ({
        port: [rule.FromPort, rule.ToPort],
        protocol: rule.IpProtocol,
        from: rule.SourceSecurityGroupId,
        cidr: rule.CidrIp ?? rule.CidrIpv6,
      })),
    ).toStrictEqual(
      expect.arrayContaining([
        {
          port: [WAKEUP_ENGINE_PORT, WAKEUP_ENGINE_PORT],
          protocol: 'tcp',
          from: groupId(stack().provisioning.taskSecurityGroup),
          cidr: undefined,
        },
        {
          port: [WAKEUP_ENGINE_PORT, WAKEUP_ENGINE_PORT],
          protocol: 'tcp',
          from: groupId(stack().wakeupRelay.securityGroup),
          cidr: undefined,
        },
      ]),
    );
    expect(ingress).toHaveLength(2);
    // The relay's only way out is the engine's port.
    const relayGroup = logicalId(stack().wakeupRelay.securityGroup);
    const relaySg = resources(template(), 'AWS::EC2::SecurityGroup')[relayGroup]!.Properties!;
    expect(relaySg.SecurityGroupEgress).toBeUndefined();
    const egress = Object.values(resources(template(), 'AWS::EC2::SecurityGroupEgress'))
      .map((rule) => rule.Properties!)
      .filter((rule) => JSON.stringify(rule.GroupId) === JSON.stringify({ 'Fn::GetAtt': [relayGroup, 'GroupId'] }));
    expect(egress).toStrictEqual([
      expect.objectContaining({
        FromPort: WAKEUP_ENGINE_PORT,
        ToPort: WAKEUP_ENGINE_PORT,
        IpProtocol: 'tcp',
        DestinationSecurityGroupId: { 'Fn::GetAtt': [engineGroup, 'GroupId'] },
      }),
    ]);
    expect(JSON.stringify(template().toJSON())).not.toMatch(
      /"CidrIp(v6)?":"(0\.0\.0\.0\/0|::\/0)"[^}]*"(FromPort|ToPort)":6380/,
    );
  });

  it("streams the messages table's keys (KEYS_ONLY) to the relay: INSERTs only, batches of 100 at once, bounded retries and record age", () => {
    const tables = resources(template(), 'AWS::DynamoDB::Table');
    const messages = tables[logicalId(stack().data.tables.messages)]!.Properties!;
    expect(messages.StreamSpecification).toStrictEqual({ StreamViewType: 'KEYS_ONLY' });
    // The only stream: no other table pays for one.
    expect(Object.values(tables).filter((table) => table.Properties!.StreamSpecification)).toHaveLength(1);
    expect(tableDefinitions.messages).toMatchObject({ partitionKey: 'inboxId', sortKey: 'seq' });
    const [, mapping] = only('AWS::Lambda::EventSourceMapping');
    expect(mapping.Properties).toStrictEqual(
      expect.objectContaining({
        EventSourceArn: { 'Fn::GetAtt': [logicalId(stack().data.tables.messages), 'StreamArn'] },
        FunctionName: { Ref: logicalId(stack().wakeupRelay.function) },
        StartingPosition: 'LATEST',
        BatchSize: 100,
        MaximumBatchingWindowInSeconds: 0,
        BisectBatchOnFunctionError: false,
        MaximumRetryAttempts: 2,
        MaximumRecordAgeInSeconds: 60,
        ParallelizationFactor: 2,
        FilterCriteria: { Filters: [{ Pattern: JSON.stringify({ eventName: ['INSERT'] }) }] },
      }),
    );
  });

  it('runs the relay in the isolated subnets with its own security group, configured for the engine by IAM, no secret', () => {
    const fn = resources(template(), 'AWS::Lambda::Function')[logicalId(stack().wakeupRelay.function)]!.Properties!;
    expect(fn).toMatchObject({
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      FunctionName: `svcnum-${environment}-wakeup-relay`,
    });
    expect(fn.MemorySize).toBe(config().wakeups.relay.memoryMiB);
    const vpc = fn.VpcConfig as { SecurityGroupIds: unknown[]; SubnetIds: Array<{ Ref: string }> };
    expect(vpc.SecurityGroupIds).toStrictEqual([groupId(stack().wakeupRelay.securityGroup)]);
    for (const subnet of vpc.SubnetIds) expect(subnet.Ref).toMatch(/^ProvisioningVpctasksSubnet/);
    const variables = (fn.Environment as { Variables: Json }).Variables;
    expect(variables).toStrictEqual({
      VALKEY_URL: {
        'Fn::Join': [
          '',
          [
            'rediss://',
            { 'Fn::GetAtt': [logicalId(stack().wakeups.replicationGroup), 'PrimaryEndPoint.Address'] },
            `:${WAKEUP_ENGINE_PORT}`,
          ],
        ],
      },
      VALKEY_USERNAME: `svcnum-wakeups-${environment}`,
      VALKEY_IAM_AUTH: `svcnum-${environment}-wakeups`,
      LOG_LEVEL: config().logLevel,
      METRICS_NAMESPACE: 'svcnum',
      SERVICE_NAME: RELAY_SERVICE_NAME,
    });
  });

  it('gives the task its VALKEY_* environment (rediss:// primary endpoint, IAM, its region)', () => {
    const [container] = Object.values(resources(template(), 'AWS::ECS::TaskDefinition'))[0]!.Properties!
      .ContainerDefinitions as Json[];
    const variables = Object.fromEntries(
      (container!.Environment as Array<{ Name: string; Value: unknown }>).map((variable) => [
        variable.Name,
        variable.Value,
      ]),
    );
    expect(variables).toMatchObject({
      VALKEY_URL: {
        'Fn::Join': [
          '',
          [
            'rediss://',
            { 'Fn::GetAtt': [logicalId(stack().wakeups.replicationGroup), 'PrimaryEndPoint.Address'] },
            `:${WAKEUP_ENGINE_PORT}`,
          ],
        ],
      },
      VALKEY_USERNAME: `svcnum-wakeups-${environment}`,
      VALKEY_IAM_AUTH: `svcnum-${environment}-wakeups`,
      AWS_REGION: config().region,
    });
    expect(variables.VALKEY_PASSWORD).toBeUndefined();
  });

  it('grants elasticache:Connect on this replication group and this user to the task role and the relay role only', () => {
    const connect = iamStatements(template()).filter(({ statement }) =>
      list(statement.Action).some((action) => action.startsWith('elasticache:')),
    );
    const expectedResources = [
      `arn:aws:elasticache:${config().region}:${config().account}:replicationgroup:svcnum-${environment}-wakeups`,
      { 'Fn::GetAtt': [logicalId(stack().wakeups.user), 'Arn'] },
    ];
    const roles = connect.flatMap(({ roles: of, statement }) => {
      expect(statement.Action).toBe('elasticache:Connect');
      expect(statement.Resource).toStrictEqual(expectedResources);
      return of;
    });
    expect(roles.sort()).toStrictEqual(
      [
        logicalId(stack().provisioning.service.taskDefinition.taskRole as never),
        logicalId(stack().wakeupRelay.function.role as never),
      ].sort(),
    );
    // The relay reads the stream, and no table.
    const relayRole = logicalId(stack().wakeupRelay.function.role as never);
    const dynamo = iamStatements(template())
      .filter(({ roles: of }) => of.includes(relayRole))
      .flatMap(({ statement }) =>
        list(statement.Action)
          .filter((action) => action.startsWith('dynamodb:'))
          .map((action) => `${action} ${JSON.stringify(statement.Resource)}`),
      );
    const stream = JSON.stringify({ 'Fn::GetAtt': [logicalId(stack().data.tables.messages), 'StreamArn'] });
    expect(dynamo.sort()).toStrictEqual([
      `dynamodb:DescribeStream ${stream}`,
      `dynamodb:GetRecords ${stream}`,
      `dynamodb:GetShardIterator ${stream}`,
      'dynamodb:ListStreams "*"',
    ]);
  });

  it('alarms on the engine (CPU, memory, connections), the relay (errors, iterator age), unpublished wake-ups and failed derived messages', () => {
    const alarms = Object.values(resources(template(), 'AWS::CloudWatch::Alarm')).map((alarm) => alarm.Properties!);
    const named = (suffix: string) => alarms.find((alarm) => alarm.AlarmName === `svcnum-${environment}-${suffix}`)!;
    const nodes = Array.from(
      { length: 1 + config().wakeups.replicas },
      (_, index) => `svcnum-${environment}-wakeups-00${index + 1}`,
    );
    type Query = {
      Id: string;
      Expression?: string;
      MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions: Json[] }; Stat: string };
    };
    const stats = (alarm: Json) =>
      (alarm.Metrics as Query[]).filter((query) => query.MetricStat).map((query) => query.MetricStat!);
    for (const [name, metric, threshold] of [
      ['WakeupEngineCpu', 'EngineCPUUtilization', 80],
      ['WakeupEngineMemory', 'DatabaseMemoryUsagePercentage', 80],
      ['WakeupEngineConnections', 'CurrConnections', 52_000],
    ] as const) {
      const alarm = named(name);
      expect(alarm.Threshold, name).toBe(threshold);
      expect(
        stats(alarm).map((stat) => stat.Metric),
        name,
      ).toStrictEqual(
        nodes.map((node) => ({
          Namespace: 'AWS/ElastiCache',
          MetricName: metric,
          Dimensions: [{ Name: 'CacheClusterId', Value: node }],
        })),
      );
    }
    expect(named('WakeupRelayErrors')).toMatchObject({
      MetricName: 'Errors',
      Namespace: 'AWS/Lambda',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(stack().wakeupRelay.function) } }],
    });
    expect(named('WakeupRelayIteratorAge').Threshold).toBe(30_000);
    expect(stats(named('WakeupRelayIteratorAge'))).toStrictEqual([
      expect.objectContaining({
        Metric: expect.objectContaining({ Namespace: 'AWS/Lambda', MetricName: 'IteratorAge' }),
        Stat: 'Maximum',
      }),
    ]);
    // Our EMF metrics, exactly as the processes write them (namespace, metric, dimensions).
    expect(stats(named('WakeupPublishFailures'))).toStrictEqual(
      [TASK_SERVICE_NAME, RELAY_SERVICE_NAME].map((service) => ({
        Metric: {
          Namespace: 'svcnum',
          MetricName: 'WakeupPublishFailures',
          Dimensions: [{ Name: 'service', Value: service }],
        },
        Period: 300,
        Stat: 'Sum',
      })),
    );
    expect(stats(named('DerivedMessageFailures'))).toStrictEqual(
      ['svcnum-messages', TASK_SERVICE_NAME].flatMap((service) =>
        DERIVED_MESSAGE_KINDS.map((kind) => ({
          Metric: {
            Namespace: 'svcnum',
            MetricName: 'DerivedMessageFailures',
            Dimensions: [
              { Name: 'kind', Value: kind },
              { Name: 'service', Value: service },
            ],
          },
          Period: 300,
          Stat: 'Sum',
        })),
      ),
    );
    // The task's lines become those metrics by metric filters (its awslogs driver has no EMF extraction;
    // every alarm's producer: test/infra/metric-producers.test.ts).
    const filters = Object.values(resources(template(), 'AWS::Logs::MetricFilter')).map((filter) => filter.Properties!);
    expect(filters).toEqual(
      expect.arrayContaining([
        {
          LogGroupName: { Ref: logicalId(stack().provisioning.taskLogs) },
          FilterPattern: '{ $.WakeupPublishFailures > 0 }',
          MetricTransformations: [
            {
              MetricNamespace: 'svcnum',
              MetricName: 'WakeupPublishFailures',
              MetricValue: '$.WakeupPublishFailures',
              Dimensions: [{ Key: 'service', Value: '$.service' }],
            },
          ],
        },
        {
          LogGroupName: { Ref: logicalId(stack().provisioning.taskLogs) },
          FilterPattern: '{ $.DerivedMessageFailures > 0 }',
          MetricTransformations: [
            {
              MetricNamespace: 'svcnum',
              MetricName: 'DerivedMessageFailures',
              MetricValue: '$.DerivedMessageFailures',
              Dimensions: [
                { Key: 'service', Value: '$.service' },
                { Key: 'kind', Value: '$.kind' },
              ],
            },
          ],
        },
        // The free pool's gauge (test/infra/stacks.test.ts: its alarm).
        {
          LogGroupName: { Ref: logicalId(stack().provisioning.taskLogs) },
          FilterPattern: '{ $.FreeNumbers >= 0 }',
          MetricTransformations: [
            {
              MetricNamespace: 'svcnum',
              MetricName: 'FreeNumbers',
              MetricValue: '$.FreeNumbers',
              Dimensions: [{ Key: 'service', Value: '$.service' }],
            },
          ],
        },
      ]),
    );
    const topic = { Ref: logicalId(stack().monitoring.topic) };
    for (const name of [
      'WakeupEngineCpu',
      'WakeupEngineMemory',
      'WakeupEngineConnections',
      'WakeupRelayErrors',
      'WakeupRelayIteratorAge',
      'WakeupPublishFailures',
      'DerivedMessageFailures',
    ]) {
      expect(named(name).AlarmActions, name).toContainEqual(topic);
    }
  });
});
