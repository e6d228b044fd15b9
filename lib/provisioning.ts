import { Duration, type RemovalPolicy, Stack } from 'aws-cdk-lib';
import {
  FlowLogDestination,
  FlowLogTrafficType,
  GatewayVpcEndpointAwsService,
  InterfaceVpcEndpointAwsService,
  IpAddresses,
  Peer,
  Port,
  SecurityGroup,
  SubnetType,
  Vpc,
} from 'aws-cdk-lib/aws-ec2';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import {
  Cluster,
  ContainerImage,
  type ContainerDefinition,
  ContainerInsights,
  CpuArchitecture,
  FargatePlatformVersion,
  FargateService,
  FargateTaskDefinition,
  LogDrivers,
  OperatingSystemFamily,
  PropagatedTagSource,
  Protocol as EcsProtocol,
} from 'aws-cdk-lib/aws-ecs';
import {
  AlpnPolicy,
  ListenerCertificate,
  NetworkLoadBalancer,
  NetworkTargetGroup,
  Protocol,
  SslPolicy,
  TargetType,
} from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import { AnyPrincipal, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { LoadBalancerTarget } from 'aws-cdk-lib/aws-route53-targets';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership } from 'aws-cdk-lib/aws-s3';
import { aliasRecord } from './dns';
import { Construct } from 'constructs';
import type { TableKey } from '../core/tables';
import { access } from './access';
import type { EnvironmentConfig } from './config';
import { grantTableAccess, type GrantTarget } from './grants';
import { grantMacKeys, macKeyEnvironment, type MacKeys, type SigningKeys } from './keys';
import { logRetention, repoRoot, statefulRemovalPolicy } from './util';
import type { WakeupEngine } from './wakeup-engine';

// The provisioning face: the grpc-js server (grpc-service/) as a Fargate service behind an
// internet-facing Network Load Balancer. TLS ends at the NLB (ALPN h2); the task speaks
// plaintext HTTP/2 on GRPC_PORT inside the VPC.
//
// Networking: the tasks run in isolated subnets with no route to the internet at all (no NAT
// gateway). Everything they need is reached through VPC endpoints: DynamoDB and S3 (ECR image
// layers) through free gateway endpoints, KMS, ECR and CloudWatch Logs through interface
// endpoints. Compared with NAT gateways (one per AZ, ~USD 32/month each plus data processing)
// the four interface endpoints cost about the same in two AZs, but leave the tasks no egress path
// to anywhere else: a compromised task cannot reach the internet.

export const GRPC_PORT = 50051;
/**
 * The task's HTTP health endpoint (HEALTH_PORT, grpc-service/health-endpoint.ts): 200 only while grpc.health.v1 says
 * SERVING.
 */
export const HEALTH_PORT = 8081;
/**
 * How the NLB checks each task: GET /health on HEALTH_PORT, 200 only. A task that answers 503
 * (NOT_SERVING, draining) or nothing (a wedged event loop) fails; two failed checks 10 s apart, each
 * given 5 s, take it out of service within 30 s. A bare TCP connect would still succeed: the kernel
 * accepts connections for a process that no longer runs its loop.
 */
export const TARGET_HEALTH_CHECK = {
  path: '/health',
  port: HEALTH_PORT,
  intervalSeconds: 10,
  timeoutSeconds: 5,
  unhealthyThreshold: 2,
  healthyThreshold: 2,
} as const;
/**
 * The container's own health check (ECS replaces a task whose essential container turns
 * UNHEALTHY): the same endpoint, asked by the image's node (it has no curl), 2 failures 10 s apart.
 */
export const containerHealthCommand = () => [
  'CMD',
  'node',
  '-e',
  "require('http').get({host:'127.0.0.1',port:process.env.HEALTH_PORT," +
    `path:'${TARGET_HEALTH_CHECK.path}',timeout:${(TARGET_HEALTH_CHECK.timeoutSeconds - 1) * 1000}},` +
    "(r)=>process.exit(r.statusCode===200?0:1)).on('timeout',()=>process.exit(1)).on('error',()=>process.exit(1))",
];
/** SERVICE_NAME of the task: the `service` of its log lines and the dimension of its metrics. */
export const TASK_SERVICE_NAME = 'svcnum-provisioning';

