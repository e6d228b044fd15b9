import { describe, expect, it } from 'vitest';
import { routeGroupNames } from '../../lambdas/manifest';
import { access, keyActions, type ComputeUnit } from '../../lib/access';
import { environmentNames, type EnvironmentName } from '../../lib/config';
import { KEY_ADMIN_ACTIONS } from '../../lib/keys';
import type { ServiceStack } from '../../lib/service-stack';
import { list, logicalId, resources, synthesizeForFile, type Json, type Statement } from './support';

// Least privilege in both stacks, from their templates: every "*" left in a policy (IAM policies,
// roles' AWS managed policies, key policies, topic, bucket and VPC endpoint policies) is in the
// allowlist below with its reason, and anything new fails; the key policies of the signing keys
// and the two HMAC keys let the account administer them and name exactly the roles lib/access.ts
// gives a use.

const synth = synthesizeForFile({ bundle: false });

/**
 * Where a "*" may stay, and why. Each entry names a policy (its logical id without the hash, or a key's role), the
 * principal and the actions.
 */
interface Allowed {
  readonly policy: string;
  readonly effect?: 'Allow' | 'Deny';
  /** `account` (its root), `role` (a role of the stack), `*`, a service principal, or '' in an IAM policy. */
  readonly principal?: string;
  readonly actions: readonly string[];
  /** As rendered: `*`, or the ARN with <account>, <region>, <env> and <LogicalId.Attribute> placeholders. */
  readonly resource: string;
  readonly reason: string;
}

const ADMIN = '<key administration>';
const KEY_RESOURCE = 'A key policy\'s Resource "*" is the key itself.';
const XRAY =
  'X-Ray active tracing (lib/config.ts http.tracing): xray:PutTraceSegments and PutTelemetryRecords have no resource type.';

