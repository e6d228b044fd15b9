import { DAY } from '../kernel/config';
import { defaultRateLimit, type RateLimitConfig } from '../kernel/rate-limit';
import { ENGINE_CHECK_INTERVAL_MS, ENGINE_LOST_POLL_INTERVAL_MS, INBOX_REFRESH_MS, POLL_INTERVAL_MS, SAFETY_POLL_INTERVAL_MS, type HubPolling } from '../messaging/stream';
import { defaultProvisioningConfig, type ProvisioningConfig } from '../provisioning/config';
import { defaultSignInLimits, type SignInLimits } from '../oauth/sign-in-guard';
import type { IamAuth } from './elasticache-iam';
import type { WakeupEngine } from './valkey-wakeups';

// The runtime configuration of a process, read from its environment once, at start, and validated
// as a whole: every variable the service reads, its default and what it accepts are here
// (docs/configuration.md is the reference). All problems are reported together, in one line
// naming each variable, the value given and what is allowed. A refused value is shown as given
// (key ids are ARNs, not key material), except the pub/sub engine's password (VALKEY_PASSWORD, or
// in VALKEY_URL): never shown, never logged.
//
// Four kinds of process read it: a Lambda function of the HTTP routes (`lambda`), the Fargate task
// running the gRPC server (`task`), the wake-up relay Lambda (`relay`: the engine only), and the
// local runner and admin CLI (`local`). The domain receives the plain
// values (`ServiceSettings`), never the environment. Logging and metrics settings (LOG_LEVEL,
// SERVICE_NAME, METRICS_NAMESPACE) are read here too, apart (`readTelemetrySettings`): a process
// never stops over them.

export type Environment = Readonly<Record<string, string | undefined>>;

type ServiceVariable =
  | 'NUMBER_COOL_OFF_DAYS' | 'AGENT_QUOTA_INDEPENDENT' | 'AGENT_QUOTA_DEPENDENT' | 'MASK_QUOTA' | 'NUMBER_QUOTA' | 'MESSAGE_POLL_INTERVAL_MS'
  | 'MESSAGE_SAFETY_POLL_MS' | 'MESSAGE_ENGINE_LOST_POLL_MS' | 'MESSAGE_ENGINE_CHECK_MS' | 'MESSAGE_RELIST_MS' | 'VALKEY_URL' | 'VALKEY_USERNAME' | 'VALKEY_PASSWORD'
  | 'VALKEY_IAM_AUTH' | 'AWS_REGION'
  | 'SIGN_IN_CONCURRENT_CHECKS' | 'SIGN_IN_QUEUED_CHECKS' | `${'SIGN_IN' | 'PUBLIC'}_RATE_LIMIT_${'BURST' | 'PER_MINUTE'}`;
/** Logging and metrics (core/adapters/log.ts): every kind of process reads them. */
type TelemetryVariable = 'LOG_LEVEL' | 'SERVICE_NAME' | 'METRICS_NAMESPACE';
/** What a process in AWS reads. lib/ may type the environment it sets with it (`import type` loads no code). */
export type AwsVariable = 'ISSUER' | 'TABLE_PREFIX' | 'KMS_KEY_ID' | 'KMS_VERIFY_KEY_IDS' | 'KMS_PUBLIC_KEYS' | 'MAC_KEY_ID' | 'PAGE_TOKEN_KEY_ID' | 'GRPC_PORT' | 'GRPC_REFLECTION' | 'HEALTH_PORT' | 'DRAIN_SECONDS' | ServiceVariable | TelemetryVariable;
type LocalVariable = 'HOST' | 'PORT' | 'GRPC_PORT' | 'GRPC_REFLECTION' | 'DYNAMODB_PORT' | 'DATA_DIR' | 'ISSUER' | ServiceVariable | TelemetryVariable;
type Variable = AwsVariable | LocalVariable;

