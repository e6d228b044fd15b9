import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreFaults } from './support/faults';
import { launchChromium, openTab } from './support/chromium';
import { startTestService, type TestService } from './support/service';

// A page of another origin reads the public endpoints and discovery with fetch in a real Chromium:
// what it may read is decided by the browser's CORS check, not by this test. A page's fetch of an
// answer without Access-Control-Allow-Origin fails (TypeError) and the page sees no status at all.

describe('public endpoints read by a page of another origin', () => {
  const faults = new StoreFaults();
  let service: TestService;
  let chromium: Browser;
  let pageServer: Server;
  let pageOrigin: string;

  beforeAll(async () => {
    pageServer = createServer((_request, response) => {
      response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      response.end(
        '<!doctype html><html lang="en"><head><title>Directory app</title><link rel="icon" href="data:,"></head><body></body></html>',
      );
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    [service, chromium] = await Promise.all([
      startTestService({ wrapStore: faults.wrap, publicRateLimit: { burst: 50, perMinute: 600 } }),
      launchChromium(),
    ]);
  });
  afterAll(async () => {
    await chromium?.close();
    await new Promise((resolve) => pageServer?.close(resolve));
    await service?.close();
  });

  it('reads every answer, refusals and failures included; an endpoint not meant for pages stays unreadable', async () => {
    const { context, page } = await openTab(chromium);
    try {
      await page.goto(`${pageOrigin}/`);
      const api = `http://127.0.0.1:${service.port}`;
      expect(new URL(api).origin).not.toBe(pageOrigin);
      const read = (method: string, path: string) =>
        page.evaluate(
          async (url, init) => {
            try {
              const response = await fetch(url, init);
              const body = (await response.json()) as { error?: string };
              return `${response.status} ${body.error ?? 'ok'}`;
            } catch (error) {
              return `unreadable (${(error as Error).name})`;
            }
          },
          `${api}${path}`,
          { method },
        );

      faults.failOn('getNumber');
      const failed = await read('GET', '/api/resolve?alias=%2B1%20555%20010%200000');
      expect(faults.fired).toEqual(['getNumber#1']);
      faults.reset();

      expect({
        failed,
        malformed: await read('GET', '/api/resolve?alias=ab'),
        unknown: await read('GET', '/api/resolve?alias=nobody.here'),
        wrongMethod: await read('POST', '/api/resolve?alias=nobody.here'),
        discovery: await read('GET', '/.well-known/openid-configuration'),
        keys: await read('GET', '/.well-known/jwks.json'),
        keysWrongMethod: await read('POST', '/.well-known/jwks.json'),
        // The control: UserInfo answers pages of no other origin, so the browser hides its 401.
        userinfo: await read('GET', '/oauth/userinfo'),
      }).toEqual({
        failed: '500 server_error',
        malformed: '400 invalid_request',
        unknown: '404 not_found',
        wrongMethod: '405 invalid_request',
        discovery: '200 ok',
        keys: '200 ok',
        keysWrongMethod: '405 invalid_request',
        userinfo: 'unreadable (TypeError)',
      });
    } finally {
      await context.close();
    }
  });
});
