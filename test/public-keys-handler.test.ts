import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readRuntimeConfig } from '../core/adapters/runtime-config';
import { startKmsStandIn, type KmsStandIn } from './support/kms-standin';

// The deploy-time custom resource that publishes the signing keys' public keys (lib/public-keys.ts,
// lib/public-keys-handler.cjs, inlined into the template), run as Lambda runs it: the real SDK
// against the KMS stand-in, its answer PUT to a loopback "pre-signed URL" as CloudFormation expects.

const ACTIVE = 'arn:aws:kms:eu-west-1:111122223333:key/active';
const NEXT = 'arn:aws:kms:eu-west-1:111122223333:key/next';
const MAC = 'arn:aws:kms:eu-west-1:111122223333:key/mac';
const RSA = 'arn:aws:kms:eu-west-1:111122223333:key/rsa';

let kms: KmsStandIn;
let responses: Server;
let responseUrl: string;
const answers: Array<Record<string, unknown>> = [];
let handler: (event: Record<string, unknown>) => Promise<void>;

beforeAll(async () => {
  kms = await startKmsStandIn({ signing: [ACTIVE, NEXT], mac: [MAC], rsa: [RSA] });
  responses = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    answers.push({
      method: request.method,
      ...(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>),
    });
    response.end();
  });
  await new Promise<void>((resolve) => responses.listen(0, '127.0.0.1', resolve));
  responseUrl = `http://127.0.0.1:${(responses.address() as AddressInfo).port}/presigned`;
  for (const [name, value] of Object.entries({
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    AWS_ENDPOINT_URL_KMS: kms.endpoint,
  }))
    vi.stubEnv(name, value);
  handler = (createRequire(import.meta.url)('../lib/public-keys-handler.cjs') as { handler: typeof handler }).handler;
});

afterAll(async () => {
  vi.unstubAllEnvs();
  await new Promise<void>((resolve) => (responses ? responses.close(() => resolve()) : resolve()));
  await kms?.close();
});

const event = (RequestType: string, KeyIds: string[], PhysicalResourceId?: string) => ({
  RequestType,
  ResponseURL: responseUrl,
  StackId: 'arn:aws:cloudformation:eu-west-1:111122223333:stack/svcnum-sandbox/1',
  RequestId: `request-${answers.length}`,
  LogicalResourceId: 'PublicKeys',
  ResourceType: 'Custom::SigningPublicKeys',
  ...(PhysicalResourceId ? { PhysicalResourceId } : {}),
  ResourceProperties: { ServiceToken: 'arn:fn', KeyIds },
});

describe('the public-keys custom resource', () => {
  it("answers create with every key's public key (one GetPublicKey each), a KMS_PUBLIC_KEYS the processes accept", async () => {
    const before = kms.requests.length;
    await handler(event('Create', [ACTIVE, NEXT, RSA]));
    expect(kms.requests.slice(before)).toEqual(
      [ACTIVE, NEXT, RSA].map((keyId) => ({ operation: 'GetPublicKey', keyId, signed: true, status: 200 })),
    );
    const answer = answers.at(-1)!;
    expect(answer).toMatchObject({
      method: 'PUT',
      Status: 'SUCCESS',
      LogicalResourceId: 'PublicKeys',
      PhysicalResourceId: 'signing-public-keys',
    });
    const published = (answer.Data as { PublicKeys: string }).PublicKeys;
    expect(JSON.parse(published)).toStrictEqual({
      [ACTIVE]: kms.publicKeyDer(ACTIVE),
      [NEXT]: kms.publicKeyDer(NEXT),
      [RSA]: kms.publicKeyDer(RSA),
    });
    const config = readRuntimeConfig('lambda', {
      ISSUER: 'https://id.example.com',
      TABLE_PREFIX: 'svcnum-sandbox-',
      KMS_KEY_ID: ACTIVE,
      KMS_PUBLIC_KEYS: published,
    });
    expect([...config.kmsPublicKeys.keys()]).toEqual([ACTIVE, NEXT, RSA]);
  });

  it('fails the deploy step, with the reason, for a key that is not an Ed25519 or RSA signing key', async () => {
    await handler(event('Update', [ACTIVE, MAC], 'signing-public-keys'));
    expect(answers.at(-1)).toMatchObject({
      Status: 'FAILED',
      PhysicalResourceId: 'signing-public-keys',
      Reason: expect.stringContaining('SIGN_VERIFY'),
    });
    expect(answers.at(-1)).not.toHaveProperty('Data');
  });

  it('answers delete without calling KMS', async () => {
    const before = kms.requests.length;
    await handler(event('Delete', [ACTIVE], 'signing-public-keys'));
    expect(answers.at(-1)).toMatchObject({ Status: 'SUCCESS', PhysicalResourceId: 'signing-public-keys' });
    expect(kms.requests.length).toBe(before);
  });
});