/** The MAC keys' variables: set only for the units that use the key (lib/access.ts `mac`, `pageTokenMac`). */
export type MacKeyVariable = 'MAC_KEY_ID' | 'PAGE_TOKEN_KEY_ID';
const macKeyPurpose: Record<MacKeyVariable, string> = {
  MAC_KEY_ID: 'the KMS HMAC key of sign-in tokens',
  PAGE_TOKEN_KEY_ID: 'the KMS HMAC key of page tokens',
};

/** What every process hands to the domain. */
export interface ServiceSettings {
  /** NUMBER_COOL_OFF_DAYS, AGENT_QUOTA_INDEPENDENT, AGENT_QUOTA_DEPENDENT, MASK_QUOTA, NUMBER_QUOTA. */
  provisioning: ProvisioningConfig;
  /** SIGN_IN_CONCURRENT_CHECKS, SIGN_IN_QUEUED_CHECKS, SIGN_IN_RATE_LIMIT_BURST, SIGN_IN_RATE_LIMIT_PER_MINUTE. */
  signIn: SignInLimits;
  /** PUBLIC_RATE_LIMIT_BURST, PUBLIC_RATE_LIMIT_PER_MINUTE: the public endpoints' per-IP limit. */
  publicRateLimit: RateLimitConfig;
  /**
   * How open message streams poll (core/messaging/stream.ts): MESSAGE_POLL_INTERVAL_MS (the store,
   * without a pub/sub engine), MESSAGE_SAFETY_POLL_MS (the store, engine ready: the delay of a
   * wake-up that never reached the engine, at most), MESSAGE_ENGINE_LOST_POLL_MS (the store until
   * the engine is back), MESSAGE_ENGINE_CHECK_MS (the engine's recorded heads, engine ready: the
   * delay of a wake-up that reached the engine but not the process, at most), MESSAGE_RELIST_MS
   * (the owner's numbers; with the engine ready, at most every ten MESSAGE_SAFETY_POLL_MS).
   */
  messagePolling: HubPolling;
  /** VALKEY_URL, VALKEY_USERNAME, VALKEY_PASSWORD or VALKEY_IAM_AUTH (+ AWS_REGION): the pub/sub engine of inbox wake-ups; unset, wake-ups stay in the process. */
  wakeupEngine?: WakeupEngine;
}

/** A Lambda function (and the base of the task): the stack sets these. */
export interface AwsRuntimeConfig {
  /** ISSUER */
  issuer: string;
  /** TABLE_PREFIX */
  tablePrefix: string;
  /** KMS_KEY_ID: the key that signs. */
  kmsKeyId: string;
  /** KMS_VERIFY_KEY_IDS: further keys published in the JWKS (rotation). */
  kmsVerifyKeyIds: string[];
  /**
   * KMS_PUBLIC_KEYS: the signing keys' public keys (DER SPKI) by key id, published by the deploy so
   * that no process calls GetPublicKey; empty when unset (then each key is fetched once per process).
   */
  kmsPublicKeys: ReadonlyMap<string, Uint8Array>;
  /** MAC_KEY_ID: the sign-in HMAC key; only processes that use it have it, and it is checked on use. */
  macKeyId?: string;
  /** PAGE_TOKEN_KEY_ID: the HMAC key the page-token key is derived from; only the units that derive it have it. */
  pageTokenKeyId?: string;
  service: ServiceSettings;
}

/** The Fargate task running the gRPC server. */
export interface TaskRuntimeConfig extends AwsRuntimeConfig {
  /** PAGE_TOKEN_KEY_ID: required, every List* and the message stream page with it. */
  pageTokenKeyId: string;
  /** GRPC_PORT */
  grpcPort: number;
  /** HEALTH_PORT: the HTTP health endpoint the NLB and the container health check ask (grpc-service/health-endpoint.ts). */
  healthPort: number;
  /** GRPC_REFLECTION (the task's default token, as the stacks set it; npm start's open). */
  grpcReflection: ReflectionAccess;
  /** DRAIN_SECONDS: how long calls in flight may finish after SIGTERM. */
  drainSeconds: number;
}

