// Shared pieces of the fuzz tests: a seeded PRNG (FUZZ_SEED=<n> replays a run), value pools with
// the names and values that broke parsers before, and a runner that keeps N requests in flight.

/** The seed of this run: FUZZ_SEED, or a fixed default so CI is reproducible. */
export const fuzzSeed = (fallback: number) => (process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : fallback);

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export class Prng {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(below: number): number {
    return Math.floor(this.next() * below);
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  bytes(length: number): Buffer {
    const out = Buffer.alloc(length);
    for (let index = 0; index < length; index++) out[index] = this.int(256);
    return out;
  }

  /** Short random text from printable ASCII, some unicode and control characters. */
  text(maxLength = 24): string {
    const alphabet = 'abcXYZ019 -_.~%+&=;:/?#[]@!$\'"()*,<>\\{}|^`\t\u00e9\u00fc\u4e2d\u{1F600}\u202e\u0000\u0007';
    const chars = [...alphabet];
    let out = '';
    const length = this.int(maxLength + 1);
    for (let index = 0; index < length; index++) out += this.pick(chars);
    return out;
  }
}

/** Names that are also Object.prototype members (or special to JavaScript objects). */
export const PROPERTY_NAMES = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  '__defineGetter__',
  '__defineSetter__',
  '__lookupGetter__',
  '__lookupSetter__',
  'length',
  'then',
  'toJSON',
] as const;

/** Values chosen to break parsers: empty, property names, unicode, numbers at edges, huge ones. */
export function oddValue(random: Prng): string {
  switch (random.int(12)) {
    case 0:
      return '';
    case 1:
      return random.pick(PROPERTY_NAMES);
    case 2:
      return random.text();
    case 3:
      return random.pick([
        '0',
        '-1',
        '1e309',
        'NaN',
        '9007199254740993',
        '-9223372036854775808',
        '18446744073709551616',
        '1.5',
        '0x10',
      ]);
    case 4:
      return 'x'.repeat(random.pick([4096, 4097, 10_000, 70_000]));
    case 5:
      return random.pick(['null', 'true', '[]', '{}', '{"__proto__":{"admin":true}}', 'undefined']);
    case 6:
      return `${'\u{1F600}'.repeat(random.int(50) + 1)}\uD800`;
    case 7:
      return random.pick([
        'openid',
        'openid profile email',
        'prov:agents',
        'messaging',
        'code',
        'authorization_code',
        'refresh_token',
        'client_credentials',
        'S256',
        'plain',
      ]);
    case 8:
      return random.pick([
        'http://localhost/cb',
        'https://example.com/callback',
        'javascript:alert(1)',
        '//evil.example',
        'http://[::1',
        'urn:ietf:params:oauth:token-type:access_token',
      ]);
    case 9:
      return Buffer.from(random.text(40)).toString('base64url');
    case 10:
      return random.pick(['a.b.c', 'eyJhbGciOiJFZERTQSJ9.e30.', 'Bearer', '\r\n', ' ']);
    default:
      return String(random.int(1_000_000) - 500_000);
  }
}

/** Runs `count` tasks with at most `concurrency` in flight. */
export async function runConcurrently(
  count: number,
  concurrency: number,
  task: (index: number) => Promise<void>,
): Promise<void> {
  let nextIndex = 0;
  const worker = async () => {
    while (nextIndex < count) await task(nextIndex++);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}
