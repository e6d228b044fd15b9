import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openLocalKeyStore, type LocalKeyStore } from '../core/adapters/local-keys';
import { systemRandom } from '../core/adapters/system';
import { serviceConfig } from '../core/kernel/config';
import type { DomainError } from '../core/kernel/errors';
import {
  createAccessTokenVerifier,
  createTokenIssuer,
  VERIFIED_TOKEN_MAX_LENGTH,
  VERIFIED_TOKENS_MAX,
} from '../core/oauth/tokens';
import { TestClock } from './support/clock';

// The access-token verifier keeps the tokens that verified (issue 11): a client sends the same
// token on every call, and its Ed25519 signature is checked once per process. What must not
// change: an expired token, a token of a retired key and a token that differs in any byte are
// refused as before. Signature checks are counted at WebCrypto (jose verifies through it).

const config = serviceConfig('https://id.example.test');
let dir: string;
let keys: LocalKeyStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'token-cache-'));
  keys = await openLocalKeyStore(dir);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

function setup() {
  const clock = new TestClock();
  const issuer = createTokenIssuer(config, keys, clock, systemRandom);
  const verify = createAccessTokenVerifier(config, keys, clock);
  const mint = async (act?: Record<string, unknown>) =>
    (await issuer.accessToken({ subject: 'u1', clientId: 'c1', scopes: ['openid'], ...(act ? { act } : {}) })).token;
  const signatureChecks = vi.spyOn(globalThis.crypto.subtle, 'verify');
  return { clock, verify, mint, signatureChecks };
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught as DomainError,
  );
  expect(error, 'expected a refusal').toBeDefined();
  expect(error!.oauth).toBe('invalid_token');
  return error!.message;
}

describe('verified access tokens', () => {
  it("checks a token's signature once, whatever the number of uses; another token is checked on its own", async () => {
    const { verify, mint, signatureChecks } = setup();
    const token = await mint();
    const first = await verify(token);
    for (let use = 0; use < 5; use++) expect(await verify(token)).toBe(first);
    expect(signatureChecks).toHaveBeenCalledTimes(1);
    await verify(await mint());
    expect(signatureChecks).toHaveBeenCalledTimes(2);
  });

  it("checks a token's signature once when its first uses arrive together", async () => {
    const { verify, mint, signatureChecks } = setup();
    const token = await mint();
    const all = await Promise.all(Array.from({ length: 8 }, () => verify(token)));
    expect(new Set(all).size).toBe(1);
    expect(signatureChecks).toHaveBeenCalledTimes(1);
  });

  it('gives the same claims to every use, frozen with the objects in them (a delegation chain)', async () => {
    const { verify, mint } = setup();
    const claims = await verify(await mint({ sub: 'agent', act: { sub: 'owner' } }));
    expect(Object.isFrozen(claims)).toBe(true);
    expect(() => {
      (claims as { scope: string }).scope = 'admin';
    }).toThrow(TypeError);
    const act = claims.act as { act: { sub: string } };
    expect(Object.isFrozen(act) && Object.isFrozen(act.act)).toBe(true);
    expect(() => {
      act.act.sub = 'someone else';
    }).toThrow(TypeError);
  });

  it('keeps no token it refused: each use of a token for another audience is checked in full and refused', async () => {
    const { mint, signatureChecks } = setup();
    const elsewhere = createAccessTokenVerifier(serviceConfig('https://other.example.test'), keys, new TestClock());
    const token = await mint();
    for (let use = 0; use < 2; use++) await refusal(elsewhere(token));
    expect(signatureChecks).toHaveBeenCalledTimes(2);
  });

  it(`checks a token longer than ${VERIFIED_TOKEN_MAX_LENGTH} characters in full on every use`, async () => {
    const { verify, mint, signatureChecks } = setup();
    const token = await mint({ sub: 'agent', note: 'x'.repeat(VERIFIED_TOKEN_MAX_LENGTH) });
    expect(token.length).toBeGreaterThan(VERIFIED_TOKEN_MAX_LENGTH);
    for (let use = 0; use < 3; use++) await verify(token);
    expect(signatureChecks).toHaveBeenCalledTimes(3);
  });

  it('refuses a kept token once it expires, by the clock', async () => {
    const { clock, verify, mint, signatureChecks } = setup();
    const token = await mint();
    const { exp } = await verify(token);
    clock.freeze(exp! * 1000 - 1);
    await verify(token);
    clock.freeze(exp! * 1000);
    expect(await refusal(verify(token))).toBe('the access token expired');
    expect(signatureChecks).toHaveBeenCalledTimes(1);
    // No longer kept: checked in full, refused for the same reason.
    expect(await refusal(verify(token))).toBe('the access token expired');
    expect(signatureChecks).toHaveBeenCalledTimes(2);
  });

  it('refuses a token that differs in one byte of its signature, though the original is kept', async () => {
    const { verify, mint } = setup();
    const token = await mint();
    await verify(token);
    const last = token.at(-2) === 'A' ? 'B' : 'A';
    const tampered = `${token.slice(0, -2)}${last}${token.at(-1)}`;
    expect(await refusal(verify(tampered))).toBe('the access token is invalid');
    await verify(token);
  });

  it('refuses a kept token of a retired key from the next key reload on', async () => {
    const { verify, mint } = setup();
    const token = await mint();
    await verify(token);
    const oldKid = (await keys.list()).find((key) => key.active)!.kid;
    await keys.activate(await keys.add());
    await keys.retire(oldKid);
    // The verifier's key set lives 5 minutes (the local key store's folder read, 10 s).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 6 * 60 * 1000 });
    expect(await refusal(verify(token))).toBe('the access token is invalid');
    await verify(await mint());
  });

  it('keeps at most VERIFIED_TOKENS_MAX tokens: past that, the oldest is checked in full again', async () => {
    const { verify, mint, signatureChecks } = setup();
    const tokens = await Promise.all(Array.from({ length: VERIFIED_TOKENS_MAX + 1 }, () => mint()));
    for (const token of tokens) await verify(token);
    expect(signatureChecks).toHaveBeenCalledTimes(VERIFIED_TOKENS_MAX + 1);
    await verify(tokens.at(-1)!);
    expect(signatureChecks).toHaveBeenCalledTimes(VERIFIED_TOKENS_MAX + 1);
    await verify(tokens[0]!);
    expect(signatureChecks).toHaveBeenCalledTimes(VERIFIED_TOKENS_MAX + 2);
  }, 60_000);
});
