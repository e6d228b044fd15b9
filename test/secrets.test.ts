import { describe, expect, it } from 'vitest';
import { systemRandom } from '../core/adapters/system';
import { decoyPasswordHash, hashPassword, PASSWORD_COST, verifyPassword } from '../core/kernel/secrets';
import { TEST_PASSWORD_COST } from './support/service';

// The tests' in-process service hashes at a lower scrypt cost (test/support/service.ts); this file
// holds the production cost and what the lower one must keep: the hash's shape and the decoy's.

describe('password hashes', () => {
  it("use OWASP's scrypt cost by default (N=2^17, r=8, p=1), carried in the hash, and verify", async () => {
    expect(PASSWORD_COST).toEqual({ N: 131_072, r: 8, p: 1 });
    const stored = await hashPassword('correct horse battery staple', systemRandom);
    expect(stored).toMatch(/^scrypt\$131072\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(await verifyPassword('correct horse battery staple', stored)).toBe(true);
    expect(await verifyPassword('correct horse battery stapl', stored)).toBe(false);
  });

  it('have a decoy of the same cost and shape as a real hash, at any cost, that no password matches', async () => {
    for (const cost of [PASSWORD_COST, TEST_PASSWORD_COST]) {
      const real = await hashPassword('a password', systemRandom, cost);
      const decoy = decoyPasswordHash(cost);
      expect(decoy.split('$').map((part) => part.length)).toEqual(real.split('$').map((part) => part.length));
      expect(decoy.split('$').slice(0, 4)).toEqual(real.split('$').slice(0, 4));
      expect(await verifyPassword('a password', decoy)).toBe(false);
    }
    expect(decoyPasswordHash()).toBe(decoyPasswordHash(PASSWORD_COST));
  });
});
