import { withoutUserinfo, type VariableReader } from './config-variables';
import type { IamAuth } from './elasticache-iam';

// The pub/sub engine of inbox wake-ups as configured: VALKEY_URL
// (redis[s]://[user[:password]@]host[:port]), and VALKEY_USERNAME / VALKEY_PASSWORD for credentials
// given apart (a secret injected on its own); in AWS rediss:// only. VALKEY_IAM_AUTH=<replication
// group id>: the user signs in with IAM auth tokens (elasticache-iam.ts) signed in AWS_REGION, so a
// user is required and a password refused. A password is never repeated in a problem.
//
// The engine's type lives here, beside what makes it: runtime-config.ts reads it, the engine
// (valkey-wakeups*.ts) takes it, and neither of them is imported back.

/** Where the engine is and how to sign in. */
export interface WakeupEngine {
  /** `redis[s]://host:port`, without credentials: what logs name. */
  address: string;
  host: string;
  port: number;
  /** rediss://: TLS, the server's certificate checked against the host name. */
  tls: boolean;
  username?: string;
  password?: string;
  /** IAM authentication (VALKEY_IAM_AUTH): the password is an IAM auth token, never a `password`. */
  iam?: IamAuth;
}

/** Where the pub/sub engine is: locally redis:// or rediss://; in AWS TLS only. */
const ENGINE_URL =
  /^(rediss?):\/\/(?:([^:@/?#\s]*)(?::([^@/?#\s]*))?@)?([^:@/?#\s]+|\[[0-9a-fA-F:.]+\])(?::(\d{1,5}))?\/?$/;
const DEFAULT_ENGINE_PORT = 6379;
/** An ElastiCache replication group id: 1-40 of a-z 0-9 -, a letter first, no `--`, no `-` last. */
const REPLICATION_GROUP_ID = /^(?=.{1,40}$)[a-z](?:-?[a-z0-9])*$/;
const AWS_REGION_NAME = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;

/** VALKEY_IAM_AUTH's settings, with the user it signs in and AWS_REGION (where tokens are signed). */
function iamAuth(
  read: VariableReader,
  replicationGroupId: string,
  userId: string | undefined,
  passwordSet: boolean,
): IamAuth | undefined {
  const { problems } = read;
  const region = read.optional('AWS_REGION');
  const before = problems.length;
  if (!REPLICATION_GROUP_ID.test(replicationGroupId)) {
    const allowed = 'an ElastiCache replication group id (1-40 of a-z 0-9 -, a letter first)';
    read.refuse('VALKEY_IAM_AUTH', replicationGroupId, allowed, undefined);
  }
  if (!userId) problems.push('VALKEY_IAM_AUTH needs the user it signs in: VALKEY_USERNAME (or the user of VALKEY_URL)');
  if (passwordSet) {
    problems.push(
      'VALKEY_IAM_AUTH and a password (VALKEY_PASSWORD or in VALKEY_URL) are both set: ' +
        'an IAM user signs in with tokens, give no password',
    );
  }
  if (region === undefined) {
    problems.push('AWS_REGION must be set with VALKEY_IAM_AUTH (the region IAM auth tokens are signed for)');
  } else if (!AWS_REGION_NAME.test(region)) {
    read.refuse('AWS_REGION', region, 'an AWS region name (e.g. eu-central-1)', undefined);
  }
  return problems.length === before ? { replicationGroupId, userId: userId!, region: region! } : undefined;
}

/** VALKEY_URL's parts (user and password percent-decoded), or a refusal (undefined). */
function engineUrl(read: VariableReader, value: string, deployed: boolean) {
  const shown = withoutUserinfo(value);
  const allowed = deployed
    ? 'a rediss:// URL (TLS): rediss://[user[:password]@]host[:port]'
    : 'a redis:// or rediss:// URL: redis[s]://[user[:password]@]host[:port]';
  const parts = ENGINE_URL.exec(value);
  const port = Number(parts?.[5] ?? DEFAULT_ENGINE_PORT);
  if (!parts || (deployed && parts[1] !== 'rediss') || port < 1 || port > 65535) {
    return read.refuse('VALKEY_URL', shown, allowed, undefined);
  }
  try {
    const user = parts[2] ? decodeURIComponent(parts[2]) : undefined;
    const password = parts[3] ? decodeURIComponent(parts[3]) : undefined;
    return { scheme: parts[1]!, hostPart: parts[4]!, port, user, password };
  } catch {
    return read.refuse('VALKEY_URL', shown, `${allowed}, its user and password percent-encoded`, undefined);
  }
}

/** The engine of VALKEY_URL and its credentials; unset (and none of its variables set), none. */
export function readWakeupEngine(read: VariableReader, deployed: boolean): WakeupEngine | undefined {
  const value = read.optional('VALKEY_URL');
  const username = read.optional('VALKEY_USERNAME');
  const password = read.exact('VALKEY_PASSWORD');
  const iamGroup = read.optional('VALKEY_IAM_AUTH');
  if (value === undefined) {
    const apart = [
      ['VALKEY_USERNAME', username],
      ['VALKEY_PASSWORD', password],
      ['VALKEY_IAM_AUTH', iamGroup],
    ] as const;
    for (const [name, set] of apart) {
      if (set !== undefined) read.problems.push(`${name} is set but VALKEY_URL is not (the engine it signs in to)`);
    }
    return undefined;
  }
  const url = engineUrl(read, value, deployed);
  if (!url) return undefined;
  if (url.user && username) read.problems.push('VALKEY_USERNAME and the user of VALKEY_URL are both set: give one');
  if (url.password && password) {
    read.problems.push('VALKEY_PASSWORD and the password of VALKEY_URL are both set: give one');
  }
  const user = url.user ?? username;
  const secret = url.password ?? password;
  const iam = iamGroup === undefined ? undefined : iamAuth(read, iamGroup, user, secret !== undefined);
  return {
    address: `${url.scheme}://${url.hostPart}:${url.port}`,
    host: url.hostPart.replace(/^\[(.*)\]$/, '$1'),
    port: url.port,
    tls: url.scheme === 'rediss',
    ...(user ? { username: user } : {}),
    ...(secret && !iamGroup ? { password: secret } : {}),
    ...(iam ? { iam } : {}),
  };
}

/** The relay's engine: VALKEY_URL required (the relay publishes nothing else). */
export function readRequiredWakeupEngine(read: VariableReader): WakeupEngine {
  const engine = readWakeupEngine(read, true);
  if (!engine && read.optional('VALKEY_URL') === undefined) {
    read.problems.push('VALKEY_URL must be set (the pub/sub engine the relay publishes to)');
  }
  return engine ?? { address: '', host: '', port: DEFAULT_ENGINE_PORT, tls: true };
}