/** The local runner (`npm start`) and the admin CLI. */
export interface LocalRuntimeConfig {
  /** HOST: where the HTTP and gRPC servers listen. */
  host: string;
  /** PORT, GRPC_PORT, DYNAMODB_PORT: 0 picks a free one. */
  port: number;
  grpcPort: number;
  dynamoPort: number;
  /** GRPC_REFLECTION (default open). */
  grpcReflection: ReflectionAccess;
  /** DATA_DIR */
  dataDir: string;
  /** ISSUER; unset: http://localhost:$PORT, once the port is known. */
  issuer?: string;
  service: ServiceSettings;
}

/** The wake-up relay Lambda (lambdas/wakeup-relay.ts): it only publishes to the engine. */
export interface RelayRuntimeConfig {
  /** VALKEY_URL (required), VALKEY_USERNAME, VALKEY_IAM_AUTH, AWS_REGION. */
  wakeupEngine: WakeupEngine;
}

export interface RuntimeConfig {
  lambda: AwsRuntimeConfig;
  task: TaskRuntimeConfig;
  relay: RelayRuntimeConfig;
  local: LocalRuntimeConfig;
}

export type ProcessKind = keyof RuntimeConfig;

const DEFAULT_GRPC_PORT = 50051;
const DEFAULT_HEALTH_PORT = 8081;

/** Who may use gRPC server reflection: anyone (`open`), or callers with a provisioning client's token of any prov:* scope (`token`). */
export type ReflectionAccess = 'open' | 'token';
const REFLECTION_ACCESS: readonly ReflectionAccess[] = ['open', 'token'];
/** Below ECS's 30 s stop timeout; the Fargate maximum of that timeout bounds it. */
const DEFAULT_DRAIN_SECONDS = 25;
const MAX_DRAIN_SECONDS = 120;

