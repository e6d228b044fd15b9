// The one typed configuration of each deployed environment. Plain data (no aws-cdk-lib import), so
// the admin CLI and the benchmarks can read it without loading the CDK.
//
// Two sources, no placeholders: what an operator must choose (account, region, domains and
// certificates, alarm destinations, allowed CIDRs, the public function's reserved concurrency)
// comes from the settings file the CDK context names (lib/settings.ts; docs/deploying.md,
// "2. Configure"), with no defaults; everything else (sizes, limits, retention, protection) is
// fixed per environment below.

import type { RouteGroup } from '../lambdas/manifest';
import type { EnvironmentSettings } from './settings-schema';

export const environmentNames = ['sandbox', 'production'] as const;
export type EnvironmentName = (typeof environmentNames)[number];

export const isEnvironmentName = (value: string): value is EnvironmentName =>
  (environmentNames as readonly string[]).includes(value);

/** CloudFormation stack name of an environment: `svcnum-sandbox`, `svcnum-production`. */
export const stackName = (environment: EnvironmentName) => `svcnum-${environment}`;

/** Physical table name prefix of an environment (core/tables.ts `tableNames(prefix)`). */
export const tablePrefix = (environment: EnvironmentName) => `${stackName(environment)}-`;

/** Stack outputs that operators and the admin CLI (`--env`) read. */
export const outputNames = {
  tablePrefix: 'TablePrefix',
  region: 'Region',
  issuer: 'Issuer',
  apiUrl: 'ApiStageUrl',
  apiDomainTarget: 'ApiDomainTarget',
  grpcEndpoint: 'GrpcEndpoint',
  loadBalancerDnsName: 'GrpcLoadBalancerDnsName',
  signingKeyArn: 'SigningKeyArn',
  signingKeyAlias: 'SigningKeyAlias',
  rsaSigningKeyArn: 'RsaSigningKeyArn',
  signInMacKeyArn: 'SignInMacKeyArn',
  pageTokenKeyArn: 'PageTokenKeyArn',
  alarmTopicArn: 'AlarmTopicArn',
  dashboardName: 'DashboardName',
} as const;

/** CloudWatch Logs retention periods that CloudWatch accepts. */
export const logRetentionDayValues = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;
export type LogRetentionDays = (typeof logRetentionDayValues)[number];

export interface HostedZone {
  /** Route 53 hosted zone id, e.g. Z0123456789ABCDEFGHIJ. */
  readonly id: string;
  /** The zone's domain name, e.g. svcnum.example. */
  readonly name: string;
}

export interface CustomDomain {
  readonly domainName: string;
  /** ACM certificate in the stack's region covering domainName. */
  readonly certificateArn: string;
  /** When set, the stack creates the alias record; otherwise point a CNAME at the stack output. */
  readonly hostedZone?: HostedZone;
}

export interface FunctionSettings {
  readonly memoryMiB: number;
  readonly timeoutSeconds: number;
  /**
   * Reserved concurrency: at most this many instances, and never fewer available (the account's
   * unreserved pool must keep 100). Set on `public` (settings: publicReservedConcurrency), so that
   * unauthenticated calls cannot take the concurrency of sign-in and tokens.
   */
  readonly reservedConcurrency?: number;
}

export interface EnvironmentConfig {
  readonly name: EnvironmentName;
  readonly account: string;
  readonly region: string;
  /**
   * The two AZs of the VPC. Default: the region's first two (Fn::GetAZs at deploy time), which
   * needs no context lookup at synth. Name them only to pin specific zones.
   */
  readonly availabilityZones?: readonly [string, string];

  readonly http: {
    /**
     * Custom domain of the REST API (optional). Without one the issuer is the execute-api stage
     * URL, and the browser pages, which redirect to root-relative paths (/login, /consent), only
     * work behind a custom domain: configure one wherever people sign in.
     */
    readonly customDomain?: CustomDomain;
    readonly stageName: string;
    /** Stage-wide API Gateway throttling (requests per second, burst). */
    readonly throttle: { readonly rateLimit: number; readonly burstLimit: number };
    /** X-Ray active tracing of the Lambda functions and the stage. */
    readonly tracing: boolean;
    readonly functions: Record<RouteGroup, FunctionSettings>;
  };

