import { generateKeyPairSync } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  readRuntimeConfig,
  type Environment,
  type ProcessKind,
  type RuntimeConfig,
  type ServiceSettings,
} from '../core/adapters/runtime-config';
import { DAY } from '../core/kernel/config';
import { handler as discoveryHandler } from '../lambdas/discovery';
import { handler as publicHandler } from '../lambdas/public';
import type { HttpEvent } from '../lambdas/http';
import { runBundled } from './support/processes';

// core/adapters/runtime-config.ts: every variable a process reads, its default, the values it
// accepts and the message for each it refuses; several problems are named together. Then the two
// AWS entry points (a Lambda handler, the gRPC task) refuse a bad environment with that message.

/** What the stack always sets for a process in AWS. */
const aws = {
  ISSUER: 'https://id.example.com',
  TABLE_PREFIX: 'svcnum-sandbox-',
  KMS_KEY_ID: 'arn:aws:kms:eu-central-1:111122223333:key/active',
};
/** The task also always gets the page-token key (it pages); a Lambda only where its routes page (public). */
const PAGE_TOKEN_KEY_ID = 'arn:aws:kms:eu-central-1:111122223333:key/page-token';
const task = { ...aws, PAGE_TOKEN_KEY_ID };
/** The kinds that read the service settings (the wake-up relay reads only the engine: its own test below). */
type ServiceKind = Exclude<ProcessKind, 'relay'>;
const baseOf: Record<ServiceKind, Environment> = { lambda: aws, task, local: {} };
const kinds = Object.keys(baseOf) as ServiceKind[];

const read = <K extends ServiceKind>(kind: K, env: Environment) => readRuntimeConfig(kind, { ...baseOf[kind], ...env });
const refusal = (kind: ServiceKind, env: Environment): string => {
  try {
    read(kind, env);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`${JSON.stringify(env)} was accepted by ${kind}`);
};

interface Variable {
  name: string;
  /** The kinds of process that read it. */
  kinds: ServiceKind[];
  value: (config: RuntimeConfig[ServiceKind]) => unknown;
  /** Required: blank is refused rather than defaulted (the base environment sets it). */
  required?: boolean;
  fallback: unknown;
  valid: Array<[given: string, read: unknown]>;
  invalid: string[];
  allowed: string;
}

const service = (pick: (settings: ServiceSettings) => unknown) => (config: RuntimeConfig[ServiceKind]) =>
  pick(config.service);
/** A top-level field of a process's configuration. */
const field = (name: string) => (config: RuntimeConfig[ServiceKind]) =>
  (config as unknown as Record<string, unknown>)[name];
const positive = (name: string, fallback: number, pick: (settings: ServiceSettings) => number): Variable => ({
  name,
  kinds,
  value: service(pick),
  fallback,
  valid: [
    ['1', 1],
    [' 50 ', 50],
    ['999999999', 999_999_999],
  ],
  invalid: ['0', '-3', '1.5', 'lots', '1e3', '0x10', '1000000000'],
  allowed: 'a whole number of at least 1',
});
const port = (name: string, key: string, fallback: number, kindsReading: ServiceKind[]): Variable => ({
  name,
  kinds: kindsReading,
  value: field(key),
  fallback,
  valid: [
    ['0', 0],
    ['8080', 8080],
    ['65535', 65535],
  ],
  invalid: ['65536', '-1', 'eighty', '80.5'],
  allowed: 'a port number (0-65535)',
});

