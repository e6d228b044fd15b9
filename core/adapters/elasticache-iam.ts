import { createHash, createHmac } from 'node:crypto';

// The password of an ElastiCache user whose authentication type is `iam`: an IAM auth token, that is a
// SigV4 presigned request `GET http://<replicationGroupId>/?Action=connect&User=<userId>` (service
// `elasticache`, X-Amz-Expires 900) without its `http://` (AWS documentation, "Authenticating with
// IAM"). A token is good for 15 minutes at AUTH; a connection it opened is closed by ElastiCache
// after 12 hours unless it authenticates again (core/adapters/valkey-wakeups.ts renews before that).
//
// Signed here with node:crypto: the SDK's signer (@smithy/signature-v4) is not one of our
// dependencies (only a transitive one of the SDK clients), and the relay Lambda's bundle must stay
// small. test/elasticache-iam.test.ts checks every token against that signer.

/** What signs: the process's AWS credentials (the task role's in Fargate, the function role's in Lambda). */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
  /** When they stop working (temporary credentials). */
  expiration?: Date | undefined;
}

/** Gives the current credentials (an SDK credential provider: memoized, refreshed before expiry). */
export type CredentialsSupplier = () => Promise<AwsCredentials>;

/** Whom a token signs in, where: VALKEY_IAM_AUTH, VALKEY_USERNAME and AWS_REGION (runtime-config.ts). */
export interface IamAuth {
  /** The replication group's id: the host the token is signed for. */
  replicationGroupId: string;
  /** The ElastiCache user (id = name for IAM users). */
  userId: string;
  region: string;
}

/** A connection signed in by IAM renews itself this long after it opened: before ElastiCache's 12-hour limit. */
export const IAM_RENEW_MS = 11 * 3_600_000;
/** A token's lifetime at AUTH (the most ElastiCache accepts). */
export const IAM_TOKEN_EXPIRES_SECONDS = 900;
/** Credentials are fetched again this often, or sooner when they expire within a token's lifetime. */
const CREDENTIALS_REFRESH_MS = 10 * 60_000;

const ALGORITHM = 'AWS4-HMAC-SHA256';
const SERVICE = 'elasticache';
const hex = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
/** RFC 3986 unreserved characters kept, everything else percent-encoded (SigV4's URI encoding). */
const encode = (value: string) =>
  encodeURIComponent(value).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);

/** The IAM auth token of `auth`, signed with `credentials` at `now`. */
export function elasticacheIamToken(auth: IamAuth, credentials: AwsCredentials, now: Date): string {
  const amzDate = now.toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${auth.region}/${SERVICE}/aws4_request`;
  const host = auth.replicationGroupId;
  const parameters: Array<[string, string]> = [
    ['Action', 'connect'],
    ['User', auth.userId],
    ['X-Amz-Algorithm', ALGORITHM],
    ['X-Amz-Credential', `${credentials.accessKeyId}/${scope}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(IAM_TOKEN_EXPIRES_SECONDS)],
    ...(credentials.sessionToken ? [['X-Amz-Security-Token', credentials.sessionToken] as [string, string]] : []),
    ['X-Amz-SignedHeaders', 'host'],
  ];
  const query = parameters
    .map(([name, value]) => [encode(name), encode(value)])
    .sort(([a], [b]) => (a! < b! ? -1 : a! > b! ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  // No body: the payload hash is the empty string's.
  const canonicalRequest = ['GET', '/', query, `host:${host}\n`, 'host', hex('')].join('\n');
  const stringToSign = [ALGORITHM, amzDate, scope, hex(canonicalRequest)].join('\n');
  const dayKey = hmac(`AWS4${credentials.secretAccessKey}`, day);
  const signingKey = hmac(hmac(hmac(dayKey, auth.region), SERVICE), 'aws4_request');
  return `${host}/?${query}&X-Amz-Signature=${hmac(signingKey, stringToSign).toString('hex')}`;
}

/** Tokens for the connections of one process: credentials resolved ahead, a token signed at each connect. */
export interface IamTokens {
  /** Credentials at hand (awaited before a connection opens); rejects while none can be had. */
  ready(): Promise<void>;
  /**
   * A token signed now: ioredis reads it at every (re)connect. Never logged. Never throws (ioredis
   * reads it inside its connect): without credentials yet it starts fetching them and gives an empty
   * password, which the engine refuses, and the connection's next attempt signs in.
   */
  token(): string;
  /** How long a connection these tokens opened may serve before it renews (IAM_RENEW_MS; tests shorten it). */
  readonly renewAfterMs: number;
  close(): void;
}

export function createIamTokens(
  auth: IamAuth,
  credentials: CredentialsSupplier,
  now: () => Date = () => new Date(),
  renewAfterMs = IAM_RENEW_MS,
): IamTokens {
  let current: AwsCredentials | undefined;
  let fetchedAt = -Infinity;
  let fetching: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const expiresSoon = (expiration: Date | undefined) =>
    expiration !== undefined && expiration.getTime() - now().getTime() < IAM_TOKEN_EXPIRES_SECONDS * 1000;
  const stale = () =>
    !current || now().getTime() - fetchedAt >= CREDENTIALS_REFRESH_MS || expiresSoon(current.expiration);
  const refresh = () =>
    (fetching ??= credentials()
      .then((fresh) => {
        current = fresh;
        fetchedAt = now().getTime();
      })
      .finally(() => {
        fetching = undefined;
      }));
  return {
    renewAfterMs,
    async ready() {
      if (stale()) await refresh();
      // Kept fresh for reconnections, which read `token()` without waiting.
      if (!timer) {
        timer = setInterval(() => void refresh().catch(() => undefined), CREDENTIALS_REFRESH_MS);
        timer.unref();
      }
    },
    token() {
      if (stale()) void refresh().catch(() => undefined);
      return current ? elasticacheIamToken(auth, current, now()) : '';
    },
    close() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
