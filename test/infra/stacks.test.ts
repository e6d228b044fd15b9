import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Stack, type CfnElement } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Alarm, Metric } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { build } from 'esbuild';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { tableDefinitions, tableNames, type TableDefinition, type TableKey } from '../../core/tables';
import { routeManifest, type RouteGroup } from '../../lambdas/manifest';
import { access, keyActions, type ComputeUnit } from '../../lib/access';
import { lambdaBundle } from '../../lib/bundling';
import { environmentNames, outputNames, stackName, tablePrefix, type EnvironmentName } from '../../lib/config';
import { PUBLIC_API_PATHS } from '../../lib/http-api';
import type { HmacKey } from '../../lib/keys';
import type { Key } from 'aws-cdk-lib/aws-kms';
import { acknowledgments } from '../../lib/nag';
import { ENGINE_EVENT_TYPES, notifyOperators } from '../../lib/monitoring';
import { containerHealthCommand, GRPC_PORT, HEALTH_PORT, TARGET_HEALTH_CHECK } from '../../lib/provisioning';
import { PUBLIC_KEYS_RESOURCE_TYPE } from '../../lib/public-keys';
import { repoRoot } from '../../lib/util';
import { iamStatements, list, logicalId, resourceName, resources, synthesizeForFile, type Json } from './support';
import { grpcImageEnvironment } from '../support/grpc-image';

// Both stacks, synthesized once (beforeAll) with the cdk-nag plugin on, checked resource by
// resource against the sources they are built from: core/tables.ts, lambdas/manifest.ts,
// lib/access.ts and lib/config.ts.

const synth = synthesizeForFile();

const groups = Object.keys(routeManifest) as RouteGroup[];
const tableKeys = Object.keys(tableDefinitions) as TableKey[];

