import { defaultRateLimit, type RateLimitConfig } from '../kernel/rate-limit';
import {
  ENGINE_CHECK_INTERVAL_MS,
  ENGINE_LOST_POLL_INTERVAL_MS,
  INBOX_REFRESH_MS,
  POLL_INTERVAL_MS,
  SAFETY_POLL_INTERVAL_MS,
  type HubPolling,
} from '../messaging/hub-polling';
import { defaultProvisioningConfig, type ProvisioningConfig } from '../provisioning/config';
import { defaultSignInLimits, type SignInLimits } from '../oauth/sign-in-guard';
import {
  variableReader,
  withoutUserinfo,
  type Environment,
  type ServiceVariable,
  type Variable,
  type VariableReader,
} from './config-variables';
import { readRequiredWakeupEngine, readWakeupEngine, type WakeupEngine } from './wakeup-engine-config';

// The runtime configuration of a process, read from its environment once, at start, and validated
// as a whole: every variable the service reads, its default and what it accepts are here
// (docs/configuration.md is the reference). All problems are reported together, in one line
// naming each variable, the value given and what is allowed. A refused value is shown as given
// (key ids are ARNs, not key material), except the pub/sub engine's password (VALKEY_PASSWORD, or
// in VALKEY_URL): never shown, never logged.
//
// Four kinds of process read it: a Lambda function of the HTTP routes (`lambda`), the Fargate task
// running the gRPC server (`task`), the wake-up relay Lambda (`relay`: the engine only), and the
// local runner and admin CLI (`local`). The domain receives the plain values (`ServiceSettings`),
// never the environment. The variables' names and their reader are in config-variables.ts, the
// pub/sub engine's (VALKEY_*) in wakeup-engine-config.ts. Logging and metrics settings (LOG_LEVEL,
// SERVICE_NAME, METRICS_NAMESPACE) are read apart, in telemetry-settings.ts (re-exported here): a
// process never stops over them, and log.ts / metrics.ts need nothing else.

export type { AwsVariable, Environment } from './config-variables';
export type { WakeupEngine } from './wakeup-engine-config';
export { LOG_LEVELS, readTelemetrySettings, type LogLevel, type TelemetrySettings } from './telemetry-settings';

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
  /** DPOP_NONCES (`on` or `off`, default off): DPoP proofs must carry a server nonce (core/oauth/dpop-nonces.ts). */
  dpopNonces: boolean;
  /**
   * How open message streams poll (core/messaging/hub-polling.ts): MESSAGE_POLL_INTERVAL_MS (the store,
   * without a pub/sub engine), MESSAGE_SAFETY_POLL_MS (the store, engine ready: the delay of a
   * wake-up that never reached the engine, at most), MESSAGE_ENGINE_LOST_POLL_MS (the store until
   * the engine is back), MESSAGE_ENGINE_CHECK_MS (the engine's recorded heads, engine ready: the
   * delay of a wake-up that reached the engine but not the process, at most), MESSAGE_RELIST_MS
   * (the owner's numbers; with the engine ready, at most every ten MESSAGE_SAFETY_POLL_MS).
   */
  messagePolling: HubPolling;
  /**
   * VALKEY_URL, VALKEY_USERNAME, VALKEY_PASSWORD or VALKEY_IAM_AUTH (+ AWS_REGION): the pub/sub engine
   * of inbox wake-ups; unset, wake-ups stay in the process.
   */
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
  /**
   * KMS_RSA_KEY_ID: the RSA key that signs RS256 ID tokens, and KMS_RSA_VERIFY_KEY_IDS the further RSA
   * keys published (rotation); only the units that issue ID tokens or publish keys have them.
   */
  kmsRsaKeyId?: string;
  kmsRsaVerifyKeyIds: string[];
  /** MAC_KEY_ID: the sign-in HMAC key; only processes that use it have it, and it is checked on use. */
  macKeyId?: string;
  /** PAGE_TOKEN_KEY_ID: the HMAC key the page-token key is derived from; only the units that derive it have it. */
  pageTokenKeyId?: string;
  /** GRPC_ORIGIN: the task's public origin (DPoP proofs' htu); the Lambdas have none. */
  grpcOrigin?: string;
  service: ServiceSettings;
}

