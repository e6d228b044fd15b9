import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { HttpEvent } from '../lambdas/http';
import { startTestService, type TestService } from './support/service';

// In Lambda, every request emits CloudWatch EMF metrics (core/adapters/metrics.ts): the count and
// outcome class per route, when METRICS_NAMESPACE is set (the stack sets it; the local runner does
// not). The settings are read once per process: here a fresh module graph reads them with it set.

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service?.close());

const context = {
  functionName: 'discovery',
  awsRequestId: 'r-1',
  getRemainingTimeInMillis: () => 1000,
} as unknown as Context;
const event = (path: string): HttpEvent => ({
  resource: path,
  path,
  httpMethod: 'GET',
  headers: {},
  multiValueHeaders: {},
  queryStringParameters: null,
  multiValueQueryStringParameters: null,
  pathParameters: null,
  stageVariables: null,
  body: null,
  isBase64Encoded: false,
  requestContext: { requestId: 'r-1' } as HttpEvent['requestContext'],
});

describe('Lambda metrics', () => {
  it('emits Requests and Successes/ClientErrors per route as EMF, in the configured namespace', async () => {
    vi.stubEnv('METRICS_NAMESPACE', 'svcnum-test');
    vi.resetModules();
    const { createDiscoveryHandler } = await import('../lambdas/discovery');
    const lines: string[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    const consoleLog = vi.spyOn(console, 'log').mockImplementation((...parts) => {
      lines.push(parts.map(String).join(' '));
    });
    try {
      const handler = createDiscoveryHandler(service.core);
      expect((await handler(event('/.well-known/jwks.json'), context)).statusCode).toBe(200);
      expect((await handler(event('/nowhere'), context)).statusCode).toBe(404);
    } finally {
      write.mockRestore();
      consoleLog.mockRestore();
      vi.unstubAllEnvs();
      vi.resetModules();
    }
    const emf = lines
      .flatMap((line) => line.split('\n'))
      .filter((line) => line.includes('"_aws"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(emf).toHaveLength(2);
    const [ok, missing] = emf;
    expect(ok).toMatchObject({
      route: '/.well-known/jwks.json',
      Requests: 1,
      Successes: 1,
      service: 'svcnum-identity',
    });
    expect(missing).toMatchObject({ route: '/nowhere', Requests: 1, ClientErrors: 1 });
    const directive = (ok!._aws as { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][] }> })
      .CloudWatchMetrics[0]!;
    expect(directive.Namespace).toBe('svcnum-test');
    expect(directive.Dimensions.flat()).toContain('route');
    // The dimensions the deployed metrics have always had (service, route): dashboards and alarms keep working.
    expect(directive.Dimensions).toEqual([['service', 'route']]);
    expect(
      (missing!._aws as { CloudWatchMetrics: Array<{ Metrics: unknown[] }> }).CloudWatchMetrics[0]!.Metrics,
    ).toEqual([
      { Name: 'Requests', Unit: 'Count' },
      { Name: 'ClientErrors', Unit: 'Count' },
    ]);
  });
});
