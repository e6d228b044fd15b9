import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { openLocalKeyStore } from '../core/adapters/local-keys';
import { systemClock, systemRandom } from '../core/adapters/system';
import { serviceConfig } from '../core/kernel/config';
import { newUlid } from '../core/kernel/ids';
import { randomSecret } from '../core/kernel/secrets';
import { createAccessTokenVerifier, createTokenIssuer, VERIFIED_TOKENS_MAX } from '../core/oauth/tokens';
import { onCleanup } from './cleanup';

// In-process signing and verifying, one operation at a time on this thread:
//   the physical reference (node:crypto Ed25519 on a JWT-sized message) and what the service
//   does per token (core/oauth/tokens.ts signing with the local key store, jose verification, and
//   the service's verifier on a token's first use and on its later uses, which it keeps).

export interface OpsResult {
  ops: number;
  seconds: number;
  opsPerSecond: number;
  /** Microseconds per operation. */
  microsPerOp: number;
}

export interface CryptoResult {
  /** Bytes signed: the signing input (header.payload) of a real access token. */
  messageBytes: number;
  ed25519Sign: OpsResult;
  ed25519Verify: OpsResult;
  jwtSign: OpsResult;
  joseJwtVerify: OpsResult;
  /** The service's verifier on tokens it has not seen: the full check, and the token kept. */
  accessTokenFirstUse: OpsResult;
  /** The same verifier on one token it verified before (expiry and key checked, no signature). */
  accessTokenRepeatUse: OpsResult;
}

const summarise = (ops: number, started: number): OpsResult => {
  const seconds = (performance.now() - started) / 1000;
  return {
    ops,
    seconds: Math.round(seconds * 100) / 100,
    opsPerSecond: Math.round(ops / seconds),
    microsPerOp: Math.round(((seconds * 1e6) / ops) * 100) / 100,
  };
};

const BATCH = 64;

export function measureSync(seconds: number, operation: () => void): OpsResult {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let ops = 0;
  while (performance.now() < deadline) {
    for (let index = 0; index < BATCH; index++) operation();
    ops += BATCH;
  }
  return summarise(ops, started);
}

export async function measureAsync(seconds: number, operation: () => Promise<unknown>): Promise<OpsResult> {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let ops = 0;
  while (performance.now() < deadline) {
    for (let index = 0; index < BATCH; index++) await operation();
    ops += BATCH;
  }
  return summarise(ops, started);
}

export async function cryptoBenchmarks(seconds: number, log: (message: string) => void): Promise<CryptoResult> {
  const dir = await mkdtemp(join(tmpdir(), 'svcnum-bench-keys-'));
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  try {
    const config = serviceConfig('http://localhost:3000');
    const keys = await openLocalKeyStore(join(dir, 'keys'));
    const issuer = createTokenIssuer(config, keys, systemClock, systemRandom);
    const input = {
      subject: newUlid(systemClock, systemRandom),
      clientId: randomSecret(systemRandom, 16),
      scopes: ['openid', 'profile', 'email'],
      authTime: Date.now(),
    };
    const sample = (await issuer.accessToken(input)).token;
    const message = Buffer.from(sample.slice(0, sample.lastIndexOf('.')), 'ascii');

    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const signature = sign(null, message, privateKey);
    const warm = Math.min(0.5, seconds / 4);

    log(`Ed25519 sign/verify, ${message.length}-byte message (${seconds} s each)`);
    measureSync(warm, () => sign(null, message, privateKey));
    const ed25519Sign = measureSync(seconds, () => sign(null, message, privateKey));
    measureSync(warm, () => verify(null, message, publicKey, signature));
    const ed25519Verify = measureSync(seconds, () => verify(null, message, publicKey, signature));

    log(`JWT sign (core/oauth/tokens.ts) and verify (jose) (${seconds} s each)`);
    await measureAsync(warm, () => issuer.accessToken(input));
    const jwtSign = await measureAsync(seconds, () => issuer.accessToken(input));

    const jwks = createLocalJWKSet({ keys: await keys.publicKeys() });
    const verifyOptions = { algorithms: ['EdDSA'], issuer: config.issuer, audience: config.issuer, typ: 'at+jwt' };
    await measureAsync(warm, () => jwtVerify(sample, jwks, verifyOptions));
    const joseJwtVerify = await measureAsync(seconds, () => jwtVerify(sample, jwks, verifyOptions));

    // Distinct tokens taken in turn, more of them than the verifier keeps: with its oldest-first
    // eviction, every use is a first use.
    const distinct = await Promise.all(
      Array.from({ length: VERIFIED_TOKENS_MAX + 1_000 }, async () => (await issuer.accessToken(input)).token),
    );
    let next = 0;
    const firstUse = createAccessTokenVerifier(config, keys, systemClock);
    const nextDistinct = () => firstUse(distinct[next++ % distinct.length]!);
    await measureAsync(warm, nextDistinct);
    const accessTokenFirstUse = await measureAsync(seconds, nextDistinct);

    const repeatUse = createAccessTokenVerifier(config, keys, systemClock);
    await measureAsync(warm, () => repeatUse(sample));
    const accessTokenRepeatUse = await measureAsync(seconds, () => repeatUse(sample));

    return {
      messageBytes: message.length,
      ed25519Sign,
      ed25519Verify,
      jwtSign,
      joseJwtVerify,
      accessTokenFirstUse,
      accessTokenRepeatUse,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
