import { Annotations, CfnOutput, Fn, Stack, Tags, type StackProps } from 'aws-cdk-lib';
import { StreamViewType } from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';
import { routeGroupNames } from '../lambdas/manifest';
import { type EnvironmentConfig, outputNames, stackName, tablePrefix } from './config';
import { Data } from './data';
import { functionServiceName, HttpApi } from './http-api';
import { HmacKey, SigningKeys, type MacKeys } from './keys';
import { Monitoring } from './monitoring';
import { applyNagSuppressions } from './nag';
import { Provisioning, TASK_SERVICE_NAME } from './provisioning';
import { PublishedPublicKeys } from './public-keys';
import { exampleValues } from './settings';
import { LambdaReleases } from './releases';
import { WakeupEngine } from './wakeup-engine';
import { RELAY_SERVICE_NAME, WakeupRelay } from './wakeup-relay';

// One environment of the service: data, keys, the HTTP API, the provisioning API, the wake-up
// engine and its relay, monitoring.

export interface ServiceStackProps extends StackProps {
  readonly config: EnvironmentConfig;
}

/** What every process in AWS reads (core/adapters/aws-environment.ts), except ISSUER. */
function sharedEnvironment(
  config: EnvironmentConfig,
  prefix: string,
  keys: SigningKeys,
  publicKeys: PublishedPublicKeys,
) {
  return {
    TABLE_PREFIX: prefix,
    KMS_KEY_ID: keys.active.keyArn,
    KMS_VERIFY_KEY_IDS: keys.published.map((key) => key.keyArn).join(','),
    // Published at deploy time: no process calls GetPublicKey (lib/public-keys.ts).
    KMS_PUBLIC_KEYS: publicKeys.value,
    NUMBER_COOL_OFF_DAYS: String(config.numberCoolOffDays),
    DPOP_NONCES: config.dpopNonces ? 'on' : 'off',
    AGENT_QUOTA_INDEPENDENT: String(config.agentQuotas.independent),
    AGENT_QUOTA_DEPENDENT: String(config.agentQuotas.dependent),
    MASK_QUOTA: String(config.numberPool.maskQuota),
    NUMBER_QUOTA: String(config.numberPool.numberQuota),
    LOG_LEVEL: config.logLevel,
    METRICS_NAMESPACE: 'svcnum',
  };
}

export class ServiceStack extends Stack {
  readonly data: Data;
  readonly keys: SigningKeys;
  /** The RSA keys of RS256 ID tokens. */
  readonly rsaKeys: SigningKeys;
  readonly publicKeys: PublishedPublicKeys;
  readonly signInMac: HmacKey;
  readonly pageTokenKey: HmacKey;
  readonly http: HttpApi;
  readonly provisioning: Provisioning;
  readonly wakeups: WakeupEngine;
  readonly wakeupRelay: WakeupRelay;
  readonly monitoring: Monitoring;
  readonly releases: LambdaReleases;
  private readonly zones: string[];

