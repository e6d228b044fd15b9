import { Duration } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { SecurityGroup, SubnetType, type IVpc } from 'aws-cdk-lib/aws-ec2';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { FilterCriteria, FilterRule, StartingPosition, Tracing } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { wakeupRelayManifest } from '../lambdas/manifest';
import type { EnvironmentConfig } from './config';
import { functionLogGroup, nodejsFunctionProps } from './util';
import type { WakeupEngine } from './wakeup-engine';

// The wake-up relay (lambdas/wakeup-relay.ts): the messages table's stream (KEYS_ONLY) → one
// SPUBLISH per inbox and batch on the engine, for the messages the messages Lambda writes (it holds
// no engine client and runs outside the VPC). In the VPC's isolated subnets with a security group of
// its own whose only way out is the engine's port: it reaches nothing else (no NAT, no endpoint:
// Lambda reads the stream and takes the logs; credentials come in the environment).
//
// The event source mapping: only INSERTs reach the function (TTL removals, one per message, are
// filtered out by Lambda); batches of up to 100 without waiting to fill them (a wake-up is about
// latency); a failed batch (only the relay's own faults fail one: a publish failure is counted and
// passed over) is retried twice, and records older than a minute are dropped: by then every stream
// has read them through its safety-net poll. Two batches per shard at once: order between batches
// does not matter (each wake-up says "look now").

/**
 * SERVICE_NAME of the relay (lambdas/wakeup-relay.ts RELAY_SERVICE_NAME, not imported: synth loads no handler code).
 */
export const RELAY_SERVICE_NAME = 'svcnum-wakeup-relay';

/** The EC2 actions Lambda needs of a function's role to manage the function's network interfaces in a VPC. */
const VPC_FUNCTION_ENI_ACTIONS = [
  'ec2:CreateNetworkInterface',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeSubnets',
  'ec2:DeleteNetworkInterface',
  'ec2:AssignPrivateIpAddresses',
  'ec2:UnassignPrivateIpAddresses',
] as const;

export interface WakeupRelayProps {
  readonly config: EnvironmentConfig;
  readonly vpc: IVpc;
  readonly engine: WakeupEngine;
  /** The messages table, its stream on. */
  readonly messages: Table;
}

export class WakeupRelay extends Construct {
  readonly function: NodejsFunction;
  readonly securityGroup: SecurityGroup;

  constructor(scope: Construct, id: string, props: WakeupRelayProps) {
    super(scope, id);
    const { config, engine } = props;
    const name = `svcnum-${config.name}-wakeup-relay`;
    const settings = config.wakeups.relay;
    const logGroup = functionLogGroup(this, 'Logs', name, config);
    // Its own role: logs to its group, the stream (granted by the event source), the engine (IAM
    // auth), and the network interfaces of a function in a VPC. Not AWSLambdaVPCAccessExecutionRole:
    // that managed policy adds logs:CreateLogGroup/CreateLogStream/PutLogEvents on every log group.
    const role = new Role(this, 'Role', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `svcnum ${config.name}: the wake-up relay function`,
    });
    role.addToPolicy(
      new PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    // What Lambda does with the function's role to attach it to the VPC (the EC2 actions of
    // AWSLambdaVPCAccessExecutionRole): the Describe actions have no resource type, and the ENIs'
    // ids are Lambda's, unknown to the template.
    role.addToPolicy(new PolicyStatement({ actions: [...VPC_FUNCTION_ENI_ACTIONS], resources: ['*'] }));
    engine.grantConnect(role);

    this.securityGroup = new SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `svcnum-${config.name}: wake-up relay, out to the engine port only`,
      allowAllOutbound: false,
    });
    // The engine's ingress from this group, and this group's one egress rule, to the engine.
    engine.allowFrom(this.securityGroup, 'Wake-up relay (TLS)');

    this.function = new NodejsFunction(this, 'Function', {
      ...nodejsFunctionProps({
        entry: wakeupRelayManifest.entry,
        memoryMiB: settings.memoryMiB,
        timeoutSeconds: settings.timeoutSeconds,
        role,
        logGroup,
      }),
      functionName: name,
      description: `svcnum ${config.name}: messages table stream → inbox wake-ups on the engine`,
      tracing: Tracing.DISABLED,
      vpc: props.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
      securityGroups: [this.securityGroup],
      allowPublicSubnet: false,
      environment: {
        ...engine.environment,
        LOG_LEVEL: config.logLevel,
        METRICS_NAMESPACE: 'svcnum',
        SERVICE_NAME: RELAY_SERVICE_NAME,
      },
    });
    this.function.addEventSource(
      new DynamoEventSource(props.messages, {
        startingPosition: StartingPosition.LATEST,
        batchSize: 100,
        maxBatchingWindow: Duration.seconds(0),
        bisectBatchOnError: false,
        retryAttempts: 2,
        maxRecordAge: Duration.seconds(60),
        parallelizationFactor: 2,
        filters: [FilterCriteria.filter({ eventName: FilterRule.isEqual('INSERT') })],
      }),
    );
  }
}
