import { DAY } from '../kernel/config';
import type { TelemetryVariable } from './telemetry-settings';

// The environment variables a process reads (their names, as types) and the reader that checks
// them, collecting every refusal instead of stopping at the first. runtime-config.ts (what each
// kind of process reads) and wakeup-engine-config.ts (the pub/sub engine's variables) use it.

export type Environment = Readonly<Record<string, string | undefined>>;

export type ServiceVariable =
  | 'NUMBER_COOL_OFF_DAYS'
  | 'AGENT_QUOTA_INDEPENDENT'
  | 'AGENT_QUOTA_DEPENDENT'
  | 'MASK_QUOTA'
  | 'NUMBER_QUOTA'
  | 'MESSAGE_POLL_INTERVAL_MS'
  | 'MESSAGE_SAFETY_POLL_MS'
  | 'MESSAGE_ENGINE_LOST_POLL_MS'
  | 'MESSAGE_ENGINE_CHECK_MS'
  | 'MESSAGE_RELIST_MS'
  | 'VALKEY_URL'
  | 'VALKEY_USERNAME'
  | 'VALKEY_PASSWORD'
  | 'VALKEY_IAM_AUTH'
  | 'AWS_REGION'
  | 'SIGN_IN_CONCURRENT_CHECKS'
  | 'SIGN_IN_QUEUED_CHECKS'
  | 'DPOP_NONCES'
  | `${'SIGN_IN' | 'PUBLIC'}_RATE_LIMIT_${'BURST' | 'PER_MINUTE'}`;
/** What a process in AWS reads. lib/ may type the environment it sets with it (`import type` loads no code). */
export type AwsVariable =
  | 'ISSUER'
  | 'TABLE_PREFIX'
  | 'KMS_KEY_ID'
  | 'KMS_VERIFY_KEY_IDS'
  | 'KMS_PUBLIC_KEYS'
  | 'KMS_RSA_KEY_ID'
  | 'KMS_RSA_VERIFY_KEY_IDS'
  | 'MAC_KEY_ID'
  | 'PAGE_TOKEN_KEY_ID'
  | 'GRPC_PORT'
  | 'GRPC_REFLECTION'
  | 'GRPC_ORIGIN'
  | 'HEALTH_PORT'
  | 'DRAIN_SECONDS'
  | ServiceVariable
  | TelemetryVariable;
type LocalVariable =
  | 'HOST'
  | 'PORT'
  | 'GRPC_PORT'
  | 'GRPC_REFLECTION'
  | 'DYNAMODB_PORT'
  | 'DATA_DIR'
  | 'ISSUER'
  | ServiceVariable
  | TelemetryVariable;
export type Variable = AwsVariable | LocalVariable;

/** A URL with its userinfo (which may hold a password) replaced, for problems that quote it. */
export const withoutUserinfo = (url: string) => url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1…@');

/** Reads variables, collecting every refusal (`problems`) instead of stopping at the first. */
export function variableReader(env: Environment) {
  const problems: string[] = [];
  /** Trimmed; blank counts as unset (its default applies). */
  const given = (name: Variable) => env[name]?.trim() || undefined;
  function refuse<T>(name: Variable, value: string, allowed: string, fallback: T): T {
    problems.push(`${name} must be ${allowed}, got '${value}'`);
    return fallback;
  }
  function wholeNumber(
    name: Variable,
    fallback: number,
    min: number,
    max: number,
    allowed = `a whole number ${min}-${max}`,
  ): number {
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
  return {
    problems,
    refuse,
    text: (name: Variable, fallback: string) => given(name) ?? fallback,
    optional: given,
    /** Not trimmed (a password is taken as given); blank counts as unset. */
    exact: (name: Variable) => (env[name]?.trim() ? env[name] : undefined),
    required,
    list: (name: Variable) =>
      (given(name) ?? '')
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean),
    wholeNumber,
    /** A non-negative decimal number of days, in milliseconds. */
    days(name: Variable, fallback: number): number {
      const value = given(name);
      if (value === undefined) return fallback;
      if (/^\d{1,6}(\.\d{1,9})?$/.test(value)) return Number(value) * DAY;
      return refuse(name, value, 'a non-negative number', fallback);
    },
    port: (name: Variable, fallback: number) => wholeNumber(name, fallback, 0, 65535, 'a port number (0-65535)'),
  };
}

export type VariableReader = ReturnType<typeof variableReader>;
