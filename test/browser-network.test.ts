import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocal, type LocalService } from '../local/runner';
import { button, clickAndWait, launchChromium, openTab, signInOnPage, watchFormPosts } from './support/chromium';

// The service opened to a network (HOST plus ISSUER on the machine's own address, plain http), as
// someone trying it from another device would meet it. Browsers send no Fetch Metadata
// (`Sec-Fetch-Site`) to such an origin: it is not potentially trustworthy. So here the form
// check rests on `Origin`, which `Referrer-Policy: same-origin` makes our real one.

const address = Object.values(networkInterfaces())
  .flat()
  .find((candidate) => candidate?.family === 'IPv4' && !candidate.internal)?.address;

/** A port free on `host` now (the issuer must name it before the service listens). */
async function freePort(host: string): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, host, resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Why the test cannot run here, if it cannot: it needs an address other machines could reach. */
const NO_ADDRESS = address === undefined ? 'this machine has no external IPv4 address (only loopback)' : undefined;

describe('pages over plain http on a network address', () => {
  let service: LocalService;
  let dataDir: string;
  let chromium: Browser;
  let attacker: Server;
  let attackerOrigin: string;

  beforeAll(async () => {
    if (NO_ADDRESS) return;
    dataDir = await mkdtemp(join(tmpdir(), 'svcnum-network-'));
    const port = await freePort(address!);
    attacker = createServer((request, response) => {
      const query = new URL(request.url ?? '/', 'http://attacker').searchParams;
      const target = query.get('action') ?? '';
      // `?policy=no-referrer`: a page under which Chromium posts with `Origin: null`.
      response.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Referrer-Policy': query.get('policy') ?? 'strict-origin-when-cross-origin',
      });
      response.end(
        `<!doctype html><html lang="en"><head><title>Win</title><link rel="icon" href="data:,"></head><body><form method="post" action="${target}"><input type="hidden" name="csrf" value="x"><button type="submit">Claim your prize</button></form></body></html>`,
      );
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    attackerOrigin = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
    [service, chromium] = await Promise.all([
      startLocal({ dataDir, host: address!, port, dynamoPort: 0, grpcPort: 0, issuer: `http://${address}:${port}` }),
      launchChromium(),
    ]);
  });
  afterAll(async () => {
    await chromium?.close();
    if (attacker) await new Promise((resolve) => attacker.close(resolve));
    await service?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('signs in and out with our Origin and no Sec-Fetch-Site, and refuses posts from another origin and with Origin null', async (context) => {
    if (NO_ADDRESS) context.skip(NO_ADDRESS);
    const login = { email: 'lan@example.com', password: 'correct horse battery staple' };
    await service.core.registration.createUser(login);
    const tab = await openTab(chromium);
    const { page } = tab;
    const formPosts = await watchFormPosts(page);

    await page.goto(`${service.issuer}/login`);
    await signInOnPage(page, login);
    expect(page.url()).toBe(`${service.issuer}/account`);
    await clickAndWait(page, button('Sign out'));
    expect(await page.$eval('h1', (element) => element.textContent)).toBe('Signed out');

    for (const policy of ['strict-origin-when-cross-origin', 'no-referrer']) {
      await page.goto(`${attackerOrigin}/?policy=${policy}&action=${encodeURIComponent(`${service.issuer}/logout`)}`);
      const refused = await clickAndWait(page, button('Claim your prize'));
      expect(refused?.status(), policy).toBe(403);
    }

    const posts = formPosts();
    expect(
      posts.map((post) => [new URL(post.url).pathname, post.headers.origin, post.headers['sec-fetch-site']]),
    ).toEqual([
      ['/login', service.issuer, undefined],
      ['/logout', service.issuer, undefined],
      ['/logout', attackerOrigin, undefined],
      ['/logout', 'null', undefined],
    ]);
    await tab.context.close();
    expect(tab.problems.list()).toEqual([]);
  });
});