  readonly waf: {
    /**
     * Requests per IP per evaluation window to /api/resolve and /api/discover; then 429. The
     * public function's in-process limiter gets the same rate per minute (PUBLIC_RATE_LIMIT_PER_MINUTE).
     */
    readonly publicApiRateLimit: number;
    /**
     * Sign-in form posts (POST /login) per IP per evaluation window; then a 429 page. The service
     * throttles password checks per account and per address as well (docs/security.md, "Failed sign-ins");
     * this rule keeps a flood from one address from reaching the functions at all.
     */
    readonly signInRateLimit: number;
    /**
     * Sign-in page views (GET /login) per IP per evaluation window: each one without a valid
     * sign-in token costs a KMS GenerateMac, so a flood of page views is bounded too.
     */
    readonly signInPageRateLimit: number;
    /**
     * Backstop: requests per IP per evaluation window to any path (floods, credential stuffing).
     * Keep it well above what one busy API client sends from one address.
     */
    readonly perIpRateLimit: number;
    readonly evaluationWindowSeconds: 60 | 120 | 300 | 600;
    /** Retry-After (seconds) sent with the 429 of the rate rules. */
    readonly retryAfterSeconds: number;
  };

  readonly signingKeys: {
    /** Version of the key that signs (a KMS key `signing-<version>` in this stack). */
    readonly active: string;
    /** Further key versions published in the JWKS only: one being introduced or retired. */
    readonly published: readonly string[];
  };
  /** The RSA keys of RS256 ID tokens (KMS keys `signing-rsa-<version>`), versioned and rotated as signingKeys. */
  readonly rsaSigningKeys: EnvironmentConfig['signingKeys'];

  readonly provisioning: {
    /** The gRPC endpoint's name; the NLB TLS certificate must cover it. */
    readonly domainName: string;
    /** ACM certificate of the NLB's TLS listener (required). */
    readonly certificateArn: string;
    readonly hostedZone?: HostedZone;
    /** Who may reach the NLB on 443. */
    readonly allowedCidrs: readonly string[];
    readonly cpu: 256 | 512 | 1024 | 2048 | 4096;
    readonly memoryMiB: number;
    readonly minTasks: number;
    readonly maxTasks: number;
    readonly cpuTargetPercent: number;
    /** Calls in flight get this long after SIGTERM (DRAIN_SECONDS); also the NLB deregistration delay. */
    readonly drainSeconds: number;
    /** ECS stopTimeout: SIGKILL this long after SIGTERM; must exceed drainSeconds. */
    readonly stopTimeoutSeconds: number;
  };

  /**
   * The pub/sub engine of inbox wake-ups (lib/wakeup-engine.ts): ElastiCache for Valkey in the VPC,
   * cluster mode disabled, and the relay Lambda that publishes for the messages Lambda.
   */
  readonly wakeups: {
    /** ElastiCache node type (pub/sub only, nothing stored: small nodes do). */
    readonly nodeType: string;
    /** Replicas beside the primary: 0 is one node (no failover); 1+ is Multi-AZ with automatic failover. */
    readonly replicas: number;
    /** The wake-up relay function (DynamoDB stream of the messages table → engine). */
    readonly relay: FunctionSettings;
  };

  /** Cool-off of retired numbers before reuse (NUMBER_COOL_OFF_DAYS). */
  readonly numberCoolOffDays: number;
  /** DPoP proofs must carry a server nonce (DPOP_NONCES, docs/security.md#dpop-proofs). */
  readonly dpopNonces: boolean;
  /** Default agent quotas per owner (AGENT_QUOTA_INDEPENDENT / _DEPENDENT); `admin quota set` overrides per owner. */
  readonly agentQuotas: { readonly independent: number; readonly dependent: number };
  readonly logRetentionDays: LogRetentionDays;
  readonly logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

