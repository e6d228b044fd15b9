import {
  constants,
  createHash,
  generateKeyPairSync,
  privateEncrypt,
  sign as cryptoSign,
  type KeyObject,
} from 'node:crypto';
import { describe, it, expect, beforeEach } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  GetPublicKeyCommand,
  KMSClient,
  SignCommand,
  type GetPublicKeyCommandOutput,
  type KeySpec,
  type KeyUsageType,
} from '@aws-sdk/client-kms';
import { calculateJwkThumbprint, createLocalJWKSet, jwtVerify } from 'jose';
import { KMS_BUSY_RETRY_AFTER_SECONDS, kmsRetryStrategy } from '../core/adapters/kms-client';
import { createKmsKeyRing } from '../core/adapters/kms-keys';
import { combinedKeyRing } from '../core/kernel/key-rings';

const ACTIVE_KEY_ID = 'arn:aws:kms:eu-west-1:111122223333:key/active-0000';
const NEXT_KEY_ID = 'arn:aws:kms:eu-west-1:111122223333:key/next-1111';
const OLD_KEY_ID = 'arn:aws:kms:eu-west-1:111122223333:key/old-2222';

interface FakeKmsKey {
  publicKey: KeyObject;
  privateKey: KeyObject;
  keySpec: KeySpec;
  keyUsage: KeyUsageType;
  /** Delay before GetPublicKey answers, to make response order differ from request order. */
  delayMs: number;
}

function ed25519Key(delayMs = 0): FakeKmsKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { publicKey, privateKey, keySpec: 'ECC_NIST_EDWARDS25519', keyUsage: 'SIGN_VERIFY', delayMs };
}

function rsaKey(): FakeKmsKey {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { publicKey, privateKey, keySpec: 'RSA_2048', keyUsage: 'SIGN_VERIFY', delayMs: 0 };
}

/** DER DigestInfo of SHA-256 (RFC 8017 §9.2): what RSASSA-PKCS1-v1_5 signs before the digest. */
const SHA256_DIGEST_INFO = Buffer.from('3031300d060960864801650304020105000420', 'hex');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');
const ascii = (text: string) => new TextEncoder().encode(text);

// Never talks to AWS: mockClient replaces send() on every KMSClient instance.
const kmsMock = mockClient(KMSClient);
const client = new KMSClient({
  region: 'eu-west-1',
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
});

let keys: Map<string, FakeKmsKey>;
/** How many upcoming GetPublicKey calls fail as if KMS were throttling. */
let getPublicKeyFailures: number;

function installKms(): void {
  kmsMock.on(GetPublicKeyCommand).callsFake(async (input): Promise<GetPublicKeyCommandOutput> => {
    if (getPublicKeyFailures > 0) {
      getPublicKeyFailures -= 1;
      throw new Error('ThrottlingException: Rate exceeded');
    }
    const key = keys.get(input.KeyId);
    if (!key) throw new Error(`NotFoundException: ${input.KeyId}`);
    await sleep(key.delayMs);
    return {
      $metadata: {},
      KeyId: input.KeyId,
      KeySpec: key.keySpec,
      KeyUsage: key.keyUsage,
      PublicKey: new Uint8Array(key.publicKey.export({ format: 'der', type: 'spki' })),
      SigningAlgorithms: ['ED25519_SHA_512', 'ED25519_PH_SHA_512'],
    };
  });
  // Behaves like KMS pure Ed25519 (signs the received message itself with the private key), and like
  // RSASSA_PKCS1_V1_5_SHA_256 with DIGEST (signs the DigestInfo of the received digest).
  kmsMock.on(SignCommand).callsFake((input) => {
    const key = keys.get(input.KeyId);
    if (!key) throw new Error(`NotFoundException: ${input.KeyId}`);
    const message = Buffer.from(input.Message);
    const rsaDigest = input.SigningAlgorithm === 'RSASSA_PKCS1_V1_5_SHA_256' && input.MessageType === 'DIGEST';
    const signature = rsaDigest
      ? privateEncrypt(
          { key: key.privateKey, padding: constants.RSA_PKCS1_PADDING },
          Buffer.concat([SHA256_DIGEST_INFO, message]),
        )
      : cryptoSign(null, message, key.privateKey);
    return { KeyId: input.KeyId, SigningAlgorithm: input.SigningAlgorithm, Signature: new Uint8Array(signature) };
  });
}

