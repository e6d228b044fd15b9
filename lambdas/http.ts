import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { oauthError, type DomainError, type ErrorKind, type OAuthErrorCode } from '../core/kernel/errors';
import { paramsFrom, type Params } from '../core/kernel/params';
import { DPOP_ALGORITHMS } from '../core/kernel/access';

// Translating API Gateway REST proxy events to what the core needs, and results back.

export type HttpEvent = APIGatewayProxyEvent;
export type HttpResult = APIGatewayProxyResult;

/** Request bodies above this are refused before parsing: no endpoint needs more. */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * Every response: nothing here may be cached or framed, and nothing leaks through Referer.
 * Redirects keep `no-referrer`: the next request (the client's callback with its code) gets none.
 */
const BASE_HEADERS = {
  'Cache-Control': 'no-store',
  Pragma: 'no-cache',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/**
 * HSTS (RFC 6797) on every answer when the issuer is https: API answers too, not only pages, so a
 * client that first calls the token endpoint or the keys is pinned to https as well.
 */
const STRICT_TRANSPORT_SECURITY = 'max-age=63072000; includeSubDomains';

/** `result` with HSTS when the service is served over https (`secure`); the edge applies it to every answer. */
export function withTransportSecurity(result: HttpResult, secure: boolean): HttpResult {
  return secure
    ? { ...result, headers: { ...result.headers, 'Strict-Transport-Security': STRICT_TRANSPORT_SECURITY } }
    : result;
}

/** Each event's headers by lower-case name, built once (several look-ups per request). */
const lowerCased = new WeakMap<object, Map<string, string>>();

/** Headers by lower-case name, whatever case the client or API Gateway used (the first given name wins). */
export function header(event: HttpEvent, name: string): string | undefined {
  const headers = event.headers ?? {};
  let byName = lowerCased.get(headers);
  if (!byName) {
    byName = new Map();
    for (const key of Object.keys(headers)) {
      const value = headers[key];
      const lower = key.toLowerCase();
      if (value !== undefined && !byName.has(lower)) byName.set(lower, value);
    }
    lowerCased.set(headers, byName);
  }
  return byName.get(name.toLowerCase());
}

/**
 * Every value of a header, by lower-case name, whatever case the client used: all of
 * `multiValueHeaders`, plus any `headers` entry whose exact name is not there (API Gateway repeats
 * a header's value in `headers` under the same name; a value must not count twice).
 */
export function headerValues(event: HttpEvent, name: string): string[] {
  const wanted = name.toLowerCase();
  const multi = event.multiValueHeaders ?? {};
  const values: string[] = [];
  for (const [key, list] of Object.entries(multi)) if (key.toLowerCase() === wanted) values.push(...(list ?? []));
  for (const [key, value] of Object.entries(event.headers ?? {})) {
    if (key.toLowerCase() === wanted && value !== undefined && !Object.hasOwn(multi, key)) values.push(value);
  }
  return values;
}

/**
 * What a request presents to a resource server (core/oauth/bearer.ts): every Authorization and DPoP
 * value, and the request as a DPoP proof names it: its method and the issuer's URL of its route
 * (RFC 9449 §4.3; the URL clients were given, whatever host API Gateway saw).
 */
export const presentedAccess = (event: HttpEvent, issuer: string) => ({
  authorization: headerValues(event, 'authorization'),
  dpop: headerValues(event, 'dpop'),
  target: { method: event.httpMethod, url: `${issuer}${event.resource ?? event.path}` },
});

/** Query parameters with repeats kept (API Gateway's multi-value form). */
export function queryParams(event: HttpEvent): Params {
  const multi = event.multiValueQueryStringParameters ?? {};
  const entries: Array<[string, string]> = [];
  for (const [name, values] of Object.entries(multi)) for (const value of values ?? []) entries.push([name, value]);
  if (entries.length === 0) {
    for (const [name, value] of Object.entries(event.queryStringParameters ?? {}))
      if (value !== undefined) entries.push([name, value]);
  }
  return paramsFrom(entries);
}

export function rawBody(event: HttpEvent): string {
  if (!event.body) return '';
  return event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
}

/** A form-encoded body (the only body any of our endpoints accept). */
export function formParams(event: HttpEvent): Params {
  const body = rawBody(event);
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) throw oauthError('invalid_request', 'the request body is too large');
  const contentType = (header(event, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (body !== '' && contentType !== 'application/x-www-form-urlencoded') {
    throw oauthError('invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  return paramsFrom(new URLSearchParams(body));
}

export function cookies(event: HttpEvent): Map<string, string> {
  const jar = new Map<string, string>();
  for (const part of (header(event, 'cookie') ?? '').split(';')) {
    const index = part.indexOf('=');
    if (index <= 0) continue;
    const name = part.slice(0, index).trim();
    // First occurrence wins: the most specific path is sent first, and we only use Path=/.
    if (!jar.has(name)) jar.set(name, part.slice(index + 1).trim());
  }
  return jar;
}

export interface CookieOptions {
  secure: boolean;
  maxAgeSeconds?: number;
}

/** `__Host-` cookies (RFC 6265bis) when served over https: no Domain, Path=/, Secure. */
export const cookieName = (base: string, secure: boolean) => (secure ? `__Host-${base}` : base);

export function setCookie(name: string, value: string, options: CookieOptions): string {
  const parts = [`${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (options.secure) parts.push('Secure');
  if (options.maxAgeSeconds !== undefined) parts.push(`Max-Age=${options.maxAgeSeconds}`);
  return parts.join('; ');
}

export function json(statusCode: number, body: unknown, headers: Record<string, string> = {}): HttpResult {
  return {
    statusCode,
    headers: { ...BASE_HEADERS, 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  };
}

/** Answers of public data (no credential involved): readable from any origin, refusals and failures included. */
export const ANY_ORIGIN = { 'Access-Control-Allow-Origin': '*' } as const;

/** Public, cacheable JSON (discovery documents and keys): the one exception to no-store. */
export function publicJson(body: unknown, maxAgeSeconds: number): HttpResult {
  return {
    statusCode: 200,
    headers: {
      ...BASE_HEADERS,
      'Cache-Control': `public, max-age=${maxAgeSeconds}`,
      'Content-Type': 'application/json',
      ...ANY_ORIGIN,
    },
    body: JSON.stringify(body),
  };
}

/**
 * HTML pages: Referer only to ourselves. Under `no-referrer` browsers post our own forms with
 * `Origin: null`, which cannot be told from a cross-site post; under `same-origin` they send our
 * real origin, while other sites still get neither the query (/login?request=…) nor the path.
 */
export const PAGE_REFERRER_POLICY = 'same-origin';

export interface PageOptions {
  cookies?: string[];
  /** Origins a form on this page may end up at (after the service redirects to the client). */
  formTargets?: string[];
  /** The page runs our one script (/assets/passkeys.js) and it may call back to us (WebAuthn options). */
  script?: boolean;
}

export function html(statusCode: number, body: string, options: PageOptions = {}): HttpResult {
  const formAction = ["'self'", ...(options.formTargets ?? [])].join(' ');
  return {
    statusCode,
    headers: {
      ...BASE_HEADERS,
      'Referrer-Policy': PAGE_REFERRER_POLICY,
      'Content-Type': 'text/html; charset=utf-8',
      // No inline script anywhere; styles only from our own stylesheet, scripts only from our own file.
      'Content-Security-Policy':
        `default-src 'none'; style-src 'self'; img-src 'self'; form-action ${formAction}; ` +
        (options.script ? "script-src 'self'; connect-src 'self'; " : '') +
        "frame-ancestors 'none'; base-uri 'none'",
      'X-Frame-Options': 'DENY',
    },
    ...(options.cookies?.length ? { multiValueHeaders: { 'Set-Cookie': options.cookies } } : {}),
    body,
  };
}

export function redirect(location: string, statusCode: 302 | 303, setCookies: string[] = []): HttpResult {
  return {
    statusCode,
    headers: { ...BASE_HEADERS, Location: location },
    ...(setCookies.length ? { multiValueHeaders: { 'Set-Cookie': setCookies } } : {}),
    body: '',
  };
}

// The one mapping of a domain refusal to HTTP. The status is the OAuth code's own where a
// standard gives it one (RFC 6749 §5.2, RFC 6750 §3.1, RFC 8693 §2.2.2), else the kind's.

const OAUTH_STATUS: Partial<Record<OAuthErrorCode, number>> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_token: 401,
  insufficient_scope: 403,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  invalid_scope: 400,
  invalid_target: 400,
  unsupported_token_type: 400,
  temporarily_unavailable: 503,
  // RFC 6749 §4.1.2.1: server_error is the 500 of a redirect; as an HTTP answer it is a 500, not a 503.
  server_error: 500,
};

const KIND_STATUS: Record<ErrorKind, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  gone: 410,
  conflict: 409,
  failed_precondition: 409,
  exhausted: 429,
  aborted: 409,
  unavailable: 503,
};

export const httpStatus = (error: DomainError): number =>
  (error.oauth && OAUTH_STATUS[error.oauth]) ?? KIND_STATUS[error.kind];

/**
 * The body's `error`: the OAuth code, else the documented word, else the kind (`invalid_request` for a bad argument, as
 * OAuth says it).
 */
const errorCode = (error: DomainError): string =>
  error.oauth ?? error.code ?? (error.kind === 'invalid_argument' ? 'invalid_request' : error.kind);

/** RFC 6750 §3: auth-param values are quoted-strings of %x20-21 / %x23-5B / %x5D-7E only. */
const quotable = (value: string) => value.replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, "'");

/** The scheme a request's Authorization header used, lower-cased (`bearer`, `dpop`, …), if any. */
export const presentedScheme = (event: HttpEvent): string | undefined =>
  header(event, 'authorization')?.trim().split(/\s+/, 1)[0]?.toLowerCase() || undefined;

function challenge(error: DomainError, realm: string, scheme: 'Bearer' | 'DPoP' | undefined): string | undefined {
  if (error.challenge === 'Basic') return `Basic realm="${realm}", charset="UTF-8"`;
  if (scheme === undefined) return undefined;
  const params = [`realm="${realm}"`];
  if (error.oauth) params.push(`error="${error.oauth}"`, `error_description="${quotable(error.message)}"`);
  if (error.scope) params.push(`scope="${quotable(error.scope)}"`);
  // RFC 9449 §7.1: the algorithms a proof may use.
  if (scheme === 'DPoP') params.push(`algs="${DPOP_ALGORITHMS.join(' ')}"`);
  return `${scheme} ${params.join(', ')}`;
}

/**
 * The challenge's scheme: the error's, except that a refusal made after a DPoP credential was
 * accepted (a missing scope, a revoked grant) answers in the scheme the request used (RFC 9449 §7.1).
 */
function challengeScheme(error: DomainError, presented: string | undefined): 'Bearer' | 'DPoP' | undefined {
  if (error.challenge === 'Bearer' && error.oauth && presented === 'dpop') return 'DPoP';
  return error.challenge === 'Bearer' || error.challenge === 'DPoP' ? error.challenge : undefined;
}

/**
 * A refusal as JSON: `{error, error_description}` (RFC 6749 §5.2), the challenge the caller
 * should answer (`realm` names the route group) and `Retry-After`. RFC 6750 §3.1: a request that
 * sent no Bearer credential gets the bare challenge, 401 with `{}` and no error information.
 * `presented`: the request's Authorization scheme (presentedScheme).
 */
export function errorResult(
  error: DomainError,
  realm: string,
  headers: Record<string, string> = {},
  presented?: string,
): HttpResult {
  const authenticate = challenge(error, realm, challengeScheme(error, presented));
  const extra = {
    ...headers,
    ...(authenticate ? { 'WWW-Authenticate': authenticate } : {}),
    ...(error.dpopNonce !== undefined ? { 'DPoP-Nonce': error.dpopNonce } : {}),
    ...(error.retryAfterSeconds !== undefined ? { 'Retry-After': String(error.retryAfterSeconds) } : {}),
  };
  if (error.kind === 'unauthenticated' && error.challenge === 'Bearer' && !error.oauth) return json(401, {}, extra);
  return json(httpStatus(error), { error: errorCode(error), error_description: error.message }, extra);
}

export const methodNotAllowed = (allowed: string[], headers: Record<string, string> = {}): HttpResult =>
  json(
    405,
    { error: 'invalid_request', error_description: `method not allowed; use ${allowed.join(' or ')}` },
    { ...headers, Allow: allowed.join(', ') },
  );
