import { Validations, type Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import { routeGroupNames } from '../lambdas/manifest';
import type { EnvironmentConfig } from './config';

// Every cdk-nag (AwsSolutions pack) finding this project accepts, with its reason. cdk-nag 3
// records acknowledgments through CDK's own `Validations.of(construct).acknowledge()`; an
// acknowledgment covers the construct and everything below it. Each one names a construct path
// that must exist, so a suppression cannot silently outlive what it was written for.

/** How cdk-nag names an AWS managed policy of a service role in its finding ids. */
const SERVICE_ROLE_POLICY = 'arn:<AWS::Partition>:iam::aws:policy/service-role';

export interface Acknowledgment {
  /** Construct path below the stack, e.g. `Http/Api`. */
  readonly path: string;
  /** Rule id, with the finding in brackets where the rule reports several (IAM4, IAM5). */
  readonly id: string;
  readonly reason: string;
}

export function acknowledgments(config: EnvironmentConfig): Acknowledgment[] {
  // Construct ids of the route group functions and roles: BrowserFunction, BrowserRole, …
  const groups = routeGroupNames.map((group) => `${group[0]!.toUpperCase()}${group.slice(1)}`);
  const list: Acknowledgment[] = [
    {
      path: 'Http/Api',
      id: 'AwsSolutions-APIG2',
      reason:
        "Every handler validates its own input and answers in the protocol's format (RFC 6749/6750 JSON errors, " +
        'error pages); ' +
        'an API Gateway validator would answer with its own non-OAuth body and cannot express the rules (repeated ' +
        'parameters, lengths, PKCE).',
    },
    {
      path: 'Http/Api',
      id: 'AwsSolutions-APIG4',
      reason:
        'These are the OAuth 2.0 / OpenID Connect endpoints and the sign-in pages: they authenticate at the ' +
        'protocol level ' +
        '(PKCE, client secrets, bearer access tokens, session cookies) and must be reachable without an API ' +
        'Gateway authorizer. ' +
        '/api/resolve and /api/discover are public by specification and rate-limited per IP by the WAF.',
    },
    {
      path: 'Http/Api',
      id: 'AwsSolutions-COG4',
      reason:
        'This service is itself the identity provider; a Cognito user pool authorizer does not apply to its OAuth ' +
        'endpoints (see APIG4).',
    },
    {
      path: 'Http/Api/CloudWatchRole',
      id: `AwsSolutions-IAM4[Policy::${SERVICE_ROLE_POLICY}/AmazonAPIGatewayPushToCloudWatchLogs]`,
      reason:
        'The account-level role API Gateway needs to write execution logs (ERROR level; APIG6). AWS documents this ' +
        'managed policy for it; ' +
        'it grants CloudWatch Logs writes only.',
    },
    ...groups.map((name) => ({
      path: `Http/${name}Function`,
      id: 'AwsSolutions-L1',
      reason:
        'nodejs22.x is chosen deliberately: the design targets Node 22 in Lambda and in the Fargate image (node:22) ' +
        'while CI runs Node 20, so one code base runs on all three. Moving to nodejs24.x is a separate, tested change.',
    })),
    {
      path: 'PublicKeys/Function',
      id: 'AwsSolutions-L1',
      reason:
        "The deploy-time custom resource that publishes the signing keys' public keys runs on nodejs22.x like the " +
        'route group ' +
        'functions (see their L1 acknowledgment); it runs once per deploy that changes the key set.',
    },
    {
      path: 'Provisioning/Task/ExecutionRole',
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'ecr:GetAuthorizationToken has no resource-level permissions (IAM reference: resource type "*"); ' +
        'the image pull itself (ecr:BatchGetImage, GetDownloadUrlForLayer, BatchCheckLayerAvailability) is limited ' +
        'to the asset repository.',
    },
    {
      path: 'Provisioning/Task',
      id: 'AwsSolutions-ECS2',
      reason:
        'The environment holds configuration only (issuer URL, table prefix, KMS key ARNs, ports, log level), no ' +
        'secret: ' +
        'the service has no secret of its own (signing is done by KMS, tables are reached with the task role).',
    },
    {
      path: 'Provisioning/NlbAccessLogs',
      id: 'AwsSolutions-S1',
      reason:
        'This bucket receives the NLB access logs; logging access to it into yet another bucket would only add a ' +
        'bucket without ' +
        'an audit need (it is private, SSL-only, versionless, objects expire with the log retention).',
    },
  ];
  list.push(
    {
      path: 'Wakeups/ReplicationGroup',
      id: 'AwsSolutions-AEC6',
      reason:
        'The engine authenticates by IAM through RBAC (a user group whose only enabled user has authentication ' +
        'type iam; the default ' +
        'user is off), which replaces the Redis AUTH token this rule looks for: no password exists to leak or ' +
        'rotate, and each connection is ' +
        'signed by the task role or the relay role (elasticache:Connect on this replication group and user only).',
    },
    {
      path: 'WakeupRelay/Function',
      id: 'AwsSolutions-L1',
      reason: 'The wake-up relay runs on nodejs22.x like the route group functions (see their L1 acknowledgment).',
    },
    {
      path: 'WakeupRelay/Role',
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'dynamodb:ListStreams, which the Lambda event source mapping needs, is granted on "*" by CDK\'s stream ' +
        'grant: it lists stream ARNs ' +
        'and reads nothing; reading the stream (DescribeStream, GetRecords, GetShardIterator) is limited to the ' +
        "messages table's stream. " +
        'The EC2 network-interface actions Lambda needs for a function in a VPC are on "*": the Describe actions ' +
        'have no resource type and ' +
        "the interfaces are Lambda's, unknown to the template (the EC2 part of AWSLambdaVPCAccessExecutionRole, " +
        'without its logs actions on every log group).',
    },
    {
      path: 'Monitoring/WakeupEngineEvents/EventsRole',
      id: 'AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
      reason:
        'The role EventBridge publishes ElastiCache events with: SNS encrypts each message with a data key of the ' +
        "topic's key " +
        '(kms:GenerateDataKey* as the SNS documentation gives it), on that one key only.',
    },
  );
  if (config.wakeups.replicas === 0) {
    list.push({
      path: 'Wakeups/ReplicationGroup',
      id: 'AwsSolutions-AEC4',
      reason:
        'One node in this environment by choice (lib/config.ts wakeups.replicas): the engine stores nothing, and ' +
        'while it is down or ' +
        "replaced, wake-ups fall back to the streams' safety-net poll (delivery slower, nothing lost). Production " +
        'runs a replica in a second AZ.',
    });
  }
  if (config.lambdaReleases.traffic === 'canary') {
    list.push({
      path: 'Releases/DeployRole',
      id: `AwsSolutions-IAM4[Policy::${SERVICE_ROLE_POLICY}/AWSCodeDeployRoleForLambdaLimited]`,
      reason:
        'The role CodeDeploy assumes to shift the live aliases (lib/releases.ts). AWS documents this managed ' +
        'policy for Lambda deployments: ' +
        'read and update aliases, read alarms, invoke hook functions named CodeDeployHook_*; it grants no data or ' +
        'key access.',
    });
  }
  if (config.http.tracing) {
    for (const name of groups) {
      list.push({
        path: `Http/${name}Role`,
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level ' +
          'permissions, so ' +
          'their resource is "*". Every other statement of this role names its log group, tables, indexes or keys.',
      });
    }
  }
  if (config.provisioning.allowedCidrs.some((cidr) => cidr.endsWith('/0'))) {
    list.push({
      path: 'Provisioning/NlbSecurityGroup',
      id: 'AwsSolutions-EC23',
      reason:
        "The provisioning API is a public, internet-facing gRPC endpoint for partners' backends: port 443 only, " +
        'TLS at the NLB, ' +
        'every call authenticated with a client-credentials bearer token. Restrict grpc.allowedCidrs in the ' +
        'settings file where ' +
        "the callers' addresses are known.",
    });
  }
  return list;
}

/** Applies the acknowledgments; a path that does not exist is an error. */
export function applyNagSuppressions(stack: Stack, config: EnvironmentConfig): void {
  for (const acknowledgment of acknowledgments(config)) {
    const target = findPath(stack, acknowledgment.path);
    if (!target)
      throw new Error(
        `cdk-nag acknowledgment ${acknowledgment.id}: no construct ${stack.stackName}/${acknowledgment.path}`,
      );
    Validations.of(target).acknowledge({ id: acknowledgment.id, reason: acknowledgment.reason });
  }
}

function findPath(root: IConstruct, path: string): IConstruct | undefined {
  let current: IConstruct | undefined = root;
  for (const id of path.split('/')) current = current?.node.tryFindChild(id);
  return current;
}