const variables: Variable[] = [
  {
    name: 'NUMBER_COOL_OFF_DAYS',
    kinds,
    value: service((s) => s.provisioning.coolOff),
    fallback: 90 * DAY,
    valid: [
      ['0', 0],
      ['1', DAY],
      ['0.5', DAY / 2],
      ['365', 365 * DAY],
    ],
    invalid: ['-1', 'ninety', '1e3', '.5', 'Infinity'],
    allowed: 'a non-negative number',
  },
  {
    name: 'AGENT_QUOTA_INDEPENDENT',
    kinds,
    value: service((s) => s.provisioning.independentAgentQuota),
    fallback: 10,
    valid: [
      ['0', 0],
      ['100000', 100_000],
    ],
    invalid: ['100001', '-1', '2.5', 'ten'],
    allowed: 'a whole number 0-100000',
  },
  {
    name: 'AGENT_QUOTA_DEPENDENT',
    kinds,
    value: service((s) => s.provisioning.dependentAgentQuota),
    fallback: 10,
    valid: [
      ['0', 0],
      ['25', 25],
    ],
    invalid: ['100001', 'many'],
    allowed: 'a whole number 0-100000',
  },
  {
    name: 'MASK_QUOTA',
    kinds,
    value: service((s) => s.provisioning.maskQuota),
    fallback: 10,
    valid: [
      ['0', 0],
      ['100000', 100_000],
    ],
    invalid: ['100001', '-1', 'ten'],
    allowed: 'a whole number 0-100000',
  },
  {
    name: 'NUMBER_QUOTA',
    kinds,
    value: service((s) => s.provisioning.numberQuota),
    fallback: 10,
    valid: [
      ['1', 1],
      ['40', 40],
    ],
    invalid: ['100001', '2.5'],
    allowed: 'a whole number 0-100000',
  },
  positive('SIGN_IN_CONCURRENT_CHECKS', 2, (s) => s.signIn.concurrentChecks),
  positive('SIGN_IN_QUEUED_CHECKS', 8, (s) => s.signIn.queuedChecks),
  positive('SIGN_IN_RATE_LIMIT_BURST', 20, (s) => s.signIn.perIp.burst),
  positive('SIGN_IN_RATE_LIMIT_PER_MINUTE', 10, (s) => s.signIn.perIp.perMinute),
  positive('PUBLIC_RATE_LIMIT_BURST', 20, (s) => s.publicRateLimit.burst),
  positive('PUBLIC_RATE_LIMIT_PER_MINUTE', 300, (s) => s.publicRateLimit.perMinute),
  {
    name: 'DPOP_NONCES',
    kinds,
    value: service((s) => s.dpopNonces),
    fallback: false,
    valid: [
      ['on', true],
      ['off', false],
    ],
    invalid: ['yes', '1', 'ON'],
    allowed: 'on or off',
  },
  {
    name: 'MESSAGE_POLL_INTERVAL_MS',
    kinds,
    value: service((s) => s.messagePolling.pollIntervalMs),
    fallback: 250,
    valid: [
      ['20', 20],
      ['60000', 60_000],
    ],
    invalid: ['19', '60001', 'fast', '100.5'],
    allowed: 'a whole number 20-60000',
  },
  {
    name: 'MESSAGE_SAFETY_POLL_MS',
    kinds,
    value: service((s) => s.messagePolling.safetyPollMs),
    fallback: 90_000,
    valid: [
      ['1000', 1_000],
      ['3600000', 3_600_000],
    ],
    invalid: ['999', '3600001', 'slow'],
    allowed: 'a whole number 1000-3600000',
  },
  {
    name: 'MESSAGE_ENGINE_LOST_POLL_MS',
    kinds,
    value: service((s) => s.messagePolling.engineLostPollMs),
    fallback: 2_000,
    valid: [
      ['20', 20],
      ['60000', 60_000],
    ],
    invalid: ['19', '60001', '2s'],
    allowed: 'a whole number 20-60000',
  },
  {
    name: 'MESSAGE_ENGINE_CHECK_MS',
    kinds,
    value: service((s) => s.messagePolling.engineCheckMs),
    fallback: 3_000,
    valid: [
      ['100', 100],
      ['600000', 600_000],
    ],
    invalid: ['99', '600001', '3s'],
    allowed: 'a whole number 100-600000',
  },
  {
    name: 'MESSAGE_RELIST_MS',
    kinds,
    value: service((s) => s.messagePolling.relistMs),
    fallback: 30_000,
    valid: [
      ['1000', 1_000],
      ['3600000', 3_600_000],
    ],
    invalid: ['999', '3600001', '30s'],
    allowed: 'a whole number 1000-3600000',
  },
  {
    name: 'ISSUER',
    kinds: ['local'],
    value: field('issuer'),
    fallback: undefined,
    valid: [
      ['https://id.example.com', 'https://id.example.com'],
      ['http://192.0.2.10:3000/base', 'http://192.0.2.10:3000/base'],
    ],
    invalid: [
      'id.example.com',
      'ftp://id.example.com',
      'https://id.example.com/?x=1',
      'https://id.example.com/#top',
      'https://',
    ],
    allowed: 'an http(s) URL without query or fragment',
  },
  {
    // Deployed: https only, no userinfo (RFC 8414 §2: the issuer is an https URL).
    name: 'ISSUER',
    kinds: ['lambda', 'task'],
    value: field('issuer'),
    fallback: 'https://id.example.com',
    required: true,
    valid: [
      [
        'https://abc.execute-api.eu-central-1.amazonaws.com/prod',
        'https://abc.execute-api.eu-central-1.amazonaws.com/prod',
      ],
      ['https://id.example.com:8443', 'https://id.example.com:8443'],
    ],
    invalid: [
      'abc.execute-api.eu-central-1.amazonaws.com',
      'https://id.example.com?x',
      'http://id.example.com',
      'HTTP://id.example.com',
    ],
    allowed: 'an https URL without userinfo, query or fragment',
  },
  {
    name: 'TABLE_PREFIX',
    kinds: ['lambda', 'task'],
    value: field('tablePrefix'),
    fallback: 'svcnum-sandbox-',
    required: true,
    valid: [
      ['svcnum-production-', 'svcnum-production-'],
      ['a.B_9-', 'a.B_9-'],
      ['x'.repeat(200), 'x'.repeat(200)],
    ],
    invalid: ['svcnum sandbox', 'svcnum/sandbox-', 'svcnum:sandbox', 'tablé-', 'x'.repeat(201)],
    allowed: '1-200 characters of A-Z a-z 0-9 _ . - (DynamoDB table names)',
  },
  port('PORT', 'port', 3000, ['local']),
  port('DYNAMODB_PORT', 'dynamoPort', 8000, ['local']),
  port('GRPC_PORT', 'grpcPort', 50051, ['local', 'task']),
  port('HEALTH_PORT', 'healthPort', 8081, ['task']),
  // Open on a laptop; a token in AWS even without the variable (the task faces the NLB's allowed ranges).
  ...(
    [
      ['local', 'open'],
      ['task', 'token'],
    ] as const
  ).map(
    ([kind, fallback]): Variable => ({
      name: 'GRPC_REFLECTION',
      kinds: [kind],
      value: field('grpcReflection'),
      fallback,
      valid: [
        ['open', 'open'],
        ['token', 'token'],
        [' token ', 'token'],
      ],
      invalid: ['TOKEN', 'closed', 'true'],
      allowed: 'open or token',
    }),
  ),
  {
    name: 'DRAIN_SECONDS',
    kinds: ['task'],
    value: field('drainSeconds'),
    fallback: 25,
    valid: [
      ['0', 0],
      ['120', 120],
    ],
    invalid: ['121', '2.5', 'forever'],
    allowed: 'a whole number 0-120',
  },
  {
    name: 'GRPC_ORIGIN',
    kinds: ['task'],
    value: field('grpcOrigin'),
    fallback: undefined,
    valid: [
      ['https://grpc.example.com', 'https://grpc.example.com'],
      [' https://grpc.example.com:8443 ', 'https://grpc.example.com:8443'],
    ],
    invalid: ['http://grpc.example.com', 'https://grpc.example.com/', 'grpc.example.com'],
    allowed: 'an https origin: https://host[:port], no path',
  },
];

