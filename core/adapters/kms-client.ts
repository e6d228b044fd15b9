import { KMSClient, type KMSClientConfig } from '@aws-sdk/client-kms';
import { oauthError } from '../kernel/errors';

// The KMS client of a process in AWS, and what a throttled KMS call becomes. KMS throttles per
// account and Region (docs/deploying.md, "KMS request quotas"): every token is one Sign, so a burst
// beyond the quota answers ThrottlingException. A throttled call is retried a few times with
// exponential backoff and full jitter (so that many containers throttled together do not retry in
// step), each throttle is counted (the KmsThrottles metric, alarmed on), and a call still throttled
// after the last attempt becomes `temporarily_unavailable` (HTTP 503, gRPC UNAVAILABLE) with Retry-After.

/** The SDK's retry interface (RetryStrategyV2), named through the client's own configuration type. */
type RetryStrategy = Extract<NonNullable<KMSClientConfig['retryStrategy']>, { acquireInitialRetryToken: unknown }>;
type RetryToken = Awaited<ReturnType<RetryStrategy['acquireInitialRetryToken']>>;

export interface KmsRetryPolicy {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** The ceiling of the first retry's random wait; it doubles per retry. */
  baseDelayMs: number;
  /** No wait is longer than this. */
  maxDelayMs: number;
}

/**
 * At most 4 attempts, waits drawn from [0, 100 ms), [0, 200 ms), [0, 400 ms): at most 0.7 s more on
 * a token request, well inside the API's timeout; KMS quotas are per second, so a longer wait would
 * mostly hold a container that is better answering 503 with Retry-After.
 */
export const KMS_RETRY: KmsRetryPolicy = { maxAttempts: 4, baseDelayMs: 100, maxDelayMs: 1_000 };

/** Seconds a caller is told to wait (Retry-After) when KMS stayed throttled: its quotas are per second. */
export const KMS_BUSY_RETRY_AFTER_SECONDS = 1;

/**
 * The SDK retry strategy of our KMS clients: throttled and transient failures (the SDK's own
 * classification: ThrottlingException, HTTP 429, …; timeouts, 5xx, connection resets) are retried
 * up to `maxAttempts` with full jitter; `onThrottle` is told of every throttled attempt.
 */
export function kmsRetryStrategy(
  policy: KmsRetryPolicy,
  onThrottle: () => void,
  random: () => number = Math.random,
): RetryStrategy {
  const token = (retries: number, delay: number): RetryToken => ({
    getRetryCount: () => retries,
    getRetryDelay: () => delay,
  });
  return {
    acquireInitialRetryToken: async () => token(0, 0),
    async refreshRetryTokenForRetry(previous, { errorType }) {
      if (errorType === 'THROTTLING') onThrottle();
      const retries = previous.getRetryCount();
      // Refusing ends the call with the last error (the SDK's contract).
      if ((errorType !== 'THROTTLING' && errorType !== 'TRANSIENT') || retries + 1 >= policy.maxAttempts) {
        throw new Error('no further KMS attempt');
      }
      const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retries);
      return token(retries + 1, Math.floor(random() * ceiling));
    },
    recordSuccess: () => undefined,
  };
}

/** A KMS client that retries as `kmsRetryStrategy` says; one per process. */
export function createKmsClient(options: { onThrottle: () => void; policy?: KmsRetryPolicy }): KMSClient {
  const policy = options.policy ?? KMS_RETRY;
  return new KMSClient({
    maxAttempts: policy.maxAttempts,
    retryStrategy: kmsRetryStrategy(policy, options.onThrottle),
  });
}

// The SDK's throttling names that KMS may answer (ThrottlingException is what KMS documents), or 429.
const THROTTLING_NAMES = new Set([
  'ThrottlingException',
  'Throttling',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'RequestThrottledException',
]);

export function isKmsThrottle(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { $metadata, $retryable } = error as {
    $metadata?: { httpStatusCode?: number };
    $retryable?: { throttling?: boolean };
  };
  return THROTTLING_NAMES.has(error.name) || $metadata?.httpStatusCode === 429 || $retryable?.throttling === true;
}

/**
 * Rethrows a KMS failure, a throttle (still throttled after the retries) as `temporarily_unavailable`
 * with Retry-After; anything else as it is (a fault of ours or of the key: a server error).
 */
export function rethrowKmsFailure(error: unknown): never {
  if (isKmsThrottle(error)) {
    throw oauthError('temporarily_unavailable', `the key service is busy; retry in ${KMS_BUSY_RETRY_AFTER_SECONDS} s`, {
      retryAfterSeconds: KMS_BUSY_RETRY_AFTER_SECONDS,
    });
  }
  throw error;
}

/** `call`'s answer; its failure as `rethrowKmsFailure` says. */
export async function callKms<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    return rethrowKmsFailure(error);
  }
}