export interface ProvisioningProps {
  readonly config: EnvironmentConfig;
  readonly tables: Record<TableKey, GrantTarget>;
  readonly tablePrefix: string;
  readonly keys: SigningKeys;
  /** The task derives its page-token key from the page-token key (lib/access.ts `pageTokenMac`). */
  readonly macKeys: MacKeys;
  readonly environment: Record<string, string>;
}

/** Where the tasks run: the VPC's isolated subnets (no route out but the VPC endpoints). */
const ISOLATED = { subnetType: SubnetType.PRIVATE_ISOLATED };

export class Provisioning extends Construct {
  readonly vpc: Vpc;
  readonly cluster: Cluster;
  readonly service: FargateService;
  readonly loadBalancer: NetworkLoadBalancer;
  readonly targetGroup: NetworkTargetGroup;
  readonly endpoint: string;
  readonly taskSecurityGroup: SecurityGroup;
  /** The task's log group (its EMF lines are made metrics by metric filters: lib/monitoring.ts). */
  readonly taskLogs: LogGroup;
  private readonly container: ContainerDefinition;

  constructor(scope: Construct, id: string, props: ProvisioningProps) {
    super(scope, id);
    const { config } = props;
    const prefix = `svcnum-${config.name}`;
    const removalPolicy = statefulRemovalPolicy(config.retainData);
    const network = this.network(props, prefix, removalPolicy);
    this.vpc = network.vpc;
    this.taskSecurityGroup = network.taskSecurityGroup;
    this.cluster = new Cluster(this, 'Cluster', {
      vpc: this.vpc,
      clusterName: prefix,
      containerInsightsV2: ContainerInsights.ENABLED,
    });
    const task = this.task(props, prefix, removalPolicy);
    this.taskLogs = task.taskLogs;
    this.container = task.container;
    this.service = this.fargateService(props, prefix, task.taskDefinition);
    const front = this.loadBalancing(props, prefix, removalPolicy, network.nlbSecurityGroup);
    this.loadBalancer = front.loadBalancer;
    this.targetGroup = front.targetGroup;
    this.endpoint = `${config.provisioning.domainName}:443`;
  }

