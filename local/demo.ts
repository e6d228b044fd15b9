import { createHash, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { DomainError, invalidArgument } from '../core/kernel/errors';
import type { Modules } from '../core/registry';
import { html, withTransportSecurity } from '../lambdas/http';
import { escapeHtml, layout } from '../lambdas/pages';
import type { LocalExtra } from './http-server';

// A tiny login client built into the local runner (never deployed), so that a newcomer can see
// a whole sign-in right after `npm start`: /demo starts the PKCE flow, /demo/callback swaps the
// code at /oauth/token over real HTTP, calls UserInfo and shows what came back.

export interface DemoSetup {
  clientId: string;
  email: string;
  password: string;
  createdNow: boolean;
}

interface DemoFile {
  email: string;
  password: string;
  clients: Record<string, string>;
}

/**
 * Creates (once per data folder and issuer) the demo login client and the demo user. Each is
 * recorded as soon as it exists, so a failure in between (an issuer no login client may redirect
 * to) leaves nothing that a later start would try to create twice.
 */
export async function ensureDemo(
  core: Pick<Modules, 'registration'>,
  dataDir: string,
  issuer: string,
): Promise<DemoSetup> {
  const path = join(dataDir, 'demo.json');
  // Local convenience only: the demo password lives in the (git-ignored) data folder, mode 0600.
  const save = (demo: DemoFile) => writeFile(path, JSON.stringify(demo, null, 2), { mode: 0o600 });
  let demo = await readFile(path, 'utf8')
    .then((text) => JSON.parse(text) as DemoFile)
    .catch(() => undefined);
  let createdNow = false;
  if (!demo) {
    const email = 'demo@example.com';
    const password = randomBytes(12).toString('base64url');
    await core.registration.createUser({ email, password }).catch((error: unknown) => {
      // The password was only ever in demo.json: with the file gone, the demo user cannot be used.
      if (error instanceof DomainError && /already registered/.test(error.message)) {
        throw invalidArgument(
          `${path} is gone but its demo user is still in the data; stop the service and rm -rf ${dataDir} to start ` +
            `over`,
        );
      }
      throw error;
    });
    demo = { email, password, clients: {} };
    createdNow = true;
    await save(demo);
  }
  if (!demo.clients[issuer]) {
    const { client } = await core.registration.createLoginClient({
      name: 'Demo app',
      scope: 'openid profile email',
      redirectUris: [`${issuer}/demo/callback`],
    });
    demo.clients[issuer] = client.clientId;
    createdNow = true;
    await save(demo);
  }
  return { clientId: demo.clients[issuer]!, email: demo.email, password: demo.password, createdNow };
}

export function demoClient(issuer: string, clientId: string): LocalExtra {
  const pending = new Map<string, { verifier: string; expiresAt: number }>();
  const redirectUri = `${issuer}/demo/callback`;

  return async (request, url, response) => {
    if (request.method !== 'GET' || (url.pathname !== '/demo' && url.pathname !== '/demo/callback')) return false;
    if (url.pathname === '/demo') {
      const verifier = randomBytes(32).toString('base64url');
      const state = randomBytes(16).toString('base64url');
      for (const [key, value] of pending) if (value.expiresAt < Date.now()) pending.delete(key);
      pending.set(state, { verifier, expiresAt: Date.now() + 10 * 60_000 });
      const authorize = new URL(`${issuer}/oauth/authorize`);
      authorize.search = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirectUri,
        scope: 'openid profile email',
        state,
        nonce: randomBytes(16).toString('base64url'),
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
      }).toString();
      response.writeHead(302, { Location: authorize.toString(), 'Cache-Control': 'no-store' }).end();
      return true;
    }
    const state = url.searchParams.get('state') ?? '';
    const flow = pending.get(state);
    pending.delete(state);
    let body: string;
    if (url.searchParams.has('error')) {
      const error = escapeHtml(url.searchParams.get('error') ?? '');
      const description = escapeHtml(url.searchParams.get('error_description') ?? '');
      body =
        `<h1>The sign-in did not complete</h1><p><strong>${error}</strong>: ${description}</p>` +
        '<p><a href="/demo">Try again</a></p>';
    } else if (!flow || url.searchParams.get('iss') !== issuer) {
      body =
        '<h1>Unknown or expired sign-in</h1><p>The state or issuer does not match a sign-in started here. <a ' +
        'href="/demo">Start again</a>.</p>';
    } else {
      const tokenResponse = await fetch(`${issuer}/oauth/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code: url.searchParams.get('code') ?? '',
          redirect_uri: redirectUri,
          client_id: clientId,
          code_verifier: flow.verifier,
        }),
      });
      const tokens = (await tokenResponse.json()) as Record<string, unknown>;
      if (!tokenResponse.ok) {
        body = `<h1>Token exchange failed</h1>${jsonBlock('error-response', 'Error response', tokens)}`;
      } else {
        const userInfo = await (
          await fetch(`${issuer}/oauth/userinfo`, {
            headers: { Authorization: `Bearer ${String(tokens.access_token)}` },
          })
        ).json();
        const idTokenClaims = tokens.id_token ? decodeJwt(String(tokens.id_token)) : null;
        const shown = {
          ...tokens,
          access_token: `${String(tokens.access_token).slice(0, 24)}…`,
          refresh_token: tokens.refresh_token ? '(hidden)' : tokens.refresh_token,
          id_token: tokens.id_token ? '(decoded above, under "ID token claims")' : undefined,
        };
        body =
          '<h1>Signed in</h1><p>The demo app exchanged the code (PKCE S256) and called UserInfo.</p>' +
          jsonBlock('userinfo', 'UserInfo', userInfo) +
          jsonBlock('claims', 'ID token claims', idTokenClaims) +
          jsonBlock('tokens', 'Token response', shown) +
          '<p><a href="/account">Your account</a> · <a href="/demo">Run the demo again</a></p>';
      }
    }
    // The service's own page frame and headers (strict CSP, no inline style).
    const result = withTransportSecurity(
      html(200, layout('Demo app', body, { wide: true })),
      issuer.startsWith('https:'),
    );
    response.writeHead(result.statusCode, result.headers as Record<string, string>).end(result.body);
    return true;
  };
}

/**
 * JSON in a `<pre>` that may scroll sideways: focusable, so a keyboard can scroll it, and named
 * (a region labelled by its heading) so a screen reader says what it is.
 */
function jsonBlock(id: string, title: string, value: unknown): string {
  const json = escapeHtml(JSON.stringify(value, null, 2));
  const heading = `<h2 id="${id}">${escapeHtml(title)}</h2>`;
  return `${heading}<pre tabindex="0" role="region" aria-labelledby="${id}">${json}</pre>`;
}
