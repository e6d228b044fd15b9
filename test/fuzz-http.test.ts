import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { logger } from '../lambdas/edge';
import { routeGroups } from '../lambdas/routes';
import { startHttpServer } from '../local/http-server';
import { createLoginClient, createUser, exchange, obtainCode, postForm } from './support/flow';
import { fuzzSeed, oddValue, Prng, PROPERTY_NAMES, runConcurrently } from './support/fuzz';
import { startTestService, type TestService } from './support/service';

// Every HTTP route of the local runner, every method it serves and some it does not, over raw
// TCP so that nothing is cleaned up on the way (fetch and node:http refuse some names, values
// and encodings): random and Object-property-named query parameters, headers, cookies, form and
// JSON bodies, repeated parameters, wrong content types, huge values, unicode and invalid
// percent-encoding, with and without a real session, client and tokens. No answer may be a 5xx,
// every request gets an answer, and the service keeps serving.

const REQUESTS = 3000;
const CONCURRENCY = 8;

const routes: Array<{ path: string; methods: readonly string[] }> = Object.values(routeGroups).flatMap((group) =>
  Object.entries(group.routes).map(([path, methods]) => ({ path, methods })),
);

const PARAMETER_NAMES = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'nonce',
  'code_challenge',
  'code_challenge_method',
  'prompt',
  'max_age',
  'grant_type',
  'code',
  'code_verifier',
  'refresh_token',
  'client_secret',
  'token',
  'token_type_hint',
  'request',
  'csrf',
  'identifier',
  'password',
  'decision',
  'grant',
  'alias',
  'capability',
  'page_token',
  'page_size',
  'to',
  'text',
  'from',
  'client_assertion',
  'client_assertion_type',
  'resource',
  'audience',
];
const HEADER_NAMES = [
  'Authorization',
  'Content-Type',
  'Cookie',
  'Origin',
  'Referer',
  'Sec-Fetch-Site',
  'Sec-Fetch-Mode',
  'X-Forwarded-For',
  'Accept',
  'Accept-Language',
  'X-Requested-With',
  'DPoP',
];
const CONTENT_TYPES = [
  'application/x-www-form-urlencoded',
  'application/x-www-form-urlencoded; charset=ISO-8859-1',
  'application/json',
  'application/json; charset=utf-16',
  'text/plain',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  '',
  ';;;',
  'APPLICATION/JSON',
];
const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'];

interface Known {
  clientId: string;
  redirectUri: string;
  session: string;
  csrfCookie: string;
  accessToken: string;
  refreshToken: string;
  messagingToken: string;
  cookieNames: string[];
}

/** A header value that still frames as one header line (no CR, LF or NUL). */
const headerSafe = (value: string) => value.replace(/[\r\n\0]/g, '');

/** Lone surrogates cannot be percent-encoded (as UTF-8): dropped; the raw form still sends them. */
const encode = (text: string) =>
  encodeURIComponent(text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, ''));

