import {
  constants,
  createHash,
  createHmac,
  generateKeyPairSync,
  privateEncrypt,
  randomBytes,
  sign,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

// A small local stand-in for AWS KMS, for processes configured like AWS processes
// (AWS_ENDPOINT_URL_KMS): the JSON 1.1 protocol of the four operations the service uses, checked
// as KMS checks them. Sign and GetPublicKey are backed by an Ed25519 key per signing key id (an
// RSA 2048 key per `rsa` key id: RSASSA_PKCS1_V1_5_SHA_256 over a DIGEST or a RAW message), GenerateMac and VerifyMac by an HMAC-SHA-256 key per MAC key id. Every request is recorded. It can
// be told to throttle an operation, as KMS does beyond its request quota: ThrottlingException, HTTP 400.

export type KmsOperation = 'Sign' | 'GetPublicKey' | 'GenerateMac' | 'VerifyMac';

export interface KmsRequest {
  /** The X-Amz-Target operation (`TrentService.` removed), known or not. */
  operation: string;
  keyId?: string;
  /** SigV4-signed, as every SDK request is. */
  signed: boolean;
  /** The HTTP status of the answer. */
  status: number;
  /** The error type (`__type`) of a refused request. */
  error?: string;
}

export interface KmsStandIn {
  /** For AWS_ENDPOINT_URL_KMS. */
  endpoint: string;
  requests: KmsRequest[];
  /** The public key of a signing key, as a JWK (OKP, Ed25519). */
  publicJwk(keyId: string): { kty: string; crv: string; x: string };
  /** The public key of a signing key as GetPublicKey returns it: base64 DER SubjectPublicKeyInfo. */
  publicKeyDer(keyId: string): string;
  /** The next `times` requests of `operation` answer ThrottlingException (0 stops throttling it). */
  throttle(operation: KmsOperation, times: number): void;
  close(): Promise<void>;
}

class KmsFault extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

const blob = (value: unknown, field: string): Buffer => {
  if (typeof value !== 'string' || value.length === 0)
    throw new KmsFault('ValidationException', `${field} is required`);
  return Buffer.from(value, 'base64');
};

export async function startKmsStandIn(keys: {
  signing: readonly string[];
  mac: readonly string[];
  rsa?: readonly string[];
}): Promise<KmsStandIn> {
  const signing = new Map<string, { publicKey: KeyObject; privateKey: KeyObject }>([
    ...keys.signing.map((keyId) => [keyId, generateKeyPairSync('ed25519')] as const),
    ...(keys.rsa ?? []).map((keyId) => [keyId, generateKeyPairSync('rsa', { modulusLength: 2048 })] as const),
  ]);
  const isRsa = (keyId: string) => signing.get(keyId)?.privateKey.asymmetricKeyType === 'rsa';
  const mac = new Map<string, Buffer>(keys.mac.map((keyId) => [keyId, randomBytes(32)]));
  const requests: KmsRequest[] = [];
  const throttles = new Map<string, number>();

  const publicKeyDer = (keyId: string) =>
    signingKey(keyId).publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
  const signingKey = (keyId: string) => {
    const key = signing.get(keyId);
    if (key) return key;
    if (mac.has(keyId)) throw new KmsFault('InvalidKeyUsageException', `${keyId} is not a SIGN_VERIFY key`);
    throw new KmsFault('NotFoundException', `Key '${keyId}' does not exist`);
  };
  const macKey = (keyId: string, algorithm: unknown) => {
    const key = mac.get(keyId);
    if (!key)
      throw new KmsFault(
        signing.has(keyId) ? 'InvalidKeyUsageException' : 'NotFoundException',
        `${keyId} is not a GENERATE_VERIFY_MAC key`,
      );
    if (algorithm !== 'HMAC_SHA_256')
      throw new KmsFault('InvalidKeyUsageException', `MacAlgorithm ${String(algorithm)} is not valid for ${keyId}`);
    return key;
  };

  // RSASSA-PKCS1-v1_5 over SHA-256: the DigestInfo of the digest (given, or of the RAW message), padded.
  const rsaSign = (input: Record<string, unknown>, keyId: string, privateKey: KeyObject) => {
    const message = blob(input.Message, 'Message');
    const digest = input.MessageType === 'DIGEST' ? message : createHash('sha256').update(message).digest();
    if (input.SigningAlgorithm !== 'RSASSA_PKCS1_V1_5_SHA_256' || digest.length !== 32)
      throw new KmsFault('ValidationException', `${keyId}: not a SHA-256 RSASSA_PKCS1_V1_5 request`);
    const digestInfo = Buffer.concat([Buffer.from('3031300d060960864801650304020105000420', 'hex'), digest]);
    const signature = privateEncrypt({ key: privateKey, padding: constants.RSA_PKCS1_PADDING }, digestInfo);
    return { KeyId: keyId, SigningAlgorithm: input.SigningAlgorithm, Signature: signature.toString('base64') };
  };

  const operations: Record<KmsOperation, (input: Record<string, unknown>, keyId: string) => Record<string, unknown>> = {
    GetPublicKey: (_input, keyId) => ({
      KeyId: keyId,
      KeySpec: isRsa(keyId) ? 'RSA_2048' : 'ECC_NIST_EDWARDS25519',
      KeyUsage: 'SIGN_VERIFY',
      PublicKey: publicKeyDer(keyId),
      SigningAlgorithms: isRsa(keyId)
        ? ['RSASSA_PKCS1_V1_5_SHA_256', 'RSASSA_PSS_SHA_256']
        : ['ED25519_SHA_512', 'ED25519_PH_SHA_512'],
    }),
    Sign: (input, keyId) => {
      const key = signingKey(keyId);
      if (isRsa(keyId)) return rsaSign(input, keyId, key.privateKey);
      // KMS's pure Ed25519 (RFC 8032) is ED25519_SHA_512 over a RAW message, at most 4096 bytes.
      if (input.SigningAlgorithm !== 'ED25519_SHA_512' || input.MessageType !== 'RAW') {
        throw new KmsFault(
          'InvalidKeyUsageException',
          `SigningAlgorithm ${String(input.SigningAlgorithm)} with MessageType ${String(input.MessageType)} is not supported here`,
        );
      }
      const message = blob(input.Message, 'Message');
      if (message.length > 4096) throw new KmsFault('ValidationException', 'Message is longer than 4096 bytes');
      return {
        KeyId: keyId,
        SigningAlgorithm: 'ED25519_SHA_512',
        Signature: sign(null, message, key.privateKey).toString('base64'),
      };
    },
    GenerateMac: (input, keyId) => ({
      KeyId: keyId,
      MacAlgorithm: 'HMAC_SHA_256',
      Mac: createHmac('sha256', macKey(keyId, input.MacAlgorithm))
        .update(blob(input.Message, 'Message'))
        .digest('base64'),
    }),
    VerifyMac: (input, keyId) => {
      const expected = createHmac('sha256', macKey(keyId, input.MacAlgorithm))
        .update(blob(input.Message, 'Message'))
        .digest();
      const presented = blob(input.Mac, 'Mac');
      // KMS answers a wrong MAC with an exception, never MacValid: false.
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected))
        throw new KmsFault('KMSInvalidMacException', 'the MAC is not valid');
      return { KeyId: keyId, MacAlgorithm: 'HMAC_SHA_256', MacValid: true };
    },
  };

  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const operation = String(request.headers['x-amz-target'] ?? '').replace(/^TrentService\./, '');
    const record: KmsRequest = {
      operation,
      signed: /^AWS4-HMAC-SHA256 Credential=/.test(request.headers.authorization ?? ''),
      status: 200,
    };
    requests.push(record);
    let status = 200;
    let body: Record<string, unknown>;
    try {
      if (request.method !== 'POST' || !/^application\/x-amz-json-1\.1/.test(request.headers['content-type'] ?? '')) {
        throw new KmsFault('UnsupportedOperationException', 'KMS speaks POST application/x-amz-json-1.1');
      }
      const handle = operations[operation as KmsOperation];
      if (!handle) throw new KmsFault('UnsupportedOperationException', `the stand-in does not do ${operation}`);
      const input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      if (typeof input.KeyId !== 'string') throw new KmsFault('ValidationException', 'KeyId is required');
      record.keyId = input.KeyId;
      const throttled = throttles.get(operation) ?? 0;
      if (throttled > 0) {
        throttles.set(operation, throttled - 1);
        // KMS's answer beyond its request quota (docs: "Throttling" in the KMS developer guide).
        throw new KmsFault('ThrottlingException', 'Rate exceeded');
      }
      body = handle(input, input.KeyId);
    } catch (error) {
      status = 400;
      body =
        error instanceof KmsFault
          ? { __type: error.type, message: error.message }
          : { __type: 'ValidationException', message: String(error) };
      record.error = String(body.__type);
    }
    record.status = status;
    response.writeHead(status, { 'Content-Type': 'application/x-amz-json-1.1' });
    response.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    publicJwk(keyId) {
      const { kty, crv, x } = signingKey(keyId).publicKey.export({ format: 'jwk' });
      return { kty: kty!, crv: crv!, x: x! };
    },
    publicKeyDer,
    throttle(operation, times) {
      throttles.set(operation, times);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
