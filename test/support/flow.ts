import { createLocalJWKSet, jwtVerify } from 'jose';
import type { Client, User } from '../../core/kernel/model';
import { Browser, pkcePair } from './browser';
import type { TestService } from './service';

export const REDIRECT_URI = 'https://client.example/callback';

export interface Reply {
  status: number;
  json: Record<string, unknown>;
  text: string;
  headers: Headers;
}

/** One HTTP request; the body is parsed as JSON when it is JSON (else `json` is empty). */
export async function send(
  url: string,
  init: { method?: string; body?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const response = await fetch(url, {
    method: init.method ?? 'POST',
    ...(init.headers ? { headers: init.headers } : {}),
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON: the test looks at status and text
  }
  return { status: response.status, json, text, headers: response.headers };
}

export const postForm = (url: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  send(url, {
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });

let counter = 0;

export async function createLoginClient(
  service: TestService,
  scope = 'openid profile email',
  redirectUris = [REDIRECT_URI],
): Promise<Client> {
  return (await service.core.registration.createLoginClient({ name: `Test app ${++counter}`, scope, redirectUris }))
    .client;
}

export async function createUser(
  service: TestService,
  options: { setupRequired?: boolean } = {},
): Promise<{ user: User; email: string; password: string }> {
  const email = `user${++counter}-${Date.now()}@example.com`;
  const password = 'correct horse battery staple';
  const user = await service.core.registration.createUser({ email, password, ...options });
  return { user, email, password };
}

export function authorizePath(client: Client, params: Record<string, string | undefined>) {
  const query = new URLSearchParams();
  const all: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: client.redirectUris[0],
    scope: 'openid profile email',
    state: 'st-123',
    code_challenge_method: 'S256',
    ...params,
  };
  for (const [name, value] of Object.entries(all)) if (value !== undefined) query.append(name, value);
  return `/oauth/authorize?${query.toString()}`;
}

/** Drives the browser through authorize → sign-in → consent; returns the final redirect to the client. */
export async function authorizeInBrowser(
  browser: Browser,
  client: Client,
  login: { email: string; password: string },
  params: Record<string, string | undefined> = {},
) {
  return signInFrom(browser, authorizePath(client, params), login);
}

/**
 * Opens `path` (an authorization URL) and answers the sign-in and consent pages (Allow) until the service sends the
 * browser elsewhere.
 */
export async function signInFrom(browser: Browser, path: string, login: { email: string; password: string }) {
  let step = await browser.request(path);
  for (let hops = 0; hops < 6; hops++) {
    if (step.status !== 302 && step.status !== 303) return step;
    const location = new URL(step.location!, browser.base);
    if (location.origin !== new URL(browser.base).origin) return step;
    if (location.pathname === '/login') {
      const page = await browser.request(location.pathname + location.search);
      step = await browser.request('/login', {
        form: {
          request: Browser.field(page.body, 'request'),
          csrf: Browser.field(page.body, 'csrf'),
          identifier: login.email,
          password: login.password,
        },
      });
    } else if (location.pathname === '/consent') {
      const page = await browser.request(location.pathname + location.search);
      step = await browser.request('/consent', {
        form: {
          request: Browser.field(page.body, 'request'),
          csrf: Browser.field(page.body, 'csrf'),
          decision: 'allow',
        },
      });
    } else {
      step = await browser.request(location.pathname + location.search);
    }
  }
  throw new Error('too many redirects');
}

/** A code for a fresh PKCE pair, via the browser flow. */
export async function obtainCode(
  service: TestService,
  client: Client,
  login: { email: string; password: string },
  params: Record<string, string | undefined> = {},
  browser = new Browser(service.issuer),
) {
  const pkce = pkcePair();
  const final = await authorizeInBrowser(browser, client, login, { code_challenge: pkce.challenge, ...params });
  const location = new URL(final.location!);
  const code = location.searchParams.get('code');
  if (!code) throw new Error(`no code: ${final.location}`);
  return { code, verifier: pkce.verifier, location, browser };
}

export function exchange(
  service: TestService,
  client: Client,
  code: string,
  verifier: string,
  extra: Record<string, string> = {},
) {
  return postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUris[0]!,
    client_id: client.clientId,
    code_verifier: verifier,
    ...extra,
  });
}

export async function verifyWithJwks(service: TestService, token: string, options: { audience: string; typ: string }) {
  const jwks = (await (await fetch(`${service.issuer}/.well-known/jwks.json`)).json()) as { keys: never[] };
  return jwtVerify(token, createLocalJWKSet(jwks), {
    algorithms: ['EdDSA'],
    issuer: service.issuer,
    audience: options.audience,
    typ: options.typ,
    currentDate: new Date(service.clock.now()),
  });
}