  /**
   * The VPC (no NAT: isolated task subnets, flow logs), the security groups of the NLB, the tasks
   * and the interface endpoints, and the endpoints themselves (gateways limited by policy).
   */
  private network(props: ProvisioningProps, prefix: string, removalPolicy: RemovalPolicy) {
    const { config } = props;
    const p = config.provisioning;
    const stack = Stack.of(this);
    const flowLogs = new LogGroup(this, 'FlowLogs', {
      retention: logRetention(config.logRetentionDays),
      removalPolicy,
    });
    const vpc = new Vpc(this, 'Vpc', {
      ipAddresses: IpAddresses.cidr('10.40.0.0/16'),
      // Two AZs from the stack (lib/service-stack.ts): configured, or Fn::GetAZs; never a lookup.
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [
        { name: 'public', subnetType: SubnetType.PUBLIC, cidrMask: 24, mapPublicIpOnLaunch: false },
        { name: 'tasks', subnetType: SubnetType.PRIVATE_ISOLATED, cidrMask: 22 },
      ],
      restrictDefaultSecurityGroup: true,
      flowLogs: {
        all: { destination: FlowLogDestination.toCloudWatchLogs(flowLogs), trafficType: FlowLogTrafficType.ALL },
      },
    });

    const nlbSecurityGroup = new SecurityGroup(this, 'NlbSecurityGroup', {
      vpc,
      description: `${prefix}: gRPC clients to the NLB (TLS 443)`,
      allowAllOutbound: false,
    });
    for (const cidr of p.allowedCidrs) nlbSecurityGroup.addIngressRule(Peer.ipv4(cidr), Port.tcp(443), 'gRPC over TLS');
    const taskSecurityGroup = new SecurityGroup(this, 'TaskSecurityGroup', {
      vpc,
      description: `${prefix}: gRPC tasks, reachable from the NLB only`,
      // The isolated subnets route nowhere but to the VPC endpoints.
      allowAllOutbound: true,
    });
    taskSecurityGroup.connections.allowFrom(nlbSecurityGroup, Port.tcp(GRPC_PORT), 'gRPC (plaintext h2) from the NLB');
    taskSecurityGroup.connections.allowFrom(nlbSecurityGroup, Port.tcp(HEALTH_PORT), 'HTTP health checks from the NLB');

    // Interface endpoints, reachable from the tasks only (not from the whole VPC).
    const endpointSecurityGroup = new SecurityGroup(this, 'EndpointSecurityGroup', {
      vpc,
      description: `${prefix}: VPC interface endpoints (KMS, ECR, Logs), from the gRPC tasks only`,
      allowAllOutbound: false,
    });
    endpointSecurityGroup.connections.allowFrom(taskSecurityGroup, Port.tcp(443), 'HTTPS from the gRPC tasks');
    for (const [name, service] of [
      ['Kms', InterfaceVpcEndpointAwsService.KMS],
      ['EcrApi', InterfaceVpcEndpointAwsService.ECR],
      ['EcrDocker', InterfaceVpcEndpointAwsService.ECR_DOCKER],
      ['Logs', InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS],
    ] as const) {
      vpc.addInterfaceEndpoint(name, {
        service,
        subnets: ISOLATED,
        privateDnsEnabled: true,
        open: false,
        securityGroups: [endpointSecurityGroup],
      });
    }

    // Gateway endpoints, each limited by its policy to what the tasks need.
    const dynamo = vpc.addGatewayEndpoint('DynamoDb', {
      service: GatewayVpcEndpointAwsService.DYNAMODB,
      subnets: [ISOLATED],
    });
    dynamo.addToPolicy(
      new PolicyStatement({
        principals: [new AnyPrincipal()],
        // The union of what the task is granted (lib/access.ts), on this environment's tables only.
        actions: [
          ...new Set(
            Object.values(access.provisioning.tables).flatMap((table) => [
              ...table.actions,
              ...(table.queryIndexes?.length ? ['Query'] : []),
            ]),
          ),
        ].map((action) => `dynamodb:${action}`),
        resources: [stack.formatArn({ service: 'dynamodb', resource: 'table', resourceName: `${props.tablePrefix}*` })],
      }),
    );
    const s3 = vpc.addGatewayEndpoint('S3', { service: GatewayVpcEndpointAwsService.S3, subnets: [ISOLATED] });
    s3.addToPolicy(
      new PolicyStatement({
        principals: [new AnyPrincipal()],
        actions: ['s3:GetObject'],
        // Where ECR keeps image layers (AWS documentation: "Amazon ECR interface VPC endpoints").
        resources: [`arn:${stack.partition}:s3:::prod-${stack.region}-starport-layer-bucket/*`],
      }),
    );
    return { vpc, nlbSecurityGroup, taskSecurityGroup };
  }

