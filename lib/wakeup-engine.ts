import { ArnFormat, Stack, Tags } from 'aws-cdk-lib';
import { Port, SecurityGroup, SubnetType, type IConnectable, type IVpc } from 'aws-cdk-lib/aws-ec2';
import { CfnReplicationGroup, CfnSubnetGroup, CfnUser, CfnUserGroup } from 'aws-cdk-lib/aws-elasticache';
import { PolicyStatement, type IGrantable } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import type { AwsVariable } from '../core/adapters/runtime-config';
import type { EnvironmentConfig } from './config';

// The pub/sub engine of inbox wake-ups (core/adapters/valkey-wakeups.ts): ElastiCache for Valkey in
// the VPC's isolated subnets, reachable on its port from the gRPC tasks and the relay Lambda only.
//
// - Cluster mode disabled, one shard: the adapter is a standalone client, and sharded pub/sub
//   (SPUBLISH/SSUBSCRIBE) works on one shard as it would on many; pub/sub traffic is far below what
//   one primary carries. Production has a replica in another AZ with automatic failover; the sandbox
//   one node (a lost engine only slows wake-ups to the streams' safety-net poll).
// - Valkey 8.0: the current major ElastiCache and CloudFormation accept (engine `valkey`), with
//   sharded pub/sub and IAM authentication (both need 7.2+).
// - TLS required and encryption at rest; a port of its own (not 6379).
// - Authentication by IAM, no password anywhere: an RBAC user of authentication type `iam`
//   (id = name, as IAM users must be), in a user group with the `default` user every group needs,
//   disabled. Processes sign in with IAM auth tokens (core/adapters/elasticache-iam.ts), allowed by
//   `elasticache:Connect` on this replication group and this user (grantConnect).
// - Nothing is stored (DynamoDB is the truth): no snapshots, nothing to back up or retain.

/** The engine's port: not the default 6379 (cdk-nag AwsSolutions-AEC5). */
export const WAKEUP_ENGINE_PORT = 6380;
export const WAKEUP_ENGINE_VERSION = '8.0';
/**
 * What the wake-up user may do: publish and subscribe on the wake-up channels (sharded pub/sub);
 * record and read the inboxes' heads (`head:*` keys only: the wake-up script, EVALSHA/EVAL, whose
 * GET, SET and SPUBLISH are checked against these same rules, and MGET); and what ioredis sends on
 * connecting (INFO for its ready check, CLIENT SETNAME, PING). test/wakeup-relay.test.ts runs the
 * adapter against a redis-server whose user has exactly this.
 */
export const WAKEUP_USER_ACCESS_STRING =
  'on ~head:* &inbox:* &owner:* -@all +spublish +ssubscribe +sunsubscribe +evalsha +eval +get +set +mget +ping ' +
  '+info +client|setname';

export interface WakeupEngineProps {
  readonly config: EnvironmentConfig;
  readonly vpc: IVpc;
}

export class WakeupEngine extends Construct {
  readonly securityGroup: SecurityGroup;
  readonly replicationGroup: CfnReplicationGroup;
  /** Also the host IAM auth tokens are signed for (VALKEY_IAM_AUTH). */
  readonly replicationGroupId: string;
  /** The RBAC user of the wake-ups (authentication type iam; VALKEY_USERNAME). */
  readonly user: CfnUser;
  readonly userId: string;
  /** rediss://<primary endpoint>:<port> (VALKEY_URL): the primary, which failover moves. */
  readonly url: string;
  private readonly replicationGroupArn: string;