const allowlist: readonly Allowed[] = [
  // IAM policies of our roles.
  ...routeGroupNames.map((group) => ({
    policy: `Http${group[0]!.toUpperCase()}${group.slice(1)}RoleDefaultPolicy`,
    actions: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'],
    resource: '*',
    reason: XRAY,
  })),
  {
    policy: 'ProvisioningTaskExecutionRoleDefaultPolicy',
    actions: ['ecr:GetAuthorizationToken'],
    resource: '*',
    reason: 'ecr:GetAuthorizationToken has no resource type; the image pull itself is limited to the asset repository.',
  },
  {
    policy: 'WakeupRelayRoleDefaultPolicy',
    actions: ['dynamodb:ListStreams'],
    resource: '*',
    reason:
      "The event source mapping lists stream ARNs (CDK's stream grant; ListStreams has no resource type); it reads only the messages table's stream.",
  },
  {
    policy: 'WakeupRelayRoleDefaultPolicy',
    actions: [
      'ec2:CreateNetworkInterface',
      'ec2:DescribeNetworkInterfaces',
      'ec2:DescribeSubnets',
      'ec2:DeleteNetworkInterface',
      'ec2:AssignPrivateIpAddresses',
      'ec2:UnassignPrivateIpAddresses',
    ],
    resource: '*',
    reason:
      "Lambda attaches the relay to the VPC with its role: the Describe actions have no resource type, the interfaces are Lambda's and unknown to the template.",
  },
  // AWS managed policies (their statements are AWS's, on "*").
  {
    policy: 'CustomVpcRestrictDefaultSGCustomResourceProviderRole',
    actions: ['service-role/AWSLambdaBasicExecutionRole'],
    resource: '*',
    reason:
      'CDK\'s provider that empties the VPC\'s default security group (restrictDefaultSecurityGroup): logs on "*", its own role, runs at deploy.',
  },
  {
    policy: 'HttpApiCloudWatchRole',
    actions: ['service-role/AmazonAPIGatewayPushToCloudWatchLogs'],
    resource: '*',
    reason:
      "API Gateway's account-level logging role (execution logs at ERROR): the policy AWS documents for it, logs only.",
  },
  {
    policy: 'MonitoringWakeupEngineEventsEventsRoleDefaultPolicy',
    actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
    resource: '<MonitoringTopicKey.Arn>',
    reason:
      "The role EventBridge publishes ElastiCache events with: SNS encrypts with a data key of the topic's key (GenerateDataKey* as SNS documents it), that one key only.",
  },
  {
    policy: 'ReleasesDeployRole',
    actions: ['service-role/AWSCodeDeployRoleForLambdaLimited'],
    resource: '*',
    reason:
      'CodeDeploy shifting the live aliases of canary releases (production): the policy AWS documents for Lambda deployments, acknowledged in lib/nag.ts.',
  },
  // Key policies of the signing keys and the HMAC keys: the account administers, the roles of lib/access.ts use.
  ...(['signing-key', 'sign-in-mac-key', 'page-token-key'] as const).map((key) => ({
    policy: key,
    principal: 'account',
    actions: [ADMIN],
    resource: '*',
    reason: `${KEY_RESOURCE} The account administers the key (lib/keys.ts KEY_ADMIN_ACTIONS), never uses it.`,
  })),
  {
    policy: 'signing-key',
    principal: 'role',
    actions: ['kms:Sign', 'kms:GetPublicKey'],
    resource: '*',
    reason: `${KEY_RESOURCE} The roles lib/access.ts lets sign or verify (the key-policy test below names them).`,
  },
  {
    policy: 'sign-in-mac-key',
    principal: 'role',
    actions: ['kms:GenerateMac', 'kms:VerifyMac'],
    resource: '*',
    reason: `${KEY_RESOURCE} The pages' role only (lib/access.ts mac).`,
  },
  {
    policy: 'page-token-key',
    principal: 'role',
    actions: ['kms:GenerateMac'],
    resource: '*',
    reason: `${KEY_RESOURCE} discover's and the task's roles (lib/access.ts pageTokenMac).`,
  },
  // The alarm topic's key and policy.
  {
    policy: 'topic-key',
    principal: 'account',
    actions: ['kms:*'],
    resource: '*',
    reason: `${KEY_RESOURCE} It encrypts alarm notifications only; the account keeps IAM-delegated use of it (test publishes, new publishers).`,
  },
  {
    policy: 'topic-key',
    principal: 'cloudwatch.amazonaws.com',
    actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
    resource: '*',
    reason: `${KEY_RESOURCE} CloudWatch encrypts alarm notifications (GenerateDataKey* as AWS documents it), for this account's alarms in this region only.`,
  },
  {
    policy: 'MonitoringAlarmTopicPolicy',
    effect: 'Deny',
    principal: '*',
    actions: ['sns:Publish'],
    resource: '<MonitoringAlarmTopic>',
    reason: 'enforceSSL: nobody publishes over plain HTTP.',
  },
  // The NLB access-log bucket.
  {
    policy: 'ProvisioningNlbAccessLogsPolicy',
    effect: 'Deny',
    principal: '*',
    actions: ['s3:*'],
    resource: '<ProvisioningNlbAccessLogs.Arn>',
    reason: 'enforceSSL: no request over plain HTTP, from anyone.',
  },
  {
    policy: 'ProvisioningNlbAccessLogsPolicy',
    effect: 'Deny',
    principal: '*',
    actions: ['s3:*'],
    resource: '<ProvisioningNlbAccessLogs.Arn>/*',
    reason: 'enforceSSL: no request over plain HTTP, from anyone.',
  },
  {
    policy: 'ProvisioningNlbAccessLogsPolicy',
    principal: '<elb-account>',
    actions: ['s3:PutObject'],
    resource: '<ProvisioningNlbAccessLogs.Arn>/nlb/AWSLogs/<account>/*',
    reason:
      "Access logs: the region's Elastic Load Balancing account writes log objects (names it chooses) under this account's prefix.",
  },
  {
    policy: 'ProvisioningNlbAccessLogsPolicy',
    principal: 'delivery.logs.amazonaws.com',
    actions: ['s3:PutObject'],
    resource: '<ProvisioningNlbAccessLogs.Arn>/nlb/AWSLogs/<account>/*',
    reason: "Access logs: log delivery writes log objects (names it chooses) under this account's prefix.",
  },
  // VPC gateway endpoints: their policy limits what any principal in the VPC reaches through them.
  {
    policy: 'ProvisioningVpcDynamoDb',
    principal: '*',
    actions: [
      'dynamodb:BatchGetItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
    ],
    resource: 'arn:aws:dynamodb:<region>:<account>:table/svcnum-<env>-*',
    reason:
      "The endpoint reaches this environment's tables (and their indexes) only, with the task's actions; who may do what is the roles' policies.",
  },
  {
    policy: 'ProvisioningVpcS3',
    principal: '*',
    actions: ['s3:GetObject'],
    resource: 'arn:aws:s3:::prod-<region>-starport-layer-bucket/*',
    reason: 'ECR\'s image layers (AWS documentation, "Amazon ECR interface VPC endpoints"); reads only.',
  },
];