/** Where the pub/sub engine is: locally redis:// or rediss://; in AWS TLS only. */
/** A URL with its userinfo (which may hold a password) replaced, for problems that quote it. */
const withoutUserinfo = (url: string) => url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1…@');
const ENGINE_URL = /^(rediss?):\/\/(?:([^:@/?#\s]*)(?::([^@/?#\s]*))?@)?([^:@/?#\s]+|\[[0-9a-fA-F:.]+\])(?::(\d{1,5}))?\/?$/;
const DEFAULT_ENGINE_PORT = 6379;
/** An ElastiCache replication group id: 1-40 of a-z 0-9 -, a letter first, no `--`, no `-` last. */
const REPLICATION_GROUP_ID = /^(?=.{1,40}$)[a-z](?:-?[a-z0-9])*$/;
const AWS_REGION_NAME = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;

const LOCAL_ISSUER = [/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/, 'an http(s) URL without query or fragment'] as const;
const DEPLOYED_ISSUER = [/^https:\/\/[^/?#\s@]+(\/[^?#\s]*)?$/, 'an https URL without userinfo, query or fragment'] as const;

/** Reads variables, collecting every refusal instead of stopping at the first. */
function variableReader(env: Environment) {
  const problems: string[] = [];
  /** Trimmed; blank counts as unset (its default applies). */
  const given = (name: Variable) => env[name]?.trim() || undefined;
  function refuse<T>(name: Variable, value: string, allowed: string, fallback: T): T {
    problems.push(`${name} must be ${allowed}, got '${value}'`);
    return fallback;
  }
  function wholeNumber(name: Variable, fallback: number, min: number, max: number, allowed = `a whole number ${min}-${max}`): number {
    const value = given(name);
    if (value === undefined) return fallback;
    const parsed = /^\d{1,9}$/.test(value) ? Number(value) : Number.NaN;
    return parsed >= min && parsed <= max ? parsed : refuse(name, value, allowed, fallback);
  }
  function required(name: Variable, what: string): string {
    const value = given(name);
    if (value === undefined) problems.push(`${name} must be set (${what})`);
    return value ?? '';
  }
  /** VALKEY_IAM_AUTH's settings, with the user it signs in and AWS_REGION (where tokens are signed). */
  function iamAuth(replicationGroupId: string, userId: string | undefined, passwordSet: boolean): IamAuth | undefined {
    const region = given('AWS_REGION');
    const before = problems.length;
    if (!REPLICATION_GROUP_ID.test(replicationGroupId)) refuse('VALKEY_IAM_AUTH', replicationGroupId, 'an ElastiCache replication group id (1-40 of a-z 0-9 -, a letter first)', undefined);
    if (!userId) problems.push('VALKEY_IAM_AUTH needs the user it signs in: VALKEY_USERNAME (or the user of VALKEY_URL)');
    if (passwordSet) problems.push('VALKEY_IAM_AUTH and a password (VALKEY_PASSWORD or in VALKEY_URL) are both set: an IAM user signs in with tokens, give no password');
    if (region === undefined) problems.push('AWS_REGION must be set with VALKEY_IAM_AUTH (the region IAM auth tokens are signed for)');
    else if (!AWS_REGION_NAME.test(region)) refuse('AWS_REGION', region, 'an AWS region name (e.g. eu-central-1)', undefined);
    return problems.length === before ? { replicationGroupId, userId: userId!, region: region! } : undefined;
  }
  return {
    problems,
    text: (name: Variable, fallback: string) => given(name) ?? fallback,
    optional: given,
    required,
    list: (name: Variable) => (given(name) ?? '').split(',').map((item) => item.trim()).filter(Boolean),
    wholeNumber,
    /** A non-negative decimal number of days, in milliseconds. */
    days(name: Variable, fallback: number): number {
      const value = given(name);
      if (value === undefined) return fallback;
      return /^\d{1,6}(\.\d{1,9})?$/.test(value) ? Number(value) * DAY : refuse(name, value, 'a non-negative number', fallback);
    },
    port: (name: Variable, fallback: number) => wholeNumber(name, fallback, 0, 65535, 'a port number (0-65535)'),
    /** GRPC_REFLECTION, `fallback` unless given. */
    reflection(fallback: ReflectionAccess): ReflectionAccess {
      const value = given('GRPC_REFLECTION');
      if (value === undefined) return fallback;
      return (REFLECTION_ACCESS as readonly string[]).includes(value) ? (value as ReflectionAccess) : refuse('GRPC_REFLECTION', value, REFLECTION_ACCESS.join(' or '), fallback);
    },
    /** Locally http or https; in AWS https only, and no userinfo (a deployed issuer is a public https origin). */
    issuer(name: Variable, deployed = false): string | undefined {
      const value = given(name);
      const [pattern, allowed] = deployed ? DEPLOYED_ISSUER : LOCAL_ISSUER;
      if (value === undefined || pattern.test(value)) return value;
      return refuse(name, withoutUserinfo(value), allowed, undefined);
    },
    /**
     * VALKEY_URL (redis[s]://[user[:password]@]host[:port]), and VALKEY_USERNAME / VALKEY_PASSWORD
     * for credentials given apart (a secret injected on its own); in AWS rediss:// only. A password
     * is never repeated in a problem. VALKEY_IAM_AUTH=<replication group id>: the user signs in with
     * IAM auth tokens (elasticache-iam.ts) signed in AWS_REGION, so a user is required and a password refused.
     */
    wakeupEngine(deployed: boolean): WakeupEngine | undefined {
      const value = given('VALKEY_URL');
      const username = given('VALKEY_USERNAME');
      // Not trimmed: a password is taken as given (blank is unset).
      const password = env.VALKEY_PASSWORD?.trim() ? env.VALKEY_PASSWORD : undefined;
      const iamGroup = given('VALKEY_IAM_AUTH');
      if (value === undefined) {
        for (const [name, set] of [['VALKEY_USERNAME', username], ['VALKEY_PASSWORD', password], ['VALKEY_IAM_AUTH', iamGroup]] as const) {
          if (set !== undefined) problems.push(`${name} is set but VALKEY_URL is not (the engine it signs in to)`);
        }
        return undefined;
      }
      const shown = withoutUserinfo(value);
      const allowed = deployed ? 'a rediss:// URL (TLS): rediss://[user[:password]@]host[:port]' : 'a redis:// or rediss:// URL: redis[s]://[user[:password]@]host[:port]';
      const parts = ENGINE_URL.exec(value);
      const port = Number(parts?.[5] ?? DEFAULT_ENGINE_PORT);
      if (!parts || (deployed && parts[1] !== 'rediss') || port < 1 || port > 65535) return refuse('VALKEY_URL', shown, allowed, undefined);
      let urlUser: string | undefined;
      let urlPassword: string | undefined;
      try {
        urlUser = parts[2] ? decodeURIComponent(parts[2]) : undefined;
        urlPassword = parts[3] ? decodeURIComponent(parts[3]) : undefined;
      } catch {
        return refuse('VALKEY_URL', shown, `${allowed}, its user and password percent-encoded`, undefined);
      }
      if (urlUser && username) problems.push('VALKEY_USERNAME and the user of VALKEY_URL are both set: give one');
      if (urlPassword && password) problems.push('VALKEY_PASSWORD and the password of VALKEY_URL are both set: give one');
      const host = parts[4]!.replace(/^\[(.*)\]$/, '$1');
      const user = urlUser ?? username;
      const secret = urlPassword ?? password;
      const iam = iamGroup === undefined ? undefined : iamAuth(iamGroup, user, secret !== undefined);
      return {
        address: `${parts[1]}://${parts[4]}:${port}`, host, port, tls: parts[1] === 'rediss',
        ...(user ? { username: user } : {}), ...(secret && !iamGroup ? { password: secret } : {}), ...(iam ? { iam } : {}),
      };
    },
    /** Required with VALKEY_URL (the relay publishes nothing else). */
    requiredWakeupEngine(): WakeupEngine {
      const engine = this.wakeupEngine(true);
      if (!engine && given('VALKEY_URL') === undefined) problems.push('VALKEY_URL must be set (the pub/sub engine the relay publishes to)');
      return engine ?? { address: '', host: '', port: DEFAULT_ENGINE_PORT, tls: true };
    },
    /** A JSON object of key id → base64 DER SubjectPublicKeyInfo of an Ed25519 key (KMS GetPublicKey's PublicKey). */
    publicKeys(name: Variable): ReadonlyMap<string, Uint8Array> {
      const value = given(name);
      const keys = new Map<string, Uint8Array>();
      if (value === undefined) return keys;
      const allowed = 'a JSON object of KMS key ARN to base64 DER SubjectPublicKeyInfo of an Ed25519 key';
      let parsed: unknown;
      try {
        parsed = JSON.parse(value);
      } catch {
        return refuse(name, value.slice(0, 80), allowed, keys);
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return refuse(name, value.slice(0, 80), allowed, keys);
      for (const [keyId, encoded] of Object.entries(parsed)) {
        const der = typeof encoded === 'string' && /^[A-Za-z0-9+/]+={0,2}$/.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
        if (!keyId.trim() || !der || !isEd25519Spki(der)) return refuse(name, `${keyId}: ${String(encoded).slice(0, 80)}`, allowed, new Map());
        keys.set(keyId, new Uint8Array(der));
      }
      return keys;
    },
    /** A physical table name prefix: DynamoDB's table-name characters, leaving room for the longest table name. */
    tablePrefix(name: Variable, what: string): string {
      const value = given(name);
      if (value === undefined || /^[A-Za-z0-9_.-]{1,200}$/.test(value)) return value ?? required(name, what);
      return refuse(name, value, '1-200 characters of A-Z a-z 0-9 _ . - (DynamoDB table names)', value);
    },
  };
}

type VariableReader = ReturnType<typeof variableReader>;

/** The fixed 12-byte DER header of an Ed25519 SubjectPublicKeyInfo (RFC 8410), before the 32-byte key. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const isEd25519Spki = (der: Buffer) => der.length === ED25519_SPKI_PREFIX.length + 32 && der.subarray(0, ED25519_SPKI_PREFIX.length).equals(ED25519_SPKI_PREFIX);

const positive = (read: VariableReader, name: ServiceVariable, fallback: number) =>
  read.wholeNumber(name, fallback, 1, 999_999_999, 'a whole number of at least 1');

/** `<prefix>_RATE_LIMIT_BURST` and `<prefix>_RATE_LIMIT_PER_MINUTE`. */
const rateLimit = (read: VariableReader, prefix: 'SIGN_IN' | 'PUBLIC', fallback: RateLimitConfig): RateLimitConfig => ({
  burst: positive(read, `${prefix}_RATE_LIMIT_BURST`, fallback.burst),
  perMinute: positive(read, `${prefix}_RATE_LIMIT_PER_MINUTE`, fallback.perMinute),
});

function serviceSettings(read: VariableReader, deployed: boolean): ServiceSettings {
  const quota = (name: ServiceVariable, fallback: number) => read.wholeNumber(name, fallback, 0, 100_000);
  const settings: ServiceSettings = {
    provisioning: {
      ...defaultProvisioningConfig,
      coolOff: read.days('NUMBER_COOL_OFF_DAYS', defaultProvisioningConfig.coolOff),
      independentAgentQuota: quota('AGENT_QUOTA_INDEPENDENT', defaultProvisioningConfig.independentAgentQuota),
      dependentAgentQuota: quota('AGENT_QUOTA_DEPENDENT', defaultProvisioningConfig.dependentAgentQuota),
      maskQuota: quota('MASK_QUOTA', defaultProvisioningConfig.maskQuota),
      numberQuota: quota('NUMBER_QUOTA', defaultProvisioningConfig.numberQuota),
    },
    signIn: {
      concurrentChecks: positive(read, 'SIGN_IN_CONCURRENT_CHECKS', defaultSignInLimits.concurrentChecks),
      queuedChecks: positive(read, 'SIGN_IN_QUEUED_CHECKS', defaultSignInLimits.queuedChecks),
      perIp: rateLimit(read, 'SIGN_IN', defaultSignInLimits.perIp),
    },
    publicRateLimit: rateLimit(read, 'PUBLIC', defaultRateLimit),
    messagePolling: {
      pollIntervalMs: read.wholeNumber('MESSAGE_POLL_INTERVAL_MS', POLL_INTERVAL_MS, 20, 60_000),
      safetyPollMs: read.wholeNumber('MESSAGE_SAFETY_POLL_MS', SAFETY_POLL_INTERVAL_MS, 1_000, 3_600_000),
      engineLostPollMs: read.wholeNumber('MESSAGE_ENGINE_LOST_POLL_MS', ENGINE_LOST_POLL_INTERVAL_MS, 20, 60_000),
      engineCheckMs: read.wholeNumber('MESSAGE_ENGINE_CHECK_MS', ENGINE_CHECK_INTERVAL_MS, 100, 600_000),
      relistMs: read.wholeNumber('MESSAGE_RELIST_MS', INBOX_REFRESH_MS, 1_000, 3_600_000),
    },
  };
  const wakeupEngine = read.wakeupEngine(deployed);
  return wakeupEngine ? { ...settings, wakeupEngine } : settings;
}

function awsConfig(read: VariableReader): AwsRuntimeConfig {
  const macKeyId = read.optional('MAC_KEY_ID');
  const pageTokenKeyId = read.optional('PAGE_TOKEN_KEY_ID');
  return {
    // Refused as a URL (then given) or missing: one problem either way.
    issuer: read.issuer('ISSUER', true) ?? read.required('ISSUER', 'the issuer URL'),
    tablePrefix: read.tablePrefix('TABLE_PREFIX', 'the physical table name prefix'),
    kmsKeyId: read.required('KMS_KEY_ID', 'the KMS key that signs'),
    kmsVerifyKeyIds: read.list('KMS_VERIFY_KEY_IDS'),
    kmsPublicKeys: read.publicKeys('KMS_PUBLIC_KEYS'),
    ...(macKeyId ? { macKeyId } : {}),
    ...(pageTokenKeyId ? { pageTokenKeyId } : {}),
    service: serviceSettings(read, true),
  };
}

const readers: { [K in ProcessKind]: (read: VariableReader) => RuntimeConfig[K] } = {
  lambda: awsConfig,
  task: (read) => ({
    ...awsConfig(read),
    pageTokenKeyId: read.required('PAGE_TOKEN_KEY_ID', macKeyPurpose.PAGE_TOKEN_KEY_ID),
    grpcPort: read.port('GRPC_PORT', DEFAULT_GRPC_PORT),
    healthPort: read.port('HEALTH_PORT', DEFAULT_HEALTH_PORT),
    // The task is reachable from the NLB's allowed ranges: without the variable, reflection wants a token.
    grpcReflection: read.reflection('token'),
    drainSeconds: read.wholeNumber('DRAIN_SECONDS', DEFAULT_DRAIN_SECONDS, 0, MAX_DRAIN_SECONDS),
  }),
  relay: (read) => ({ wakeupEngine: read.requiredWakeupEngine() }),
  local: (read) => {
    const issuer = read.issuer('ISSUER');
    return {
      host: read.text('HOST', '127.0.0.1'),
      port: read.port('PORT', 3000),
      grpcPort: read.port('GRPC_PORT', DEFAULT_GRPC_PORT),
      dynamoPort: read.port('DYNAMODB_PORT', 8000),
      grpcReflection: read.reflection('open'),
      dataDir: read.text('DATA_DIR', '.data'),
      ...(issuer ? { issuer } : {}),
      service: serviceSettings(read, false),
    };
  },
};

/**
 * The configuration of a `kind` process from `env`, or an Error whose message names every
 * problem (`A must be …, got '…'; B must be set (…)`). Call it once, when the process starts.
 * `needs`: MAC-key variables this process (a Lambda whose routes use the key) requires.
 */
export function readRuntimeConfig<K extends ProcessKind>(kind: K, env: Environment = process.env, needs: readonly MacKeyVariable[] = []): RuntimeConfig[K] {
  const read = variableReader(env);
  const config = readers[kind](read);
  for (const variable of needs) read.required(variable, macKeyPurpose[variable]);
  if (read.problems.length > 0) throw new Error(read.problems.join('; '));
  return config;
}

export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** How a process logs and measures (core/adapters/log.ts). */
export interface TelemetrySettings {
  /** LOG_LEVEL (any case): DEBUG, INFO (default), WARN, ERROR or SILENT. */
  logLevel: LogLevel;
  /** SERVICE_NAME: the `service` of every line; unset, each logger's own default. */
  serviceName?: string;
  /** METRICS_NAMESPACE: the CloudWatch namespace of the Lambda metrics; unset, none are written. */
  metricsNamespace?: string;
  /** A refused LOG_LEVEL, said on the first line the process logs. */
  problem?: string;
}

/**
 * LOG_LEVEL, SERVICE_NAME and METRICS_NAMESPACE from `env`. Never throws: an unknown level is
 * INFO and named in `problem` (no process stops over how much it logs). Read once per process
 * (log.ts `telemetrySettings`).
 */
export function readTelemetrySettings(env: Environment = process.env): TelemetrySettings {
  const read = variableReader(env);
  const given = read.optional('LOG_LEVEL');
  const level = given?.toUpperCase();
  const known = (LOG_LEVELS as readonly string[]).includes(level ?? '');
  const serviceName = read.optional('SERVICE_NAME');
  const metricsNamespace = read.optional('METRICS_NAMESPACE');
  return {
    logLevel: known ? (level as LogLevel) : 'INFO',
    ...(serviceName ? { serviceName } : {}),
    ...(metricsNamespace ? { metricsNamespace } : {}),
    ...(given !== undefined && !known ? { problem: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${given.slice(0, 40)}'; logging at INFO` } : {}),
  };
}
