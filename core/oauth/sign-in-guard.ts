import { limits, SECOND } from '../kernel/config';
import { clientKey, createRateLimiter, type RateLimitConfig } from '../kernel/rate-limit';
import type { Clock } from '../kernel/ports';
import { sha256 } from '../kernel/secrets';
import type { OAuthPort } from './store';

// What stands between a sign-in form and scrypt (128 MiB, ~0.4 s of CPU per check):
//   - per client IP, an in-process token bucket (a WAF rate rule on /login in AWS comes first);
//   - per process, a bound on password checks running and waiting (the rest: "busy", 503);
//   - per identifier (a hash of the normalised number or email, whether an account has it or
//     not) and per device cookie, a count of attempts in the store, shared by every process:
//     a few failures are free, then each one delays the next check (progressive delay). Nothing
//     ever locks an account: a browser that signed in before is judged by its own device count.
//
// The per-process limits below are set by SIGN_IN_CONCURRENT_CHECKS, SIGN_IN_QUEUED_CHECKS,
// SIGN_IN_RATE_LIMIT_BURST and SIGN_IN_RATE_LIMIT_PER_MINUTE (core/adapters/runtime-config.ts);
// a successful sign-in gives its per-IP token back.

export interface SignInLimits {
  concurrentChecks: number;
  queuedChecks: number;
  perIp: RateLimitConfig;
}

export const defaultSignInLimits: SignInLimits = {
  concurrentChecks: 2,
  queuedChecks: 8,
  perIp: { burst: 20, perMinute: 10 },
};

/** A place for one sign-in: its store work, then at most one password check. */
export interface Admission {
  check<T>(work: () => Promise<T>): Promise<T>;
  leave(): void;
}

/**
 * At most `concurrent` password checks run at once; `queued` more sign-ins may be admitted and
 * wait their turn; further ones are refused at once, before any work, whatever the account. A
 * browser with a verified device cookie has `queued` places more and goes first in the queue:
 * strangers filling the process cannot keep a person who signed in here before out.
 */
export function createCheckGate(concurrent: number, queued: number) {
  let admitted = 0;
  let running = 0;
  let checks = 0;
  const waiting = { device: [] as Array<() => void>, other: [] as Array<() => void> };
  return {
    admit(fromKnownDevice = false): Admission | undefined {
      if (admitted >= concurrent + queued * (fromKnownDevice ? 2 : 1)) return undefined;
      admitted++;
      let left = false;
      return {
        async check(work) {
          if (running < concurrent) running++;
          else await new Promise<void>((resolve) => (fromKnownDevice ? waiting.device : waiting.other).push(resolve));
          checks++;
          try {
            return await work();
          } finally {
            // The slot passes straight to the next in line, known devices first.
            const next = waiting.device.shift() ?? waiting.other.shift();
            if (next) next();
            else running--;
          }
        },
        leave() {
          if (!left) admitted--;
          left = true;
        },
      };
    },
    /** Password checks started by this process (for tests and metrics). */
    get checks() {
      return checks;
    },
  };
}

/** The delay a key's `failures`-th failure imposes before its next check. */
export function delayAfter(failures: number): number {
  if (failures < limits.signInFreeFailures) return 0;
  return Math.min(limits.signInFirstDelay * 2 ** (failures - limits.signInFreeFailures), limits.signInMaxDelay);
}

/** Email addresses compare case-insensitively, as accounts store them. */
const normalisedIdentifier = (identifier: string) => {
  const trimmed = identifier.trim();
  return trimmed.includes('@') ? trimmed.toLowerCase() : trimmed;
};

export const identifierKey = (identifier: string) => `id#${sha256(normalisedIdentifier(identifier))}`;
export const deviceKey = (deviceId: string) => `device#${deviceId}`;

export type Counted = { counted: true } | { counted: false; retryAfterMs: number };

/** Parallel attempts on one key that lose the race re-read this often before giving up. */
const COUNT_ROUNDS = 3;

export function createSignInGuard(deps: { store: OAuthPort; clock: Clock; limits: SignInLimits }) {
  const { store } = deps;
  const gate = createCheckGate(deps.limits.concurrentChecks, deps.limits.queuedChecks);
  const perIp = createRateLimiter(deps.limits.perIp, deps.clock);

  return {
    gate,
    /** Takes one attempt from the client address's bucket. */
    takeAddress: (sourceIp: string | undefined) => perIp.take(clientKey(sourceIp)),
    /** Gives the attempt back: it succeeded, or it was never checked. */
    giveBackAddress: (sourceIp: string | undefined) => perIp.giveBack(clientKey(sourceIp)),

    /**
     * Counts one attempt against `key` before its password is checked, so however many guesses
     * arrive at once, each check was counted first. Not counted (and not to be checked) while the
     * key's delay runs, or once it holds `upTo` failures. Two round trips: a read and a
     * conditional put.
     */
    async count(key: string, now: number, upTo?: number): Promise<Counted> {
      for (let round = 0; round < COUNT_ROUNDS; round++) {
        const state = await store.getSignInThrottle(key, now);
        const failures = state?.failures ?? 0;
        if (state && state.blockedUntil > now) return { counted: false, retryAfterMs: state.blockedUntil - now };
        if (state && upTo !== undefined && failures >= upTo) {
          return { counted: false, retryAfterMs: state.expiresAt - now };
        }
        const next = {
          key,
          failures: failures + 1,
          blockedUntil: now + delayAfter(failures + 1),
          expiresAt: now + limits.signInFailureMemory,
        };
        if (await store.putSignInThrottle(next, state?.failures, now)) return { counted: true };
      }
      return { counted: false, retryAfterMs: SECOND };
    },

    /** A success: the key's failures are forgotten. */
    clear: (key: string) => store.deleteSignInThrottle(key),
  };
}

export type SignInGuard = ReturnType<typeof createSignInGuard>;
