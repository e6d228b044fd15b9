// What the Lambda edge (lambdas/edge.ts) costs per request, in process (issue 25, item 5): the
// same token request through
//   route alone        the route function, nothing around it (the floor)
//   plain edge         edgeHandler: request log, metrics, error mapping, security headers, plainly wrapped
//   middy, bare        the plain edge inside @middy/core with no middleware (what the edge was before)
//   middy middlewares  the same work as @middy/core middlewares (the shape docs/decisions.md once named):
//                      header normalisation and the invocation logger `before`, security headers,
//                      metrics and the request log `after`, error mapping `onError`; also without
//                      middy's early-timeout timer (timeoutEarlyInMillis 0)
// Each on an answered request (200) and a refused one (a DomainError mapped to 401), at LOG_LEVEL
// SILENT and INFO (the line is built and handed to a stdout that drops it: the write itself is the
// terminal's or CloudWatch's, the same for all). Every variant's answers are checked equal first.
// CPU time per call (process.cpuUsage), not wall time. Rounds interleave the variants (a busy
// moment weighs on all); the fastest and the median round are reported, edge overhead = variant −
// route alone. Beside it: the bytes of @middy/core in the token group's Lambda bundle (none since
// the edge wraps plainly; 2,605 of 295,168 bytes before).
//
// Writes bench/results/edge-overhead.json. `BENCH_ONLY=edge-overhead npm run bench`, or
// `npx tsx bench/edge-overhead.ts`. BENCH_EDGE_CALLS (default 20000) calls per variant per round,
// BENCH_EDGE_ROUNDS (default 9).

import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { createLogger, type Logger } from '../core/adapters/log';
import { createRequestMetrics } from '../core/adapters/metrics';
import { oauthError } from '../core/kernel/errors';
import {
  edgeHandler,
  failureAnswer,
  invocationLogger,
  logRequest,
  resourceOf,
  routeAnswer,
  type EdgeHandler,
  type EdgeOptions,
  type RouteTable,
} from '../lambdas/edge';
import { formParams, header, json, withTransportSecurity, type HttpEvent, type HttpResult } from '../lambdas/http';
import { buildLambdaBundle } from '../lib/build-lambda';
import { fmt, machine, numberFromEnv, table, writeJson } from './report';
import { benchLog, runAsScript } from './cleanup';

const RESULT_FILE = fileURLToPath(new URL('./results/edge-overhead.json', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A client_credentials request as API Gateway hands it over (fresh objects each call, as each request has). */
function tokenEvent(secret: string): HttpEvent {
  const headers = {
    Host: 'localhost:3000',
    'Content-Type': 'application/x-www-form-urlencoded',
    'Content-Length': '45',
    Authorization: `Basic ${Buffer.from(`bench-client:${secret}`).toString('base64')}`,
    Connection: 'keep-alive',
  };
  return {
    resource: '/oauth/token',
    path: '/oauth/token',
    httpMethod: 'POST',
    headers,
    multiValueHeaders: Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, [value]])),
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    body: 'grant_type=client_credentials&scope=messaging',
    isBase64Encoded: false,
    requestContext: { requestId: 'bench', identity: { sourceIp: '127.0.0.1' } } as HttpEvent['requestContext'],
  };
}

const context = {
  callbackWaitsForEmptyEventLoop: false,
  functionName: 'bench-token',
  functionVersion: '$LATEST',
  memoryLimitInMB: '512',
  invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:bench-token',
  awsRequestId: 'bench',
  logGroupName: '/aws/lambda/bench-token',
  logStreamName: 'bench',
  getRemainingTimeInMillis: () => 30_000,
  done: () => undefined,
  fail: () => undefined,
  succeed: () => undefined,
} satisfies Context;

/** The token route's own work, short of the grant: read the form and the Basic credentials, answer JSON. */
const routes: RouteTable = {
  '/oauth/token': {
    POST: async (event) => {
      const form = formParams(event);
      if (header(event, 'authorization')?.endsWith('Og=='))
        throw oauthError('invalid_client', 'client authentication failed');
      return json(200, { access_token: 'a.b.c', token_type: 'Bearer', expires_in: 300, scope: form.get('scope') });
    },
  },
};

