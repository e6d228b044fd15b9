import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRegistration } from '../core/accounts';
import { KMS_RETRY } from '../core/adapters/kms-client';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient, ensureTables } from '../core/adapters/dynamo-schema';
import { systemClock, systemRandom } from '../core/adapters/system';
import { ed25519PublicJwk } from '../core/kernel/jwk';
import { tableNames } from '../core/tables';
import { localDynamoClient, startEmbeddedDynamo, type EmbeddedDynamo } from '../local/embedded-dynamo';
import { startHttpServer } from '../local/http-server';
import { postForm } from './support/flow';
import { startKmsStandIn, type KmsRequest, type KmsStandIn } from './support/kms-standin';

// KMS throttles signing beyond the account's request quota. The token Lambda's handler, configured as
// in AWS (its environment; the real SDK KMS client with our retry strategy) against the KMS stand-in
// and the embedded DynamoDB, behind real HTTP: a throttled Sign is retried and the token issued; one
// still throttled after the last attempt is a 503 with Retry-After. Each throttle is one KmsThrottles
// EMF line. KMS_PUBLIC_KEYS is set, as the stack sets it: no GetPublicKey at all.

const KEY_ID = 'arn:aws:kms:eu-west-1:111122223333:key/signing-throttle-test';
const PREFIX = 'svcnum-throttle-';
const ISSUER = 'https://id.example.test';

let root: string;
let dynamo: EmbeddedDynamo;
let kms: KmsStandIn;
let gateway: Awaited<ReturnType<typeof startHttpServer>>;
let base: string;
let client: { clientId: string; clientSecret: string };
const lines: string[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'svcnum-kms-throttle-'));
  dynamo = await startEmbeddedDynamo(join(root, 'dynamodb'), 0);
  const dynamoClient = localDynamoClient(dynamo.endpoint);
  await ensureTables(dynamoClient, tableNames(PREFIX));
  const registration = createRegistration(
    createDynamoStore(documentClient(dynamoClient), tableNames(PREFIX)),
    systemClock,
    systemRandom,
  );
  const owner = await registration.createUser({
    email: 'owner@example.com',
    password: 'owner password 1',
    accountType: 'business',
  });
  const created = await registration.createApiClient({
    name: 'Throttled app',
    scope: 'messaging',
    ownerId: owner.svcnumId,
  });
  client = { clientId: created.client.clientId, clientSecret: created.clientSecret! };
  kms = await startKmsStandIn({ signing: [KEY_ID], mac: [] });

  // What the stack gives the token function, and what AWS adds (region, credentials; here the endpoints).
  for (const [name, value] of Object.entries({
    ISSUER,
    TABLE_PREFIX: PREFIX,
    KMS_KEY_ID: KEY_ID,
    KMS_PUBLIC_KEYS: JSON.stringify({ [KEY_ID]: kms.publicKeyDer(KEY_ID) }),
    METRICS_NAMESPACE: 'svcnum',
    SERVICE_NAME: 'svcnum-token',
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    AWS_ENDPOINT_URL_KMS: kms.endpoint,
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
  }))
    vi.stubEnv(name, value);
  // Telemetry settings are read once per process: a fresh module graph reads them with the above.
  vi.resetModules();
  const { handler } = await import('../lambdas/token');
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    lines.push(String(chunk));
    return true;
  });
  gateway = await startHttpServer(new Map([['/oauth/token', { handler, functionName: 'svcnum-token' }]]), {
    port: 0,
    host: '127.0.0.1',
  });
  base = `http://127.0.0.1:${gateway.port}`;
});

afterAll(async () => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  await gateway?.close();
  await kms?.close();
  await dynamo?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const grant = () =>
  postForm(`${base}/oauth/token`, {
    grant_type: 'client_credentials',
    client_id: client.clientId,
    client_secret: client.clientSecret,
  });

/** What the stand-in received from here on, and the KmsThrottles lines written. */
function observe() {
  const requests = kms.requests.length;
  const written = lines.length;
  return {
    requests: () => kms.requests.slice(requests),
    throttles: () =>
      lines
        .slice(written)
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => 'KmsThrottles' in line),
  };
}

const sign = (status: number): KmsRequest => ({
  operation: 'Sign',
  keyId: KEY_ID,
  signed: true,
  status,
  ...(status === 200 ? {} : { error: 'ThrottlingException' }),
});

describe('a throttled KMS Sign', () => {
  it('is retried: two throttles, then the token is issued, signed by the key, and each throttle is counted', async () => {
    const seen = observe();
    kms.throttle('Sign', 2);
    const reply = await grant();
    expect(reply.status, reply.text).toBe(200);
    const published = await ed25519PublicJwk(Buffer.from(kms.publicKeyDer(KEY_ID), 'base64'));
    const { payload } = await jwtVerify(String(reply.json.access_token), createLocalJWKSet({ keys: [published] }), {
      algorithms: ['EdDSA'],
      issuer: ISSUER,
      typ: 'at+jwt',
    });
    expect(payload.client_id).toBe(client.clientId);
    expect(seen.requests()).toEqual([sign(400), sign(400), sign(200)]);
    const throttles = seen.throttles();
    expect(throttles).toHaveLength(2);
    for (const line of throttles) {
      expect(line).toMatchObject({ service: 'svcnum-token', KmsThrottles: 1 });
      expect(line._aws).toMatchObject({
        CloudWatchMetrics: [
          { Namespace: 'svcnum', Dimensions: [['service']], Metrics: [{ Name: 'KmsThrottles', Unit: 'Count' }] },
        ],
      });
    }
  });

  it(`still throttled after ${KMS_RETRY.maxAttempts} attempts: 503 temporarily_unavailable with Retry-After, never a 500`, async () => {
    const seen = observe();
    kms.throttle('Sign', 100);
    const reply = await grant();
    kms.throttle('Sign', 0);
    expect(reply.status, reply.text).toBe(503);
    expect(reply.headers.get('retry-after')).toBe('1');
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.json).toMatchObject({ error: 'temporarily_unavailable' });
    expect(seen.requests()).toEqual(Array.from({ length: KMS_RETRY.maxAttempts }, () => sign(400)));
    expect(seen.throttles()).toHaveLength(KMS_RETRY.maxAttempts);
  });

  it('once KMS answers again, one Sign issues the token; the public key came from KMS_PUBLIC_KEYS (no GetPublicKey)', async () => {
    const seen = observe();
    const reply = await grant();
    expect(reply.status, reply.text).toBe(200);
    expect(seen.requests()).toEqual([sign(200)]);
    expect(seen.throttles()).toEqual([]);
    expect(kms.requests.filter((request) => request.operation !== 'Sign')).toEqual([]);
  });
});