function queryPart(random: Prng, name: string, value: string): string {
  switch (random.int(4)) {
    case 0:
      return `${name}=${value}`.replace(/[\s#]/g, '+'); // raw: '%', '&', unicode bytes and all
    case 1:
      return `${encode(name)}=${random.pick(['%zz', '%', '%E0%A4%A', '%ff%fe', '%00', '%C0%AF'])}${encode(value.slice(0, 50))}`;
    default:
      return `${encode(name)}=${encode(value)}`;
  }
}

class HttpRequestBuilder {
  constructor(
    private readonly random: Prng,
    private readonly known: Known,
    private readonly host: string,
  ) {}

  private name(): string {
    const pick = this.random.int(10);
    if (pick < 4) return this.random.pick(PROPERTY_NAMES);
    if (pick < 8) return this.random.pick(PARAMETER_NAMES);
    return this.random.text(12);
  }

  value(name: string): string {
    const { known } = this;
    if (this.random.chance(0.35)) {
      switch (name) {
        case 'client_id':
          return known.clientId;
        case 'redirect_uri':
          return known.redirectUri;
        case 'response_type':
          return 'code';
        case 'code_challenge_method':
          return 'S256';
        case 'code_challenge':
          return 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
        case 'grant_type':
          return this.random.pick(['authorization_code', 'refresh_token', 'client_credentials', 'constructor']);
        case 'refresh_token':
        case 'token':
          return known.refreshToken;
        case 'scope':
          return this.random.pick(['openid', 'openid profile email', 'constructor', 'openid __proto__']);
        default:
          break;
      }
    }
    const value = oddValue(this.random);
    // Mostly within the 16 KiB head Node accepts (else 431 before any handler runs); limits at 4096.
    return value.length > 4097 && this.random.chance(0.9) ? value.slice(0, this.random.pick([4096, 4097])) : value;
  }

  private params(count: number): Array<[string, string]> {
    const params: Array<[string, string]> = [];
    for (let index = 0; index < count; index++) {
      const name = this.name();
      params.push([name, this.value(name)]);
      if (this.random.chance(0.1)) params.push([name, this.value(name)]); // repeated
    }
    return params;
  }

  private cookieHeader(): string {
    const { known } = this;
    const pairs: string[] = [];
    if (this.random.chance(0.5)) pairs.push(`${known.cookieNames[0]}=${known.session}`);
    if (this.random.chance(0.3)) pairs.push(`${known.cookieNames[1]}=${known.csrfCookie}`);
    for (let index = this.random.int(4); index > 0; index--) {
      const name = this.random.chance(0.5)
        ? this.random.pick(PROPERTY_NAMES)
        : this.random.pick([...known.cookieNames, this.random.text(8)]);
      pairs.push(`${name}=${oddValue(this.random).replace(/;/g, '')}`);
    }
    if (this.random.chance(0.1)) pairs.push(this.random.pick(['=', ';', 'novalue', '  = x', '\u00e9=\u00e9']));
    return pairs.join(this.random.pick(['; ', ';', ' ; ']));
  }

  private body(method: string): { bytes: Buffer; contentType?: string } {
    if (method === 'GET' || method === 'HEAD' ? this.random.chance(0.9) : this.random.chance(0.1))
      return { bytes: Buffer.alloc(0) };
    const kind = this.random.int(10);
    let bytes: Buffer;
    let contentType: string;
    if (kind < 5) {
      bytes = Buffer.from(
        this.params(this.random.int(8))
          .map(([name, value]) => queryPart(this.random, name, value))
          .join('&'),
      );
      contentType = 'application/x-www-form-urlencoded';
    } else if (kind < 8) {
      const object: Record<string, unknown> = JSON.parse('{"__proto__": {"polluted": true}}') as Record<
        string,
        unknown
      >;
      for (const [name, value] of this.params(this.random.int(5))) {
        object[name] = this.random.pick([
          value,
          null,
          0,
          -1,
          1e308,
          true,
          [value],
          { [this.random.pick(PROPERTY_NAMES)]: value },
        ]);
      }
      const text = this.random.chance(0.8)
        ? JSON.stringify(object)
        : this.random.pick(['null', '[]', '"x"', '1', '{', '{"to":', '\uFEFF{}', 'nul']);
      bytes = Buffer.from(text);
      contentType = 'application/json';
    } else {
      bytes = this.random.bytes(this.random.int(200));
      contentType = 'application/octet-stream';
    }
    // above the 64 KiB body limit
    if (this.random.chance(0.02)) bytes = Buffer.concat([bytes, Buffer.alloc(70 * 1024, 0x61)]);
    if (this.random.chance(0.3)) contentType = this.random.pick(CONTENT_TYPES);
    return { bytes, contentType };
  }

  build(): { head: string; bytes: Buffer; summary: string } {
    const random = this.random;
    const route = random.pick(routes);
    const method = random.chance(0.75) ? random.pick(route.methods) : random.pick(METHODS);
    let path = route.path;
    if (random.chance(0.1)) {
      path = random.pick([
        `${path}/`,
        path.toUpperCase(),
        `${path}%00`,
        `/${path}`,
        `${path}/..`,
        `/${random.pick(PROPERTY_NAMES)}`,
        '/%zz',
        `${path};x=1`,
        '*',
      ]);
    }
    const query = this.params(random.int(7)).map(([name, value]) => queryPart(random, name, value));
    const target = query.length ? `${path}?${query.join('&')}` : path;
    const headers: Array<[string, string]> = [
      ['Host', this.host],
      ['Connection', 'close'],
    ];
    if (random.chance(0.5)) headers.push(['Cookie', this.cookieHeader()]);
    if (random.chance(0.3)) {
      headers.push([
        'Authorization',
        random.pick([
          `Bearer ${this.known.accessToken}`,
          `Bearer ${this.known.messagingToken}`,
          'Bearer',
          'Bearer a.b.c',
          `Basic ${Buffer.from(`${this.known.clientId}:constructor`).toString('base64')}`,
          'Basic %%%',
          `Basic ${Buffer.from('__proto__:__proto__').toString('base64')}`,
          'Digest x',
          `bearer  ${this.known.accessToken}`,
        ]),
      ]);
    }
    for (let index = random.int(5); index > 0; index--) {
      const name = random.chance(0.6) ? random.pick(PROPERTY_NAMES) : random.pick(HEADER_NAMES);
      headers.push([
        name,
        headerSafe(
          name === 'Origin' ? random.pick([`http://${this.host}`, 'null', 'https://evil.example']) : this.value(name),
        ),
      ]);
    }
    const body = this.body(method);
    if (body.contentType !== undefined) headers.push(['Content-Type', headerSafe(body.contentType)]);
    let bytes = body.bytes;
    if (bytes.length > 0 && random.chance(0.05)) {
      headers.push(['Transfer-Encoding', 'chunked']);
      bytes = Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n0\r\n\r\n')]);
    } else if (bytes.length > 0 || random.chance(0.2)) headers.push(['Content-Length', String(bytes.length)]);
    if (random.chance(0.02)) headers.push(['Host', 'evil.example']); // a second Host
    const head = `${method} ${target} HTTP/1.1\r\n${headers.map(([name, value]) => `${name}: ${value}`).join('\r\n')}\r\n\r\n`;
    return {
      head,
      bytes,
      summary: `${method} ${target.slice(0, 300)} headers ${JSON.stringify(headers.slice(2)).slice(0, 500)} body ${bytes.toString('latin1').slice(0, 300)}`,
    };
  }
}

/** Sends raw bytes and reads the status code of the answer (0 when none came). */
function rawRequest(port: number, head: string, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(Buffer.concat(chunks).subarray(0, 20).toString('latin1'));
      resolve(match ? Number(match[1]) : 0);
    };
    socket.setTimeout(20_000, finish);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', finish);
    // Some requests are refused before their body is read; a reset then still leaves the answer.
    socket.write(Buffer.concat([Buffer.from(head, 'utf8'), body]), () => undefined);
  });
}

