import { isIPv4, isIPv6 } from 'node:net';
import type { Clock } from './ports';

// The in-process per-IP limiter of the public endpoints: a token bucket per client address.
// In AWS a WAF rate-based rule on the API is the first line; this stays on behind it, per
// process (each Lambda container or local runner counts on its own).
// PUBLIC_RATE_LIMIT_BURST and PUBLIC_RATE_LIMIT_PER_MINUTE set it (core/adapters/runtime-config.ts;
// defaults below: a burst of 20, 300 a minute = 5/s).
//
// Memory is bounded: at most `maxClients` buckets. A bucket is a few numbers; when the map is
// full, the buckets idle longest are dropped first (they have usually refilled, so forgetting
// them changes nothing).

export interface RateLimitConfig {
  /** Bucket size: requests allowed in a burst. */
  burst: number;
  /** Refill rate: requests per minute, sustained. */
  perMinute: number;
  /** Most buckets kept (default 10,000). */
  maxClients?: number;
}

export const defaultRateLimit: Readonly<Required<RateLimitConfig>> = { burst: 20, perMinute: 300, maxClients: 10_000 };

export type RateDecision = { allowed: true; remaining: number } | { allowed: false; retryAfterSeconds: number };

/**
 * The bucket key of a client address: an IPv4 address as is (also when IPv4-mapped), an IPv6
 * address by its /64 (one subscriber usually holds a whole /64). Anything else shares one bucket.
 */
export function clientKey(sourceIp: string | undefined): string {
  let ip = (sourceIp ?? '').trim().replace(/%.*$/, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) ip = mapped[1]!;
  if (isIPv4(ip)) return ip;
  if (!isIPv6(ip)) return 'unknown';
  const [head = '', tail] = ip.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0');
  const groups = tail === undefined ? left : [...left, ...zeros, ...right];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

interface Bucket {
  tokens: number;
  at: number;
}

export function createRateLimiter(config: RateLimitConfig, clock: Clock) {
  const burst = config.burst;
  const perMs = config.perMinute / 60_000;
  const maxClients = config.maxClients ?? defaultRateLimit.maxClients;
  // Insertion order = least recently used first (a bucket is re-inserted on every use).
  const buckets = new Map<string, Bucket>();

  function evict() {
    const target = Math.floor(maxClients * 0.9);
    for (const key of buckets.keys()) {
      if (buckets.size <= target) break;
      buckets.delete(key);
    }
  }

  return {
    /** Takes one request's token from `key`'s bucket. */
    take(key: string): RateDecision {
      const now = clock.now();
      const bucket = buckets.get(key);
      const tokens = bucket ? Math.min(burst, bucket.tokens + Math.max(0, now - bucket.at) * perMs) : burst;
      buckets.delete(key);
      if (tokens >= 1) {
        buckets.set(key, { tokens: tokens - 1, at: now });
        if (buckets.size > maxClients) evict();
        return { allowed: true, remaining: Math.floor(tokens - 1) };
      }
      buckets.set(key, { tokens, at: now });
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / perMs / 1000)) };
    },
    /** Returns the token of a request that turned out not to count (a successful sign-in). */
    giveBack(key: string) {
      const bucket = buckets.get(key);
      if (bucket) bucket.tokens = Math.min(burst, bucket.tokens + 1);
    },
    /** Buckets held (for tests and metrics). */
    get size() {
      return buckets.size;
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
