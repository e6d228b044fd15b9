import { createHmac, generateKeyPairSync, timingSafeEqual } from 'node:crypto';
import { exportJWK, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { dpopRefusal } from '../core/kernel/access';
import { DomainError } from '../core/kernel/errors';
import type { MacKey } from '../core/kernel/ports';
import { checkProof, normalisedHtu, PROOF_WINDOW_SECONDS, type ProofContext } from '../core/oauth/dpop';
import { createDpopNonces, NONCE_WINDOW_MS } from '../core/oauth/dpop-nonces';
import { TestClock } from './support/clock';
import { dpopKey, type DpopKey } from './support/dpop';

// The DPoP proof checks (core/oauth/dpop.ts, RFC 9449 §4.3) one by one, with an in-memory jti store
// and a hand-moved clock: each claim's failure names it, a replayed jti is refused, nonces (when on)
// are asked for and accepted for two windows, and malformed input is always invalid_dpop_proof,
// never another error (which an edge would answer with a 500).

const HTU = 'https://id.example/oauth/userinfo';
const TOKEN = 'header.payload.signature';

const macKey: MacKey = {
  mac: async (message) => createHmac('sha256', 'test key').update(message).digest(),
  verify: async (message, mac) => timingSafeEqual(createHmac('sha256', 'test key').update(message).digest(), mac),
};

function context(nonces = false) {
  const clock = new TestClock();
  const seen = new Map<string, number>();
  const store: ProofContext['store'] = {
    claimDpopProof: async (key, expiresAt, now) => {
      const live = seen.get(key);
      if (live !== undefined && live > now) return false;
      seen.set(key, expiresAt);
      return true;
    },
  };
  return { clock, store, nonces: createDpopNonces(nonces, macKey, clock) };
}

/** The refusal `check` ends in, as its code and message. */
async function refusal(check: Promise<unknown>): Promise<{ code?: string; message: string; nonce?: string }> {
  const error = await check.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(DomainError);
  const refused = error as DomainError;
  expect(refused.kind).toBe('unauthenticated');
  expect(refused.challenge).toBe('DPoP');
  return { ...(refused.oauth ? { code: refused.oauth } : {}), message: refused.message, nonce: refused.dpopNonce };
}

const check = (ctx: ProofContext, proof: string, url = HTU, token: string | undefined = TOKEN) =>
  checkProof(ctx, proof, { method: 'GET', url }, token, dpopRefusal);

let es256: DpopKey;
let eddsa: DpopKey;
beforeAll(async () => {
  [es256, eddsa] = await Promise.all([dpopKey('ES256'), dpopKey('EdDSA')]);
});

describe('DPoP proofs (RFC 9449 §4.3)', () => {
  it('accepts a proof of EdDSA and of ES256 keys and returns its key thumbprint', async () => {
    const ctx = context();
    for (const key of [es256, eddsa]) {
      expect(await check(ctx, await key.proof('GET', HTU, { accessToken: TOKEN }))).toBe(key.jkt);
    }
  });

  it('compares htu without query or fragment, with scheme and host normalised (§4.3)', async () => {
    const ctx = context();
    const proof = await es256.proof('GET', 'HTTPS://ID.example:443/oauth/userinfo?x=1#f', { accessToken: TOKEN });
    expect(await check(ctx, proof, `${HTU}?other=2`)).toBe(es256.jkt);
    expect(normalisedHtu('https://ID.example:443/a?b#c')).toBe('https://id.example/a');
    expect(normalisedHtu('not a url')).toBeUndefined();
  });

  it('refuses each claim that does not fit, naming it', async () => {
    const ctx = context();
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[Promise<string>, RegExp, string?]> = [
      [es256.proof('GET', HTU, { accessToken: TOKEN, typ: 'JWT' }), /typ dpop\+jwt/],
      [es256.proof('POST', HTU, { accessToken: TOKEN }), /htm must be GET/],
      [es256.proof('GET', 'https://id.example/oauth/token', { accessToken: TOKEN }), /htu must be https:\/\/id\.ex/],
      [es256.proof('GET', HTU, { accessToken: TOKEN, iat: now - PROOF_WINDOW_SECONDS - 5 }), /iat is more than 300 s/],
      [es256.proof('GET', HTU, { accessToken: TOKEN, iat: now + PROOF_WINDOW_SECONDS + 5 }), /iat is more than 300 s/],
      [es256.proof('GET', HTU, { accessToken: TOKEN, claims: { iat: undefined } }), /iat must be a number/],
      [es256.proof('GET', HTU, { accessToken: TOKEN, claims: { jti: undefined } }), /jti must be 1 to 256/],
      [es256.proof('GET', HTU, { accessToken: TOKEN, jti: 'x'.repeat(257) }), /jti must be 1 to 256/],
      [es256.proof('GET', HTU), /ath must be/],
      [es256.proof('GET', HTU, { accessToken: 'another token' }), /ath must be/],
      // Signed by one key, naming another: the signature does not verify with the header's jwk.
      [es256.proof('GET', HTU, { accessToken: TOKEN, jwk: (await dpopKey('ES256')).publicJwk }), /signature does not/],
    ];
    for (const [proof, message] of cases) {
      expect(await refusal(check(ctx, await proof))).toMatchObject({ code: 'invalid_dpop_proof', message });
    }
  });

  it('refuses none, HS256, RS256 and a private key in the header', async () => {
    const ctx = context();
    const claims = { htm: 'GET', htu: HTU, jti: 'j', iat: Math.floor(Date.now() / 1000) };
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const none = `${encode({ alg: 'none', typ: 'dpop+jwt', jwk: es256.publicJwk })}.${encode(claims)}.`;
    const hs256 = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'c2VjcmV0' } as never })
      .sign(new TextEncoder().encode('secret'));
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs256 = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', typ: 'dpop+jwt', jwk: await exportJWK(rsa.publicKey) })
      .sign(rsa.privateKey);
    for (const proof of [none, hs256, rs256]) {
      expect(await refusal(check(ctx, proof, HTU, undefined))).toMatchObject({
        code: 'invalid_dpop_proof',
        message: /alg must be one of EdDSA, Ed25519, ES256|malformed/,
      });
    }
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const withPrivate = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(ec.privateKey) })
      .sign(ec.privateKey);
    expect(await refusal(check(ctx, withPrivate, HTU, undefined))).toMatchObject({ code: 'invalid_dpop_proof' });
  });

  it('accepts a jti once per key, and the same jti of another key', async () => {
    const ctx = context();
    const proof = await es256.proof('GET', HTU, { accessToken: TOKEN, jti: 'once' });
    expect(await check(ctx, proof)).toBe(es256.jkt);
    expect(await refusal(check(ctx, proof))).toMatchObject({ code: 'invalid_dpop_proof', message: /used before/ });
    expect(await check(ctx, await eddsa.proof('GET', HTU, { accessToken: TOKEN, jti: 'once' }))).toBe(eddsa.jkt);
  });

  it('asks for a nonce when nonces are on, and accepts it for the current and the previous window', async () => {
    const ctx = context(true);
    const asked = await refusal(check(ctx, await es256.proof('GET', HTU, { accessToken: TOKEN })));
    expect(asked).toMatchObject({ code: 'use_dpop_nonce', message: /must carry the server nonce/ });
    const nonce = asked.nonce!;
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(await ctx.nonces.current()).toBe(nonce);
    expect(await check(ctx, await es256.proof('GET', HTU, { accessToken: TOKEN, nonce }))).toBe(es256.jkt);
    // Proofs are made at the clock's time: moved, the iat would be refused before the nonce is looked at.
    ctx.clock.advance(NONCE_WINDOW_MS);
    const later = { accessToken: TOKEN, nonce, iat: Math.floor(ctx.clock.now() / 1000) };
    expect(await check(ctx, await es256.proof('GET', HTU, later))).toBe(es256.jkt);
    ctx.clock.advance(NONCE_WINDOW_MS);
    const stale = await refusal(
      check(ctx, await es256.proof('GET', HTU, { ...later, iat: Math.floor(ctx.clock.now() / 1000) })),
    );
    expect(stale).toMatchObject({ code: 'use_dpop_nonce', message: /stale/ });
    expect(stale.nonce).not.toBe(nonce);
  });

  it('answers malformed proofs with invalid_dpop_proof, never another error', async () => {
    const ctx = context();
    const valid = await es256.proof('GET', HTU, { accessToken: TOKEN });
    const [header, payload, signature] = valid.split('.') as [string, string, string];
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const inputs = [
      '',
      '.',
      '..',
      'a.b.c',
      'not a jwt',
      `${header}.${payload}`,
      `${header}.${payload}.${signature}.extra`,
      `${encode('string')}.${payload}.${signature}`,
      `${encode({ alg: 'ES256', typ: 'dpop+jwt' })}.${payload}.${signature}`,
      `${encode({ alg: 'ES256', typ: 'dpop+jwt', jwk: 'x' })}.${payload}.${signature}`,
      `${encode({ alg: 'ES256', typ: 'dpop+jwt', jwk: { kty: 'EC' } })}.${payload}.${signature}`,
      `${encode({ alg: 'ES256', typ: 'dpop+jwt', jwk: { kty: 'OKP', crv: 'Ed25519', x: 'AA' } })}.${payload}.${signature}`,
      `${header}.${encode([1, 2])}.${signature}`,
      `${header}.${encode({ htm: 1, htu: {}, iat: 'x', jti: [] })}.${signature}`,
      `${header}.${'%%%'}.${signature}`,
      `${header}.${payload}.${'A'.repeat(10_000)}`,
      `${'\u0000'.repeat(3)}.${'\u00ff'}.x`,
    ];
    for (const input of inputs) {
      expect(await refusal(check(ctx, input)), JSON.stringify(input.slice(0, 60))).toMatchObject({
        code: 'invalid_dpop_proof',
      });
    }
  });
});
