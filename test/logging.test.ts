import type { Context } from 'aws-lambda';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../core/adapters/log';
import { readTelemetrySettings, type TelemetrySettings } from '../core/adapters/runtime-config';
import type { HttpEvent, HttpResult } from '../lambdas/http';
import { capturedStdout } from './support/stdout';

// core/adapters/log.ts: one JSON line per call on stdout, levels, errors as JSON, settings read
// once per process (LOG_LEVEL, SERVICE_NAME, METRICS_NAMESPACE; a bad level never stops anything).
// Then the Lambda edge (lambdas/edge.ts) as it runs: its keys per invocation, its cold start, and
// nothing of what a request carries (Authorization, cookies, password, code) in any line.

/** Every line written to stdout while `run` runs, parsed. */
async function linesOf(run: () => unknown): Promise<Array<Record<string, unknown>>> {
  const text = await capturedStdout(run);
  if (text !== '') expect(text.endsWith('\n'), 'every line ends with a newline').toBe(true);
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const at = (logLevel: TelemetrySettings['logLevel'], more: Partial<TelemetrySettings> = {}): TelemetrySettings => ({
  logLevel,
  ...more,
});

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

describe('settings (core/adapters/runtime-config.ts readTelemetrySettings)', () => {
  it('INFO by default; any case of a level; SERVICE_NAME and METRICS_NAMESPACE when set, blank as unset', () => {
    expect(readTelemetrySettings({})).toEqual({ logLevel: 'INFO' });
    expect(
      readTelemetrySettings({ LOG_LEVEL: ' silent ', SERVICE_NAME: 'svcnum-token', METRICS_NAMESPACE: 'svcnum' }),
    ).toEqual({ logLevel: 'SILENT', serviceName: 'svcnum-token', metricsNamespace: 'svcnum' });
    expect(readTelemetrySettings({ LOG_LEVEL: '', SERVICE_NAME: ' ', METRICS_NAMESPACE: '' })).toEqual({
      logLevel: 'INFO',
    });
    for (const level of ['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT'] as const)
      expect(readTelemetrySettings({ LOG_LEVEL: level }).logLevel).toBe(level);
  });

  it('an unknown level is INFO, and the first line says so once (a process never stops over its log level)', async () => {
    const settings = readTelemetrySettings({ LOG_LEVEL: 'verbose' });
    expect(settings).toEqual({
      logLevel: 'INFO',
      problem: "LOG_LEVEL must be one of DEBUG, INFO, WARN, ERROR, SILENT, got 'verbose'; logging at INFO",
    });
    const lines = await linesOf(() => {
      createLogger('svc', settings).info('first');
      createLogger('svc', settings).info('second');
    });
    expect(lines.map((line) => [line.level, line.message])).toEqual([
      ['WARN', settings.problem],
      ['INFO', 'first'],
      ['INFO', 'second'],
    ]);
  });
});

describe('a logger', () => {
  it('writes level, message, ISO timestamp and service first, then its keys, then the fields; those four are never replaced', async () => {
    const [line] = await linesOf(() =>
      createLogger('svc', at('INFO'))
        .child({ requestId: 'r-1' })
        .info('request', { status: 200, level: 'DEBUG', service: 'other' }),
    );
    expect(Object.keys(line!)).toEqual(['level', 'message', 'timestamp', 'service', 'requestId', 'status']);
    expect(line).toEqual({
      level: 'INFO',
      message: 'request',
      timestamp: expect.any(String),
      service: 'svc',
      requestId: 'r-1',
      status: 200,
    });
    expect(new Date(line!.timestamp as string).toISOString()).toBe(line!.timestamp);
  });

  it('SERVICE_NAME names the service of every logger instead of its default', async () => {
    const lines = await linesOf(() =>
      createLogger('svcnum-identity', at('INFO', { serviceName: 'svcnum-token' })).info('x'),
    );
    expect(lines[0]!.service).toBe('svcnum-token');
  });

  it('writes the levels at and above its own; SILENT writes nothing, and a disabled level does not even read its fields', async () => {
    const calls = (logger: ReturnType<typeof createLogger>) => {
      logger.debug('d');
      logger.info('i');
      logger.warn('w');
      logger.error('e');
    };
    const written = async (level: TelemetrySettings['logLevel']) =>
      (await linesOf(() => calls(createLogger('svc', at(level))))).map((line) => line.level);
    expect(await written('DEBUG')).toEqual(['DEBUG', 'INFO', 'WARN', 'ERROR']);
    expect(await written('INFO')).toEqual(['INFO', 'WARN', 'ERROR']);
    expect(await written('WARN')).toEqual(['WARN', 'ERROR']);
    expect(await written('ERROR')).toEqual(['ERROR']);
    expect(await written('SILENT')).toEqual([]);

    let reads = 0;
    const fields = {
      get costly() {
        reads++;
        return 'value';
      },
    };
    const silent = createLogger('svc', at('SILENT'));
    const info = createLogger('svc', at('INFO'));
    expect(
      await linesOf(() => {
        silent.error('e', fields);
        silent.child({ requestId: 'r' }).error('e', fields);
        info.debug('d', fields);
      }),
    ).toEqual([]);
    expect(reads).toBe(0);
    expect([silent.enabled('ERROR'), info.enabled('DEBUG'), info.enabled('INFO')]).toEqual([false, false, true]);
  });

  it('writes an error field as name, message and stack, with its causes', async () => {
    const root = new TypeError('socket closed');
    const error = Object.assign(new Error('store failed', { cause: root }), { name: 'StoreError' });
    const [line] = await linesOf(() =>
      createLogger('svc', at('INFO')).error('request failed', { resource: '/x', error }),
    );
    expect(line!.error).toEqual({
      name: 'StoreError',
      message: 'store failed',
      stack: error.stack,
      cause: { name: 'TypeError', message: 'socket closed', stack: root.stack },
    });
    expect(line!.resource).toBe('/x');
    const [plain] = await linesOf(() => createLogger('svc', at('INFO')).error('x', { error: 'a code' }));
    expect(plain!.error).toBe('a code');
  });

  it('never throws over its fields: a cycle still gives a line saying what happened', async () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const lines = await linesOf(() =>
      createLogger('svc', at('INFO')).child({ requestId: 'r-1' }).warn('odd', { cycle }),
    );
    expect(lines).toEqual([
      {
        level: 'WARN',
        message: 'odd',
        timestamp: expect.any(String),
        service: 'svc',
        logError: 'the fields could not be serialized',
      },
    ]);
  });

  it("a child adds its keys to its parent's; the parent keeps its own", async () => {
    const parent = createLogger('svc', at('INFO')).child({ a: 1 });
    const lines = await linesOf(() => {
      parent.child({ b: 2 }).info('child');
      parent.info('parent');
    });
    expect(lines.map(({ a, b }) => ({ a, b }))).toEqual([
      { a: 1, b: 2 },
      { a: 1, b: undefined },
    ]);
  });
});