type Request = {
  event: HttpEvent;
  context: Context;
  response: HttpResult | undefined;
  error: unknown;
  internal: Record<string, unknown>;
};

/** The edge's work as middy middlewares, each piece the plain edge's own function. */
function middyMiddlewares(options: EdgeOptions & { logger: Logger }, timeoutEarlyInMillis?: number): EdgeHandler {
  const metrics = createRequestMetrics('svcnum-identity');
  const state = new WeakMap<Request, { log: Logger; resource: string; started: number }>();
  const edge: MiddlewareObj<HttpEvent, HttpResult, Error, Context> = {
    before: (request) => {
      header(request.event, 'host'); // header normalisation: the lower-cased map, built once per event
      state.set(request as Request, {
        log: invocationLogger(options.logger, request.event, request.context),
        resource: resourceOf(request.event),
        started: performance.now(),
      });
    },
    after: (request) => {
      const { log, resource, started } = state.get(request as Request)!;
      request.response = withTransportSecurity(request.response!, options.secure);
      metrics.record(resource, request.response.statusCode);
      logRequest(log, request.event, resource, request.response, started);
    },
    onError: (request) => {
      const { log, resource, started } = state.get(request as Request)!;
      request.response = withTransportSecurity(
        failureAnswer(request.error, log, resource, request.event, options),
        options.secure,
      );
      metrics.record(resource, request.response.statusCode);
      logRequest(log, request.event, resource, request.response, started);
    },
  };
  const handler = middy<HttpEvent, HttpResult, Error, Context>(
    (event: HttpEvent) => routeAnswer(routes, resourceOf(event), event, options),
    timeoutEarlyInMillis === undefined ? undefined : { timeoutEarlyInMillis },
  );
  return handler.use(edge) as unknown as EdgeHandler;
}

function variants(logger: Logger): Record<string, EdgeHandler> {
  const options = { secure: false, realm: 'oauth', logger };
  const plain = edgeHandler(routes, options);
  return {
    'route alone': (event) =>
      routeAnswer(routes, '/oauth/token', event, options).catch((error: unknown) =>
        failureAnswer(error, logger, '', event, options),
      ),
    'plain edge': plain,
    'middy, bare': middy<HttpEvent, HttpResult, Error, Context>(plain) as unknown as EdgeHandler,
    'middy middlewares': middyMiddlewares(options),
    // Without middy's per-invocation timer (a setTimeout that ends the handler 5 ms before Lambda would).
    'middy middlewares, no timer': middyMiddlewares(options, 0),
  };
}

/**
 * CPU µs per call of `calls` sequential calls (process.cpuUsage: this process does nothing else
 * meanwhile). CPU time, not wall time: on a machine shared with others, waiting for a core is not the edge's cost.
 */
