import { createDynamoAccountsStore } from '../core/adapters/dynamo-accounts-store';
import { createDynamoDirectoryStore } from '../core/adapters/dynamo-directory-store';
import { dynamoStore } from '../core/adapters/dynamo-store';
import { directoryLimits } from '../core/directory/config';
import { clientKey, defaultRateLimit, type RateLimitConfig, type RateLimiter } from '../core/kernel/rate-limit';
import { httpsIssuer } from '../core/kernel/config';
import { DomainError } from '../core/kernel/errors';
import { optionalParam } from '../core/kernel/params';
import { directoryModule, type Modules } from '../core/registry';
import { edgeHandler, type Route } from './edge';
import { ANY_ORIGIN, json, queryParams, type HttpEvent, type HttpResult } from './http';
import { lambdaHandler } from './runtime';

// The public, read-only endpoints (spec 4.4): no credential, limited per client IP.
//   GET /api/resolve?alias=…                                  alias or formatted number → number, entity type, state
//   GET /api/discover?capability=…&page_size=…&page_token=…  discoverable agents offering a capability
// Answers are JSON and readable from any origin (no credential is involved). Successful answers
// may be cached briefly (resolve 10 s, never past an active mask's expiry; discover 30 s);
// errors and 429s are never cached.

export interface PublicOptions {
  /** Limits of the per-IP token bucket (PUBLIC_RATE_LIMIT_*, read by core/adapters/runtime-config.ts). */
  rateLimit?: RateLimitConfig;
  /** A ready limiter (tests); it wins over `rateLimit`. */
  limiter?: RateLimiter;
}

const cacheable = (body: unknown, maxAgeSeconds: number): HttpResult =>
  json(200, body, {
    ...ANY_ORIGIN,
    'Cache-Control': maxAgeSeconds >= 1 ? `public, max-age=${maxAgeSeconds}` : 'no-store',
  });

/** One parameter, at most once (a repeated one is a 400 like everywhere else). */
const param = (event: HttpEvent, name: string): string | undefined => optionalParam(queryParams(event), name);

/** The modules this group's routes use. */
export const publicModules = [directoryModule] as const;

export function createPublicHandler({ directory }: Pick<Modules, 'directory'>, options: PublicOptions = {}) {
  const limiter = options.limiter ?? directory.rateLimiter(options.rateLimit ?? defaultRateLimit);

  /** Every public route: one token from the client's bucket first, then the route. */
  const limited =
    (route: Route): Route =>
    async (event) => {
      const decision = limiter.take(clientKey(event.requestContext?.identity?.sourceIp));
      if (!decision.allowed) {
        const seconds = decision.retryAfterSeconds;
        throw new DomainError('exhausted', `too many requests from this address; retry in ${seconds} s`, {
          code: 'rate_limited',
          retryAfterSeconds: seconds,
        });
      }
      return route(event);
    };

  return edgeHandler(
    {
      '/api/resolve': {
        GET: limited(async (event) => {
          const { resolved, validFor } = await directory.resolve(param(event, 'alias'));
          // Never cached past the moment an active mask expires.
          const maxAge =
            validFor === undefined
              ? directoryLimits.resolveMaxAge
              : Math.min(directoryLimits.resolveMaxAge, Math.floor(validFor / 1000));
          return cacheable(resolved, maxAge);
        }),
      },
      '/api/discover': {
        GET: limited(async (event) =>
          cacheable(
            await directory.discover({
              capability: param(event, 'capability'),
              pageToken: param(event, 'page_token'),
              pageSize: param(event, 'page_size'),
            }),
            directoryLimits.discoverMaxAge,
          ),
        ),
      },
    },
    { errorHeaders: ANY_ORIGIN, secure: httpsIssuer(directory.config) },
  );
}

// discover's page_token needs the page-token key: without it the function fails at once, not at the first paged
// request.
export const handler = lambdaHandler(
  publicModules,
  (modules, config) => createPublicHandler(modules, { rateLimit: config.service.publicRateLimit }),
  {
    store: dynamoStore(createDynamoAccountsStore, createDynamoDirectoryStore),
    macKeys: ['PAGE_TOKEN_KEY_ID'],
  },
);
