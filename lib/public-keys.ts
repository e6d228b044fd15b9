import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomResource, Duration } from 'aws-cdk-lib';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './config';
import type { SigningKeys } from './keys';
import { functionLogGroup, repoRoot } from './util';

// The signing keys' public keys, published at deploy time (KMS_PUBLIC_KEYS), so that no Lambda
// container or task calls KMS GetPublicKey when it starts: a cold-start storm of many containers
// would otherwise spend GetPublicKey's request quota (a management-API quota, far below the signing
// quota) once per container. A custom resource calls GetPublicKey once per key on each deploy that
// changes the key set (its KeyIds); its value reaches every process as an environment variable.
// Nothing calls AWS at synth.

export interface PublishedPublicKeysProps {
  readonly config: EnvironmentConfig;
  /** The signing keys, Ed25519 then RSA: every key verifiers accept (SigningKeys.all), active first. */
  readonly keys: readonly SigningKeys[];
}

export const PUBLIC_KEYS_RESOURCE_TYPE = 'Custom::SigningPublicKeys';

export class PublishedPublicKeys extends Construct {
  /** KMS_PUBLIC_KEYS: a JSON object of key ARN → base64 DER SubjectPublicKeyInfo (a deploy-time token). */
  readonly value: string;
  readonly function: LambdaFunction;

  constructor(scope: Construct, id: string, props: PublishedPublicKeysProps) {
    super(scope, id);
    const { config } = props;
    const name = `svcnum-${config.name}-signing-public-keys`;
    const logGroup = functionLogGroup(this, 'Logs', name, config);
    // Its own role: logs to its own group, and GetPublicKey on the signing keys (in its policy and
    // the keys'), nothing else.
    const role = new Role(this, 'Role', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `svcnum ${config.name}: publishes the signing keys' public keys at deploy time`,
    });
    role.addToPolicy(
      new PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    for (const keys of props.keys) keys.grant(role, 'verify');
    this.function = new LambdaFunction(this, 'Function', {
      functionName: name,
      description: `svcnum ${config.name}: KMS GetPublicKey of the signing keys, once per deploy (KMS_PUBLIC_KEYS)`,
      // Inlined into the template: no asset to build or upload, and the runtime's own AWS SDK.
      code: Code.fromInline(readFileSync(join(repoRoot, 'lib/public-keys-handler.cjs'), 'utf8')),
      handler: 'index.handler',
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.ARM_64,
      memorySize: 256,
      timeout: Duration.minutes(1),
      role,
      logGroup,
    });
    const resource = new CustomResource(this, 'Resource', {
      serviceToken: this.function.functionArn,
      resourceType: PUBLIC_KEYS_RESOURCE_TYPE,
      // A new key set (rotation) is an update: GetPublicKey again, and every process gets the new value.
      properties: { KeyIds: props.keys.flatMap((keys) => keys.all.map((key) => key.keyArn)) },
    });
    this.value = resource.getAttString('PublicKeys');
  }
}