describe.each(environmentNames)('%s stack', (environment: EnvironmentName) => {
  const template = () => synth.templates[environment];
  const stack = () => synth.stacks[environment];
  const config = () => synth.configs[environment];
  /** KMS_PUBLIC_KEYS as the template gives it: the deploy-time custom resource's attribute. */
  const publicKeysValue = () => ({
    'Fn::GetAtt': [logicalId(stack().publicKeys.node.findChild('Resource') as never), 'PublicKeys'],
  });

  it('is svcnum-<env> in the configured account and region', () => {
    expect(stack().stackName).toBe(stackName(environment));
    expect(stack().account).toBe(config().account);
    expect(stack().region).toBe(config().region);
  });

  describe('data', () => {
    it('has exactly the tables of core/tables.ts, named with the environment prefix', () => {
      template().resourceCountIs('AWS::DynamoDB::Table', tableKeys.length);
      const names = tableNames(tablePrefix(environment));
      for (const key of tableKeys) {
        template().hasResourceProperties('AWS::DynamoDB::Table', { TableName: names[key] });
      }
    });

    it('builds keys, indexes and TTL exactly from the definitions; on demand; PITR on', () => {
      const tables = resources(template(), 'AWS::DynamoDB::Table');
      for (const key of tableKeys) {
        const definition: TableDefinition = tableDefinitions[key];
        const table = tables[logicalId(stack().data.tables[key])]!.Properties!;
        const keySchema = (partitionKey: string, sortKey?: string) => [
          { AttributeName: partitionKey, KeyType: 'HASH' },
          ...(sortKey ? [{ AttributeName: sortKey, KeyType: 'RANGE' }] : []),
        ];
        expect(table.KeySchema, key).toStrictEqual(keySchema(definition.partitionKey, definition.sortKey));
        expect(table.BillingMode, key).toBe('PAY_PER_REQUEST');
        expect(table.PointInTimeRecoverySpecification, key).toStrictEqual({ PointInTimeRecoveryEnabled: true });
        // TTL where the definition has one, and nowhere else.
        if (definition.ttlAttribute)
          expect(table.TimeToLiveSpecification, key).toStrictEqual({
            AttributeName: definition.ttlAttribute,
            Enabled: true,
          });
        else expect(table.TimeToLiveSpecification, key).toBeUndefined();
        const indexes = (table.GlobalSecondaryIndexes as Json[] | undefined) ?? [];
        expect(
          indexes.map((index) => ({ name: index.IndexName, keys: index.KeySchema, projection: index.Projection })),
          key,
        ).toStrictEqual(
          (definition.indexes ?? []).map((index) => ({
            name: index.name,
            keys: keySchema(index.partitionKey, index.sortKey),
            projection: { ProjectionType: 'ALL' },
          })),
        );
        const attributes = new Set(
          [
            definition.partitionKey,
            definition.sortKey,
            ...(definition.indexes ?? []).flatMap((index) => [index.partitionKey, index.sortKey]),
          ].filter(Boolean),
        );
        expect(
          (table.AttributeDefinitions as Json[]).map((attribute) => attribute.AttributeName).sort(),
          key,
        ).toStrictEqual([...attributes].sort());
        expect(
          (table.AttributeDefinitions as Json[]).every((attribute) => attribute.AttributeType === 'S'),
          key,
        ).toBe(true);
      }
    });

    it(
      environment === 'production'
        ? 'retains every table, log group, key and bucket except after a failed create (a first deploy can be retried); tables deletion-protected'
        : 'lets every sandbox table, log group, key and bucket go with the stack',
      () => {
        const stateful = ['AWS::DynamoDB::Table', 'AWS::Logs::LogGroup', 'AWS::KMS::Key', 'AWS::S3::Bucket'];
        const expected =
          environment === 'production'
            ? { DeletionPolicy: 'RetainExceptOnCreate', UpdateReplacePolicy: 'Retain' }
            : { DeletionPolicy: 'Delete', UpdateReplacePolicy: 'Delete' };
        for (const type of stateful) {
          const found = Object.entries(resources(template(), type));
          expect(found.length, type).toBeGreaterThan(0);
          for (const [id, resource] of found) {
            expect(
              { DeletionPolicy: resource.DeletionPolicy, UpdateReplacePolicy: resource.UpdateReplacePolicy },
              `${type} ${id}`,
            ).toStrictEqual(expected);
          }
        }
        for (const table of Object.values(resources(template(), 'AWS::DynamoDB::Table'))) {
          expect(table.Properties!.DeletionProtectionEnabled).toBe(environment === 'production');
        }
      },
    );
  });

  describe('keys', () => {
    it('keeps the sign-in MAC key and the page-token key in KMS (two HMAC_256 / GENERATE_VERIFY_MAC keys), each named only for the units that use it', () => {
      const keys = resources(template(), 'AWS::KMS::Key');
      const arnOf = (construct: HmacKey) => ({ 'Fn::GetAtt': [logicalId(construct.key), 'Arn'] });
      for (const [construct, alias] of [
        [stack().signInMac, 'sign-in-mac'],
        [stack().pageTokenKey, 'page-token'],
      ] as const) {
        const key = keys[logicalId(construct.key)]!.Properties!;
        expect(key.KeySpec, alias).toBe('HMAC_256');
        expect(key.KeyUsage, alias).toBe('GENERATE_VERIFY_MAC');
        template().hasResourceProperties('AWS::KMS::Alias', {
          AliasName: `alias/svcnum-${environment}/${alias}`,
          TargetKeyId: arnOf(construct),
        });
      }
      expect(logicalId(stack().signInMac.key)).not.toBe(logicalId(stack().pageTokenKey.key));
      expect(Object.values(keys).filter((key) => key.Properties!.KeySpec === 'HMAC_256')).toHaveLength(2);
      const functions = resources(template(), 'AWS::Lambda::Function');
      for (const group of groups) {
        const variables = (
          functions[logicalId(stack().http.functions[group])]!.Properties!.Environment as { Variables: Json }
        ).Variables;
        // The sign-in MAC key for the pages only; the page-token key for discover and the token endpoint's DPoP nonces.
        expect(variables.MAC_KEY_ID, group).toStrictEqual(group === 'browser' ? arnOf(stack().signInMac) : undefined);
        const pageTokenKeyUsers = ['public', 'token'];
        expect(variables.PAGE_TOKEN_KEY_ID, group).toStrictEqual(
          pageTokenKeyUsers.includes(group) ? arnOf(stack().pageTokenKey) : undefined,
        );
      }
      // The gRPC task derives its page-token key from the page-token key, and never sees the sign-in MAC key.
      const [container] = Object.values(resources(template(), 'AWS::ECS::TaskDefinition'))[0]!.Properties!
        .ContainerDefinitions as Json[];
      const taskVariable = (name: string) =>
        (container!.Environment as Array<{ Name: string; Value: unknown }>).find((variable) => variable.Name === name)
          ?.Value;
      expect(taskVariable('PAGE_TOKEN_KEY_ID')).toStrictEqual(arnOf(stack().pageTokenKey));
      expect(taskVariable('MAC_KEY_ID')).toBeUndefined();
      template().hasOutput(outputNames.pageTokenKeyArn, { Value: arnOf(stack().pageTokenKey) });
      template().hasOutput(outputNames.signInMacKeyArn, { Value: arnOf(stack().signInMac) });
    });

    it('signs with a KMS Ed25519 key (ECC_NIST_EDWARDS25519 / SIGN_VERIFY) and an alias per environment', () => {
      const keys = resources(template(), 'AWS::KMS::Key');
      const signing = keys[logicalId(stack().keys.active)]!.Properties!;
      expect(signing.KeySpec).toBe('ECC_NIST_EDWARDS25519');
      expect(signing.KeyUsage).toBe('SIGN_VERIFY');
      expect(signing.EnableKeyRotation).toBe(false);
      // Its key policy lets the account administer it, and names the roles that use it
      // (test/infra/least-privilege.test.ts).
      const principals = list((signing.KeyPolicy as { Statement: Array<{ Principal: unknown }> }).Statement).map(
        (statement) => statement.Principal,
      );
      expect(principals[0]).toStrictEqual({ AWS: `arn:aws:iam::${config().account}:root` });
      const signingKeys = Object.values(keys).filter((key) => key.Properties!.KeySpec === 'ECC_NIST_EDWARDS25519');
      expect(signingKeys).toHaveLength(1 + config().signingKeys.published.length);
      template().hasResourceProperties('AWS::KMS::Alias', {
        AliasName: `alias/svcnum-${environment}/signing-${config().signingKeys.active}`,
        TargetKeyId: { 'Fn::GetAtt': [logicalId(stack().keys.active), 'Arn'] },
      });
      template().hasResourceProperties('AWS::KMS::Alias', { AliasName: `alias/svcnum-${environment}/signing` });
    });

    it('RS256 ID tokens: an RSA_2048 SIGN_VERIFY key per version beside them, aliased signing-rsa', () => {
      const keys = resources(template(), 'AWS::KMS::Key');
      const rsa = keys[logicalId(stack().rsaKeys.active)]!.Properties!;
      expect(rsa).toMatchObject({ KeySpec: 'RSA_2048', KeyUsage: 'SIGN_VERIFY', EnableKeyRotation: false });
      const rsaKeys = Object.values(keys).filter((key) => key.Properties!.KeySpec === 'RSA_2048');
      expect(rsaKeys).toHaveLength(1 + config().rsaSigningKeys.published.length);
      template().hasResourceProperties('AWS::KMS::Alias', {
        AliasName: `alias/svcnum-${environment}/signing-rsa-${config().rsaSigningKeys.active}`,
        TargetKeyId: { 'Fn::GetAtt': [logicalId(stack().rsaKeys.active), 'Arn'] },
      });
      template().hasResourceProperties('AWS::KMS::Alias', { AliasName: `alias/svcnum-${environment}/signing-rsa` });
    });
  });

  describe('published public keys', () => {
    it('are read once per deploy by a custom resource over every signing key, whose function may only GetPublicKey on them and log', () => {
      const [resource, ...others] = Object.values(resources(template(), PUBLIC_KEYS_RESOURCE_TYPE));
      expect(others).toEqual([]);
      const arns = (keys: readonly Key[]) => keys.map((key) => ({ 'Fn::GetAtt': [logicalId(key), 'Arn'] }));
      const signingKeys = arns(stack().keys.all);
      const rsaKeys = arns(stack().rsaKeys.all);
      expect(resource!.Properties).toStrictEqual({
        ServiceToken: { 'Fn::GetAtt': [logicalId(stack().publicKeys.function), 'Arn'] },
        KeyIds: [...signingKeys, ...rsaKeys],
      });
      const fn = resources(template(), 'AWS::Lambda::Function')[logicalId(stack().publicKeys.function)]!.Properties!;
      expect(fn).toMatchObject({
        Runtime: 'nodejs22.x',
        Handler: 'index.handler',
        Architectures: ['arm64'],
        FunctionName: `svcnum-${environment}-signing-public-keys`,
      });
      // Inlined: nothing to build, no call to AWS at synth.
      expect((fn.Code as { ZipFile: string }).ZipFile).toBe(
        readFileSync(join(repoRoot, 'lib/public-keys-handler.cjs'), 'utf8'),
      );
      const role = (fn.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const statements = iamStatements(template())
        .filter((found) => found.roles.includes(role))
        .map((found) => found.statement);
      expect(statements.map((statement) => [statement.Action, statement.Resource])).toStrictEqual([
        [
          ['logs:CreateLogStream', 'logs:PutLogEvents'],
          { 'Fn::GetAtt': [logicalId(stack().publicKeys.function.logGroup as never), 'Arn'] },
        ],
        ['kms:GetPublicKey', [...signingKeys, ...rsaKeys]],
      ]);
      expect(resources(template(), 'AWS::IAM::Role')[role]!.Properties!.ManagedPolicyArns).toBeUndefined();
    });
  });

  describe('IAM least privilege', () => {
    const names = () => {
      const map = new Map<string, string>();
      for (const key of tableKeys) map.set(logicalId(stack().data.tables[key]), `table:${key}`);
      for (const key of stack().keys.all) map.set(logicalId(key), 'signing-key');
      for (const key of stack().rsaKeys.all) map.set(logicalId(key), 'rsa-signing-key');
      map.set(logicalId(stack().signInMac.key), 'sign-in-mac-key');
      map.set(logicalId(stack().pageTokenKey.key), 'page-token-key');
      return map;
    };
    it('walks every statement: no wildcard action, "*" only as listed with its reason (least-privilege.test.ts), no Not*', () => {
      const statements = iamStatements(template());
      expect(statements.length).toBeGreaterThan(10);
      for (const { where, statement } of statements) {
        expect(statement.NotAction, where).toBeUndefined();
        expect(statement.NotResource, where).toBeUndefined();
        const actions = list(statement.Action);
        for (const action of actions) {
          expect(action, where).not.toBe('*');
          // kms:GenerateDataKey* as SNS documents it for an encrypted topic's publishers (listed in
          // least-privilege.test.ts).
          if (action !== 'kms:GenerateDataKey*') expect(action, `${where}: ${action}`).not.toMatch(/\*/);
        }
        for (const resource of list(statement.Resource)) {
          if (resource !== '*') {
            // No wildcard inside an ARN either (index/*, table/*, key/*) …
            const text = JSON.stringify(resource);
            const logGroupArn = /"Fn::GetAtt":\["[A-Za-z0-9]+","Arn"\]/.test(text) && !text.includes('*');
            expect(text.includes('*') && !logGroupArn, `${where}: ${text}`).toBe(false);
          }
        }
      }
    });

    it('attaches no AWS managed policy but the documented ones', () => {
      const managed = Object.entries(resources(template(), 'AWS::IAM::Role')).flatMap(([id, role]) =>
        list(role.Properties!.ManagedPolicyArns as unknown[] | undefined).map(
          (arn) =>
            `${id.replace(/[0-9A-F]{8}$/, '')} ${JSON.stringify(arn)
              .replace(/.*:policy\//, '')
              .replace(/"\]*\}*$/, '')}`,
        ),
      );
      expect(managed.sort()).toStrictEqual(
        [
          // CDK's provider that empties the VPC's default security group (restrictDefaultSecurityGroup).
          'CustomVpcRestrictDefaultSGCustomResourceProviderRole service-role/AWSLambdaBasicExecutionRole',
          // API Gateway's account-level logging role (acknowledged in lib/nag.ts).
          'HttpApiCloudWatchRole service-role/AmazonAPIGatewayPushToCloudWatchLogs',
          // CodeDeploy shifting the live aliases of canary releases (acknowledged in lib/nag.ts).
          ...(config().lambdaReleases.traffic === 'canary'
            ? ['ReleasesDeployRole service-role/AWSCodeDeployRoleForLambdaLimited']
            : []),
        ].sort(),
      );
    });

    const grantsOf = (roleLogicalId: string) => {
      const byName = names();
      const granted = new Set<string>();
      for (const { roles, statement } of iamStatements(template())) {
        if (!roles.includes(roleLogicalId)) continue;
        for (const action of list(statement.Action)) {
          if (!/^(dynamodb|kms):/.test(action)) continue;
          for (const resource of list(statement.Resource)) granted.add(`${action} ${resourceName(resource, byName)}`);
        }
      }
      return [...granted].sort();
    };
    const expected = (unit: ComputeUnit) => {
      const wanted = new Set<string>();
      for (const [key, tableAccess] of Object.entries(access[unit].tables)) {
        for (const action of tableAccess.actions) wanted.add(`dynamodb:${action} table:${key}`);
        for (const index of tableAccess.queryIndexes ?? []) wanted.add(`dynamodb:Query index:${key}/${index}`);
      }
      for (const action of keyActions[access[unit].keys]) wanted.add(`${action} signing-key`);
      for (const action of keyActions[access[unit].rsaKeys ?? 'none']) wanted.add(`${action} rsa-signing-key`);
      for (const action of access[unit].mac ?? []) wanted.add(`${action} sign-in-mac-key`);
      for (const action of access[unit].pageTokenMac ?? []) wanted.add(`${action} page-token-key`);
      return [...wanted].sort();
    };

    const holdersOf = (pick: (unit: ComputeUnit) => unknown) =>
      Object.fromEntries(
        (Object.keys(access) as ComputeUnit[]).filter((unit) => pick(unit)).map((unit) => [unit, pick(unit)]),
      );

    it.each(groups)('grants the %s function exactly its tables, indexes and key use (lib/access.ts)', (group) => {
      const role = stack().http.functions[group].role!;
      expect(grantsOf(logicalId(role))).toStrictEqual(expected(group));
    });

    it('grants the Fargate task role exactly its tables, indexes and key use', () => {
      const taskRole = stack().provisioning.service.taskDefinition.taskRole;
      expect(grantsOf(logicalId(taskRole))).toStrictEqual(expected('provisioning'));
    });

    it('signs only where JWTs are issued: kms:Sign for token and the gRPC task (RS256 ID tokens: token), GetPublicKey for verifiers', () => {
      const signers = (Object.keys(access) as ComputeUnit[]).filter((unit) => access[unit].keys === 'sign').sort();
      expect(signers).toStrictEqual(['provisioning', 'token']);
      expect(access.userinfo.keys).toBe('verify');
      expect(access.discovery.keys).toBe('verify');
      // The pages sign nothing; /logout verifies an id_token_hint, EdDSA or RS256.
      expect(access.browser.keys).toBe('verify');
      expect(holdersOf((unit) => access[unit].rsaKeys)).toStrictEqual({
        browser: 'verify',
        token: 'sign',
        discovery: 'verify',
      });
      // The pages make and check sign-in MACs (CSRF token, device cookie) and nobody else holds that
      // key (GenerateMac on it mints a device cookie); discover and the gRPC task only derive their
      // page-token key (GenerateMac) from a key of its own, and the token endpoint its DPoP nonce
      // key (core/oauth/dpop-nonces.ts).
      expect(holdersOf((unit) => access[unit].mac)).toStrictEqual({ browser: ['kms:GenerateMac', 'kms:VerifyMac'] });
      expect(holdersOf((unit) => access[unit].pageTokenMac)).toStrictEqual({
        token: ['kms:GenerateMac'],
        public: ['kms:GenerateMac'],
        provisioning: ['kms:GenerateMac'],
      });
      expect(access.discovery.tables).toStrictEqual({});
      // UserInfo reads the account, the token's grant (a revoked grant's tokens are refused) and
      // the token's client (a disabled client's tokens are refused); it records DPoP proofs.
      expect(Object.keys(access.userinfo.tables)).toStrictEqual(['users', 'grants', 'clients', 'dpopProofs']);
    });
  });

  describe('HTTP', () => {
    it('runs every route group as a nodejs22.x arm64 function with its memory, timeout and environment', () => {
      const functions = resources(template(), 'AWS::Lambda::Function');
      for (const group of groups) {
        const fn = functions[logicalId(stack().http.functions[group])]!.Properties!;
        const settings = config().http.functions[group];
        expect(fn.Runtime, group).toBe('nodejs22.x');
        expect(fn.Architectures, group).toStrictEqual(['arm64']);
        expect(fn.Handler, group).toBe('index.handler');
        expect(fn.MemorySize, group).toBe(settings.memoryMiB);
        expect(fn.Timeout, group).toBe(settings.timeoutSeconds);
        expect(fn.TracingConfig, group).toStrictEqual({ Mode: config().http.tracing ? 'Active' : 'PassThrough' });
        const variables = (fn.Environment as { Variables: Json }).Variables;
        expect(variables, group).toMatchObject({
          ISSUER: `https://${config().http.customDomain!.domainName}`,
          TABLE_PREFIX: tablePrefix(environment),
          KMS_KEY_ID: { 'Fn::GetAtt': [logicalId(stack().keys.active), 'Arn'] },
          KMS_VERIFY_KEY_IDS: '',
          KMS_PUBLIC_KEYS: publicKeysValue(),
          NUMBER_COOL_OFF_DAYS: String(config().numberCoolOffDays),
          DPOP_NONCES: config().dpopNonces ? 'on' : 'off',
          AGENT_QUOTA_INDEPENDENT: String(config().agentQuotas.independent),
          AGENT_QUOTA_DEPENDENT: String(config().agentQuotas.dependent),
          SERVICE_NAME: `svcnum-${group}`,
          LOG_LEVEL: config().logLevel,
        });
        expect(fn.LoggingConfig, group).toStrictEqual({
          LogGroup: { Ref: logicalId(stack().http.functions[group].logGroup) },
        });
      }
      // The public endpoints' in-process limiter runs at the WAF rule's rate.
      const publicVariables = (
        functions[logicalId(stack().http.functions.public)]!.Properties!.Environment as { Variables: Json }
      ).Variables;
      expect(publicVariables.PUBLIC_RATE_LIMIT_PER_MINUTE).toBe(
        String((config().waf.publicApiRateLimit * 60) / config().waf.evaluationWindowSeconds),
      );
      // Sign-in hashes passwords with scrypt: 128 MiB per hash.
      expect(config().http.functions.browser.memoryMiB).toBeGreaterThanOrEqual(512);
    });

    it("reserves the settings' concurrency for the public function only, so it cannot starve sign-in and tokens", () => {
      const functions = resources(template(), 'AWS::Lambda::Function');
      const reserved = Object.fromEntries(
        groups.map((group) => [
          group,
          functions[logicalId(stack().http.functions[group])]!.Properties!.ReservedConcurrentExecutions,
        ]),
      );
      expect(config().http.functions.public.reservedConcurrency).toBeGreaterThan(0);
      expect(reserved).toStrictEqual(
        Object.fromEntries(
          groups.map((group) => [
            group,
            group === 'public' ? config().http.functions.public.reservedConcurrency : undefined,
          ]),
        ),
      );
    });

    it('keeps every log group for the configured retention', () => {
      const groupsWithRetention = Object.values(resources(template(), 'AWS::Logs::LogGroup'));
      expect(groupsWithRetention.length).toBeGreaterThanOrEqual(groups.length + 4);
      for (const logGroup of groupsWithRetention)
        expect(logGroup.Properties!.RetentionInDays).toBe(config().logRetentionDays);
    });

    it("maps every route of lambdas/manifest.ts to its group's live alias (proxy integration) and nothing else", () => {
      const api = template();
      const methods = Object.values(resources(api, 'AWS::ApiGateway::Method'));
      const routes = groups.flatMap((group) =>
        Object.entries(routeManifest[group].routes).flatMap(([path, verbs]) =>
          (verbs as readonly string[]).map((verb) => ({ group, path, verb })),
        ),
      );
      expect(methods).toHaveLength(routes.length);
      const resourcePaths = new Map<string, string>();
      const apiResources = resources(api, 'AWS::ApiGateway::Resource');
      const pathOf = (id: string): string => {
        const cached = resourcePaths.get(id);
        if (cached) return cached;
        const resource = apiResources[id]!.Properties!;
        const parent = resource.ParentId as { Ref?: string };
        const path = `${parent.Ref ? pathOf(parent.Ref) : ''}/${resource.PathPart as string}`;
        resourcePaths.set(id, path);
        return path;
      };
      const actual = methods.map((method) => {
        const properties = method.Properties!;
        const integration = properties.Integration as { Type: string; IntegrationHttpMethod: string; Uri: unknown };
        const fnId = /"([A-Za-z0-9]+Live[0-9A-F]{8})"/.exec(JSON.stringify(integration.Uri))![1]!;
        expect(integration.Type).toBe('AWS_PROXY');
        expect(integration.IntegrationHttpMethod).toBe('POST');
        return {
          path: pathOf((properties.ResourceId as { Ref: string }).Ref),
          verb: properties.HttpMethod as string,
          fn: fnId,
        };
      });
      const fnIds = Object.fromEntries(groups.map((group) => [group, logicalId(stack().http.aliases[group])]));
      expect(actual.map((route) => `${route.verb} ${route.path} → ${route.fn}`).sort()).toStrictEqual(
        routes.map((route) => `${route.verb} ${route.path} → ${fnIds[route.group]}`).sort(),
      );
    });

    it('has a regional REST API with access logging, throttling, ERROR execution logs and the custom domain', () => {
      template().hasResourceProperties('AWS::ApiGateway::RestApi', {
        EndpointConfiguration: { Types: ['REGIONAL'] },
        DisableExecuteApiEndpoint: true,
      });
      template().hasResourceProperties('AWS::ApiGateway::Stage', {
        StageName: config().http.stageName,
        TracingEnabled: config().http.tracing,
        AccessLogSetting: {
          DestinationArn: Match.anyValue(),
          Format: Match.stringLikeRegexp('"ip":"\\$context.identity.sourceIp"'),
        },
        MethodSettings: Match.arrayWith([
          Match.objectLike({
            HttpMethod: '*',
            ResourcePath: '/*',
            LoggingLevel: 'ERROR',
            DataTraceEnabled: false,
            ThrottlingRateLimit: config().http.throttle.rateLimit,
            ThrottlingBurstLimit: config().http.throttle.burstLimit,
          }),
          Match.objectLike({
            HttpMethod: 'POST',
            ResourcePath: '/~1oauth~1token',
            MetricsEnabled: true,
            LoggingLevel: 'ERROR',
          }),
        ]),
      });
      // No query string or header in the access log: they can carry codes and tokens.
      const stage = Object.values(resources(template(), 'AWS::ApiGateway::Stage'))[0]!.Properties!;
      expect(JSON.stringify((stage.AccessLogSetting as Json).Format)).not.toMatch(/querystring|context\.path|header/i);
      template().hasResourceProperties('AWS::ApiGateway::DomainName', {
        DomainName: config().http.customDomain!.domainName,
        RegionalCertificateArn: config().http.customDomain!.certificateArn,
        SecurityPolicy: 'TLS_1_2',
      });
      template().resourceCountIs('AWS::ApiGateway::BasePathMapping', 1);
      template().hasResourceProperties('AWS::ApiGateway::GatewayResponse', {
        ResponseType: 'MISSING_AUTHENTICATION_TOKEN',
        StatusCode: '404',
      });
    });

    it('protects the stage with a regional WAF: per-IP rate rule scoped down to /api/resolve and /api/discover, 429 + Retry-After', () => {
      template().resourceCountIs('AWS::WAFv2::WebACL', 1);
      const acl = Object.values(resources(template(), 'AWS::WAFv2::WebACL'))[0]!.Properties!;
      expect(acl.Scope).toBe('REGIONAL');
      expect(acl.DefaultAction).toStrictEqual({ Allow: {} });
      const rules = acl.Rules as Array<{ Name: string; Priority: number; Action?: Json; Statement: Json }>;
      const rate = rules.find((rule) => rule.Name === 'public-api-per-ip')!;
      expect(rate.Priority).toBe(0);
      const statement = rate.Statement.RateBasedStatement as Json;
      expect(statement.AggregateKeyType).toBe('IP');
      expect(statement.Limit).toBe(config().waf.publicApiRateLimit);
      expect(statement.EvaluationWindowSec).toBe(config().waf.evaluationWindowSeconds);
      const scopeDown = (
        statement.ScopeDownStatement as { OrStatement: { Statements: Array<{ ByteMatchStatement: Json }> } }
      ).OrStatement.Statements;
      expect(scopeDown.map((match) => match.ByteMatchStatement.SearchString)).toStrictEqual([...PUBLIC_API_PATHS]);
      expect(PUBLIC_API_PATHS).toStrictEqual(['/api/resolve', '/api/discover']);
      for (const { ByteMatchStatement: match } of scopeDown) {
        expect(match.FieldToMatch).toStrictEqual({ UriPath: {} });
        expect(match.PositionalConstraint).toBe('CONTAINS');
        expect((match.TextTransformations as Json[]).map((transformation) => transformation.Type)).toStrictEqual([
          'URL_DECODE',
          'NORMALIZE_PATH',
          'LOWERCASE',
        ]);
      }
      expect(rate.Action).toStrictEqual({
        Block: {
          CustomResponse: {
            ResponseCode: 429,
            CustomResponseBodyKey: 'rate-limited',
            ResponseHeaders: [{ Name: 'Retry-After', Value: String(config().waf.retryAfterSeconds) }],
          },
        },
      });
      // Sign-in form posts per IP: POST and a path containing /login, answered with a page.
      const signIn = rules.find((rule) => rule.Name === 'sign-in-per-ip')!;
      const signInRate = signIn.Statement.RateBasedStatement as Json;
      expect(signInRate).toMatchObject({
        AggregateKeyType: 'IP',
        Limit: config().waf.signInRateLimit,
        EvaluationWindowSec: config().waf.evaluationWindowSeconds,
      });
      const [path, method] = (
        signInRate.ScopeDownStatement as { AndStatement: { Statements: Array<{ ByteMatchStatement: Json }> } }
      ).AndStatement.Statements;
      expect(path!.ByteMatchStatement).toMatchObject({
        SearchString: '/login',
        PositionalConstraint: 'CONTAINS',
        FieldToMatch: { UriPath: {} },
      });
      expect(method!.ByteMatchStatement).toMatchObject({
        SearchString: 'POST',
        PositionalConstraint: 'EXACTLY',
        FieldToMatch: { Method: {} },
      });
      expect(signIn.Action).toStrictEqual({
        Block: {
          CustomResponse: {
            ResponseCode: 429,
            CustomResponseBodyKey: 'sign-in-rate-limited',
            ResponseHeaders: [{ Name: 'Retry-After', Value: String(config().waf.retryAfterSeconds) }],
          },
        },
      });
      expect((acl.CustomResponseBodies as Record<string, Json>)['sign-in-rate-limited']).toMatchObject({
        ContentType: 'TEXT_HTML',
      });
      // The page views apart, at their own rate.
      const pageViews = rules.find((rule) => rule.Name === 'sign-in-page-per-ip')!;
      const pageRate = pageViews.Statement.RateBasedStatement as Json;
      expect(pageRate).toMatchObject({ AggregateKeyType: 'IP', Limit: config().waf.signInPageRateLimit });
      const [, viewMethod] = (
        pageRate.ScopeDownStatement as { AndStatement: { Statements: Array<{ ByteMatchStatement: Json }> } }
      ).AndStatement.Statements;
      expect(viewMethod!.ByteMatchStatement).toMatchObject({ SearchString: 'GET', FieldToMatch: { Method: {} } });
      expect(new Set(rules.map((rule) => rule.Priority)).size).toBe(rules.length);
      const managed = rules
        .filter((rule) => rule.Statement.ManagedRuleGroupStatement)
        .map((rule) => (rule.Statement.ManagedRuleGroupStatement as Json).Name);
      expect(managed).toContain('AWSManagedRulesCommonRuleSet');
      // Associated with the stage of this API.
      template().hasResourceProperties('AWS::WAFv2::WebACLAssociation', {
        ResourceArn: {
          'Fn::Join': [
            '',
            Match.arrayWith([Match.stringLikeRegexp('/restapis/'), { Ref: logicalId(stack().http.api) }, '/stages/']),
          ],
        },
        WebACLArn: { 'Fn::GetAtt': [logicalId(stack().http.webAcl), 'Arn'] },
      });
      // WAF logs leave out credentials.
      template().hasResourceProperties('AWS::WAFv2::LoggingConfiguration', {
        RedactedFields: [
          { SingleHeader: { Name: 'authorization' } },
          { SingleHeader: { Name: 'cookie' } },
          { QueryString: {} },
        ],
      });
    });

    it('keeps the logical ids the WAF resources had before lib/waf.ts (fixed names: a new id would create a same-named twin first)', () => {
      const ids = (type: string) => Object.keys(resources(template(), type));
      expect(ids('AWS::WAFv2::WebACL')).toStrictEqual(['HttpWebAcl9C6B4271']);
      expect(ids('AWS::WAFv2::WebACLAssociation')).toStrictEqual(['HttpWebAclAssociation7073850B']);
      expect(ids('AWS::WAFv2::LoggingConfiguration')).toStrictEqual(['HttpWafLogging83818009']);
      expect(ids('AWS::Logs::LogGroup')).toContain('HttpWafLogsC646F01F');
    });
  });

  describe('Lambda releases', () => {
    const canary = () => config().lambdaReleases.traffic === 'canary';

    it("publishes each function's current version (kept after a release, for a rollback) behind its live alias, which API Gateway invokes and may invoke (never $LATEST)", () => {
      const aliases = resources(template(), 'AWS::Lambda::Alias');
      const versions = resources(template(), 'AWS::Lambda::Version');
      for (const group of groups) {
        const fn = { Ref: logicalId(stack().http.functions[group]) };
        // currentVersion: its logical id ends in a hash of the function's code and configuration, so a change publishes
        // a new version.
        const version = stack().resolve(
          (stack().http.functions[group].currentVersion.node.defaultChild as CfnElement).logicalId,
        ) as string;
        expect(version, group).toMatch(/CurrentVersion[0-9A-F]{8}[0-9a-f]{32}$/);
        expect(versions[version]?.Properties, group).toStrictEqual({ FunctionName: fn });
        // Kept when a release replaces it: a rollback moves the alias back to it.
        expect(template().toJSON().Resources[version], group).toMatchObject({
          DeletionPolicy: 'Retain',
          UpdateReplacePolicy: 'Retain',
        });
        expect(aliases[logicalId(stack().http.aliases[group])]?.Properties, group).toStrictEqual({
          FunctionName: fn,
          FunctionVersion: { 'Fn::GetAtt': [version, 'Version'] },
          Name: 'live',
        });
      }
      // The aliases of the route groups (and CDK's custom-resource functions have none).
      expect(Object.keys(aliases)).toHaveLength(groups.length);
      // Every permission API Gateway has is on an alias: one per method, as the integrations.
      const aliasIds = new Set(groups.map((group) => logicalId(stack().http.aliases[group])));
      const gatewayPermissions = Object.values(resources(template(), 'AWS::Lambda::Permission'))
        .map((permission) => permission.Properties!)
        .filter((permission) => permission.Principal === 'apigateway.amazonaws.com');
      expect(gatewayPermissions).toHaveLength(Object.keys(resources(template(), 'AWS::ApiGateway::Method')).length);
      for (const permission of gatewayPermissions)
        expect(aliasIds.has((permission.FunctionName as { Ref: string }).Ref), JSON.stringify(permission)).toBe(true);
    });

    it(
      environment === 'production'
        ? "shifts production traffic by CodeDeploy (10 % for 5 minutes), rolling back on each alias's error and p99 alarms"
        : 'moves the sandbox aliases at once: no CodeDeploy',
      () => {
        const groupsDeployed = Object.values(resources(template(), 'AWS::CodeDeploy::DeploymentGroup')).map(
          (group) => group.Properties!,
        );
        const aliases = Object.entries(
          template().findResources('AWS::Lambda::Alias') as Record<string, { UpdatePolicy?: Json }>,
        );
        expect(canary()).toBe(environment === 'production');
        if (!canary()) {
          expect(groupsDeployed).toStrictEqual([]);
          template().resourceCountIs('AWS::CodeDeploy::Application', 0);
          for (const [id, alias] of aliases) expect(alias.UpdatePolicy, id).toBeUndefined();
          return;
        }
        const release = config().lambdaReleases as Extract<
          ReturnType<typeof config>['lambdaReleases'],
          { traffic: 'canary' }
        >;
        template().hasResourceProperties('AWS::CodeDeploy::Application', {
          ComputePlatform: 'Lambda',
          ApplicationName: `svcnum-${environment}-http`,
        });
        expect(groupsDeployed).toHaveLength(groups.length);
        const alarms = resources(template(), 'AWS::CloudWatch::Alarm');
        const topic = { Ref: logicalId(stack().monitoring.topic) };
        for (const group of groups) {
          const deployment = stack().releases.deploymentGroups[group]!;
          const properties = groupsDeployed.find(
            (candidate) => candidate.DeploymentGroupName === `svcnum-${environment}-${group}`,
          )!;
          expect(properties, group).toMatchObject({
            DeploymentConfigName: 'CodeDeployDefault.LambdaCanary10Percent5Minutes',
            DeploymentStyle: { DeploymentType: 'BLUE_GREEN', DeploymentOption: 'WITH_TRAFFIC_CONTROL' },
            AutoRollbackConfiguration: {
              Enabled: true,
              Events: expect.arrayContaining([
                'DEPLOYMENT_FAILURE',
                'DEPLOYMENT_STOP_ON_ALARM',
                'DEPLOYMENT_STOP_ON_REQUEST',
              ]) as unknown,
            },
          });
          // The alias's update is the deployment: CloudFormation hands it to CodeDeploy.
          const alias = aliases.find(([id]) => id === logicalId(stack().http.aliases[group]))![1];
          expect(alias.UpdatePolicy, group).toStrictEqual({
            CodeDeployLambdaAliasUpdate: {
              ApplicationName: { Ref: logicalId(stack().releases.node.findChild('Application')) },
              DeploymentGroupName: { Ref: logicalId(deployment) },
            },
          });
          // Rollback alarms: the alias's errors per minute and its p99 duration, each notifying the topic.
          const watched = properties.AlarmConfiguration as {
            Enabled: boolean;
            Alarms: Array<{ Name: { Ref: string } }>;
          };
          expect(watched.Enabled, group).toBe(true);
          const rollback = watched.Alarms.map((alarm) => alarms[alarm.Name.Ref]!.Properties!);
          const fn = { Ref: logicalId(stack().http.functions[group]) };
          const aliasDimensions = [
            { Name: 'FunctionName', Value: fn },
            { Name: 'Resource', Value: { 'Fn::Join': ['', [fn, ':live']] } },
          ];
          expect(
            rollback.map((alarm) => [
              alarm.MetricName,
              alarm.Statistic ?? alarm.ExtendedStatistic,
              alarm.Period,
              alarm.Threshold,
            ]),
            group,
          ).toStrictEqual([
            ['Errors', 'Sum', 60, release.rollbackErrors],
            ['Duration', 'p99', 60, release.rollbackP99Ms[group]],
          ]);
          for (const alarm of rollback) {
            expect(alarm.Dimensions, group).toStrictEqual(aliasDimensions);
            expect(alarm.AlarmActions, group).toContainEqual(topic);
            expect(alarm.TreatMissingData, group).toBe('notBreaching');
          }
          // p99 below the function's timeout: a hung version rolls back before it times out at p99.
          expect(release.rollbackP99Ms[group]).toBeLessThan(config().http.functions[group].timeoutSeconds * 1000);
        }
      },
    );
  });

  describe('provisioning', () => {
    it('terminates TLS on 443 at an internet-facing NLB with ALPN HTTP/2 and the configured certificate', () => {
      template().hasResourceProperties('AWS::ElasticLoadBalancingV2::LoadBalancer', {
        Type: 'network',
        Scheme: 'internet-facing',
      });
      const balancer = Object.values(resources(template(), 'AWS::ElasticLoadBalancingV2::LoadBalancer'))[0]!
        .Properties!;
      const attributes = Object.fromEntries(
        (balancer.LoadBalancerAttributes as Array<{ Key: string; Value: unknown }>).map((attribute) => [
          attribute.Key,
          attribute.Value,
        ]),
      );
      expect(attributes).toMatchObject({
        'access_logs.s3.enabled': 'true',
        'deletion_protection.enabled': String(config().deletionProtection),
        'load_balancing.cross_zone.enabled': 'true',
      });
      template().resourceCountIs('AWS::ElasticLoadBalancingV2::Listener', 1);
      template().hasResourceProperties('AWS::ElasticLoadBalancingV2::Listener', {
        Port: 443,
        Protocol: 'TLS',
        AlpnPolicy: ['HTTP2Only'],
        Certificates: [{ CertificateArn: config().provisioning.certificateArn }],
        SslPolicy: Match.stringLikeRegexp('^ELBSecurityPolicy-TLS13'),
        DefaultActions: [{ Type: 'forward', TargetGroupArn: { Ref: logicalId(stack().provisioning.targetGroup) } }],
      });
    });

    it('forwards TCP to the tasks on 50051, checks their health over HTTP on HEALTH_PORT (out within 30 s), deregistration delay DRAIN_SECONDS', () => {
      template().hasResourceProperties('AWS::ElasticLoadBalancingV2::TargetGroup', {
        Port: GRPC_PORT,
        Protocol: 'TCP',
        TargetType: 'ip',
        HealthCheckProtocol: 'HTTP',
        HealthCheckPort: String(HEALTH_PORT),
        HealthCheckPath: TARGET_HEALTH_CHECK.path,
        Matcher: { HttpCode: '200' },
        HealthCheckIntervalSeconds: TARGET_HEALTH_CHECK.intervalSeconds,
        HealthCheckTimeoutSeconds: TARGET_HEALTH_CHECK.timeoutSeconds,
        UnhealthyThresholdCount: TARGET_HEALTH_CHECK.unhealthyThreshold,
        TargetGroupAttributes: Match.arrayWith([
          { Key: 'deregistration_delay.timeout_seconds', Value: String(config().provisioning.drainSeconds) },
        ]),
      });
      // A task that stops answering is out after the threshold's checks, the last one timing out: at most 30 s.
      const { intervalSeconds, timeoutSeconds, unhealthyThreshold } = TARGET_HEALTH_CHECK;
      expect(intervalSeconds * unhealthyThreshold + timeoutSeconds).toBeLessThanOrEqual(30);
      expect(timeoutSeconds).toBeLessThan(intervalSeconds);
      // The NLB may reach the health port (ingress on the tasks' group, egress on its own).
      for (const port of [GRPC_PORT, HEALTH_PORT]) {
        template().hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
          FromPort: port,
          ToPort: port,
          SourceSecurityGroupId: {
            'Fn::GetAtt': [logicalId(stack().provisioning.node.findChild('NlbSecurityGroup')), 'GroupId'],
          },
        });
        template().hasResourceProperties('AWS::EC2::SecurityGroupEgress', {
          FromPort: port,
          ToPort: port,
          DestinationSecurityGroupId: { 'Fn::GetAtt': [logicalId(stack().provisioning.taskSecurityGroup), 'GroupId'] },
        });
      }
    });

    it('runs the gRPC image (grpc-service/Dockerfile, ARM64) on Fargate with stopTimeout 30 s and the task environment', () => {
      const task = Object.values(resources(template(), 'AWS::ECS::TaskDefinition'))[0]!.Properties!;
      expect(task.RuntimePlatform).toStrictEqual({ CpuArchitecture: 'ARM64', OperatingSystemFamily: 'LINUX' });
      expect(task.Cpu).toBe(String(config().provisioning.cpu));
      const [container] = task.ContainerDefinitions as Json[];
      expect(container!.StopTimeout).toBe(30);
      expect(container!.ReadonlyRootFilesystem).toBe(true);
      expect(container!.PortMappings).toStrictEqual([
        { ContainerPort: GRPC_PORT, Name: 'grpc', Protocol: 'tcp' },
        { ContainerPort: HEALTH_PORT, Name: 'health', Protocol: 'tcp' },
      ]);
      // The container checks itself too, with the image's node (test/grpc-health.test.ts runs this command).
      expect(container!.HealthCheck).toStrictEqual({
        Command: containerHealthCommand(),
        Interval: TARGET_HEALTH_CHECK.intervalSeconds,
        Timeout: TARGET_HEALTH_CHECK.timeoutSeconds,
        Retries: TARGET_HEALTH_CHECK.unhealthyThreshold,
        StartPeriod: 15,
      });
      const environmentVariables = Object.fromEntries(
        (container!.Environment as Array<{ Name: string; Value: unknown }>).map((variable) => [
          variable.Name,
          variable.Value,
        ]),
      );
      expect(environmentVariables).toMatchObject({
        ISSUER: `https://${config().http.customDomain!.domainName}`,
        TABLE_PREFIX: tablePrefix(environment),
        KMS_KEY_ID: { 'Fn::GetAtt': [logicalId(stack().keys.active), 'Arn'] },
        KMS_PUBLIC_KEYS: publicKeysValue(),
        GRPC_PORT: String(GRPC_PORT),
        HEALTH_PORT: String(HEALTH_PORT),
        GRPC_REFLECTION: 'token',
        // DPoP proofs' htu: what clients dial, never the call's own :authority.
        GRPC_ORIGIN: `https://${config().provisioning.domainName}`,
        DRAIN_SECONDS: String(config().provisioning.drainSeconds),
        NUMBER_COOL_OFF_DAYS: String(config().numberCoolOffDays),
        AGENT_QUOTA_INDEPENDENT: String(config().agentQuotas.independent),
        AGENT_QUOTA_DEPENDENT: String(config().agentQuotas.dependent),
      });
      expect(config().provisioning.drainSeconds).toBeLessThan(30);
      // The asset is the repository root with the gRPC Dockerfile, built for ARM64.
      const assets = JSON.parse(
        readFileSync(join(synth.assembly.directory, `${stackName(environment)}.assets.json`), 'utf8'),
      ) as { dockerImages: Record<string, { source: Json }> };
      const images = Object.values(assets.dockerImages);
      expect(images).toHaveLength(1);
      expect(images[0]!.source).toMatchObject({ dockerFile: 'grpc-service/Dockerfile', platform: 'linux/arm64' });
    });

    it('has a circuit breaker with rollback, private tasks, CPU autoscaling within the configured bounds, container insights', () => {
      template().hasResourceProperties('AWS::ECS::Service', {
        LaunchType: 'FARGATE',
        DesiredCount: config().provisioning.minTasks,
        DeploymentConfiguration: {
          DeploymentCircuitBreaker: { Enable: true, Rollback: true },
          MinimumHealthyPercent: 100,
          MaximumPercent: 200,
        },
        NetworkConfiguration: { AwsvpcConfiguration: Match.objectLike({ AssignPublicIp: 'DISABLED' }) },
      });
      template().hasResourceProperties('AWS::ApplicationAutoScaling::ScalableTarget', {
        MinCapacity: config().provisioning.minTasks,
        MaxCapacity: config().provisioning.maxTasks,
      });
      template().hasResourceProperties('AWS::ApplicationAutoScaling::ScalingPolicy', {
        TargetTrackingScalingPolicyConfiguration: Match.objectLike({
          PredefinedMetricSpecification: { PredefinedMetricType: 'ECSServiceAverageCPUUtilization' },
          TargetValue: config().provisioning.cpuTargetPercent,
        }),
      });
      template().hasResourceProperties('AWS::ECS::Cluster', {
        ClusterSettings: [{ Name: 'containerInsights', Value: 'enabled' }],
      });
    });

    it('uses two AZs, no NAT gateway, and VPC endpoints for DynamoDB, S3 (gateway), KMS, ECR and Logs (interface)', () => {
      template().resourceCountIs('AWS::EC2::NatGateway', 0);
      // Two AZs, the region's first two at deploy time (nothing hard-coded, nothing looked up).
      const subnets = Object.values(resources(template(), 'AWS::EC2::Subnet')).map((subnet) =>
        JSON.stringify(subnet.Properties!.AvailabilityZone),
      );
      expect(subnets).toHaveLength(4);
      expect(new Set(subnets)).toStrictEqual(
        new Set([0, 1].map((index) => JSON.stringify({ 'Fn::Select': [index, { 'Fn::GetAZs': '' }] }))),
      );
      const endpoints = Object.values(resources(template(), 'AWS::EC2::VPCEndpoint')).map((endpoint) => {
        // com.amazonaws.<region>.<service>, as a string or as a join around the region.
        const name = endpoint.Properties!.ServiceName as string | { 'Fn::Join': [string, unknown[]] };
        const service =
          typeof name === 'string'
            ? name.split('.').slice(3).join('.')
            : String(name['Fn::Join'][1].at(-1)).replace(/^\./, '');
        return `${endpoint.Properties!.VpcEndpointType as string} ${service}`;
      });
      expect(endpoints.sort()).toStrictEqual([
        'Gateway dynamodb',
        'Gateway s3',
        'Interface ecr.api',
        'Interface ecr.dkr',
        'Interface kms',
        'Interface logs',
      ]);
      // Tasks reach the NLB-facing port only from the NLB's security group.
      template().hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
        FromPort: GRPC_PORT,
        ToPort: GRPC_PORT,
        SourceSecurityGroupId: Match.objectLike({
          'Fn::GetAtt': Match.arrayWith([Match.stringLikeRegexp('NlbSecurityGroup')]),
        }),
      });
    });
  });

  describe('monitoring', () => {
    it('alarms on API 5xx, token p99, Lambda errors and throttles per function, DynamoDB throttles per table, NLB targets', () => {
      const alarms = Object.values(resources(template(), 'AWS::CloudWatch::Alarm')).map((alarm) => alarm.Properties!);
      // … and the wake-up engine's and relay's seven (test/infra/wakeups.test.ts).
      // … and, for canary releases, two rollback alarms per function (lib/releases.ts).
      const rollbackAlarms = config().lambdaReleases.traffic === 'canary' ? 2 * groups.length : 0;
      expect(alarms).toHaveLength(2 + 2 * groups.length + tableKeys.length + 2 + 1 + 1 + 7 + rollbackAlarms);
      const named = (suffix: string) => alarms.find((alarm) => alarm.AlarmName === `svcnum-${environment}-${suffix}`);
      expect(named('Api5xxRate')).toBeDefined();
      expect(JSON.stringify(named('Api5xxRate')!.Metrics)).toContain('5XXError');
      const latency = named('TokenLatencyP99')!;
      expect(latency.Threshold).toBe(config().alarms.tokenP99Ms);
      const [query] = latency.Metrics as Array<{ MetricStat: { Metric: Json; Stat: string } }>;
      expect(query!.MetricStat.Stat).toBe('p99');
      expect(query!.MetricStat.Metric).toMatchObject({ Namespace: 'AWS/ApiGateway', MetricName: 'Latency' });
      expect(query!.MetricStat.Metric.Dimensions).toEqual(
        expect.arrayContaining([
          { Name: 'Resource', Value: '/oauth/token' },
          { Name: 'Method', Value: 'POST' },
        ]),
      );
      for (const group of groups) {
        const name = `${group[0]!.toUpperCase()}${group.slice(1)}`;
        expect(named(`${name}Errors`)?.MetricName, group).toBe('Errors');
        expect(named(`${name}Throttles`)?.MetricName, group).toBe('Throttles');
      }
      for (const key of tableKeys) {
        const alarm = named(`${key[0]!.toUpperCase()}${key.slice(1)}TableThrottles`);
        expect(JSON.stringify(alarm?.Metrics), key).toMatch(/ReadThrottleEvents.*WriteThrottleEvents/);
      }
      // KMS throttles (EMF KmsThrottles, by service) of every function and the task, summed: alarm on the first.
      const kms = named('KmsThrottles')!;
      expect(kms).toMatchObject({
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
      const queries = kms.Metrics as Array<{
        Id: string;
        Expression?: string;
        MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions: Json[] }; Stat: string };
      }>;
      const services = [...groups.map((group) => `svcnum-${group}`), 'svcnum-provisioning'];
      expect(queries.filter((query) => query.MetricStat).map((query) => query.MetricStat!)).toStrictEqual(
        services.map((service) => ({
          Metric: {
            Namespace: 'svcnum',
            MetricName: 'KmsThrottles',
            Dimensions: [{ Name: 'service', Value: service }],
          },
          Period: 300,
          Stat: 'Sum',
        })),
      );
      expect(queries.find((query) => query.Expression)!.Expression).toBe(
        services.map((_, index) => `FILL(kms${index}, 0)`).join(' + '),
      );
      // The free pool: the task's FreeNumbers gauge (EMF, through a metric filter on its log group), lowest reading of
      // 5 minutes.
      expect(named('FreeNumbersLow')).toMatchObject({
        Namespace: 'svcnum',
        MetricName: 'FreeNumbers',
        Dimensions: [{ Name: 'service', Value: 'svcnum-provisioning' }],
        Statistic: 'Minimum',
        Period: 300,
        Threshold: config().numberPool.lowAlarm,
        ComparisonOperator: 'LessThanThreshold',
        TreatMissingData: 'ignore',
      });
      template().hasResourceProperties('AWS::Logs::MetricFilter', {
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
      });
      expect(named('GrpcUnhealthyTargets')!.MetricName).toBe('UnHealthyHostCount');
      expect(named('GrpcNoHealthyTargets')!.MetricName).toBe('HealthyHostCount');
      // Every alarm notifies the environment's topic.
      const topic = { Ref: logicalId(stack().monitoring.topic) };
      for (const alarm of alarms) expect(alarm.AlarmActions, alarm.AlarmName as string).toContainEqual(topic);
    });

    it("notifies people of every alarm of the stack, whoever defines it: the topic and the settings' existing topics, on ALARM and OK", () => {
      const alarms = {
        ...resources(template(), 'AWS::CloudWatch::Alarm'),
        ...resources(template(), 'AWS::CloudWatch::CompositeAlarm'),
      };
      expect(Object.keys(alarms).length).toBeGreaterThan(0);
      const destinations = [{ Ref: logicalId(stack().monitoring.topic) }, ...config().alarms.topicArns];
      for (const [id, alarm] of Object.entries(alarms)) {
        expect({ alarm: alarm.Properties!.AlarmActions, ok: alarm.Properties!.OKActions }, id).toStrictEqual({
          alarm: destinations,
          ok: destinations,
        });
      }
    });

    it("sends the wake-up engine's ElastiCache events to the same destinations (EventBridge: ElastiCache cannot publish to an encrypted topic)", () => {
      const destinations = [{ Ref: logicalId(stack().monitoring.topic) }, ...config().alarms.topicArns];
      const rules = Object.values(resources(template(), 'AWS::Events::Rule')).filter((rule) =>
        JSON.stringify(rule.Properties!.EventPattern).includes('aws.elasticache'),
      );
      expect(rules).toHaveLength(1);
      expect(rules[0]!.Properties!.EventPattern).toStrictEqual({
        source: ['aws.elasticache'],
        'detail-type': [...ENGINE_EVENT_TYPES],
      });
      expect((rules[0]!.Properties!.Targets as Json[]).map((target) => target.Arn)).toStrictEqual(destinations);
      // EventBridge publishes with the rule's own role: neither the topic nor its key trusts EventBridge itself.
      const roles = (rules[0]!.Properties!.Targets as Json[]).map((target) => target.RoleArn);
      expect(new Set(roles.map((role) => JSON.stringify(role))).size).toBe(1);
      const [roleId] = (roles[0] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'];
      const rolePolicy = Object.values(resources(template(), 'AWS::IAM::Policy')).find((policy) =>
        list(policy.Properties!.Roles as unknown[]).some(
          (role) => JSON.stringify(role) === JSON.stringify({ Ref: roleId }),
        ),
      )!;
      expect((rolePolicy.Properties!.PolicyDocument as { Statement: Json[] }).Statement).toStrictEqual([
        {
          Action: 'sns:Publish',
          Effect: 'Allow',
          Resource: config().alarms.topicArns.length
            ? [...config().alarms.topicArns, { Ref: logicalId(stack().monitoring.topic) }]
            : { Ref: logicalId(stack().monitoring.topic) },
        },
        {
          Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
          Effect: 'Allow',
          Resource: { 'Fn::GetAtt': [logicalId(stack().monitoring.topic.masterKey!), 'Arn'] },
        },
      ]);
      const keyPolicy = resources(template(), 'AWS::KMS::Key')[logicalId(stack().monitoring.topic.masterKey!)]!
        .Properties!.KeyPolicy as { Statement: Json[] };
      expect(JSON.stringify(keyPolicy)).not.toContain('events.amazonaws.com');
      const topicPolicies = Object.values(resources(template(), 'AWS::SNS::TopicPolicy'));
      expect(JSON.stringify(topicPolicies)).not.toContain('events.amazonaws.com');
    });

    it('mails the configured addresses and calls the HTTPS endpoints from an encrypted topic, and has one dashboard', () => {
      template().hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
      const subscriptions = Object.values(resources(template(), 'AWS::SNS::Subscription')).map(
        (subscription) =>
          `${subscription.Properties!.Protocol as string} ${subscription.Properties!.Endpoint as string}`,
      );
      expect(subscriptions.sort()).toStrictEqual(
        [
          ...config().alarms.emails.map((email) => `email ${email}`),
          ...config().alarms.httpsEndpoints.map((url) => `https ${url}`),
        ].sort(),
      );
      template().resourceCountIs('AWS::CloudWatch::Dashboard', 1);
      template().hasResourceProperties('AWS::CloudWatch::Dashboard', { DashboardName: `svcnum-${environment}` });
    });
  });

  it('exports the outputs the admin CLI and the operators read', () => {
    const outputs = template().findOutputs('*') as Record<string, { Value: unknown }>;
    expect(outputs[outputNames.tablePrefix]!.Value).toBe(tablePrefix(environment));
    expect(outputs[outputNames.region]!.Value).toBe(config().region);
    expect(outputs[outputNames.issuer]!.Value).toBe(`https://${config().http.customDomain!.domainName}`);
    for (const name of [
      outputNames.grpcEndpoint,
      outputNames.loadBalancerDnsName,
      outputNames.signingKeyArn,
      outputNames.alarmTopicArn,
      outputNames.dashboardName,
      outputNames.apiDomainTarget,
    ]) {
      expect(outputs[name], name).toBeDefined();
    }
    // With a custom domain the execute-api URL is neither served nor advertised.
    expect(Object.keys(outputs).filter((name) => /Endpoint[0-9A-F]{8}$/.test(name))).toStrictEqual([]);
  });

  it('passes cdk-nag (AwsSolutions) with zero unacknowledged findings, each acknowledgment with a reason', () => {
    const report = new AwsSolutionsChecks(synth.stacks[environment]).validateScope(stack());
    expect(
      report.violations.map(
        (violation) =>
          `${violation.ruleName}: ${violation.violatingResources.map((resource) => resource.constructPath).join(', ')}`,
      ),
    ).toStrictEqual([]);
    expect(report.success).toBe(true);
    const errors = synth.assembly
      .getStackArtifact(stack().artifactId)
      .messages.filter((message) => message.level === 'error');
    expect(errors).toStrictEqual([]);
    for (const acknowledgment of acknowledgments(config())) {
      expect(acknowledgment.reason.length, `${acknowledgment.id} on ${acknowledgment.path}`).toBeGreaterThan(60);
    }
  });
});