describe('readRuntimeConfig', () => {
  for (const variable of variables) {
    for (const kind of variable.kinds) {
      it(`${kind}: ${variable.name}: default, accepted values, and each refusal`, () => {
        expect(variable.value(read(kind, {}))).toStrictEqual(variable.fallback);
        // Blank is unset: the default applies.
        if (!variable.required)
          expect(variable.value(read(kind, { [variable.name]: '  ' }))).toStrictEqual(variable.fallback);
        for (const [given, value] of variable.valid)
          expect(variable.value(read(kind, { [variable.name]: given })), given).toStrictEqual(value);
        for (const given of variable.invalid) {
          expect(refusal(kind, { [variable.name]: given })).toBe(
            `${variable.name} must be ${variable.allowed}, got '${given.trim()}'`,
          );
        }
      });
    }
  }

  it('local: HOST and DATA_DIR default to 127.0.0.1 and .data, and take any value', () => {
    expect(read('local', {})).toMatchObject({ host: '127.0.0.1', dataDir: '.data' });
    expect(read('local', { HOST: ' 0.0.0.0 ', DATA_DIR: '/var/lib/svcnum' })).toMatchObject({
      host: '0.0.0.0',
      dataDir: '/var/lib/svcnum',
    });
  });

  it('local: the whole configuration with nothing set (the design brief §5 defaults)', () => {
    expect(readRuntimeConfig('local', {})).toStrictEqual({
      host: '127.0.0.1',
      port: 3000,
      grpcPort: 50051,
      dynamoPort: 8000,
      grpcReflection: 'open',
      dataDir: '.data',
      service: {
        provisioning: {
          coolOff: 90 * DAY,
          lease: 60_000,
          independentAgentQuota: 10,
          dependentAgentQuota: 10,
          maskQuota: 10,
          numberQuota: 10,
        },
        signIn: { concurrentChecks: 2, queuedChecks: 8, perIp: { burst: 20, perMinute: 10 } },
        publicRateLimit: { burst: 20, perMinute: 300 },
        dpopNonces: false,
        messagePolling: {
          pollIntervalMs: 250,
          safetyPollMs: 90_000,
          engineLostPollMs: 2_000,
          engineCheckMs: 3_000,
          relistMs: 30_000,
        },
      },
    });
  });

  it('AWS: ISSUER, TABLE_PREFIX and KMS_KEY_ID are required; KMS_VERIFY_KEY_IDS is a list; MAC_KEY_ID is optional', () => {
    for (const kind of ['lambda', 'task'] as const) {
      expect(refusal(kind, { ISSUER: '', TABLE_PREFIX: ' ', KMS_KEY_ID: '' })).toBe(
        'ISSUER must be set (the issuer URL); TABLE_PREFIX must be set (the physical table name prefix); KMS_KEY_ID must be set (the KMS key that signs)',
      );
      const config = read(kind, {});
      expect(config).toMatchObject({
        issuer: aws.ISSUER,
        tablePrefix: aws.TABLE_PREFIX,
        kmsKeyId: aws.KMS_KEY_ID,
        kmsVerifyKeyIds: [],
      });
      expect(config).not.toHaveProperty('macKeyId');
      expect(read(kind, { KMS_VERIFY_KEY_IDS: 'arn:a, arn:b,,' }).kmsVerifyKeyIds).toStrictEqual(['arn:a', 'arn:b']);
      expect(read(kind, { MAC_KEY_ID: 'arn:mac' }).macKeyId).toBe('arn:mac');
    }
    // The task reads the Lambda variables and its own two.
    expect(read('task', {})).toMatchObject({ grpcPort: 50051, drainSeconds: 25 });
    expect(read('lambda', {})).not.toHaveProperty('grpcPort');
  });

  it('AWS: KMS_PUBLIC_KEYS, a JSON object of key ARN to base64 DER SPKI of an Ed25519 or RSA 2048 key; unset, none', () => {
    const der = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' });
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'der', type: 'spki' });
    for (const kind of ['lambda', 'task'] as const) {
      expect(read(kind, {}).kmsPublicKeys.size).toBe(0);
      const published = { 'arn:a': der.toString('base64'), 'arn:r': rsa.toString('base64') };
      const keys = read(kind, { KMS_PUBLIC_KEYS: JSON.stringify(published) }).kmsPublicKeys;
      expect([...keys.keys()]).toEqual(['arn:a', 'arn:r']);
      expect(Buffer.from(keys.get('arn:a')!)).toEqual(der);
      expect(Buffer.from(keys.get('arn:r')!)).toEqual(rsa);
    }
    const rsa3072 = generateKeyPairSync('rsa', { modulusLength: 3072 })
      .publicKey.export({ format: 'der', type: 'spki' })
      .toString('base64');
    expect(refusal('lambda', { KMS_PUBLIC_KEYS: JSON.stringify({ 'arn:r': rsa3072 }) })).toMatch(
      /^KMS_PUBLIC_KEYS must/,
    );
    const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .publicKey.export({ format: 'der', type: 'spki' })
      .toString('base64');
    const allowed = 'a JSON object of KMS key ARN to base64 DER SubjectPublicKeyInfo of an Ed25519 or RSA 2048 key';
    expect(refusal('lambda', { KMS_PUBLIC_KEYS: 'arn:a=MCow' })).toBe(
      `KMS_PUBLIC_KEYS must be ${allowed}, got 'arn:a=MCow'`,
    );
    expect(refusal('lambda', { KMS_PUBLIC_KEYS: '["MCow"]' })).toBe(
      `KMS_PUBLIC_KEYS must be ${allowed}, got '["MCow"]'`,
    );
    expect(refusal('lambda', { KMS_PUBLIC_KEYS: JSON.stringify({ 'arn:a': p256 }) })).toBe(
      `KMS_PUBLIC_KEYS must be ${allowed}, got 'arn:a: ${p256.slice(0, 80)}'`,
    );
    expect(refusal('lambda', { KMS_PUBLIC_KEYS: JSON.stringify({ 'arn:a': 7 }) })).toBe(
      `KMS_PUBLIC_KEYS must be ${allowed}, got 'arn:a: 7'`,
    );
  });

  it('AWS: PAGE_TOKEN_KEY_ID is required by the task, optional for a Lambda unless its handler needs it', () => {
    expect(read('task', {}).pageTokenKeyId).toBe(PAGE_TOKEN_KEY_ID);
    expect(refusal('task', { PAGE_TOKEN_KEY_ID: ' ' })).toBe(
      'PAGE_TOKEN_KEY_ID must be set (the KMS HMAC key of page tokens)',
    );
    expect(read('lambda', {})).not.toHaveProperty('pageTokenKeyId');
    expect(read('lambda', { PAGE_TOKEN_KEY_ID }).pageTokenKeyId).toBe(PAGE_TOKEN_KEY_ID);
    expect(() => readRuntimeConfig('lambda', aws, ['PAGE_TOKEN_KEY_ID'])).toThrow(
      /^PAGE_TOKEN_KEY_ID must be set \(the KMS HMAC key of page tokens\)$/,
    );
    expect(readRuntimeConfig('lambda', { ...aws, PAGE_TOKEN_KEY_ID }, ['PAGE_TOKEN_KEY_ID']).pageTokenKeyId).toBe(
      PAGE_TOKEN_KEY_ID,
    );
  });

  it('AWS: a refused ISSUER with userinfo is named without it (it may hold a password)', () => {
    expect(refusal('lambda', { ISSUER: 'https://operator:s3cret@id.example.com' })).toBe(
      "ISSUER must be an https URL without userinfo, query or fragment, got 'https://…@id.example.com'",
    );
  });

  it('VALKEY_URL: unset, no engine; redis[s]://[user[:password]@]host[:port]; in AWS rediss:// only; credentials apart or in the URL, never both, never shown', () => {
    const engine = (kind: ServiceKind, env: Environment) => read(kind, env).service.wakeupEngine;
    for (const kind of kinds) expect(engine(kind, {})).toBeUndefined();
    expect(engine('local', { VALKEY_URL: ' redis://127.0.0.1:6390 ' })).toStrictEqual({
      address: 'redis://127.0.0.1:6390',
      host: '127.0.0.1',
      port: 6390,
      tls: false,
    });
    // A Lambda reads no engine (the relay publishes for it; the stack gives it no VALKEY_*).
    expect(engine('lambda', { VALKEY_URL: 'redis://user:s3cret@cache.internal' })).toBeUndefined();
    for (const kind of ['task'] as const) {
      expect(
        engine(kind, { VALKEY_URL: 'rediss://svcnum:p%40ss@master.wakeups.abc.euc1.cache.amazonaws.com' }),
      ).toStrictEqual({
        address: 'rediss://master.wakeups.abc.euc1.cache.amazonaws.com:6379',
        host: 'master.wakeups.abc.euc1.cache.amazonaws.com',
        port: 6379,
        tls: true,
        username: 'svcnum',
        password: 'p@ss',
      });
      expect(
        engine(kind, {
          VALKEY_URL: 'rediss://cache.internal:6380/',
          VALKEY_USERNAME: 'svcnum',
          VALKEY_PASSWORD: ' spaced pw ',
        }),
      ).toMatchObject({ port: 6380, username: 'svcnum', password: ' spaced pw ' });
      expect(refusal(kind, { VALKEY_URL: 'redis://user:s3cret@cache.internal' })).toBe(
        "VALKEY_URL must be a rediss:// URL (TLS): rediss://[user[:password]@]host[:port], got 'redis://…@cache.internal'",
      );
    }
    expect(engine('local', { VALKEY_URL: 'redis://[::1]:7000' })).toMatchObject({
      host: '::1',
      port: 7000,
      address: 'redis://[::1]:7000',
    });
    const allowed = 'a redis:// or rediss:// URL: redis[s]://[user[:password]@]host[:port]';
    for (const given of [
      '127.0.0.1:6379',
      'http://cache:6379',
      'redis://',
      'redis://cache:0',
      'redis://cache:70000',
      'redis://cache/1?x=y',
      'redis://cache#x',
    ]) {
      expect(refusal('local', { VALKEY_URL: given })).toBe(`VALKEY_URL must be ${allowed}, got '${given}'`);
    }
    expect(refusal('local', { VALKEY_URL: 'redis://:s3cret@cache', VALKEY_PASSWORD: 'other' })).toBe(
      'VALKEY_PASSWORD and the password of VALKEY_URL are both set: give one',
    );
    expect(refusal('local', { VALKEY_PASSWORD: 's3cret' })).toBe(
      'VALKEY_PASSWORD is set but VALKEY_URL is not (the engine it signs in to)',
    );
    expect(refusal('local', { VALKEY_URL: 'redis://u:%E0%A4%A@cache' })).not.toContain('%E0');
  });

  it('VALKEY_IAM_AUTH: the replication group an IAM user signs in to (tokens signed in AWS_REGION); needs a user, refuses a password', () => {
    const engine = (kind: ServiceKind, env: Environment) => read(kind, env).service.wakeupEngine;
    const url = 'rediss://master.svcnum-sandbox-wakeups.abc.euc1.cache.amazonaws.com:6380';
    const iam = {
      VALKEY_URL: url,
      VALKEY_USERNAME: 'svcnum-wakeups-sandbox',
      VALKEY_IAM_AUTH: 'svcnum-sandbox-wakeups',
      AWS_REGION: 'eu-central-1',
    };
    for (const kind of kinds.filter((kind) => kind !== 'lambda')) {
      expect(engine(kind, iam)).toStrictEqual({
        address: url,
        host: 'master.svcnum-sandbox-wakeups.abc.euc1.cache.amazonaws.com',
        port: 6380,
        tls: true,
        username: 'svcnum-wakeups-sandbox',
        iam: { replicationGroupId: 'svcnum-sandbox-wakeups', userId: 'svcnum-wakeups-sandbox', region: 'eu-central-1' },
      });
    }
    expect(refusal('task', { ...iam, VALKEY_PASSWORD: 's3cret' })).toBe(
      'VALKEY_IAM_AUTH and a password (VALKEY_PASSWORD or in VALKEY_URL) are both set: an IAM user signs in with tokens, give no password',
    );
    expect(refusal('task', { ...iam, VALKEY_USERNAME: '' })).toBe(
      'VALKEY_IAM_AUTH needs the user it signs in: VALKEY_USERNAME (or the user of VALKEY_URL)',
    );
    expect(refusal('task', { ...iam, AWS_REGION: '' })).toBe(
      'AWS_REGION must be set with VALKEY_IAM_AUTH (the region IAM auth tokens are signed for)',
    );
    expect(refusal('task', { ...iam, AWS_REGION: 'Frankfurt' })).toBe(
      "AWS_REGION must be an AWS region name (e.g. eu-central-1), got 'Frankfurt'",
    );
    for (const group of ['Svcnum', '9wakeups', 'a--b', 'a-', 'a'.repeat(41), 'a_b']) {
      expect(refusal('task', { ...iam, VALKEY_IAM_AUTH: group })).toBe(
        `VALKEY_IAM_AUTH must be an ElastiCache replication group id (1-40 of a-z 0-9 -, a letter first), got '${group}'`,
      );
    }
    expect(refusal('local', { VALKEY_IAM_AUTH: 'svcnum-sandbox-wakeups' })).toBe(
      'VALKEY_IAM_AUTH is set but VALKEY_URL is not (the engine it signs in to)',
    );
    // The relay reads the engine alone, and needs one.
    expect(readRuntimeConfig('relay', iam)).toStrictEqual({ wakeupEngine: engine('task', iam) });
    expect(() => readRuntimeConfig('relay', {})).toThrow(
      /^VALKEY_URL must be set \(the pub\/sub engine the relay publishes to\)$/,
    );
    expect(() => readRuntimeConfig('relay', { ...iam, VALKEY_URL: 'redis://cache:6380' })).toThrow(
      /^VALKEY_URL must be a rediss:\/\/ URL/,
    );
  });

  it('names every problem together, in the order of the variables, with the value given', () => {
    expect(
      refusal('local', {
        PORT: 'eighty',
        GRPC_PORT: '70000',
        ISSUER: 'ftp://x',
        NUMBER_COOL_OFF_DAYS: 'soon',
        SIGN_IN_QUEUED_CHECKS: '0',
        PUBLIC_RATE_LIMIT_BURST: 'lots',
      }),
    ).toBe(
      [
        "ISSUER must be an http(s) URL without query or fragment, got 'ftp://x'",
        "PORT must be a port number (0-65535), got 'eighty'",
        "GRPC_PORT must be a port number (0-65535), got '70000'",
        "NUMBER_COOL_OFF_DAYS must be a non-negative number, got 'soon'",
        "SIGN_IN_QUEUED_CHECKS must be a whole number of at least 1, got '0'",
        "PUBLIC_RATE_LIMIT_BURST must be a whole number of at least 1, got 'lots'",
      ].join('; '),
    );
    expect(
      refusal('task', {
        KMS_KEY_ID: '',
        AGENT_QUOTA_DEPENDENT: '-1',
        MESSAGE_POLL_INTERVAL_MS: '5',
        DRAIN_SECONDS: '300',
      }),
    ).toBe(
      [
        'KMS_KEY_ID must be set (the KMS key that signs)',
        "AGENT_QUOTA_DEPENDENT must be a whole number 0-100000, got '-1'",
        "MESSAGE_POLL_INTERVAL_MS must be a whole number 20-60000, got '5'",
        "DRAIN_SECONDS must be a whole number 0-120, got '300'",
      ].join('; '),
    );
  });

  it('reads only the environment it is given', () => {
    vi.stubEnv('PORT', 'not read');
    try {
      expect(readRuntimeConfig('local', { PORT: '4000' }).port).toBe(4000);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe('the AWS entry points', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('a Lambda handler refuses its first invocation with every problem of its environment, before any AWS call', async () => {
    vi.stubEnv('ISSUER', '');
    vi.stubEnv('TABLE_PREFIX', 'svcnum-sandbox-');
    vi.stubEnv('KMS_KEY_ID', '');
    vi.stubEnv('PUBLIC_RATE_LIMIT_PER_MINUTE', '0');
    const event = {
      resource: '/.well-known/jwks.json',
      path: '/.well-known/jwks.json',
      httpMethod: 'GET',
      headers: {},
    } as unknown as HttpEvent;
    await expect(async () => discoveryHandler(event, {} as Context)).rejects.toThrow(
      "ISSUER must be set (the issuer URL); KMS_KEY_ID must be set (the KMS key that signs); PUBLIC_RATE_LIMIT_PER_MINUTE must be a whole number of at least 1, got '0'",
    );
  });

  it('the public handler (discover pages) refuses its first invocation without PAGE_TOKEN_KEY_ID, whatever the request', async () => {
    for (const [name, value] of Object.entries(aws)) vi.stubEnv(name, value);
    vi.stubEnv('PAGE_TOKEN_KEY_ID', '');
    const event = {
      resource: '/api/resolve',
      path: '/api/resolve',
      httpMethod: 'GET',
      headers: {},
      queryStringParameters: { alias: 'x' },
    } as unknown as HttpEvent;
    await expect(async () => publicHandler(event, {} as Context)).rejects.toThrow(
      /^PAGE_TOKEN_KEY_ID must be set \(the KMS HMAC key of page tokens\)$/,
    );
  });

  it('the gRPC task stops at start with every problem of its environment', async () => {
    const outcome = await runBundled('grpc-service/main.ts', [], {
      ...aws,
      TABLE_PREFIX: '',
      GRPC_PORT: 'grpc',
      DRAIN_SECONDS: 'forever',
    });
    expect(outcome.code).not.toBe(0);
    expect(outcome.stderr).toContain(
      "TABLE_PREFIX must be set (the physical table name prefix); PAGE_TOKEN_KEY_ID must be set (the KMS HMAC key of page tokens); GRPC_PORT must be a port number (0-65535), got 'grpc'; DRAIN_SECONDS must be a whole number 0-120, got 'forever'",
    );
  });
});