let service: TestService;
let known: Known;

beforeAll(async () => {
  service = await startTestService();
  const client = await createLoginClient(service);
  const login = await createUser(service);
  const { code, verifier, browser } = await obtainCode(service, client, login);
  const tokens = await exchange(service, client, code, verifier);
  const api = await service.core.registration.createApiClient({
    name: 'Fuzz messaging',
    scope: 'messaging',
    ownerId: login.user.svcnumId,
  });
  const messaging = await postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'client_credentials',
    client_id: api.client.clientId,
    client_secret: api.clientSecret!,
  });
  const cookieNames = [...browser.cookies.keys()];
  known = {
    clientId: client.clientId,
    redirectUri: client.redirectUris[0]!,
    session: browser.cookies.get(cookieNames.find((name) => /session/.test(name)) ?? '') ?? '',
    csrfCookie: browser.cookies.get(cookieNames.find((name) => /csrf/.test(name)) ?? '') ?? '',
    accessToken: String(tokens.json.access_token),
    refreshToken: String(tokens.json.refresh_token),
    messagingToken: String(messaging.json.access_token),
    cookieNames: [...cookieNames, 'session', 'csrf'],
  };
});

afterAll(async () => {
  await service?.close();
});

const discovery = () =>
  rawRequest(
    service.port,
    `GET /.well-known/openid-configuration HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
    Buffer.alloc(0),
  );

describe('HTTP fuzz', () => {
  it(`${REQUESTS} generated requests over every route: never a 5xx, always an answer, still serving`, async () => {
    const seed = fuzzSeed(20_240_510);
    const random = new Prng(seed);
    const builder = new HttpRequestBuilder(random, known, `localhost:${service.port}`);
    const plan = Array.from({ length: REQUESTS }, () => builder.build());
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    await runConcurrently(plan.length, CONCURRENCY, async (index) => {
      const { head, bytes, summary } = plan[index]!;
      const statusCode = await rawRequest(service.port, head, bytes);
      statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1);
      if (statusCode === 0 || statusCode >= 500)
        failures.push(`seed ${seed} request ${index}: ${statusCode || 'no answer'} for ${summary}`);
    });
    console.info(
      `HTTP fuzz seed ${seed}: ${plan.length} requests over ${routes.length} routes`,
      Object.fromEntries(statuses),
    );
    expect(failures, `FUZZ_SEED=${seed} reproduces this run`).toEqual([]);
    expect(await discovery()).toBe(200);
  }, 120_000);

  it('a parameter, header or cookie named like an Object property is just an unknown name on every route and method', async () => {
    const answers: string[] = [];
    for (const { path, methods } of routes) {
      for (const method of methods) {
        for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
          const body = method === 'POST' ? `${name}=1` : '';
          const head =
            `${method} ${path}?${name}=1&${name}=2 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${name}: 1\r\nCookie: ${name}=1\r\n` +
            `${body ? `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n` : ''}\r\n`;
          const statusCode = await rawRequest(service.port, head, Buffer.from(body));
          if (statusCode === 0 || statusCode >= 500) answers.push(`${method} ${path} ${name}: ${statusCode}`);
        }
      }
    }
    expect(answers).toEqual([]);
  });

  it('an unexpected failure in the local runner is one logged line (no query string) and a 500 without details', async () => {
    const logged = vi.spyOn(logger, 'error').mockImplementation(() => undefined);
    const failing = new Map([
      [
        '/boom',
        {
          functionName: 'boom',
          handler: async () => {
            throw new Error('internal detail');
          },
        },
      ],
    ]);
    const { server, port } = await startHttpServer(failing, { port: 0, host: '127.0.0.1' });
    try {
      const response = await fetch(`http://127.0.0.1:${port}/boom?code=secret-code`);
      expect(response.status).toBe(500);
      expect(await response.json()).toEqual({
        error: 'server_error',
        error_description: 'the service failed; try again',
      });
      expect(logged).toHaveBeenCalledTimes(1);
      const [message, fields] = logged.mock.calls[0] as [string, Record<string, unknown>];
      expect(message).toBe('local request failed');
      expect(fields).toMatchObject({ method: 'GET', path: '/boom', requestId: expect.any(String) });
      expect(JSON.stringify(fields)).not.toContain('secret-code');
    } finally {
      logged.mockRestore();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