describe('alarm notifications', () => {
  it('reach an alarm that another construct defines later, once (notifyOperators)', () => {
    const app = new App();
    const stack = new Stack(app, 'Alarms');
    const topic = new Topic(stack, 'Topic');
    notifyOperators(stack, [new SnsAction(topic)]);
    const later = new Construct(stack, 'Elsewhere');
    new Alarm(later, 'Alarm', {
      metric: new Metric({ namespace: 'svcnum', metricName: 'Anything' }),
      threshold: 1,
      evaluationPeriods: 1,
    });
    Template.fromStack(stack).hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmActions: [{ Ref: stack.getLogicalId(topic.node.defaultChild as CfnElement) }],
      OKActions: [{ Ref: Match.anyValue() }],
    });
  });
});

describe('both stacks', () => {
  it('synthesize offline: no context lookup (AZs are configured), nothing missing', () => {
    expect(synth.assembly.manifest.missing ?? []).toStrictEqual([]);
  });

  it('warn while the settings look like examples (the committed example here), naming each value', () => {
    for (const environment of environmentNames) {
      const warnings = synth.assembly
        .getStackArtifact(synth.stacks[environment].artifactId)
        .messages.filter((message) => message.level === 'warning');
      expect(warnings.map((warning) => String(warning.entry.data))).toEqual([
        expect.stringMatching(
          new RegExp(
            `^settings of ${environment} that look like examples: account \\(\\d{12}\\), api\\.domainName \\(id\\.(sandbox\\.)?example\\.com\\), .*put real values in your settings file before cdk deploy`,
          ),
        ),
      ]);
    }
  });

  /** The staged bundle (index.mjs in cdk.out) of every route group's function, sandbox stack. */
  const stagedBundles = () => {
    const assets = JSON.parse(readFileSync(join(synth.assembly.directory, 'svcnum-sandbox.assets.json'), 'utf8')) as {
      files: Record<string, { source: { path: string } }>;
    };
    const functions = resources(synth.templates.sandbox, 'AWS::Lambda::Function');
    return groups.map((group) => {
      const code = functions[logicalId(synth.stacks.sandbox.http.functions[group])]!.Properties!.Code as {
        S3Key: string;
      };
      return join(synth.assembly.directory, assets.files[code.S3Key.replace(/\.zip$/, '')]!.source.path, 'index.mjs');
    });
  };

  it('bundles every route group as an ESM module that loads in Node and exports handler', () => {
    const bundles = stagedBundles();
    // A fresh Node process, as Lambda would load them (no vitest transform in between).
    const output = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      for (const file of ${JSON.stringify(bundles)}) {
        const module = await import(file);
        console.log(typeof module.handler);
      }`,
      ],
      { encoding: 'utf8', env: { ...process.env, LOG_LEVEL: 'SILENT' } },
    );
    expect(output.trim().split('\n')).toStrictEqual(groups.map(() => 'function'));
  });

  it("bundles the environment credential provider instead of the SDK's default chain (lib/lambda-credentials.ts)", async () => {
    // Strings only the rest of the default chain carries: web identity (nested STS client),
    // credential_process profiles, SSO. Control: the real chain, bundled, has each of them.
    const markers = ['AssumeRoleWithWebIdentity', 'credential_process', 'sso_start_url'];
    const { outputFiles } = await build({
      stdin: { contents: "export { defaultProvider } from '@aws-sdk/credential-provider-node';", resolveDir: repoRoot },
      bundle: true,
      platform: 'node',
      format: 'esm',
      minify: true,
      write: false,
      logLevel: 'silent',
    });
    for (const marker of markers) expect(outputFiles[0]!.text, marker).toContain(marker);
    for (const bundle of stagedBundles()) {
      const code = readFileSync(bundle, 'utf8');
      for (const marker of markers) expect(code.includes(marker), `${marker} in ${bundle}`).toBe(false);
      expect(code).toContain('AWS_SECRET_ACCESS_KEY');
    }
    expect(lambdaBundle.alias).toStrictEqual({
      '@aws-sdk/credential-provider-node': 'lib/lambda-credentials.ts',
      'mnemonist/lru-cache': 'lib/lru-cache.ts',
    });
  });

  it("bundles a Map-based LRU for the DynamoDB client's endpoint cache (lib/lru-cache.ts), evicting the least recently used", async () => {
    const { default: LRUCache } = await import('../../lib/lru-cache');
    const cache = new LRUCache<string, number>(2);
    cache.set('a', 1).set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3);
    expect([cache.has('a'), cache.has('b'), cache.has('c'), cache.peek('c'), cache.size]).toEqual([
      true,
      false,
      true,
      3,
      2,
    ]);
    cache.clear();
    expect(cache.size).toBe(0);
  });

  it('keeps the sources the Dockerfile copies in the image asset', () => {
    const dockerfile = readFileSync(join(repoRoot, 'grpc-service/Dockerfile'), 'utf8');
    const copied = dockerfile
      .split('\n')
      .filter((line) => /^COPY (?!--from)/.test(line))
      .flatMap((line) =>
        line
          .replace(/^COPY\s+/, '')
          .split(/\s+/)
          .slice(0, -1),
      );
    expect(copied).toEqual(expect.arrayContaining(['core', 'grpc-service', 'proto']));
    const assets = JSON.parse(readFileSync(join(synth.assembly.directory, 'svcnum-sandbox.assets.json'), 'utf8')) as {
      dockerImages: Record<string, { source: { directory: string } }>;
    };
    const context = join(synth.assembly.directory, Object.values(assets.dockerImages)[0]!.source.directory);
    for (const source of copied) expect(existsSync(join(context, source)), source).toBe(true);
  });

  it("runs the task with the image's V8 heap settings, read whole wherever the bundle runs outside Docker", () => {
    // The deployed-artifact tests and the bench's gRPC processes take NODE_OPTIONS from here.
    expect(grpcImageEnvironment()).toStrictEqual({
      NODE_ENV: 'production',
      GRPC_PORT: '50051',
      NODE_OPTIONS: '--max-semi-space-size=8',
    });
  });

  it('differ where the configuration says: sizes, retention, protection', () => {
    const { sandbox, production } = synth.configs;
    expect(sandbox.retainData).toBe(false);
    expect(production.retainData).toBe(true);
    expect(production.provisioning.minTasks).toBeGreaterThanOrEqual(2);
    expect(synth.stacks.production.terminationProtection).toBe(true);
    expect(synth.stacks.sandbox.terminationProtection).toBe(false);
  });
});