  readonly alarms: {
    /** Each address gets an SNS email subscription (confirm the mail once). */
    readonly emails: readonly string[];
    /** Each URL (a paging service's webhook) gets an SNS HTTPS subscription (it confirms once). */
    readonly httpsEndpoints: readonly string[];
    /** Existing SNS topics (chat, paging) that also receive every alarm. */
    readonly topicArns: readonly string[];
    /** API Gateway 5xx answers, percent of requests over 5 minutes. */
    readonly api5xxPercent: number;
    /** Lambda errors per function in 5 minutes. */
    readonly lambdaErrors: number;
    /** p99 latency of POST /oauth/token, milliseconds. */
    readonly tokenP99Ms: number;
  };

  /**
   * How a new version of a route group function takes traffic (lib/releases.ts): `canary` through
   * CodeDeploy (10 % for 5 minutes, then all), rolled back when the function's alias errors or its
   * p99 duration passes these figures; `all-at-once` moves the alias at once.
   */
  readonly lambdaReleases:
    | { readonly traffic: 'all-at-once' }
    | {
        readonly traffic: 'canary';
        /** Errors of the alias in one minute that roll a release back. */
        readonly rollbackErrors: number;
        /** p99 duration (ms) of each function's alias, in 2 of 3 minutes, that rolls a release back. */
        readonly rollbackP99Ms: Record<RouteGroup, number>;
      };

  /**
   * Fair shares of the number pool: default limits per owner (MASK_QUOTA: live masks,
   * NUMBER_QUOTA: programmable numbers; `admin quota set` overrides per owner), and the alarm
   * FreeNumbersLow when a pool query sees fewer free numbers than `lowAlarm` (1-100: a query counts up to 100).
   */
  readonly numberPool: { readonly maskQuota: number; readonly numberQuota: number; readonly lowAlarm: number };

  /**
   * Keep tables, keys, log groups and the log bucket on updates and deletes, but not after a failed
   * create (lib/util.ts statefulRemovalPolicy).
   */
  readonly retainData: boolean;
  /** DynamoDB and NLB deletion protection. */
  readonly deletionProtection: boolean;
}

/**
 * An environment's configuration: the operator's settings (lib/settings.ts, validated) and the
 * fixed values of that environment.
 */