/** A compact JWS built by hand, so the test does not rely on jose's own signing path. */
async function signAccessToken(
  signer: { kid: string; sign(message: Uint8Array): Promise<Uint8Array> },
  payload: Record<string, unknown>,
  alg = 'EdDSA',
): Promise<{ token: string; signingInput: string }> {
  const header = { alg, typ: alg === 'EdDSA' ? 'at+jwt' : 'JWT', kid: signer.kid };
  const signingInput = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  const signature = await signer.sign(ascii(signingInput));
  return { token: `${signingInput}.${b64url(signature)}`, signingInput };
}

function claims(): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return { iss: 'https://id.example.test', sub: 'user-1', aud: 'api', iat: now, exp: now + 300 };
}

describe('createKmsKeyRing', () => {
  beforeEach(() => {
    kmsMock.reset();
    keys = new Map([[ACTIVE_KEY_ID, ed25519Key()]]);
    getPublicKeyFailures = 0;
    installKms();
  });

  it('sends exactly a pure-Ed25519 RAW Sign request and returns the 64-byte signature', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const signer = await ring.activeSigner();
    const message = ascii('header.payload');

    const signature = await signer.sign(message);

    const calls = kmsMock.commandCalls(SignCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toEqual({
      KeyId: ACTIVE_KEY_ID,
      Message: message,
      MessageType: 'RAW',
      SigningAlgorithm: 'ED25519_SHA_512',
    });
    expect(signature).toBeInstanceOf(Uint8Array);
    expect(signature).toHaveLength(64);
  });

  it('produces a token that jose verifies against the published JWKS', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const signer = await ring.activeSigner();
    const payload = claims();
    const { token, signingInput } = await signAccessToken(signer, payload);

    const jwks = createLocalJWKSet({ keys: await ring.publicKeys() });
    const { payload: verified, protectedHeader } = await jwtVerify(token, jwks, {
      algorithms: ['EdDSA'],
      typ: 'at+jwt',
      issuer: 'https://id.example.test',
      audience: 'api',
    });

    expect(verified).toEqual(payload);
    expect(protectedHeader).toEqual({ alg: 'EdDSA', typ: 'at+jwt', kid: signer.kid });
    // KMS must have been asked to sign the JWS signing input itself, not a digest of it.
    expect(kmsMock.commandCalls(SignCommand)[0]!.args[0].input.Message).toEqual(ascii(signingInput));
  });

  it('uses the RFC 7638 thumbprint of the KMS public key as kid', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const exported = keys.get(ACTIVE_KEY_ID)!.publicKey.export({ format: 'jwk' });
    const expectedKid = await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x: exported.x! }, 'sha256');

    const [jwk] = await ring.publicKeys();
    const signer = await ring.activeSigner();

    expect(jwk).toEqual({ kty: 'OKP', crv: 'Ed25519', x: exported.x, kid: expectedKid, alg: 'EdDSA', use: 'sig' });
    expect(signer.kid).toBe(expectedKid);
  });

  it('rejects a token whose payload was tampered with', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const { token } = await signAccessToken(await ring.activeSigner(), claims());
    const [header, , signature] = token.split('.');
    const forged = `${header}.${b64url(JSON.stringify({ ...claims(), sub: 'admin' }))}.${signature}`;

    const jwks = createLocalJWKSet({ keys: await ring.publicKeys() });
    await expect(jwtVerify(forged, jwks, { algorithms: ['EdDSA'], typ: 'at+jwt' })).rejects.toMatchObject({
      code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
    });
  });

  it('refuses a key that is not ECC_NIST_EDWARDS25519', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    keys.set(ACTIVE_KEY_ID, { publicKey, privateKey, keySpec: 'ECC_NIST_P256', keyUsage: 'SIGN_VERIFY', delayMs: 0 });
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });

    await expect(ring.publicKeys()).rejects.toThrow(
      `KMS key ${ACTIVE_KEY_ID} has KeySpec ECC_NIST_P256; expected ECC_NIST_EDWARDS25519`,
    );
    await expect(ring.activeSigner()).rejects.toThrow(/expected ECC_NIST_EDWARDS25519/);
    expect(kmsMock.commandCalls(SignCommand)).toHaveLength(0);
  });

  it('refuses a key whose usage is not SIGN_VERIFY', async () => {
    keys.set(ACTIVE_KEY_ID, { ...ed25519Key(), keyUsage: 'ENCRYPT_DECRYPT' });
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });

    await expect(ring.publicKeys()).rejects.toThrow(
      `KMS key ${ACTIVE_KEY_ID} has KeyUsage ENCRYPT_DECRYPT; expected SIGN_VERIFY`,
    );
  });

  it('makes one GetPublicKey call per key for concurrent first calls, and caches afterwards', async () => {
    keys.set(NEXT_KEY_ID, ed25519Key(5));
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID, additionalKeyIds: [NEXT_KEY_ID] });

    const [first, second, signer] = await Promise.all([ring.publicKeys(), ring.publicKeys(), ring.activeSigner()]);
    await ring.publicKeys();

    expect(first).toEqual(second);
    expect(signer.kid).toBe(first[0]!.kid);
    const requested = kmsMock.commandCalls(GetPublicKeyCommand).map((call) => call.args[0].input.KeyId);
    expect(requested.sort()).toEqual([ACTIVE_KEY_ID, NEXT_KEY_ID].sort());
  });

  it('publishes additional keys after the active one, in configured order', async () => {
    // The active key answers last, so the order cannot come from response timing.
    keys.set(ACTIVE_KEY_ID, ed25519Key(20));
    keys.set(NEXT_KEY_ID, ed25519Key(0));
    keys.set(OLD_KEY_ID, ed25519Key(10));
    const ring = createKmsKeyRing({
      client,
      activeKeyId: ACTIVE_KEY_ID,
      additionalKeyIds: [NEXT_KEY_ID, OLD_KEY_ID],
    });

    const published = await ring.publicKeys();

    const expectedXs = [ACTIVE_KEY_ID, NEXT_KEY_ID, OLD_KEY_ID].map(
      (id) => keys.get(id)!.publicKey.export({ format: 'jwk' }).x,
    );
    expect(published.map((jwk) => (jwk.kty === 'OKP' ? jwk.x : undefined))).toEqual(expectedXs);
    expect(new Set(published.map((jwk) => jwk.kid)).size).toBe(3);
    expect((await ring.activeSigner()).kid).toBe(published[0]!.kid);
  });

  it('verifies tokens from a retiring key that is still published', async () => {
    keys.set(OLD_KEY_ID, ed25519Key());
    const oldRing = createKmsKeyRing({ client, activeKeyId: OLD_KEY_ID });
    const { token } = await signAccessToken(await oldRing.activeSigner(), claims());

    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID, additionalKeyIds: [OLD_KEY_ID] });
    const jwks = createLocalJWKSet({ keys: await ring.publicKeys() });

    await expect(jwtVerify(token, jwks, { algorithms: ['EdDSA'], typ: 'at+jwt' })).resolves.toBeTruthy();
  });

  it('retries GetPublicKey after a failure instead of caching the error', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    getPublicKeyFailures = 1;

    await expect(ring.publicKeys()).rejects.toThrow('ThrottlingException');
    const [jwk] = await ring.publicKeys();

    expect(jwk?.kty).toBe('OKP');
    expect(kmsMock.commandCalls(GetPublicKeyCommand)).toHaveLength(2);
  });

  it('throws when KMS returns no Signature', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const signer = await ring.activeSigner();
    kmsMock.on(SignCommand).resolves({ KeyId: ACTIVE_KEY_ID, SigningAlgorithm: 'ED25519_SHA_512' });

    await expect(signer.sign(ascii('header.payload'))).rejects.toThrow(/returned no Signature/);
  });

  it('throws when KMS returns a signature that is not 64 bytes', async () => {
    const ring = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const signer = await ring.activeSigner();
    kmsMock.on(SignCommand).resolves({ KeyId: ACTIVE_KEY_ID, Signature: new Uint8Array(72) });

    await expect(signer.sign(ascii('header.payload'))).rejects.toThrow(/72-byte signature/);
  });

  it('refuses messages larger than KMS accepts for RAW signing without calling KMS', async () => {
    const signer = await createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID }).activeSigner();

    await expect(signer.sign(new Uint8Array(4097))).rejects.toThrow(/at most 4096 bytes/);
    expect(kmsMock.commandCalls(SignCommand)).toHaveLength(0);
  });

  it('takes published public keys (KMS_PUBLIC_KEYS) without GetPublicKey; a ring key not published is fetched once', async () => {
    keys.set(NEXT_KEY_ID, ed25519Key());
    const der = (keyId: string) => new Uint8Array(keys.get(keyId)!.publicKey.export({ format: 'der', type: 'spki' }));
    const published = createKmsKeyRing({
      client,
      activeKeyId: ACTIVE_KEY_ID,
      additionalKeyIds: [NEXT_KEY_ID],
      publicKeys: new Map([
        [ACTIVE_KEY_ID, der(ACTIVE_KEY_ID)],
        [NEXT_KEY_ID, der(NEXT_KEY_ID)],
      ]),
    });
    const fetched = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID, additionalKeyIds: [NEXT_KEY_ID] });
    const jwks = await published.publicKeys();
    await published.activeSigner();
    expect(kmsMock.commandCalls(GetPublicKeyCommand)).toHaveLength(0);
    expect(jwks).toEqual(await fetched.publicKeys());

    kmsMock.resetHistory();
    // A key added to the configuration without the deploy that publishes it.
    const partly = createKmsKeyRing({
      client,
      activeKeyId: ACTIVE_KEY_ID,
      additionalKeyIds: [NEXT_KEY_ID],
      publicKeys: new Map([[ACTIVE_KEY_ID, der(ACTIVE_KEY_ID)]]),
    });
    expect(await partly.publicKeys()).toEqual(jwks);
    await partly.publicKeys();
    expect(kmsMock.commandCalls(GetPublicKeyCommand).map((call) => call.args[0].input.KeyId)).toEqual([NEXT_KEY_ID]);
  });

  it('answers a Sign still throttled after the retries as temporarily_unavailable with Retry-After, never as a fault', async () => {
    const signer = await createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID }).activeSigner();
    kmsMock
      .on(SignCommand)
      .rejects(
        Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException', $metadata: { httpStatusCode: 400 } }),
      );
    await expect(signer.sign(ascii('header.payload'))).rejects.toMatchObject({
      name: 'DomainError',
      kind: 'unavailable',
      oauth: 'temporarily_unavailable',
      retryAfterSeconds: KMS_BUSY_RETRY_AFTER_SECONDS,
    });
    kmsMock.on(SignCommand).rejects(Object.assign(new Error('no such key'), { name: 'NotFoundException' }));
    await expect(signer.sign(ascii('header.payload'))).rejects.toMatchObject({ name: 'NotFoundException' });
  });
});

