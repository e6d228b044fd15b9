import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { DomainError } from '../core/kernel/errors';
import { errorResult, httpStatus, json, methodNotAllowed, type HttpEvent, type HttpResult } from './http';

// The one wrapper every Lambda handler goes through: routing by resource and method, one
// structured log line per request (never a query string, body, cookie or token), and errors
// turned into safe answers: routes throw, and here a DomainError becomes its HTTP answer (the
// one mapping, lambdas/http.ts); anything else becomes a plain server_error with the details
// kept in the log.

/**
 * In AWS the stack names each function's service (POWERTOOLS_SERVICE_NAME, `svcnum-<group>`); an
 * option given here would win over it. The local runner serves every group as one service.
 */
const serviceName = process.env.POWERTOOLS_SERVICE_NAME || 'svcnum-identity';

export const logger = new Logger({ serviceName });

export type Route = (event: HttpEvent) => Promise<HttpResult>;
export type RouteTable = Record<string, Partial<Record<'GET' | 'POST', Route>>>;

export interface EdgeOptions {
  /** How an unexpected failure is shown (HTML pages answer with a page, APIs with JSON). */
  serverError?: () => HttpResult;
  /** How a refusal is shown with the status the mapping gives it; JSON (`errorResult`) by default. */
  errorPage?: (error: DomainError, status: number) => HttpResult;
  /** The realm of this route group's challenges (`WWW-Authenticate: Bearer realm="…"`). */
  realm?: string;
  /** Headers every refusal of this group carries besides (CORS on the public API). */
  errorHeaders?: Record<string, string>;
}

const jsonServerError = () => json(500, { error: 'server_error', error_description: 'the service failed; try again' });

export function edgeHandler(routes: RouteTable, options: EdgeOptions = {}) {
  // CloudWatch EMF metrics per route: requests and their outcome class. Powertools reads its own
  // POWERTOOLS_METRICS_NAMESPACE (the stack sets svcnum) and POWERTOOLS_METRICS_DISABLED (the local
  // runner sets it) when this is built, not at import.
  const metrics = new Metrics({ serviceName });
  const base = async (event: HttpEvent): Promise<HttpResult> => {
    const started = performance.now();
    const resource = event.resource ?? event.path;
    let result: HttpResult;
    try {
      const methods = routes[resource];
      const route = methods?.[event.httpMethod as 'GET' | 'POST'];
      if (!methods) result = json(404, { error: 'not_found', error_description: 'no such endpoint' });
      else if (!route) result = methodNotAllowed(Object.keys(methods));
      else result = await route(event);
    } catch (error) {
      if (error instanceof DomainError) {
        result = options.errorPage ? options.errorPage(error, httpStatus(error)) : errorResult(error, options.realm ?? 'svcnum', options.errorHeaders);
      } else {
        logger.error('request failed', { resource, method: event.httpMethod, error: error as Error });
        result = (options.serverError ?? jsonServerError)();
      }
    }
    metrics.addDimension('route', resource);
    metrics.addMetric('Requests', MetricUnit.Count, 1);
    metrics.addMetric(result.statusCode >= 500 ? 'ServerErrors' : result.statusCode >= 400 ? 'ClientErrors' : 'Successes', MetricUnit.Count, 1);
    logger.info('request', {
      method: event.httpMethod,
      resource,
      status: result.statusCode,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      ...(result.statusCode >= 400 && result.headers?.['Content-Type'] === 'application/json' && typeof result.body === 'string'
        ? { error: safeErrorCode(result.body) }
        : {}),
    });
    return result;
  };

  return middy<HttpEvent, HttpResult, Error, Context>(base)
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(logMetrics(metrics))
    .before((request) => {
      logger.appendKeys({ requestId: request.event.requestContext?.requestId });
    });
}

/** The OAuth error code of a JSON error body (a fixed word, safe to log). */
function safeErrorCode(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    return typeof parsed.error === 'string' ? parsed.error : undefined;
  } catch {
    return undefined;
  }
}
