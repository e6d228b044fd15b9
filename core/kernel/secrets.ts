import { createHash, hash, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { MacKey, Random } from './ports';

const base64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

/** A random secret of `bytes` bytes (default 32 = 256 bits), base64url without padding. */
export const randomSecret = (random: Random, bytes = 32) => base64url(random.bytes(bytes));

/**
 * The shape of our random secrets (client secrets, authorization codes), with room; anything else
 * is refused unhashed.
 */
export const OPAQUE_SECRET = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * SHA-256, base64url. Enough for high-entropy secrets (codes, refresh tokens, client secrets,
 * session ids): they cannot be guessed, so a slow KDF would only cost throughput.
 */
// One-shot crypto.hash (Node 20.12+): a third of createHash's cost, on every client secret check.
export const sha256 = (value: string) => hash('sha256', value, 'base64url');

/** Constant-time comparison of two strings (length is not secret here). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/** RFC 7636 S256: BASE64URL(SHA256(ASCII(code_verifier))). */
export const pkceChallenge = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');

/** scrypt's cost parameters (RFC 7914): CPU/memory cost N, block size r, parallelism p. */
export interface ScryptCost {
  N: number;
  r: number;
  p: number;
}

// Passwords are chosen by people, so they get a slow, memory-hard KDF. OWASP's scrypt
// recommendation: N=2^17, r=8, p=1 (128 MiB per hash). Every process that serves people uses it;
// only the tests' in-process service lowers it (test/support/service.ts), as what they test is
// the service around the KDF, not its strength.
export const PASSWORD_COST: ScryptCost = { N: 2 ** 17, r: 8, p: 1 };
const SCRYPT = { keyLength: 32, saltBytes: 16 };

function scrypt(password: string, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCallback(password.normalize('NFKC'), salt, keyLength, options, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

const scryptOptions = (N: number, r: number, p: number) => ({ N, r, p, maxmem: 256 * N * r + 1024 * 1024 });

/** `scrypt$N$r$p$salt$hash`: parameters travel with the hash so they can be raised later. */
export async function hashPassword(password: string, random: Random, cost = PASSWORD_COST): Promise<string> {
  const salt = Buffer.from(random.bytes(SCRYPT.saltBytes));
  const key = await scrypt(password, salt, SCRYPT.keyLength, scryptOptions(cost.N, cost.r, cost.p));
  return ['scrypt', cost.N, cost.r, cost.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const options = scryptOptions(Number(n), Number(r), Number(p));
  const key = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, options);
  return timingSafeEqual(key, expected);
}

/**
 * A hash of a password nobody has, at the cost of new hashes, verified when the account does not
 * exist, so that a sign-in attempt takes as long for an unknown account as for a known one.
 */
export const decoyPasswordHash = (cost = PASSWORD_COST) =>
  ['scrypt', cost.N, cost.r, cost.p, 'A'.repeat(22), 'A'.repeat(43)].join('$');

// Signed tokens: `field.….expiry.mac`, where the MAC (service MAC key, HMAC-SHA-256) covers the
// purpose, every field and the expiry (epoch seconds). The purpose keeps a token made for one
// use (a sign-in form) from passing for another (a device cookie). Fields are base64url or ids.
const TOKEN_FIELD = /^[A-Za-z0-9_-]{1,64}$/;
const MAC_BYTES = 32;
const MAX_TOKEN_LENGTH = 400;

const macInput = (purpose: string, fields: readonly string[], expirySeconds: string) =>
  new TextEncoder().encode([purpose, ...fields, expirySeconds].join('\n'));

export async function sealToken(
  macKey: MacKey,
  purpose: string,
  fields: readonly string[],
  expiresAt: number,
): Promise<string> {
  if (!fields.every((field) => TOKEN_FIELD.test(field))) {
    throw new Error('a signed token field must be 1-64 base64url characters');
  }
  const expirySeconds = String(Math.floor(expiresAt / 1000));
  const mac = await macKey.mac(macInput(purpose, fields, expirySeconds));
  return [...fields, expirySeconds, base64url(mac)].join('.');
}

/** The fields of a token sealed for `purpose` that has not expired at `now`, or undefined. */
export async function openToken(
  macKey: MacKey,
  purpose: string,
  token: string | undefined,
  now: number,
): Promise<string[] | undefined> {
  if (!token || token.length > MAX_TOKEN_LENGTH) return undefined;
  const parts = token.split('.');
  const mac = parts.pop();
  const expirySeconds = parts.pop();
  if (!mac || !expirySeconds || !/^\d{1,12}$/.test(expirySeconds)) return undefined;
  if (Number(expirySeconds) * 1000 <= now) return undefined;
  if (parts.length === 0 || !parts.every((field) => TOKEN_FIELD.test(field))) return undefined;
  const macBytes = Buffer.from(mac, 'base64url');
  if (macBytes.length !== MAC_BYTES || base64url(macBytes) !== mac) return undefined;
  return (await macKey.verify(macInput(purpose, parts, expirySeconds), macBytes)) ? parts : undefined;
}