/** The allowlist as one line per principal, action and resource. */
const allowedLines = () =>
  new Map(
    allowlist.flatMap((entry) =>
      entry.actions.map(
        (action) =>
          [
            line(entry.policy, entry.effect ?? 'Allow', entry.principal ?? '', action, entry.resource),
            entry.reason,
          ] as const,
      ),
    ),
  );

const line = (policy: string, effect: string, principal: string, action: string, resource: string) =>
  `${policy}: ${effect}${principal ? ` ${principal}` : ''} ${action} on ${resource}`;

const stripHash = (logicalId: string) => logicalId.replace(/[0-9A-F]{8}$/, '');

/**
 * Every policy document of a template, named: identity policies, roles' inline and AWS managed policies, and resource
 * policies.
 */
function policyDocuments(template: Record<string, Json>, keyNames: Map<string, string>) {
  const found: Array<{ policy: string; statements: Statement[] }> = [];
  const statementsOf = (document: unknown) =>
    list((document as { Statement?: Statement | Statement[] } | undefined)?.Statement);
  for (const [id, resource] of Object.entries(template)) {
    const properties = (resource.Properties ?? {}) as Json;
    const type = resource.Type as string;
    if (type === 'AWS::KMS::Key')
      found.push({ policy: keyNames.get(id) ?? stripHash(id), statements: statementsOf(properties.KeyPolicy) });
    if (properties.PolicyDocument) {
      const document =
        typeof properties.PolicyDocument === 'string'
          ? (JSON.parse(properties.PolicyDocument) as unknown)
          : properties.PolicyDocument;
      found.push({ policy: stripHash(id), statements: statementsOf(document) });
    }
    if (type === 'AWS::IAM::Role') {
      for (const inline of list(properties.Policies as Array<{ PolicyDocument: unknown }> | undefined))
        found.push({ policy: stripHash(id), statements: statementsOf(inline.PolicyDocument) });
      // An AWS managed policy's statements are not in the template: each is listed as a whole.
      for (const arn of list(properties.ManagedPolicyArns as unknown[] | undefined)) {
        found.push({
          policy: stripHash(id),
          statements: [
            {
              Effect: 'Allow',
              Action: JSON.stringify(arn)
                .replace(/.*:policy\//, '')
                .replace(/"\]*\}*$/, ''),
              Resource: '*',
            },
          ],
        });
      }
    }
  }
  return found;
}

/**
 * One line per principal, action and resource of every statement of `environment`'s stack with a "*" in any of the
 * three.
 */
function starLinesOf(stack: ServiceStack, environment: EnvironmentName): Set<string> {
  const config = synth.configs[environment];
  const keyNames = new Map<string, string>([
    // The RSA keys of RS256 ID tokens are signing keys alike (their users: the key-policy test below).
    ...[...stack.keys.all, ...stack.rsaKeys.all].map((key) => [logicalId(key), 'signing-key'] as [string, string]),
    [logicalId(stack.signInMac.key), 'sign-in-mac-key'],
    [logicalId(stack.pageTokenKey.key), 'page-token-key'],
    [logicalId(stack.monitoring.node.findChild('TopicKey')), 'topic-key'],
  ]);
  /**
   * A value of the template as text: tokens as <LogicalId> / <LogicalId.Attribute>, this environment's names as
   * placeholders.
   */
  const render = (value: unknown): string => {
    if (typeof value === 'string') {
      return value
        .replaceAll(config.account, '<account>')
        .replaceAll(config.region, '<region>')
        .replaceAll(`svcnum-${environment}`, 'svcnum-<env>');
    }
    const object = value as Json;
    if (object.Ref) return `<${stripHash(object.Ref as string)}>`;
    if (object['Fn::GetAtt'])
      return `<${(object['Fn::GetAtt'] as string[]).map((part, index) => (index === 0 ? stripHash(part) : part)).join('.')}>`;
    const join = object['Fn::Join'] as [string, unknown[]] | undefined;
    if (join) return join[1].map(render).join(join[0]);
    return JSON.stringify(value);
  };
  const principals = (principal: unknown): string[] => {
    if (principal === undefined) return [''];
    if (principal === '*') return ['*'];
    return Object.entries(principal as Record<string, unknown>).flatMap(([kind, values]) =>
      list(values).map((value) => {
        if (kind === 'Service') return value as string;
        const text = render(value);
        if (text === 'arn:aws:iam::<account>:root') return 'account';
        if (/^<[A-Za-z0-9]+Role[A-Za-z0-9]*\.Arn>$/.test(text)) return 'role';
        return text.replace(/^arn:aws:iam::[0-9]{12}:root$/, '<elb-account>');
      }),
    );
  };
  const lines = new Set<string>();
  const admin = new Set<string>(KEY_ADMIN_ACTIONS);
  for (const { policy, statements } of policyDocuments(
    synth.templates[environment].toJSON().Resources as Record<string, Json>,
    keyNames,
  )) {
    for (const statement of statements) {
      // A key use: the account principal, limited to one role by aws:PrincipalArn (lib/keys.ts grantKeyUse).
      const who = rolesOfCondition(statement).length ? ['role'] : principals(statement.Principal);
      const actions = list(statement.Action);
      const targets = list(statement.Resource).map(render);
      if (![...who, ...actions, ...targets].some((part) => part.includes('*'))) continue;
      for (const principal of who) {
        for (const action of actions) {
          for (const target of targets)
            lines.add(
              line(
                policy,
                statement.Effect,
                principal,
                principal === 'account' && admin.has(action) ? ADMIN : action,
                target,
              ),
            );
        }
      }
    }
  }
  return lines;
}

/** The roles a key-policy statement is limited to by `aws:PrincipalArn` (lib/keys.ts grantKeyUse). */
function rolesOfCondition(statement: Statement & { Condition?: unknown }): unknown[] {
  const condition = statement.Condition as { ArnEquals?: Record<string, unknown> } | undefined;
  return list(condition?.ArnEquals?.['aws:PrincipalArn']);
}

describe.each(environmentNames)('%s stack', (environment: EnvironmentName) => {
  const stack = () => synth.stacks[environment];
  const config = () => synth.configs[environment];
  const template = () => synth.templates[environment].toJSON().Resources as Record<string, Json>;

  it('has no "*" in any action, resource or principal but those listed with their reason', () => {
    const allowed = allowedLines();
    const unlisted = [...starLinesOf(stack(), environment)].filter((found) => !allowed.has(found));
    expect(unlisted).toStrictEqual([]);
  });

  it('lets the account administer the signing keys and HMAC keys, never use them; each use is granted to exactly the roles of lib/access.ts', () => {
    const roleOf = (unit: ComputeUnit) =>
      unit === 'provisioning'
        ? stack().provisioning.service.taskDefinition.taskRole
        : stack().http.functions[unit].role!;
    const units = Object.keys(access) as ComputeUnit[];
    const uses = (pick: (unit: ComputeUnit) => readonly string[] | undefined) =>
      units.flatMap((unit) => (pick(unit) ?? []).map((action) => `${logicalId(roleOf(unit))} ${action}`));
    const expected = {
      // The public-keys custom resource's role reads the public keys at deploy time (lib/public-keys.ts).
      signing: [
        ...uses((unit) => keyActions[access[unit].keys]),
        `${logicalId(stack().publicKeys.function.role!)} kms:GetPublicKey`,
      ],
      // The RSA keys of RS256 ID tokens: lib/access.ts `rsaKeys`, and the same deploy-time publisher.
      rsaSigning: [
        ...uses((unit) => keyActions[access[unit].rsaKeys ?? 'none']),
        `${logicalId(stack().publicKeys.function.role!)} kms:GetPublicKey`,
      ],
      signInMac: uses((unit) => access[unit].mac),
      pageToken: uses((unit) => access[unit].pageTokenMac),
    };
    const keys = {
      signing: stack().keys.all,
      rsaSigning: stack().rsaKeys.all,
      signInMac: [stack().signInMac.key],
      pageToken: [stack().pageTokenKey.key],
    };
    const root = `arn:aws:iam::${config().account}:root`;
    const useActions =
      /^kms:(\*|Sign|Verify|GetPublicKey|GenerateMac|VerifyMac|Encrypt|Decrypt|ReEncrypt|GenerateDataKey|DeriveSharedSecret|CreateGrant)/;
    const kmsKeys = resources(synth.templates[environment], 'AWS::KMS::Key');
    for (const [name, list_] of Object.entries(keys) as Array<[keyof typeof keys, typeof keys.signing]>) {
      for (const key of list_) {
        const statements = list(
          (kmsKeys[logicalId(key)]!.Properties!.KeyPolicy as { Statement: Statement[] }).Statement,
        ) as Array<Statement & { Condition?: unknown }>;
        const granted: string[] = [];
        let rootActions: string[] = [];
        for (const statement of statements) {
          expect(statement.Effect, name).toBe('Allow');
          expect(statement.Resource, name).toBe('*');
          expect(statement.NotAction, name).toBeUndefined();
          expect(list((statement.Principal as { AWS: unknown }).AWS), name).toStrictEqual([root]);
          const roles = rolesOfCondition(statement);
          if (roles.length === 0) {
            expect(statement.Condition, name).toBeUndefined();
            rootActions = [...rootActions, ...list(statement.Action)];
            continue;
          }
          // Exactly one condition: the role's ARN.
          expect(Object.keys(statement.Condition as object), name).toStrictEqual(['ArnEquals']);
          for (const role of roles) {
            const [roleId, attribute] = (role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'];
            expect(attribute, `${name}: ${JSON.stringify(role)}`).toBe('Arn');
            granted.push(...list(statement.Action).map((action) => `${roleId} ${action}`));
          }
        }
        expect(rootActions.sort(), name).toStrictEqual([...KEY_ADMIN_ACTIONS].sort());
        expect(
          rootActions.filter((action) => useActions.test(action)),
          name,
        ).toStrictEqual([]);
        expect(granted.sort(), name).toStrictEqual([...expected[name]].sort());
      }
    }
    // Who signs, at all: the token function and the gRPC task; RS256 ID tokens: the token function only.
    expect(expected.signing.filter((use) => use.endsWith('kms:Sign')).sort()).toStrictEqual(
      [logicalId(roleOf('token')), logicalId(roleOf('provisioning'))].map((role) => `${role} kms:Sign`).sort(),
    );
    expect(expected.rsaSigning.filter((use) => use.endsWith('kms:Sign'))).toStrictEqual([
      `${logicalId(roleOf('token'))} kms:Sign`,
    ]);
    // Who reads the RSA public keys: those that issue ID tokens, publish keys, or verify an id_token_hint.
    expect(expected.rsaSigning.filter((use) => use.endsWith('kms:GetPublicKey')).sort()).toStrictEqual(
      [roleOf('token'), roleOf('discovery'), roleOf('browser'), stack().publicKeys.function.role!]
        .map((role) => `${logicalId(role)} kms:GetPublicKey`)
        .sort(),
    );
  });

  it("lets CloudWatch use the topic key and publish to the topic for this account's alarms in this region only", () => {
    const fromOurAlarms = {
      StringEquals: { 'aws:SourceAccount': config().account },
      ArnLike: { 'aws:SourceArn': `arn:aws:cloudwatch:${config().region}:${config().account}:alarm:*` },
    };
    const cloudwatch = (statements: Array<Statement & { Condition?: unknown }>) =>
      statements.filter((statement) => JSON.stringify(statement.Principal).includes('cloudwatch.amazonaws.com'));
    const topicKey = template()[logicalId(stack().monitoring.node.findChild('TopicKey'))]!.Properties as {
      KeyPolicy: { Statement: Statement[] };
    };
    const topicPolicy = Object.values(resources(synth.templates[environment], 'AWS::SNS::TopicPolicy'))[0]!
      .Properties as { PolicyDocument: { Statement: Statement[] } };
    expect(
      cloudwatch(topicKey.KeyPolicy.Statement).map((statement) => [statement.Action, statement.Condition]),
    ).toStrictEqual([[['kms:Decrypt', 'kms:GenerateDataKey*'], fromOurAlarms]]);
    expect(
      cloudwatch(topicPolicy.PolicyDocument.Statement).map((statement) => [statement.Action, statement.Condition]),
    ).toStrictEqual([['sns:Publish', fromOurAlarms]]);
  });
});

describe('the allowlist', () => {
  it('has a reason for each entry, and no entry that neither stack needs any more', () => {
    const found = new Set(
      environmentNames.flatMap((environment) => [...starLinesOf(synth.stacks[environment], environment)]),
    );
    for (const [entry, reason] of allowedLines()) {
      expect(reason.length, entry).toBeGreaterThan(30);
      expect(found.has(entry), `stale: ${entry}`).toBe(true);
    }
  });
});