  /** The task definition, its log group and its container (image, environment, health, stop), with its grants. */
  private task(props: ProvisioningProps, prefix: string, removalPolicy: RemovalPolicy) {
    const { config } = props;
    const p = config.provisioning;
    const taskDefinition = new FargateTaskDefinition(this, 'Task', {
      family: `${prefix}-provisioning`,
      cpu: p.cpu,
      memoryLimitMiB: p.memoryMiB,
      runtimePlatform: { cpuArchitecture: CpuArchitecture.ARM64, operatingSystemFamily: OperatingSystemFamily.LINUX },
    });
    const taskLogs = new LogGroup(this, 'TaskLogs', {
      logGroupName: `/aws/ecs/${prefix}/provisioning`,
      retention: logRetention(config.logRetentionDays),
      removalPolicy,
    });
    const container = taskDefinition.addContainer('grpc', {
      // Built from the repository root like `docker build -f grpc-service/Dockerfile .`; at synth
      // the context is only staged into cdk.out (no Docker needed), `cdk deploy` builds it.
      image: ContainerImage.fromAsset(repoRoot, {
        file: 'grpc-service/Dockerfile',
        platform: Platform.LINUX_ARM64,
        // On top of .dockerignore: what the image never needs, kept out of the asset hash.
        exclude: [
          'cdk.out',
          'test',
          'bench',
          'bin',
          'lib',
          'local',
          'lambdas',
          'README.md',
          'docs',
          '.ci',
          'coverage',
          '*.log',
        ],
      }),
      logging: LogDrivers.awsLogs({ streamPrefix: 'grpc', logGroup: taskLogs }),
      environment: {
        ...props.environment,
        ...macKeyEnvironment(access.provisioning, props.macKeys),
        GRPC_PORT: String(GRPC_PORT),
        HEALTH_PORT: String(HEALTH_PORT),
        // Reflection only for provisioning clients' tokens: the NLB is reachable from allowedCidrs
        // (docs/grpc-api.md#limits).
        GRPC_REFLECTION: 'token',
        // What clients dial (the NLB's name): DPoP proofs' htu starts with it, whatever :authority says.
        GRPC_ORIGIN: `https://${p.domainName}`,
        DRAIN_SECONDS: String(p.drainSeconds),
        SERVICE_NAME: TASK_SERVICE_NAME,
      },
      portMappings: [
        { containerPort: GRPC_PORT, protocol: EcsProtocol.TCP, name: 'grpc' },
        { containerPort: HEALTH_PORT, protocol: EcsProtocol.TCP, name: 'health' },
      ],
      healthCheck: {
        command: containerHealthCommand(),
        interval: Duration.seconds(TARGET_HEALTH_CHECK.intervalSeconds),
        timeout: Duration.seconds(TARGET_HEALTH_CHECK.timeoutSeconds),
        retries: TARGET_HEALTH_CHECK.unhealthyThreshold,
        // Start-up (configuration, KMS public keys) before failures count.
        startPeriod: Duration.seconds(15),
      },
      // SIGTERM, then DRAIN_SECONDS for calls in flight, then SIGKILL at stopTimeout.
      stopTimeout: Duration.seconds(p.stopTimeoutSeconds),
      readonlyRootFilesystem: true,
    });
    grantTableAccess(taskDefinition.taskRole, 'provisioning', props.tables);
    props.keys.grant(taskDefinition.taskRole, access.provisioning.keys);
    grantMacKeys(taskDefinition.taskRole, access.provisioning, props.macKeys);

    return { taskDefinition, taskLogs, container };
  }

  /** The Fargate service in the isolated subnets: rolling deploys with circuit-breaker rollback, CPU scaling. */
  private fargateService(props: ProvisioningProps, prefix: string, taskDefinition: FargateTaskDefinition) {
    const p = props.config.provisioning;
    const { cluster, taskSecurityGroup } = this;
    const service = new FargateService(this, 'Service', {
      serviceName: `${prefix}-provisioning`,
      cluster,
      taskDefinition,
      desiredCount: p.minTasks,
      vpcSubnets: ISOLATED,
      assignPublicIp: false,
      securityGroups: [taskSecurityGroup],
      platformVersion: FargatePlatformVersion.LATEST,
      circuitBreaker: { enable: true, rollback: true },
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
      healthCheckGracePeriod: Duration.seconds(30),
      enableECSManagedTags: true,
      propagateTags: PropagatedTagSource.SERVICE,
    });
    service.autoScaleTaskCount({ minCapacity: p.minTasks, maxCapacity: p.maxTasks }).scaleOnCpuUtilization('Cpu', {
      targetUtilizationPercent: p.cpuTargetPercent,
      scaleOutCooldown: Duration.seconds(60),
      scaleInCooldown: Duration.seconds(300),
    });

    return service;
  }