describe('createKmsKeyRing with alg RS256 (ID tokens)', () => {
  beforeEach(() => {
    kmsMock.reset();
    keys = new Map([
      [ACTIVE_KEY_ID, ed25519Key()],
      [NEXT_KEY_ID, rsaKey()],
    ]);
    getPublicKeyFailures = 0;
    installKms();
  });
  const rsaRing = () => createKmsKeyRing({ client, activeKeyId: NEXT_KEY_ID, alg: 'RS256' });

  it('sends exactly an RSASSA_PKCS1_V1_5_SHA_256 Sign of the SHA-256 DIGEST, and jose verifies the RS256 token', async () => {
    const ring = rsaRing();
    const signer = await ring.activeSigner();
    const payload = { ...claims(), aud: 'client-1' };
    const { token, signingInput } = await signAccessToken(signer, payload, 'RS256');

    const calls = kmsMock.commandCalls(SignCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toEqual({
      KeyId: NEXT_KEY_ID,
      Message: createHash('sha256').update(signingInput).digest(),
      MessageType: 'DIGEST',
      SigningAlgorithm: 'RSASSA_PKCS1_V1_5_SHA_256',
    });
    const [jwk] = await ring.publicKeys();
    const exported = keys.get(NEXT_KEY_ID)!.publicKey.export({ format: 'jwk' });
    const kid = await calculateJwkThumbprint({ kty: 'RSA', n: exported.n!, e: exported.e! }, 'sha256');
    expect(jwk).toEqual({ kty: 'RSA', n: exported.n, e: exported.e, kid, alg: 'RS256', use: 'sig' });
    const { payload: verified, protectedHeader } = await jwtVerify(token, createLocalJWKSet({ keys: [jwk!] }), {
      algorithms: ['RS256'],
      audience: 'client-1',
    });
    expect(verified).toEqual(payload);
    expect(protectedHeader).toEqual({ alg: 'RS256', typ: 'JWT', kid });
  });

  it('refuses a key that is not RSA_2048, and signs no RS256 without an RSA ring', async () => {
    const wrong = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID, alg: 'RS256' });
    await expect(wrong.publicKeys()).rejects.toThrow(
      `KMS key ${ACTIVE_KEY_ID} has KeySpec ECC_NIST_EDWARDS25519; expected RSA_2048`,
    );
    const edOnly = combinedKeyRing(createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID }));
    await expect(edOnly.activeSigner('RS256')).rejects.toThrow(/no RSA signing key/);
    expect(kmsMock.commandCalls(SignCommand)).toHaveLength(0);
  });

  it('a combined ring signs EdDSA by default, RS256 on request, and publishes the Ed25519 keys first', async () => {
    const ed = createKmsKeyRing({ client, activeKeyId: ACTIVE_KEY_ID });
    const ring = combinedKeyRing(ed, rsaRing());
    const published = await ring.publicKeys();
    expect(published.map((jwk) => [jwk.kty, jwk.alg])).toEqual([
      ['OKP', 'EdDSA'],
      ['RSA', 'RS256'],
    ]);
    expect((await ring.activeSigner()).kid).toBe(published[0]!.kid);
    expect((await ring.activeSigner('RS256')).kid).toBe(published[1]!.kid);
  });
});