/** The Fargate task running the gRPC server. */
export interface TaskRuntimeConfig extends AwsRuntimeConfig {
  /** PAGE_TOKEN_KEY_ID: required, every List* and the message stream page with it. */
  pageTokenKeyId: string;
  /** GRPC_PORT */
  grpcPort: number;
  /**
   * HEALTH_PORT: the HTTP health endpoint the NLB and the container health check ask
   * (grpc-service/health-endpoint.ts).
   */
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

/**
 * Who may use gRPC server reflection: anyone (`open`), or callers with a provisioning client's token
 * of any prov:* scope (`token`).
 */
export type ReflectionAccess = 'open' | 'token';
const REFLECTION_ACCESS: readonly ReflectionAccess[] = ['open', 'token'];
/** Below ECS's 30 s stop timeout; the Fargate maximum of that timeout bounds it. */
const DEFAULT_DRAIN_SECONDS = 25;
const MAX_DRAIN_SECONDS = 120;

const LOCAL_ISSUER = [/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/, 'an http(s) URL without query or fragment'] as const;
const DEPLOYED_ISSUER = [
  /^https:\/\/[^/?#\s@]+(\/[^?#\s]*)?$/,
  'an https URL without userinfo, query or fragment',
] as const;

/** GRPC_REFLECTION, `fallback` unless given. */
/** An https origin (`https://host[:port]`, nothing after it), if given. */
function optionalOrigin(read: VariableReader, name: 'GRPC_ORIGIN'): { grpcOrigin?: string } {
  const value = read.optional(name);
  if (value === undefined) return {};
  if (/^https:\/\/[^/?#\s@]+$/.test(value)) return { grpcOrigin: value };
  return read.refuse(name, withoutUserinfo(value), 'an https origin: https://host[:port], no path', {});
}

function readReflection(read: VariableReader, fallback: ReflectionAccess): ReflectionAccess {
  const value = read.optional('GRPC_REFLECTION');
  if (value === undefined) return fallback;
  if ((REFLECTION_ACCESS as readonly string[]).includes(value)) return value as ReflectionAccess;
  return read.refuse('GRPC_REFLECTION', value, REFLECTION_ACCESS.join(' or '), fallback);
}

/** Locally http or https; in AWS https only, and no userinfo (a deployed issuer is a public https origin). */
function readIssuer(read: VariableReader, name: Variable, deployed = false): string | undefined {
  const value = read.optional(name);
  const [pattern, allowed] = deployed ? DEPLOYED_ISSUER : LOCAL_ISSUER;
  if (value === undefined || pattern.test(value)) return value;
  return read.refuse(name, withoutUserinfo(value), allowed, undefined);
}

/** The fixed 12-byte DER header of an Ed25519 SubjectPublicKeyInfo (RFC 8410), before the 32-byte key. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const isEd25519Spki = (der: Buffer) =>
  der.length === ED25519_SPKI_PREFIX.length + 32 &&
  der.subarray(0, ED25519_SPKI_PREFIX.length).equals(ED25519_SPKI_PREFIX);
/**
 * The fixed DER of an RSA 2048 SubjectPublicKeyInfo (RFC 8017) around its 256-byte modulus, with the
 * exponent 65537 of KMS's RSA_2048 keys.
 */
const RSA_2048_SPKI_PREFIX = Buffer.from('30820122300d06092a864886f70d01010105000382010f003082010a0282010100', 'hex');
const RSA_65537_SUFFIX = Buffer.from('0203010001', 'hex');
const isRsa2048Spki = (der: Buffer) =>
  der.length === RSA_2048_SPKI_PREFIX.length + 256 + RSA_65537_SUFFIX.length &&
  der.subarray(0, RSA_2048_SPKI_PREFIX.length).equals(RSA_2048_SPKI_PREFIX) &&
  der.subarray(-RSA_65537_SUFFIX.length).equals(RSA_65537_SUFFIX);

/**
 * A JSON object of key id → base64 DER SubjectPublicKeyInfo of an Ed25519 or RSA 2048 key (KMS
 * GetPublicKey's PublicKey).
 */
function readPublicKeys(read: VariableReader, name: Variable): ReadonlyMap<string, Uint8Array> {
  const value = read.optional(name);
  const keys = new Map<string, Uint8Array>();
  if (value === undefined) return keys;
  const allowed = 'a JSON object of KMS key ARN to base64 DER SubjectPublicKeyInfo of an Ed25519 or RSA 2048 key';
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return read.refuse(name, value.slice(0, 80), allowed, keys);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return read.refuse(name, value.slice(0, 80), allowed, keys);
  }
  for (const [keyId, encoded] of Object.entries(parsed)) {
    const base64 = typeof encoded === 'string' && /^[A-Za-z0-9+/]+={0,2}$/.test(encoded);
    const der = base64 ? Buffer.from(encoded, 'base64') : undefined;
    if (!keyId.trim() || !der || !(isEd25519Spki(der) || isRsa2048Spki(der))) {
      return read.refuse(name, `${keyId}: ${String(encoded).slice(0, 80)}`, allowed, new Map());
    }
    keys.set(keyId, new Uint8Array(der));
  }
  return keys;
}

/** A physical table name prefix: DynamoDB's table-name characters, leaving room for the longest table name. */
function readTablePrefix(read: VariableReader, name: Variable, what: string): string {
  const value = read.optional(name);
  if (value === undefined || /^[A-Za-z0-9_.-]{1,200}$/.test(value)) return value ?? read.required(name, what);
  return read.refuse(name, value, '1-200 characters of A-Z a-z 0-9 _ . - (DynamoDB table names)', value);
}

/** `on` or `off` (default off). */
function readSwitch(read: VariableReader, name: ServiceVariable): boolean {
  const value = read.optional(name);
  if (value === undefined || value === 'off') return false;
  return value === 'on' || read.refuse(name, value, 'on or off', false);
}

const positive = (read: VariableReader, name: ServiceVariable, fallback: number) =>
  read.wholeNumber(name, fallback, 1, 999_999_999, 'a whole number of at least 1');

/** `<prefix>_RATE_LIMIT_BURST` and `<prefix>_RATE_LIMIT_PER_MINUTE`. */
const rateLimit = (read: VariableReader, prefix: 'SIGN_IN' | 'PUBLIC', fallback: RateLimitConfig): RateLimitConfig => ({
  burst: positive(read, `${prefix}_RATE_LIMIT_BURST`, fallback.burst),
  perMinute: positive(read, `${prefix}_RATE_LIMIT_PER_MINUTE`, fallback.perMinute),
});

function serviceSettings(read: VariableReader): ServiceSettings {
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
    dpopNonces: readSwitch(read, 'DPOP_NONCES'),
    messagePolling: {
      pollIntervalMs: read.wholeNumber('MESSAGE_POLL_INTERVAL_MS', POLL_INTERVAL_MS, 20, 60_000),
      safetyPollMs: read.wholeNumber('MESSAGE_SAFETY_POLL_MS', SAFETY_POLL_INTERVAL_MS, 1_000, 3_600_000),
      engineLostPollMs: read.wholeNumber('MESSAGE_ENGINE_LOST_POLL_MS', ENGINE_LOST_POLL_INTERVAL_MS, 20, 60_000),
      engineCheckMs: read.wholeNumber('MESSAGE_ENGINE_CHECK_MS', ENGINE_CHECK_INTERVAL_MS, 100, 600_000),
      relistMs: read.wholeNumber('MESSAGE_RELIST_MS', INBOX_REFRESH_MS, 1_000, 3_600_000),
    },
  };
  return settings;
}

/**
 * The service settings of a process that holds streams (the task, `npm start`), with the wake-up
 * engine's. Lambdas get none (the relay publishes for them), so their bundles hold no engine reader.
 */
function streamingSettings(read: VariableReader, deployed: boolean): ServiceSettings {
  const settings = serviceSettings(read);
  const wakeupEngine = readWakeupEngine(read, deployed);
  return wakeupEngine ? { ...settings, wakeupEngine } : settings;
}

/** `settings`: the service settings' reader (the task's reads the wake-up engine's too). */
function awsConfig(read: VariableReader, settings = serviceSettings): AwsRuntimeConfig {
  const macKeyId = read.optional('MAC_KEY_ID');
  const pageTokenKeyId = read.optional('PAGE_TOKEN_KEY_ID');
  const kmsRsaKeyId = read.optional('KMS_RSA_KEY_ID');
  return {
    // Refused as a URL (then given) or missing: one problem either way.
    issuer: readIssuer(read, 'ISSUER', true) ?? read.required('ISSUER', 'the issuer URL'),
    tablePrefix: readTablePrefix(read, 'TABLE_PREFIX', 'the physical table name prefix'),
    kmsKeyId: read.required('KMS_KEY_ID', 'the KMS key that signs'),
    kmsVerifyKeyIds: read.list('KMS_VERIFY_KEY_IDS'),
    kmsPublicKeys: readPublicKeys(read, 'KMS_PUBLIC_KEYS'),
    ...(kmsRsaKeyId ? { kmsRsaKeyId } : {}),
    kmsRsaVerifyKeyIds: read.list('KMS_RSA_VERIFY_KEY_IDS'),
    ...(macKeyId ? { macKeyId } : {}),
    ...(pageTokenKeyId ? { pageTokenKeyId } : {}),
    service: settings(read),
  };
}

const readers: { [K in ProcessKind]: (read: VariableReader) => RuntimeConfig[K] } = {
  lambda: (read) => awsConfig(read),
  task: (read) => ({
    ...awsConfig(read, (same) => streamingSettings(same, true)),
    pageTokenKeyId: read.required('PAGE_TOKEN_KEY_ID', macKeyPurpose.PAGE_TOKEN_KEY_ID),
    grpcPort: read.port('GRPC_PORT', DEFAULT_GRPC_PORT),
    healthPort: read.port('HEALTH_PORT', DEFAULT_HEALTH_PORT),
    // The task is reachable from the NLB's allowed ranges: without the variable, reflection wants a token.
    grpcReflection: readReflection(read, 'token'),
    ...optionalOrigin(read, 'GRPC_ORIGIN'),
    drainSeconds: read.wholeNumber('DRAIN_SECONDS', DEFAULT_DRAIN_SECONDS, 0, MAX_DRAIN_SECONDS),
  }),
  relay: (read) => ({ wakeupEngine: readRequiredWakeupEngine(read) }),
  local: (read) => {
    const issuer = readIssuer(read, 'ISSUER');
    return {
      host: read.text('HOST', '127.0.0.1'),
      port: read.port('PORT', 3000),
      grpcPort: read.port('GRPC_PORT', DEFAULT_GRPC_PORT),
      dynamoPort: read.port('DYNAMODB_PORT', 8000),
      grpcReflection: readReflection(read, 'open'),
      dataDir: read.text('DATA_DIR', '.data'),
      ...(issuer ? { issuer } : {}),
      service: streamingSettings(read, false),
    };
  },
};

/** The read `config`, or an Error naming every problem; `needs`: MAC-key variables the process requires. */
function checked<C>(read: VariableReader, config: C, needs: readonly MacKeyVariable[]): C {
  for (const variable of needs) read.required(variable, macKeyPurpose[variable]);
  if (read.problems.length > 0) throw new Error(read.problems.join('; '));
  return config;
}

/**
 * The configuration of a `kind` process from `env`, or an Error whose message names every
 * problem (`A must be …, got '…'; B must be set (…)`). Call it once, when the process starts.
 * `needs`: MAC-key variables this process (a Lambda whose routes use the key) requires.
 */
export function readRuntimeConfig<K extends ProcessKind>(
  kind: K,
  env: Environment = process.env,
  needs: readonly MacKeyVariable[] = [],
): RuntimeConfig[K] {
  const read = variableReader(env);
  return checked(read, readers[kind](read), needs);
}

/**
 * `readRuntimeConfig('lambda', …)` without the other kinds' readers, for the Lambda entry points
 * (lambdas/runtime.ts): their bundles hold neither the task's, the relay's nor the engine's.
 */
export function readLambdaConfig(env: Environment, needs: readonly MacKeyVariable[] = []): AwsRuntimeConfig {
  const read = variableReader(env);
  return checked(read, awsConfig(read), needs);
}
