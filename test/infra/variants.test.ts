import { Match } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EnvironmentConfig, outputNames, validate } from '../../lib/config';
import { logicalId, resources, synthesize, testConfigs, type Json, type Synthesized } from './support';

// The configuration's other branches, in one more synthesis: no custom domain (issuer = the
// execute-api stage URL), a key rotation in progress (v2 signs, v1 still published), known
// client CIDRs only, DNS records in a hosted zone, tracing off.

let synth: Synthesized;
let config: EnvironmentConfig;
beforeAll(() => {
  const configs = testConfigs();
  config = validate({
    ...configs.sandbox,
    http: { ...configs.sandbox.http, customDomain: undefined, tracing: false },
    signingKeys: { active: 'v2', published: ['v1'] },
    provisioning: {
      ...configs.sandbox.provisioning,
      allowedCidrs: ['203.0.113.0/24', '198.51.100.0/24'],
      hostedZone: { id: 'Z0123456789ABCDEFGHIJ', name: 'example.com' },
    },
  });
  synth = synthesize({ ...configs, sandbox: config }, ['sandbox'], { bundle: false });
}, 120_000);
afterAll(() => synth?.cleanup());

describe('sandbox without a custom domain, during a key rotation', () => {
  const template = () => synth.templates.sandbox;
  const stack = () => synth.stacks.sandbox;

  it('uses the execute-api stage URL as the issuer, keeps that endpoint on and exports it', () => {
    const issuer = {
      'Fn::Join': [
        '',
        [
          'https://',
          { Ref: logicalId(stack().http.api) },
          '.execute-api.eu-central-1.',
          { Ref: 'AWS::URLSuffix' },
          '/v1',
        ],
      ],
    };
    template().hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ ISSUER: issuer }) },
    });
    template().hasResourceProperties('AWS::ApiGateway::RestApi', { DisableExecuteApiEndpoint: false });
    template().resourceCountIs('AWS::ApiGateway::DomainName', 0);
    const outputs = template().findOutputs('*') as Record<string, { Value: unknown }>;
    expect(outputs[outputNames.issuer]!.Value).toStrictEqual(issuer);
    expect(outputs[outputNames.apiUrl]).toBeDefined();
    expect(outputs[outputNames.apiDomainTarget]).toBeUndefined();
  });

  it('publishes both keys, signs with the active one, lets signers use either (old containers drain)', () => {
    const [active, published] = [logicalId(stack().keys.active), logicalId(stack().keys.published[0]!)];
    const functions = resources(template(), 'AWS::Lambda::Function');
    const variables = (
      functions[logicalId(stack().http.functions.discovery)]!.Properties!.Environment as { Variables: Json }
    ).Variables;
    expect(variables.KMS_KEY_ID).toStrictEqual({ 'Fn::GetAtt': [active, 'Arn'] });
    expect(variables.KMS_VERIFY_KEY_IDS).toStrictEqual({ 'Fn::GetAtt': [published, 'Arn'] });
    template().hasResourceProperties('AWS::KMS::Alias', {
      AliasName: 'alias/svcnum-sandbox/signing',
      TargetKeyId: { 'Fn::GetAtt': [active, 'Arn'] },
    });
    template().hasResourceProperties('AWS::KMS::Alias', {
      AliasName: 'alias/svcnum-sandbox/signing-v1',
      TargetKeyId: { 'Fn::GetAtt': [published, 'Arn'] },
    });
    const kmsGrant = (role: string) => {
      const policy = Object.values(resources(template(), 'AWS::IAM::Policy')).find(
        (candidate) => JSON.stringify(candidate.Properties!.Roles) === JSON.stringify([{ Ref: role }]),
      )!;
      const statement = (
        policy.Properties!.PolicyDocument as {
          Statement: Array<{ Action: unknown; Resource: Array<{ 'Fn::GetAtt': [string, string] }> }>;
        }
      ).Statement.find((candidate) => JSON.stringify(candidate.Action).includes('kms:'))!;
      return {
        actions: statement.Action,
        keys: statement.Resource.map((resource) => resource['Fn::GetAtt'][0]).sort(),
      };
    };
    // The token function signs with the RSA key of RS256 ID tokens as well (one statement: the same actions).
    expect(kmsGrant(logicalId(stack().http.functions.token.role!))).toStrictEqual({
      actions: ['kms:GetPublicKey', 'kms:Sign'],
      keys: [active, published, logicalId(stack().rsaKeys.active)].sort(),
    });
    expect(kmsGrant(logicalId(stack().http.functions.userinfo.role!))).toStrictEqual({
      actions: 'kms:GetPublicKey',
      keys: [active, published].sort(),
    });
  });

  it('opens the NLB to the configured CIDRs only and creates the DNS record', () => {
    const group = resources(template(), 'AWS::EC2::SecurityGroup')[
      logicalId(stack().node.findChild('Provisioning').node.findChild('NlbSecurityGroup'))
    ]!;
    expect(
      (group.Properties!.SecurityGroupIngress as Json[]).map(
        (rule) => `${rule.CidrIp as string}:${rule.FromPort as number}`,
      ),
    ).toStrictEqual(['203.0.113.0/24:443', '198.51.100.0/24:443']);
    template().hasResourceProperties('AWS::Route53::RecordSet', {
      Name: 'grpc.sandbox.example.com.',
      Type: 'A',
      HostedZoneId: 'Z0123456789ABCDEFGHIJ',
    });
  });

  it('has no X-Ray permission without tracing, and still passes cdk-nag without the tracing and EC23 acknowledgments', () => {
    expect(JSON.stringify(template().toJSON())).not.toContain('xray:');
    const report = new AwsSolutionsChecks(stack()).validateScope(stack());
    expect(report.violations).toStrictEqual([]);
  });
});

describe('configuration validation', () => {
  const base = () => testConfigs().sandbox;
  it.each([
    [
      'a drain longer than the stop timeout',
      (c: EnvironmentConfig) => ({ ...c, provisioning: { ...c.provisioning, drainSeconds: 30 } }),
      /drainSeconds/,
    ],
    [
      'a browser function too small for scrypt',
      (c: EnvironmentConfig) => ({
        ...c,
        http: { ...c.http, functions: { ...c.http.functions, browser: { memoryMiB: 256, timeoutSeconds: 10 } } },
      }),
      /512 MiB/,
    ],
    [
      'an active key also listed as published',
      (c: EnvironmentConfig) => ({ ...c, signingKeys: { active: 'v1', published: ['v1'] } }),
      /signingKeys/,
    ],
    [
      'a retention CloudWatch does not offer',
      (c: EnvironmentConfig) => ({ ...c, logRetentionDays: 10 as never }),
      /logRetentionDays/,
    ],
    [
      "a timeout beyond API Gateway's 29 s",
      (c: EnvironmentConfig) => ({
        ...c,
        http: { ...c.http, functions: { ...c.http.functions, token: { memoryMiB: 512, timeoutSeconds: 60 } } },
      }),
      /29 s/,
    ],
    ['a malformed account', (c: EnvironmentConfig) => ({ ...c, account: 'abc' }), /account/],
    [
      'a domain outside its hosted zone',
      (c: EnvironmentConfig) => ({
        ...c,
        provisioning: { ...c.provisioning, hostedZone: { id: 'Z0123456789ABCDEFGHIJ', name: 'svcnum.org' } },
      }),
      /not in its hosted zone/,
    ],
  ])('refuses %s', (_what, change, message) => {
    expect(() => validate(change(base()))).toThrow(message);
  });
});