async function timeCalls(handler: EdgeHandler, secret: string, calls: number): Promise<number> {
  const started = process.cpuUsage();
  for (let index = 0; index < calls; index++) await handler(tokenEvent(secret), context);
  const used = process.cpuUsage(started);
  return (used.user + used.system) / calls;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Median µs per call by variant, for one log level and one outcome; answers checked equal first. */
async function measure(level: 'SILENT' | 'INFO', secret: string, calls: number, rounds: number) {
  const logger = createLogger('svcnum-identity', { logLevel: level });
  const handlers = variants(logger);
  const answers = await Promise.all(
    Object.values(handlers).map(async (handler) => JSON.stringify(await handler(tokenEvent(secret), context))),
  );
  if (new Set(answers).size !== 1) throw new Error(`the edge variants answer differently: ${answers.join('\n')}`);
  // One unmeasured round first (JIT); then the order turns each round, so none is always first.
  for (const handler of Object.values(handlers)) await timeCalls(handler, secret, calls);
  const entries = Object.entries(handlers);
  const times: Record<string, number[]> = Object.fromEntries(entries.map(([name]) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (let at = 0; at < entries.length; at++) {
      const [name, handler] = entries[(at + round) % entries.length]!;
      times[name]!.push(await timeCalls(handler, secret, calls));
    }
  }
  const round2 = (value: number) => Math.round(value * 100) / 100;
  return {
    median: Object.fromEntries(Object.entries(times).map(([name, list]) => [name, round2(median(list))])),
    // The least disturbed round: on a shared machine, other work only ever adds time.
    fastest: Object.fromEntries(Object.entries(times).map(([name, list]) => [name, round2(Math.min(...list))])),
  };
}

/** Bytes of @middy/core in the token group's Lambda bundle as the stack builds it (0 when it is not used). */
async function middyBundleBytes(): Promise<{ bundleBytes: number; middyBytes: number }> {
  const outdir = join(tmpdir(), `svcnum-edge-bundle-${process.pid}`);
  try {
    const { outfile, metafile } = await buildLambdaBundle(join(ROOT, 'lambdas/token.ts'), outdir);
    const output = Object.entries(metafile.outputs).find(
      ([path]) => join(ROOT, path) === outfile || outfile.endsWith(path),
    )![1];
    const middyBytes = Object.entries(output.inputs)
      .filter(([path]) => path.includes('node_modules/@middy/'))
      .reduce((sum, [, input]) => sum + input.bytesInOutput, 0);
    return { bundleBytes: output.bytes, middyBytes };
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}

export async function edgeOverheadBenchmark(
  settings: { calls: number; rounds: number },
  log: (message: string) => void,
) {
  // Request lines go to a stdout that drops them while measuring: building them is the edge's cost.
  const write = process.stdout.write.bind(process.stdout);
  const results: Record<string, Record<'median' | 'fastest', Record<string, number>>> = {};
  try {
    for (const level of ['SILENT', 'INFO'] as const) {
      for (const [outcome, secret] of [
        ['answered (200)', 'secret'],
        ['refused (401)', ''],
      ] as const) {
        log(
          `edge overhead: LOG_LEVEL ${level}, ${outcome},` +
            ` ${settings.rounds} rounds × ${settings.calls} calls per variant`,
        );
        process.stdout.write = (() => true) as typeof process.stdout.write;
        results[`${level}, ${outcome}`] = await measure(level, secret, settings.calls, settings.rounds);
        process.stdout.write = write;
      }
    }
  } finally {
    process.stdout.write = write;
  }
  const bundle = await middyBundleBytes();
  const result = {
    benchmark: 'edge-overhead',
    date: new Date().toISOString(),
    ...machine(),
    settings,
    microsPerCall: results,
    tokenBundle: bundle,
  };
  await writeJson(RESULT_FILE, result);
  const names = Object.keys(Object.values(results)[0]!.median);
  const rows = Object.entries(results).flatMap(([name, byStatistic]) =>
    (['fastest', 'median'] as const).map((statistic) => {
      const row = byStatistic[statistic];
      return [
        `${name}, ${statistic}`,
        ...names.map((variant) => fmt(row[variant]!, 2)),
        ...names.slice(1).map((variant) => fmt(row[variant]! - row['route alone']!, 2)),
      ];
    }),
  );
  const report = [
    '',
    `The Lambda edge per request, in process, CPU µs per call (${settings.rounds} rounds` +
      ` × ${settings.calls} sequential calls; fastest and median round), ${result.date}`,
    table(['case', ...names.map((name) => `${name} µs`), ...names.slice(1).map((name) => `${name} overhead µs`)], rows),
    `  token Lambda bundle: ${fmt(bundle.bundleBytes)} bytes, of which @middy/core ${fmt(bundle.middyBytes)}`,
    '',
    `Written to ${RESULT_FILE}`,
    '',
  ].join('\n');
  return { result, report };
}

export const edgeOverheadSettingsFromEnv = () => ({
  calls: numberFromEnv('BENCH_EDGE_CALLS', 20_000, { integer: true }),
  rounds: numberFromEnv('BENCH_EDGE_ROUNDS', 9, { integer: true }),
});

await runAsScript(import.meta.url, async () => {
  process.stdout.write((await edgeOverheadBenchmark(edgeOverheadSettingsFromEnv(), benchLog)).report);
});