export function environmentConfig(environment: EnvironmentName, settings: EnvironmentSettings): EnvironmentConfig {
  const { account, region, availabilityZones, api, grpc, alarms: destinations } = settings;
  const provisioningEndpoint = {
    domainName: grpc.domainName,
    certificateArn: grpc.certificateArn,
    ...(grpc.hostedZone ? { hostedZone: grpc.hostedZone } : {}),
    allowedCidrs: grpc.allowedCidrs,
  };
  const alarmDestinations = {
    emails: destinations.emails ?? [],
    httpsEndpoints: destinations.httpsEndpoints ?? [],
    topicArns: destinations.topicArns ?? [],
  };
  const target = { account, region, ...(availabilityZones ? { availabilityZones } : {}) };
  const config: Record<EnvironmentName, () => EnvironmentConfig> = {
    sandbox: () => ({
      name: 'sandbox',
      ...target,
      http: {
        ...(api ? { customDomain: api } : {}),
        stageName: 'v1',
        throttle: { rateLimit: 100, burstLimit: 200 },
        tracing: true,
        functions: {
          // scrypt (N=2^17, r=8) needs 128 MiB per password check; Lambda CPU grows with memory,
          // so 1024 MiB (~0.6 vCPU) keeps a sign-in near half a second.
          browser: { memoryMiB: 1024, timeoutSeconds: 10 },
          token: { memoryMiB: 512, timeoutSeconds: 6 },
          userinfo: { memoryMiB: 256, timeoutSeconds: 5 },
          discovery: { memoryMiB: 256, timeoutSeconds: 5 },
          public: {
            memoryMiB: 256,
            timeoutSeconds: 5,
            reservedConcurrency: settings.publicReservedConcurrency || undefined,
          },
          messages: { memoryMiB: 512, timeoutSeconds: 6 },
        },
      },
      waf: {
        publicApiRateLimit: 1500,
        signInRateLimit: 100,
        signInPageRateLimit: 300,
        perIpRateLimit: 6000,
        evaluationWindowSeconds: 300,
        retryAfterSeconds: 60,
      },
      signingKeys: { active: 'v1', published: [] },
      rsaSigningKeys: { active: 'v1', published: [] },
      provisioning: {
        ...provisioningEndpoint,
        cpu: 256,
        memoryMiB: 512,
        minTasks: 1,
        maxTasks: 2,
        cpuTargetPercent: 60,
        drainSeconds: 25,
        stopTimeoutSeconds: 30,
      },
      // One node: a lost engine only slows wake-ups to the safety-net poll.
      wakeups: { nodeType: 'cache.t4g.micro', replicas: 0, relay: { memoryMiB: 256, timeoutSeconds: 10 } },
      numberCoolOffDays: 1,
      dpopNonces: false,
      agentQuotas: { independent: 10, dependent: 10 },
      logRetentionDays: 14,
      logLevel: 'DEBUG',
      alarms: { ...alarmDestinations, api5xxPercent: 5, lambdaErrors: 5, tokenP99Ms: 1500 },
      lambdaReleases: { traffic: 'all-at-once' },
      numberPool: { maskQuota: 10, numberQuota: 10, lowAlarm: 20 },
      retainData: false,
      deletionProtection: false,
    }),
    production: () => ({
      name: 'production',
      ...target,
      http: {
        // Required in production's settings (people sign in here).
        customDomain: api!,
        stageName: 'v1',
        throttle: { rateLimit: 1000, burstLimit: 2000 },
        tracing: true,
        functions: {
          browser: { memoryMiB: 1024, timeoutSeconds: 10 },
          token: { memoryMiB: 1024, timeoutSeconds: 6 },
          userinfo: { memoryMiB: 512, timeoutSeconds: 5 },
          discovery: { memoryMiB: 256, timeoutSeconds: 5 },
          public: { memoryMiB: 512, timeoutSeconds: 5, reservedConcurrency: settings.publicReservedConcurrency },
          messages: { memoryMiB: 1024, timeoutSeconds: 6 },
        },
      },
      waf: {
        publicApiRateLimit: 1500,
        signInRateLimit: 100,
        signInPageRateLimit: 300,
        perIpRateLimit: 30000,
        evaluationWindowSeconds: 300,
        retryAfterSeconds: 60,
      },
      signingKeys: { active: 'v1', published: [] },
      rsaSigningKeys: { active: 'v1', published: [] },
      provisioning: {
        ...provisioningEndpoint,
        cpu: 512,
        memoryMiB: 1024,
        minTasks: 2,
        maxTasks: 8,
        cpuTargetPercent: 60,
        drainSeconds: 25,
        stopTimeoutSeconds: 30,
      },
      wakeups: { nodeType: 'cache.t4g.small', replicas: 1, relay: { memoryMiB: 256, timeoutSeconds: 10 } },
      numberCoolOffDays: 90,
      dpopNonces: false,
      agentQuotas: { independent: 10, dependent: 10 },
      logRetentionDays: 365,
      logLevel: 'INFO',
      alarms: { ...alarmDestinations, api5xxPercent: 1, lambdaErrors: 1, tokenP99Ms: 1000 },
      lambdaReleases: {
        traffic: 'canary',
        rollbackErrors: 1,
        // Each well above what the function takes today (sign-in's scrypt about 0.5 s), well below its timeout.
        rollbackP99Ms: { browser: 3000, token: 1500, userinfo: 1000, discovery: 1000, public: 1000, messages: 1500 },
      },
      numberPool: { maskQuota: 10, numberQuota: 10, lowAlarm: 100 },
      retainData: true,
      deletionProtection: true,
    }),
  };
  return validate(config[environment]());
}

