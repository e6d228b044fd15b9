import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CloudFormationClient, DescribeStacksCommand, type Stack } from '@aws-sdk/client-cloudformation';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tableDefinitions, tableNames } from '../../core/tables';
import { outputNames, stackName } from '../../lib/config';
import type { Grant, User } from '../../core/kernel/model';
import { runAdminCommand } from '../../local/admin';
import { deployedRegion, describeDeployedEnvironment, withDeployedStore } from '../../local/deployed';

// The admin CLI's `--env`: table names come from the stack outputs (DescribeStacks), nothing
// calls AWS here: the CloudFormation and DynamoDB clients are mocked.

const stack = (overrides: Partial<Stack> = {}): Stack => ({
  StackName: 'svcnum-sandbox',
  StackStatus: 'UPDATE_COMPLETE',
  CreationTime: new Date('2026-11-21T10:00:00Z'),
  Outputs: [
    { OutputKey: outputNames.tablePrefix, OutputValue: 'svcnum-sandbox-' },
    { OutputKey: outputNames.region, OutputValue: 'eu-west-1' },
    { OutputKey: outputNames.issuer, OutputValue: 'https://id.sandbox.svcnum.example' },
  ],
  ...overrides,
});

describe('admin --env: the deployed environment from its stack outputs', () => {
  const cloudFormation = mockClient(CloudFormationClient);
  // The store talks through the document client (core/adapters/dynamo-schema.ts).
  const dynamo = mockClient(DynamoDBDocumentClient);
  beforeEach(() => {
    cloudFormation.reset();
    dynamo.reset();
  });
  afterEach(() => {
    cloudFormation.reset();
    dynamo.reset();
  });

  it('asks CloudFormation for exactly the svcnum-<env> stack and derives every table name from TablePrefix', async () => {
    cloudFormation.on(DescribeStacksCommand).resolves({ Stacks: [stack()] });

    const deployed = await describeDeployedEnvironment('sandbox', { region: 'eu-west-1' });

    const calls = cloudFormation.commandCalls(DescribeStacksCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toStrictEqual({ StackName: 'svcnum-sandbox' });
    expect(deployed).toStrictEqual({
      environment: 'sandbox',
      stackName: 'svcnum-sandbox',
      region: 'eu-west-1',
      tablePrefix: 'svcnum-sandbox-',
      tables: tableNames('svcnum-sandbox-'),
    });
    // Every table of core/tables.ts, by its physical name.
    expect(Object.keys(deployed.tables).sort()).toStrictEqual(Object.keys(tableDefinitions).sort());
    expect(deployed.tables.clients).toBe('svcnum-sandbox-clients');
    expect(deployed.tables.authRequests).toBe('svcnum-sandbox-authRequests');
  });

  it('uses the production stack for --env production', async () => {
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        stack({
          StackName: 'svcnum-production',
          Outputs: [{ OutputKey: 'TablePrefix', OutputValue: 'svcnum-production-' }],
        }),
      ],
    });
    const deployed = await describeDeployedEnvironment('production', { region: 'eu-central-1' });
    expect(cloudFormation.commandCalls(DescribeStacksCommand)[0]!.args[0].input).toStrictEqual({
      StackName: stackName('production'),
    });
    expect(deployed.region).toBe('eu-central-1'); // no Region output: where the stack was found
    expect(deployed.tables.users).toBe('svcnum-production-users');
  });

  it("opens a store on the real tables: a client list scans svcnum-sandbox-clients in the stack's region", async () => {
    cloudFormation.on(DescribeStacksCommand).resolves({ Stacks: [stack()] });
    dynamo.on(ScanCommand).resolves({ Items: [] });

    const clients = await withDeployedStore('sandbox', (store) => store.listClients(), { region: 'eu-west-1' });

    expect(clients).toStrictEqual([]);
    const scans = dynamo.commandCalls(ScanCommand);
    expect(scans).toHaveLength(1);
    expect(scans[0]!.args[0].input.TableName).toBe('svcnum-sandbox-clients');
    expect(await (scans[0]!.thisValue as DynamoDBDocumentClient).config.region()).toBe('eu-west-1');
  });

  it('refuses a missing stack, a stack in flight and a stack without the output, with a readable message', async () => {
    cloudFormation
      .on(DescribeStacksCommand)
      .rejectsOnce(Object.assign(new Error('Stack with id svcnum-sandbox does not exist'), { name: 'ValidationError' }))
      .resolvesOnce({ Stacks: [stack({ StackStatus: 'CREATE_IN_PROGRESS' })] })
      .resolvesOnce({ Stacks: [stack({ Outputs: [] })] });
    await expect(describeDeployedEnvironment('sandbox', { region: 'eu-west-1' })).rejects.toThrow(
      'no stack svcnum-sandbox in eu-west-1',
    );
    await expect(describeDeployedEnvironment('sandbox', { region: 'eu-west-1' })).rejects.toThrow(
      'is CREATE_IN_PROGRESS',
    );
    await expect(describeDeployedEnvironment('sandbox', { region: 'eu-west-1' })).rejects.toThrow(
      'no usable TablePrefix output',
    );
  });

  it('looks for the stack in AWS_REGION, else AWS_DEFAULT_REGION, else the region of the settings file SVCNUM_SETTINGS names', () => {
    expect(deployedRegion('sandbox', { AWS_REGION: 'us-east-2', AWS_DEFAULT_REGION: 'us-west-1' })).toBe('us-east-2');
    expect(deployedRegion('sandbox', { AWS_DEFAULT_REGION: 'us-west-1' })).toBe('us-west-1');
    const directory = mkdtempSync(join(tmpdir(), 'svcnum-admin-env-'));
    try {
      const settings = join(directory, 'settings.json');
      writeFileSync(settings, JSON.stringify({ production: { region: 'eu-north-1' } }));
      expect(deployedRegion('production', { SVCNUM_SETTINGS: settings })).toBe('eu-north-1');
      expect(() => deployedRegion('sandbox', { SVCNUM_SETTINGS: settings })).toThrow(
        'which region? Set AWS_REGION, or name your settings file in SVCNUM_SETTINGS',
      );
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe("admin commands with --env: the same core use cases on the environment's tables", () => {
  const cloudFormation = mockClient(CloudFormationClient);
  const dynamo = mockClient(DynamoDBDocumentClient);
  // Single-item reads go through a plain client (core/adapters/dynamo-schema.ts `reads`).
  const reads = mockClient(DynamoDBClient);
  const deployed = { region: 'eu-west-1' };
  const grant: Grant = {
    grantId: 'GgGgGgGgGgGgGgGgGgGgGg',
    secretHash: 'h'.repeat(43),
    clientId: 'shop',
    svcnumId: '01J00000000000000000000000',
    scopes: ['openid', 'email'],
    authTime: 1_790_000_000_000,
    createdAt: 1_790_000_000_000,
    lastUsedAt: 1_790_000_000_000,
  };
  const user: User = {
    svcnumId: '01J00000000000000000000000',
    svcnum: '76000000001',
    email: 'ops@example.com',
    status: 'disabled',
    accountType: 'person',
    createdAt: 1_790_000_000_000,
  };
  beforeEach(() => {
    for (const mock of [cloudFormation, dynamo, reads]) mock.reset();
    cloudFormation.on(DescribeStacksCommand).resolves({ Stacks: [stack()] });
  });
  afterEach(() => {
    for (const mock of [cloudFormation, dynamo, reads]) mock.reset();
  });

  it('grant revoke GRANT_ID --env sandbox reads the grant strongly consistent and marks it revoked in svcnum-sandbox-grants', async () => {
    reads.on(GetItemCommand).resolves({ Item: marshall(grant) });
    dynamo.on(UpdateCommand).resolves({});

    const answer = await runAdminCommand(['grant', 'revoke', grant.grantId, '--env', 'sandbox'], { deployed });

    expect(reads.commandCalls(GetItemCommand).map((call) => call.args[0].input)).toStrictEqual([
      { TableName: 'svcnum-sandbox-grants', Key: marshall({ grantId: grant.grantId }), ConsistentRead: true },
    ]);
    const [update] = dynamo.commandCalls(UpdateCommand).map((call) => call.args[0].input);
    expect(update).toStrictEqual({
      TableName: 'svcnum-sandbox-grants',
      Key: { grantId: grant.grantId },
      UpdateExpression: 'SET revokedAt = if_not_exists(revokedAt, :now), #ttl = if_not_exists(#ttl, :ttl)',
      ExpressionAttributeNames: { '#ttl': 'ttl' },
      ExpressionAttributeValues: { ':now': expect.any(Number), ':ttl': expect.any(Number) },
    });
    expect(answer).toStrictEqual({
      grant_id: grant.grantId,
      client_id: 'shop',
      svcnum_id: user.svcnumId,
      scope: 'openid email',
      created_at: new Date(grant.createdAt).toISOString(),
      revoked_at: new Date(update!.ExpressionAttributeValues![':now'] as number).toISOString(),
      revoked: true,
    });
  });

  it('user enable EMAIL --env sandbox finds the account by its email and sets it active in svcnum-sandbox-users', async () => {
    reads
      .on(GetItemCommand, { TableName: 'svcnum-sandbox-emails' })
      .resolves({ Item: marshall({ email: user.email, svcnumId: user.svcnumId }) });
    reads.on(GetItemCommand, { TableName: 'svcnum-sandbox-users' }).resolves({ Item: marshall(user) });
    dynamo.on(UpdateCommand).resolves({ Attributes: { ...user, status: 'active' } });

    const answer = await runAdminCommand(['user', 'enable', 'Ops@Example.com', '--env', 'sandbox'], { deployed });

    expect(reads.commandCalls(GetItemCommand)[0]!.args[0].input).toStrictEqual({
      TableName: 'svcnum-sandbox-emails',
      Key: marshall({ email: 'ops@example.com' }),
      ConsistentRead: false,
    });
    expect(dynamo.commandCalls(UpdateCommand).map((call) => call.args[0].input)).toStrictEqual([
      {
        TableName: 'svcnum-sandbox-users',
        Key: { svcnumId: user.svcnumId },
        UpdateExpression: 'SET #status = :status',
        ConditionExpression: 'attribute_exists(svcnumId)',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':status': 'active' },
        ReturnValues: 'ALL_NEW',
      },
    ]);
    expect(answer).toStrictEqual({
      svcnum_id: user.svcnumId,
      svcnum: user.svcnum,
      email: user.email,
      status: 'active',
      account_type: 'person',
      created_at: new Date(user.createdAt).toISOString(),
    });
  });
});

describe('admin CLI --env usage', () => {
  const run = (...args: string[]) =>
    promisify(execFile)('npx', ['tsx', 'local/admin.ts', ...args], {
      env: { ...process.env, AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );

  it('rejects an unknown environment and local key commands against a deployed one (exit 2), before any AWS call', async () => {
    const [unknown, keys] = await Promise.all([
      run('client', 'list', '--env', 'staging'),
      run('key', 'list', '--env', 'sandbox'),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--env must be sandbox or production');
    expect(keys.code).toBe(2);
    expect(keys.stderr).toContain('KMS keys');
  }, 30_000);
});