  constructor(scope: Construct, id: string, props: WakeupEngineProps) {
    super(scope, id);
    const { config } = props;
    const prefix = `svcnum-${config.name}`;
    const w = config.wakeups;
    this.replicationGroupId = `${prefix}-wakeups`;
    this.userId = `svcnum-wakeups-${config.name}`;

    this.securityGroup = new SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `${prefix}: wake-up engine (Valkey), from the gRPC tasks and the wake-up relay only`,
      allowAllOutbound: false,
    });
    const subnetGroup = new CfnSubnetGroup(this, 'Subnets', {
      cacheSubnetGroupName: `${prefix}-wakeups`,
      description: `${prefix}: the isolated subnets of the gRPC tasks`,
      subnetIds: props.vpc.selectSubnets({ subnetType: SubnetType.PRIVATE_ISOLATED }).subnetIds,
    });

    // Every user group needs a user named `default`: ours is switched off (no sign-in, no command).
    const defaultUser = new CfnUser(this, 'DefaultUser', {
      engine: 'redis',
      userId: `${prefix}-wakeups-default`,
      userName: 'default',
      accessString: 'off -@all',
      authenticationMode: { Type: 'no-password-required' },
    });
    this.user = new CfnUser(this, 'User', {
      engine: 'redis',
      userId: this.userId,
      userName: this.userId,
      accessString: WAKEUP_USER_ACCESS_STRING,
      authenticationMode: { Type: 'iam' },
    });
    // Engine `redis` for the users and their group: what ElastiCache documents for RBAC on Valkey too.
    const userGroup = new CfnUserGroup(this, 'UserGroup', {
      engine: 'redis',
      userGroupId: `${prefix}-wakeups`,
      userIds: [defaultUser.userId, this.user.userId],
    });
    userGroup.addResourceDependency(defaultUser);
    userGroup.addResourceDependency(this.user);

    const failover = w.replicas > 0;
    this.replicationGroup = new CfnReplicationGroup(this, 'ReplicationGroup', {
      replicationGroupId: this.replicationGroupId,
      replicationGroupDescription: `${prefix}: inbox wake-ups (pub/sub only; DynamoDB holds the messages)`,
      engine: 'valkey',
      engineVersion: WAKEUP_ENGINE_VERSION,
      cacheNodeType: w.nodeType,
      // Cluster mode disabled: one shard, a primary and its replicas.
      numCacheClusters: 1 + w.replicas,
      automaticFailoverEnabled: failover,
      multiAzEnabled: failover,
      port: WAKEUP_ENGINE_PORT,
      cacheSubnetGroupName: subnetGroup.ref,
      securityGroupIds: [this.securityGroup.securityGroupId],
      transitEncryptionEnabled: true,
      transitEncryptionMode: 'required',
      atRestEncryptionEnabled: true,
      userGroupIds: [userGroup.userGroupId],
      // Nothing to keep: wake-ups live for milliseconds, the messages are in DynamoDB.
      snapshotRetentionLimit: 0,
      autoMinorVersionUpgrade: true,
      preferredMaintenanceWindow: 'sun:02:00-sun:03:00',
    });
    this.replicationGroup.addResourceDependency(userGroup);
    Tags.of(this).add('component', 'wakeups');

    this.url = `rediss://${this.replicationGroup.attrPrimaryEndPointAddress}:${WAKEUP_ENGINE_PORT}`;
    this.replicationGroupArn = Stack.of(this).formatArn({
      service: 'elasticache',
      resource: 'replicationgroup',
      resourceName: this.replicationGroupId,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
  }

  /** Lets `peer` reach the engine's port (the task's and the relay's security groups; nothing else). */
  allowFrom(peer: IConnectable, description: string): void {
    this.securityGroup.connections.allowFrom(peer, Port.tcp(WAKEUP_ENGINE_PORT), description);
  }

  /** IAM authentication: elasticache:Connect on this replication group and this user, nothing else. */
  grantConnect(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['elasticache:Connect'],
        resources: [this.replicationGroupArn, this.user.attrArn],
      }),
    );
  }

  /**
   * What a process needs to sign in (core/adapters/runtime-config.ts); AWS_REGION is Lambda's own, the task's is set
   * apart.
   */
  get environment(): Partial<Record<AwsVariable, string>> {
    return { VALKEY_URL: this.url, VALKEY_USERNAME: this.userId, VALKEY_IAM_AUTH: this.replicationGroupId };
  }
}