/** The configuration mistakes that would only show at deploy time (or in production). */
export function validate(config: EnvironmentConfig): EnvironmentConfig {
  const problems: string[] = [];
  const { provisioning: p } = config;
  if (!/^\d{12}$/.test(config.account)) problems.push(`account must be 12 digits, got '${config.account}'`);
  if (p.drainSeconds >= p.stopTimeoutSeconds)
    problems.push('provisioning.drainSeconds must be below stopTimeoutSeconds (ECS kills the task at stopTimeout)');
  if (p.stopTimeoutSeconds > 120) problems.push('provisioning.stopTimeoutSeconds is at most 120 on Fargate');
  if (p.minTasks < 1 || p.maxTasks < p.minTasks) problems.push('provisioning: need 1 <= minTasks <= maxTasks');
  for (const [name, k] of [
    ['signingKeys', config.signingKeys],
    ['rsaSigningKeys', config.rsaSigningKeys],
  ] as const) {
    if (!/^[a-z0-9-]{1,20}$/.test(k.active))
      problems.push(`${name}.active must be a short version label, got '${k.active}'`);
    if (k.published.includes(k.active) || new Set(k.published).size !== k.published.length)
      problems.push(`${name}.published must not repeat a version or the active one`);
    for (const version of k.published)
      if (!/^[a-z0-9-]{1,20}$/.test(version)) problems.push(`signing key version '${version}' is not a short label`);
  }
  if (!Number.isFinite(config.numberCoolOffDays) || config.numberCoolOffDays < 0)
    problems.push('numberCoolOffDays must be a non-negative number');
  for (const [kind, quota] of Object.entries(config.agentQuotas)) {
    if (!Number.isInteger(quota) || quota < 0) problems.push(`agentQuotas.${kind} must be a whole number`);
  }
  const pool = config.numberPool;
  for (const [name, quota] of Object.entries({ maskQuota: pool.maskQuota, numberQuota: pool.numberQuota })) {
    if (!Number.isInteger(quota) || quota < 0 || quota > 100_000)
      problems.push(`numberPool.${name} must be a whole number 0-100000`);
  }
  if (!Number.isInteger(pool.lowAlarm) || pool.lowAlarm < 1 || pool.lowAlarm > 100)
    problems.push('numberPool.lowAlarm must be a whole number 1-100 (a pool query counts up to 100 free numbers)');
  if (!(logRetentionDayValues as readonly number[]).includes(config.logRetentionDays))
    problems.push(`logRetentionDays ${config.logRetentionDays} is not a CloudWatch retention period`);
  if (config.waf.publicApiRateLimit < 10 || config.waf.perIpRateLimit < 10)
    problems.push('WAF rate limits must be at least 10');
  if (config.http.functions.browser.memoryMiB < 512)
    problems.push('the browser function needs at least 512 MiB (scrypt uses 128 MiB per password check)');
  for (const [group, settings] of Object.entries(config.http.functions)) {
    if (settings.timeoutSeconds > 29)
      problems.push(`${group}: API Gateway waits at most 29 s, so a longer timeout is pointless`);
  }
  if (config.lambdaReleases.traffic === 'canary') {
    for (const [group, p99Ms] of Object.entries(config.lambdaReleases.rollbackP99Ms)) {
      if (p99Ms >= config.http.functions[group as RouteGroup].timeoutSeconds * 1000)
        problems.push(`lambdaReleases.rollbackP99Ms.${group} must be below the function's timeout`);
    }
  }
  if (!Number.isInteger(config.wakeups.replicas) || config.wakeups.replicas < 0 || config.wakeups.replicas > 5)
    problems.push('wakeups.replicas must be a whole number 0-5');
  for (const [what, domain] of [
    ['api', config.http.customDomain],
    ['grpc', config.provisioning],
  ] as const) {
    const zone = domain?.hostedZone?.name.replace(/\.$/, '');
    if (zone && domain && domain.domainName !== zone && !domain.domainName.endsWith(`.${zone}`))
      problems.push(`${what}.domainName ${domain.domainName} is not in its hosted zone ${zone}`);
  }
  if (config.name === 'production' && !config.http.customDomain)
    problems.push('production needs http.customDomain (people sign in there)');
  const reserved = config.http.functions.public.reservedConcurrency;
  if (reserved !== undefined && (!Number.isInteger(reserved) || reserved < 1))
    problems.push('http.functions.public.reservedConcurrency must be a whole number of at least 1');
  if (!/^cache\.[a-z0-9]+\.[a-z0-9]+$/.test(config.wakeups.nodeType))
    problems.push(
      `wakeups.nodeType must be an ElastiCache node type (cache.<family>.<size>), got '${config.wakeups.nodeType}'`,
    );
  if (problems.length) throw new Error(`configuration of ${config.name} is invalid:\n  ${problems.join('\n  ')}`);
  return config;
}