describe('kmsRetryStrategy', () => {
  const policy = { maxAttempts: 4, baseDelayMs: 100, maxDelayMs: 250 };
  const run = async (errorType: 'THROTTLING' | 'TRANSIENT' | 'SERVER_ERROR' | 'CLIENT_ERROR', random: () => number) => {
    let throttles = 0;
    const strategy = kmsRetryStrategy(
      policy,
      () => {
        throttles += 1;
      },
      random,
    );
    let token = await strategy.acquireInitialRetryToken('');
    const delays: number[] = [];
    for (;;) {
      try {
        token = await strategy.refreshRetryTokenForRetry(token, { errorType });
      } catch {
        return { delays, throttles };
      }
      delays.push(token.getRetryDelay());
    }
  };

  it('retries throttles and transient failures up to the attempt bound, waiting a random share (full jitter) of a doubling, capped ceiling', async () => {
    expect(await run('THROTTLING', () => 0.999)).toEqual({ delays: [99, 199, 249], throttles: 4 });
    expect(await run('THROTTLING', () => 0)).toEqual({ delays: [0, 0, 0], throttles: 4 });
    expect(await run('TRANSIENT', () => 0.5)).toEqual({ delays: [50, 100, 125], throttles: 0 });
  });

  it('does not retry a refusal (client error) or a server error', async () => {
    expect(await run('CLIENT_ERROR', () => 0.5)).toEqual({ delays: [], throttles: 0 });
    expect(await run('SERVER_ERROR', () => 0.5)).toEqual({ delays: [], throttles: 0 });
  });
});