  constructor(scope: Construct, props: ServiceStackProps) {
    const { config } = props;
    super(scope, stackName(config.name), {
      ...props,
      env: { account: config.account, region: config.region },
      description: `svcnum ${config.name}: sign-in (OAuth 2.0 / OIDC) and number provisioning`,
      terminationProtection: config.deletionProtection,
    });
    // Without configured AZs, the region's first two as resolved at deploy time (like an
    // environment-agnostic stack): no availability-zones context lookup, no credentials at synth.
    this.zones = config.availabilityZones
      ? [...config.availabilityZones]
      : [0, 1].map((index) => Fn.select(index, Fn.getAzs()));
    Tags.of(this).add('service', 'svcnum');
    Tags.of(this).add('environment', config.name);

    const prefix = tablePrefix(config.name);
    this.data = new Data(this, 'Data', {
      tablePrefix: prefix,
      retain: config.retainData,
      deletionProtection: config.deletionProtection,
      // The keys of each new message, for the wake-up relay.
      streams: { messages: StreamViewType.KEYS_ONLY },
    });
    this.keys = new SigningKeys(this, 'Keys', {
      environment: config.name,
      active: config.signingKeys.active,
      published: config.signingKeys.published,
      retain: config.retainData,
    });

    this.rsaKeys = new SigningKeys(this, 'RsaKeys', {
      environment: config.name,
      active: config.rsaSigningKeys.active,
      published: config.rsaSigningKeys.published,
      retain: config.retainData,
      alg: 'RS256',
    });

    this.publicKeys = new PublishedPublicKeys(this, 'PublicKeys', { config, keys: [this.keys, this.rsaKeys] });

    const retain = config.retainData;
    this.signInMac = new HmacKey(this, 'SignInMac', {
      environment: config.name,
      retain,
      name: 'sign-in-mac',
      purpose: 'sign-in MAC key (sign-in CSRF token, device cookie)',
    });
    this.pageTokenKey = new HmacKey(this, 'PageTokenKey', {
      environment: config.name,
      retain,
      name: 'page-token',
      purpose: 'page-token key (page tokens and resume cursors)',
    });
    const macKeys: MacKeys = { signIn: this.signInMac, pageToken: this.pageTokenKey };

    const shared = sharedEnvironment(config, prefix, this.keys, this.publicKeys);

    this.http = new HttpApi(this, 'Http', {
      config,
      tables: this.data.tables,
      tablePrefix: prefix,
      keys: this.keys,
      rsaKeys: this.rsaKeys,
      macKeys,
      sharedEnvironment: shared,
    });
    this.provisioning = new Provisioning(this, 'Provisioning', {
      config,
      tables: this.data.tables,
      tablePrefix: prefix,
      keys: this.keys,
      macKeys,
      environment: { ...shared, ISSUER: this.http.issuer },
    });
    this.wakeups = new WakeupEngine(this, 'Wakeups', { config, vpc: this.provisioning.vpc });
    this.provisioning.useWakeupEngine(this.wakeups);
    this.wakeupRelay = new WakeupRelay(this, 'WakeupRelay', {
      config,
      vpc: this.provisioning.vpc,
      engine: this.wakeups,
      messages: this.data.tables.messages,
    });

    this.monitoring = new Monitoring(this, 'Monitoring', {
      config,
      api: this.http.api,
      functions: this.http.functions,
      tables: this.data.tables,
      service: this.provisioning.service,
      loadBalancer: this.provisioning.loadBalancer,
      targetGroup: this.provisioning.targetGroup,
      metricsNamespace: shared.METRICS_NAMESPACE,
      kmsServices: [...routeGroupNames.map(functionServiceName), TASK_SERVICE_NAME],
      taskLogs: this.provisioning.taskLogs,
      wakeups: {
        engine: this.wakeups,
        relay: this.wakeupRelay.function,
        publishers: [TASK_SERVICE_NAME, RELAY_SERVICE_NAME],
        // The messages Lambda (HTTP sends) and the task (gRPC sends) store auto-replies and forwards.
        derivedMessageSenders: [functionServiceName('messages'), TASK_SERVICE_NAME],
      },
      poolAllocator: TASK_SERVICE_NAME,
    });

    this.releases = new LambdaReleases(this, 'Releases', { config, aliases: this.http.aliases });

    this.addOutputs(config, prefix);

    // Example values would only fail at deploy time (or page nobody): say so at synth. Production's
    // settings refuse them outright (lib/settings.ts) unless they come from the committed example.
    const examples = exampleValues(config);
    if (examples.length) {
      Annotations.of(this).addWarningV2(
        'svcnum:example-settings',
        `settings of ${config.name} that look like examples: ${examples.join(', ')}; put real values in your ` +
          `settings file before cdk deploy`,
      );
    }

    applyNagSuppressions(this, config);
  }

  /** The stack's outputs: what operators and the admin CLI (`--env`) read after a deploy. */
  private addOutputs(config: EnvironmentConfig, prefix: string): void {
    const output = (id: string, value: string, description: string) => new CfnOutput(this, id, { value, description });
    output(outputNames.tablePrefix, prefix, 'Physical table name prefix (core/tables.ts tableNames)');
    output(outputNames.region, this.region, 'Region of the tables, keys and endpoints');
    output(outputNames.issuer, this.http.issuer, 'OAuth issuer: discovery at /.well-known/openid-configuration');
    if (!this.http.domain) output(outputNames.apiUrl, this.http.api.url, 'The REST API stage URL');
    if (this.http.domain)
      output(
        outputNames.apiDomainTarget,
        this.http.domain.domainNameAliasDomainName,
        `Point ${config.http.customDomain!.domainName} here (CNAME or alias)`,
      );
    output(outputNames.grpcEndpoint, this.provisioning.endpoint, 'gRPC provisioning API (TLS, HTTP/2)');
    output(
      outputNames.loadBalancerDnsName,
      this.provisioning.loadBalancer.loadBalancerDnsName,
      `Point ${config.provisioning.domainName} here (CNAME or alias)`,
    );
    output(outputNames.signingKeyArn, this.keys.active.keyArn, 'The KMS key that signs (KMS_KEY_ID)');
    output(outputNames.signingKeyAlias, this.keys.activeAlias.aliasName, 'Alias that follows the active signing key');
    output(outputNames.rsaSigningKeyArn, this.rsaKeys.active.keyArn, 'The KMS key that signs RS256 ID tokens');
    output(outputNames.signInMacKeyArn, this.signInMac.key.keyArn, 'The KMS HMAC key of sign-in tokens (MAC_KEY_ID)');
    output(
      outputNames.pageTokenKeyArn,
      this.pageTokenKey.key.keyArn,
      'The KMS HMAC key the page-token key is derived from (PAGE_TOKEN_KEY_ID)',
    );
    output(outputNames.alarmTopicArn, this.monitoring.topic.topicArn, 'SNS topic of every alarm');
    output(outputNames.dashboardName, this.monitoring.dashboard.dashboardName, 'CloudWatch dashboard');
  }

  /** The VPC's AZs (see the constructor): never a context lookup. */
  override get availabilityZones(): string[] {
    return this.zones;
  }
}