describe('the Lambda edge (lambdas/edge.ts)', () => {
  const secrets = {
    bearer: 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJzZWNyZXQtc3ViamVjdCJ9.c2lnbmF0dXJlLXNlY3JldA',
    cookie: 'session-cookie-secret-4f1d9a',
    password: 'correct-horse-battery-staple-77',
    code: 'authorization-code-secret-0c2b',
    basic: Buffer.from('client-id:client-secret-9a8b7c').toString('base64'),
  };
  const context = (awsRequestId: string) =>
    ({
      functionName: 'svcnum-sandbox-token',
      awsRequestId,
      invokedFunctionArn: 'arn:aws:lambda:eu-central-1:111122223333:function:svcnum-sandbox-token',
      memoryLimitInMB: '512',
      functionVersion: '$LATEST',
      getRemainingTimeInMillis: () => 1000,
    }) as unknown as Context;
  const event = (resource: string, requestId: string, httpMethod = 'POST'): HttpEvent => ({
    resource,
    path: resource,
    httpMethod,
    headers: {
      Authorization: `Bearer ${secrets.bearer}`,
      Cookie: `__Host-session=${secrets.cookie}`,
      'Content-Type': 'application/x-www-form-urlencoded',
    },
    multiValueHeaders: { Authorization: [`Basic ${secrets.basic}`], Cookie: [`__Host-session=${secrets.cookie}`] },
    queryStringParameters: { code: secrets.code },
    multiValueQueryStringParameters: { code: [secrets.code] },
    pathParameters: null,
    stageVariables: null,
    isBase64Encoded: false,
    body: `username=someone%40example.com&password=${secrets.password}&code=${secrets.code}`,
    requestContext: { requestId } as HttpEvent['requestContext'],
  });

  /** The edge in a fresh module graph: its settings (read once per process) from `env`. */
  async function freshEdge(env: Record<string, string>) {
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    vi.resetModules();
    const { edgeHandler } = await import('../lambdas/edge');
    const { DomainError } = await import('../core/kernel/errors');
    return { edgeHandler, DomainError };
  }

  it('logs one line per request with its ids, cold_start only on the first, keys reset per invocation, never a credential or form field', async () => {
    const { edgeHandler, DomainError } = await freshEdge({
      LOG_LEVEL: 'DEBUG',
      SERVICE_NAME: 'svcnum-token',
      METRICS_NAMESPACE: 'svcnum',
    });
    const ok = async (): Promise<HttpResult> => ({
      statusCode: 200,
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });
    const handler = edgeHandler(
      {
        '/ok': { POST: ok },
        '/refused': {
          POST: async () => {
            throw new DomainError('unauthenticated', 'the token is not valid', {
              oauth: 'invalid_token',
              challenge: 'Bearer',
            });
          },
        },
        '/boom': {
          POST: async () => {
            throw new Error('the store failed');
          },
        },
      },
      { secure: false },
    );
    const lines = await linesOf(async () => {
      vi.stubEnv('_X_AMZN_TRACE_ID', 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1');
      expect((await handler(event('/ok', 'api-1'), context('fn-1'))).statusCode).toBe(200);
      delete process.env._X_AMZN_TRACE_ID;
      expect((await handler(event('/refused', 'api-2'), context('fn-2'))).statusCode).toBe(401);
      expect((await handler(event('/boom', 'api-3'), context('fn-3'))).statusCode).toBe(500);
      expect((await handler(event('/ok', 'api-4', 'GET'), context('fn-4'))).statusCode).toBe(405);
    });
    const text = JSON.stringify(lines);
    for (const [name, value] of Object.entries(secrets))
      expect(text.includes(value), `${name} appears in the log`).toBe(false);
    expect(text).not.toMatch(/password|Cookie|Authorization|username/i);

    const requests = lines.filter((line) => line.message === 'request');
    expect(
      requests.map(({ requestId, function_request_id, status, error, cold_start }) => ({
        requestId,
        function_request_id,
        status,
        error,
        cold_start,
      })),
    ).toEqual([
      { requestId: 'api-1', function_request_id: 'fn-1', status: 200, error: undefined, cold_start: true },
      { requestId: 'api-2', function_request_id: 'fn-2', status: 401, error: 'invalid_token', cold_start: false },
      { requestId: 'api-3', function_request_id: 'fn-3', status: 500, error: 'server_error', cold_start: false },
      { requestId: 'api-4', function_request_id: 'fn-4', status: 405, error: expect.any(String), cold_start: false },
    ]);
    expect(requests[0]).toMatchObject({
      level: 'INFO',
      service: 'svcnum-token',
      function_name: 'svcnum-sandbox-token',
      function_memory_size: '512',
      function_arn: 'arn:aws:lambda:eu-central-1:111122223333:function:svcnum-sandbox-token',
      xray_trace_id: '1-5759e988-bd862e3fe1be46a994272793',
      method: 'POST',
      resource: '/ok',
      durationMs: expect.any(Number),
    });
    // The trace id was the first invocation's only: nothing carries over to the next.
    expect(requests.slice(1).map((line) => 'xray_trace_id' in line)).toEqual([false, false, false]);

    const failure = lines.find((line) => line.message === 'request failed');
    expect(failure).toMatchObject({
      level: 'ERROR',
      requestId: 'api-3',
      function_request_id: 'fn-3',
      resource: '/boom',
      error: { name: 'Error', message: 'the store failed' },
    });
    // One EMF line per request besides, in the namespace and under the service of the settings.
    const metrics = lines.filter((line) => '_aws' in line);
    expect(metrics.map(({ service, route }) => ({ service, route }))).toEqual(
      ['/ok', '/refused', '/boom', '/ok'].map((route) => ({ service: 'svcnum-token', route })),
    );
    expect(lines).toHaveLength(requests.length + metrics.length + 1);
  });

  it('requests served at once (the local runner) keep their own ids', async () => {
    const { edgeHandler } = await freshEdge({ LOG_LEVEL: 'INFO' });
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const answer = (): HttpResult => ({ statusCode: 200, headers: {}, body: '' });
    const handler = edgeHandler(
      {
        '/slow': {
          POST: async () => {
            await held;
            return answer();
          },
        },
        '/ok': { POST: async () => answer() },
      },
      { secure: false },
    );
    const lines = await linesOf(async () => {
      const slow = handler(event('/slow', 'api-slow'), context('fn-slow'));
      await handler(event('/ok', 'api-fast'), context('fn-fast'));
      release();
      await slow;
    });
    expect(
      lines.map(({ resource, requestId, function_request_id }) => ({ resource, requestId, function_request_id })),
    ).toEqual([
      { resource: '/ok', requestId: 'api-fast', function_request_id: 'fn-fast' },
      { resource: '/slow', requestId: 'api-slow', function_request_id: 'fn-slow' },
    ]);
  });

  it('SILENT and no METRICS_NAMESPACE (tests, bench, local runner): nothing at all on stdout', async () => {
    const { edgeHandler } = await freshEdge({ LOG_LEVEL: 'SILENT' });
    const handler = edgeHandler(
      {
        '/boom': {
          POST: async () => {
            throw new Error('the store failed');
          },
        },
      },
      { secure: false },
    );
    expect(
      await linesOf(async () => {
        expect((await handler(event('/boom', 'api-1'), context('fn-1'))).statusCode).toBe(500);
        expect((await handler(event('/nowhere', 'api-2'), context('fn-2'))).statusCode).toBe(404);
      }),
    ).toEqual([]);
  });
});
