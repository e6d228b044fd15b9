import type { Context } from 'aws-lambda';
import { createLogger, type LogFields, type Logger } from '../core/adapters/log';
import { createRequestMetrics } from '../core/adapters/metrics';
import { DomainError } from '../core/kernel/errors';
import {
  errorResult,
  httpStatus,
  json,
  methodNotAllowed,
  presentedScheme,
  withTransportSecurity,
  type HttpEvent,
  type HttpResult,
} from './http';

// The one wrapper every Lambda handler goes through: routing by resource and method, one
// structured log line per request (never a query string, body, cookie or token), and errors
// turned into safe answers: routes throw, and here a DomainError becomes its HTTP answer (the
// one mapping, lambdas/http.ts); anything else becomes a plain server_error with the details
// kept in the log. Every answer gets the security headers of lambdas/http.ts (HSTS when the
// issuer is https). In Lambda, one CloudWatch EMF metrics line per request besides.

/**
 * In AWS the stack names each function's service (SERVICE_NAME, `svcnum-<group>`), which wins
 * over this default. The local runner serves every group as one service.
 */
const DEFAULT_SERVICE = 'svcnum-identity';

export const logger = createLogger(DEFAULT_SERVICE);

/** True until this process's first invocation has begun (a Lambda container serves one at a time). */
let coldStart = true;

/** The `Root=…` id of an X-Ray trace header (`Root=1-…;Parent=…;Sampled=1`). */
const traceRoot = (header: string) => /(?:^|;)Root=([^;]+)/.exec(header)?.[1];

/** What every line of an invocation carries: API Gateway's request id and the Lambda context's fields. */
function invocationKeys(event: HttpEvent, context: Context | undefined): LogFields {
  // The Lambda runtime sets the trace header in the environment for each invocation; right while a
  // container serves one invocation at a time, as ours do (no multi-concurrency), like cold_start.
  const trace = process.env._X_AMZN_TRACE_ID;
  const keys: LogFields = {
    requestId: event.requestContext?.requestId,
    function_request_id: context?.awsRequestId,
    function_name: context?.functionName,
    function_arn: context?.invokedFunctionArn,
    function_memory_size: context?.memoryLimitInMB,
    cold_start: coldStart,
    xray_trace_id: trace ? traceRoot(trace) : undefined,
  };
  coldStart = false;
  return keys;
}

export type Route = (event: HttpEvent) => Promise<HttpResult>;
export type RouteTable = Record<string, Partial<Record<'GET' | 'POST', Route>>>;

export interface EdgeOptions {
  /** The issuer is https: every answer of the group carries HSTS, refusals, 404s and failures included. */
  secure: boolean;
  /** How an unexpected failure is shown (HTML pages answer with a page, APIs with JSON). */
  serverError?: () => HttpResult;
  /** How a refusal is shown with the status the mapping gives it; JSON (`errorResult`) by default. */
  errorPage?: (error: DomainError, status: number) => HttpResult;
  /** The realm of this route group's challenges (`WWW-Authenticate: Bearer realm="…"`). */
  realm?: string;
  /** Headers every refusal and failure of this group carries besides (CORS on the public endpoints). */
  errorHeaders?: Record<string, string>;
  /** Where the request lines go (default: this process's logger at its LOG_LEVEL; the edge bench gives its own). */
  logger?: Logger;
}

const jsonServerError = (headers?: Record<string, string>) =>
  json(500, { error: 'server_error', error_description: 'the service failed; try again' }, headers);

/** The edge's cross-cutting work, one function each; edgeHandler composes them around the route. */

/** This invocation's logger (its keys are this request's alone, however many the process serves at once). */
export const invocationLogger = (base: Logger, event: HttpEvent, context: Context | undefined): Logger =>
  base.child(invocationKeys(event, context));

/** The route's key: a console test event may name neither resource nor path, yet the metric and the log need one. */
export const resourceOf = (event: HttpEvent): string => event.resource ?? event.path ?? '(none)';

/** The route's answer, or the edge's own 404/405 when no route takes the resource or method. */
export function routeAnswer(
  routes: RouteTable,
  resource: string,
  event: HttpEvent,
  options: EdgeOptions,
): Promise<HttpResult> {
  const methods = routes[resource];
  const route = methods?.[event.httpMethod as 'GET' | 'POST'];
  if (!methods) {
    return Promise.resolve(
      json(404, { error: 'not_found', error_description: 'no such endpoint' }, options.errorHeaders),
    );
  }
  if (!route) return Promise.resolve(methodNotAllowed(Object.keys(methods), options.errorHeaders));
  return route(event);
}

/**
 * A thrown error as an answer: a DomainError by the one mapping (lambdas/http.ts), anything else a
 * plain server_error, its details in the log only.
 */
export function failureAnswer(
  error: unknown,
  log: Logger,
  resource: string,
  event: HttpEvent,
  options: EdgeOptions,
): HttpResult {
  if (error instanceof DomainError) {
    return options.errorPage
      ? options.errorPage(error, httpStatus(error))
      : errorResult(error, options.realm ?? 'svcnum', options.errorHeaders, presentedScheme(event));
  }
  log.error('request failed', { resource, method: event.httpMethod, error: error as Error });
  return options.serverError ? options.serverError() : jsonServerError(options.errorHeaders);
}

/** The one line per request: method, route, status, duration, and a refusal's OAuth code (never more). */
export function logRequest(log: Logger, event: HttpEvent, resource: string, result: HttpResult, started: number): void {
  if (!log.enabled('INFO')) return;
  log.info('request', {
    method: event.httpMethod,
    resource,
    status: result.statusCode,
    durationMs: Math.round((performance.now() - started) * 10) / 10,
    ...(result.statusCode >= 400 &&
    result.headers?.['Content-Type'] === 'application/json' &&
    typeof result.body === 'string'
      ? { error: safeErrorCode(result.body) }
      : {}),
  });
}

export type EdgeHandler = (event: HttpEvent, context: Context) => Promise<HttpResult>;

/**
 * The route table as one Lambda handler, wrapped plainly (no middleware framework: measured by
 * bench/edge-overhead.ts, docs/decisions.md).
 */
export function edgeHandler(routes: RouteTable, options: EdgeOptions): EdgeHandler {
  // CloudWatch EMF metrics per route: requests and their outcome class (none without METRICS_NAMESPACE).
  const metrics = createRequestMetrics(DEFAULT_SERVICE);
  const base = options.logger ?? logger;
  return async (event, context) => {
    const started = performance.now();
    const log = invocationLogger(base, event, context);
    const resource = resourceOf(event);
    let result: HttpResult;
    try {
      result = await routeAnswer(routes, resource, event, options);
    } catch (error) {
      result = failureAnswer(error, log, resource, event, options);
    }
    result = withTransportSecurity(result, options.secure);
    metrics.record(resource, result.statusCode);
    logRequest(log, event, resource, result, started);
    return result;
  };
}

/** The OAuth error code of a JSON error body (a fixed word, safe to log). */
export function safeErrorCode(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    return typeof parsed.error === 'string' ? parsed.error : undefined;
  } catch {
    return undefined;
  }
}
