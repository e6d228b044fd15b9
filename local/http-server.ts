import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context } from 'aws-lambda';
import type { HttpEvent, HttpResult } from '../lambdas/http';
import { logger } from '../lambdas/edge';
import { listenOrExplain } from './start-errors';

// Serves Lambda handlers over plain HTTP by building the API Gateway REST proxy event that AWS
// would send (resource, multi-value query and headers, body, requestContext) and writing the
// proxy result back. The handlers cannot tell the difference.

export type LambdaHandler = (event: HttpEvent, context: Context) => Promise<HttpResult>;

export interface LocalRoute {
  handler: LambdaHandler;
  functionName: string;
}

/** Requests larger than this are refused by the runner itself, as API Gateway would (10 MB there). */
const MAX_REQUEST_BYTES = 1024 * 1024;

/** Extra non-Lambda routes of the local runner (the demo client). */
export type LocalExtra = (request: IncomingMessage, url: URL, response: ServerResponse) => Promise<boolean>;

function readBody(request: IncomingMessage): Promise<Buffer | undefined> {
  // Listeners rather than `for await`: one promise per request, not one per chunk.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Past the limit the rest is read and dropped, so the client still gets its 413.
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_REQUEST_BYTES) chunks.push(chunk);
    });
    request.on('end', () =>
      resolve(size > MAX_REQUEST_BYTES ? undefined : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)),
    );
    request.on('error', reject);
  });
}

function lambdaContext(functionName: string, requestId: string): Context {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => 30_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/**
 * A map keyed by what the client sent: no prototype, so `constructor`, `toString` or `__proto__`
 * are names like any other (as in the JSON that API Gateway hands a Lambda).
 */
const clientKeyed = <Value>(): Record<string, Value> => Object.create(null) as Record<string, Value>;

export function buildEvent(request: IncomingMessage, url: URL, body: Buffer, requestId: string): HttpEvent {
  const headers = clientKeyed<string>();
  const multiValueHeaders = clientKeyed<string[]>();
  for (let index = 0; index < request.rawHeaders.length; index += 2) {
    const name = request.rawHeaders[index]!;
    const value = request.rawHeaders[index + 1]!;
    headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
    multiValueHeaders[name] ??= [];
    multiValueHeaders[name].push(value);
  }
  const query = clientKeyed<string>();
  const multiQuery = clientKeyed<string[]>();
  for (const [name, value] of url.searchParams) {
    query[name] = value;
    multiQuery[name] ??= [];
    multiQuery[name].push(value);
  }
  const hasQuery = Object.keys(query).length > 0;
  const isText =
    body.length === 0 ||
    /^(text\/|application\/(x-www-form-urlencoded|json))/i.test(request.headers['content-type'] ?? '');
  return {
    resource: url.pathname,
    path: url.pathname,
    httpMethod: request.method ?? 'GET',
    headers,
    multiValueHeaders,
    queryStringParameters: hasQuery ? query : null,
    multiValueQueryStringParameters: hasQuery ? multiQuery : null,
    pathParameters: null,
    stageVariables: null,
    body: body.length === 0 ? null : isText ? body.toString('utf8') : body.toString('base64'),
    isBase64Encoded: body.length > 0 && !isText,
    requestContext: {
      requestId,
      resourcePath: url.pathname,
      path: url.pathname,
      httpMethod: request.method ?? 'GET',
      stage: 'local',
      identity: { sourceIp: request.socket.remoteAddress ?? '127.0.0.1' },
    } as HttpEvent['requestContext'],
  };
}

function writeResult(response: ServerResponse, result: HttpResult) {
  // One writeHead with a flat [name, value, …] list: what setHeader per header would do, at a
  // fraction of the cost (no per-call validation and header-object bookkeeping).
  // A name in both maps takes multiValueHeaders' values only, as API Gateway merges them.
  const multiNames = new Set(Object.keys(result.multiValueHeaders ?? {}).map((name) => name.toLowerCase()));
  const headers: string[] = [];
  for (const [name, value] of Object.entries(result.headers ?? {}))
    if (!multiNames.has(name.toLowerCase())) headers.push(name, String(value));
  for (const [name, values] of Object.entries(result.multiValueHeaders ?? {}))
    for (const value of values) headers.push(name, String(value));
  const body = result.isBase64Encoded ? Buffer.from(result.body, 'base64') : (result.body ?? '');
  // Given, since writeHead sends the head before the body is known (else it would be chunked);
  // never on answers that have no body by definition (RFC 9110 §8.6).
  const bodiless = result.statusCode < 200 || result.statusCode === 204 || result.statusCode === 304;
  if (!bodiless) headers.push('Content-Length', String(Buffer.byteLength(body)));
  response.writeHead(result.statusCode, headers);
  response.end(body);
}

/**
 * The runner's own answers (no route, too large, its own failure), as API Gateway's own would
 * be: JSON, never cached, never sniffed as something else.
 */
const runnerAnswer = (
  statusCode: number,
  error: string,
  description: string,
  extra: Record<string, string> = {},
): HttpResult => ({
  statusCode,
  headers: {
    'Content-Type': 'application/json',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    ...extra,
  },
  body: JSON.stringify({ error, error_description: description }),
});

/** The path alone: a query string may carry codes or tokens, which never go to a log. */
const safePath = (target = '/') => target.split('?')[0]!.slice(0, 200);

/** A started server: `close()` stops listening and drops open keep-alive connections, resolving once closed. */
export interface RunningHttpServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

export async function startHttpServer(
  routes: Map<string, LocalRoute>,
  listen: { port: number; host: string },
  extra?: LocalExtra,
): Promise<RunningHttpServer> {
  const server = createServer(async (request, response) => {
    const requestId = randomUUID();
    try {
      const url = new URL(request.url ?? '/', 'http://localhost');
      if (extra && (await extra(request, url, response))) return;
      const route = routes.get(url.pathname);
      if (!route) {
        writeResult(response, runnerAnswer(404, 'not_found', 'no such endpoint'));
        return;
      }
      const body = await readBody(request);
      if (!body) {
        writeResult(
          response,
          runnerAnswer(413, 'invalid_request', 'the request body is too large', { Connection: 'close' }),
        );
        return;
      }
      writeResult(
        response,
        await route.handler(buildEvent(request, url, body, requestId), lambdaContext(route.functionName, requestId)),
      );
    } catch (error) {
      // The Lambda wrapper (lambdas/edge.ts) answers and logs its own failures; this is the runner's.
      logger.error('local request failed', {
        requestId,
        method: request.method,
        path: safePath(request.url),
        error: error as Error,
      });
      if (!response.headersSent)
        writeResult(response, runnerAnswer(500, 'server_error', 'the service failed; try again'));
      else response.destroy();
    }
  });
  server.keepAliveTimeout = 5_000;
  await listenOrExplain(server, listen.port, listen.host, 'PORT');
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return { server, port: (server.address() as AddressInfo).port, close };
}