  /** The internet-facing NLB (TLS 443, ALPN h2) with its access logs, the tasks' target group and the DNS record. */
  private loadBalancing(
    props: ProvisioningProps,
    prefix: string,
    removalPolicy: RemovalPolicy,
    nlbSecurityGroup: SecurityGroup,
  ) {
    const { config } = props;
    const p = config.provisioning;
    const { vpc, service } = this;
    const accessLogs = new Bucket(this, 'NlbAccessLogs', {
      encryption: BucketEncryption.S3_MANAGED,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      lifecycleRules: [{ expiration: Duration.days(config.logRetentionDays) }],
      // Production keeps its access logs (audit records; the lifecycle rule expires them). The
      // sandbox's go with the stack: empty the bucket first (docs/deploying.md, "Operate").
      removalPolicy,
    });

    const loadBalancer = new NetworkLoadBalancer(this, 'Nlb', {
      loadBalancerName: `${prefix}-grpc`,
      vpc,
      internetFacing: true,
      vpcSubnets: { subnetType: SubnetType.PUBLIC },
      securityGroups: [nlbSecurityGroup],
      crossZoneEnabled: true,
      deletionProtection: config.deletionProtection,
    });
    loadBalancer.logAccessLogs(accessLogs, 'nlb');

    const targetGroup = new NetworkTargetGroup(this, 'Targets', {
      vpc,
      port: GRPC_PORT,
      // TLS terminates at the NLB; the targets get the decrypted HTTP/2 stream over TCP.
      protocol: Protocol.TCP,
      targetType: TargetType.IP,
      preserveClientIp: false,
      // ECS deregisters a stopping task first, waits this long, then sends SIGTERM; the server then
      // answers GOAWAY and drains for DRAIN_SECONDS. The same figure keeps the two phases aligned.
      deregistrationDelay: Duration.seconds(p.drainSeconds),
      connectionTermination: false,
      // NLB health checks speak TCP or HTTP, not gRPC: HTTP to the task's health endpoint, which
      // answers from grpc.health.v1 (TARGET_HEALTH_CHECK). Clients ask grpc.health.v1.Health/Check
      // through the listener.
      healthCheck: {
        protocol: Protocol.HTTP,
        port: String(TARGET_HEALTH_CHECK.port),
        path: TARGET_HEALTH_CHECK.path,
        healthyHttpCodes: '200',
        interval: Duration.seconds(TARGET_HEALTH_CHECK.intervalSeconds),
        timeout: Duration.seconds(TARGET_HEALTH_CHECK.timeoutSeconds),
        healthyThresholdCount: TARGET_HEALTH_CHECK.healthyThreshold,
        unhealthyThresholdCount: TARGET_HEALTH_CHECK.unhealthyThreshold,
      },
    });
    targetGroup.addTarget(service.loadBalancerTarget({ containerName: 'grpc', containerPort: GRPC_PORT }));

    loadBalancer.addListener('Tls', {
      port: 443,
      protocol: Protocol.TLS,
      certificates: [ListenerCertificate.fromArn(p.certificateArn)],
      sslPolicy: SslPolicy.RECOMMENDED_TLS,
      // gRPC is HTTP/2 only; clients negotiate h2 by ALPN.
      alpnPolicy: AlpnPolicy.HTTP2_ONLY,
      defaultTargetGroups: [targetGroup],
    });

    if (p.hostedZone) aliasRecord(this, 'GrpcRecord', p.hostedZone, p.domainName, new LoadBalancerTarget(loadBalancer));
    return { loadBalancer, targetGroup };
  }

  /**
   * The tasks' wake-ups go through `engine`: they subscribe to the inboxes their streams watch and
   * publish what they store (owner wake-ups too), signed in by IAM with the task role.
   */
  useWakeupEngine(engine: WakeupEngine): void {
    for (const [name, value] of Object.entries({ ...engine.environment, AWS_REGION: Stack.of(this).region }))
      this.container.addEnvironment(name, value);
    engine.grantConnect(this.service.taskDefinition.taskRole);
    engine.allowFrom(this.taskSecurityGroup, 'gRPC tasks (TLS)');
  }
}
