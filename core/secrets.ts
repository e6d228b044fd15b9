import { createHash, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { Random } from './ports';

const base64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

/** A random secret of `bytes` bytes (default 32 = 256 bits), base64url without padding. */
export const randomSecret = (random: Random, bytes = 32) => base64url(random.bytes(bytes));

/**
 * SHA-256, base64url. Enough for high-entropy secrets (codes, refresh tokens, client secrets,
 * session ids): they cannot be guessed, so a slow KDF would only cost throughput.
 */
export const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('base64url');

/** Constant-time comparison of two strings (length is not secret here). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/** RFC 7636 S256: BASE64URL(SHA256(ASCII(code_verifier))). */
export const pkceChallenge = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');

// Passwords are chosen by people, so they get a slow, memory-hard KDF. OWASP's scrypt
// recommendation: N=2^17, r=8, p=1 (128 MiB per hash).
const SCRYPT = { N: 2 ** 17, r: 8, p: 1, keyLength: 32, saltBytes: 16 };

function scrypt(password: string, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCallback(password.normalize('NFKC'), salt, keyLength, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

const scryptOptions = (N: number, r: number, p: number) => ({ N, r, p, maxmem: 256 * N * r + 1024 * 1024 });

/** `scrypt$N$r$p$salt$hash`: parameters travel with the hash so they can be raised later. */
export async function hashPassword(password: string, random: Random): Promise<string> {
  const salt = Buffer.from(random.bytes(SCRYPT.saltBytes));
  const key = await scrypt(password, salt, SCRYPT.keyLength, scryptOptions(SCRYPT.N, SCRYPT.r, SCRYPT.p));
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, scryptOptions(Number(n), Number(r), Number(p)));
  return timingSafeEqual(key, expected);
}

/**
 * A hash of a password nobody has, verified when the account does not exist, so that a
 * sign-in attempt takes as long for an unknown account as for a known one.
 */
export const decoyPasswordHash = 'scrypt$131072$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
