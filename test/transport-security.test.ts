import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postForm, send, type Reply } from './support/flow';
import { startTestService, type TestService } from './support/service';

// HSTS on every answer of every route group when the issuer is https (pages, the token endpoint,
// UserInfo, messages, discovery and keys, the public endpoints; successes, refusals, 404s and
// 405s alike), none with a plain-http issuer; and the local runner's own answers are never sniffed.
// The runner serves plain http here; an https issuer is what a TLS proxy in front of it would have.

const HSTS = 'max-age=63072000; includeSubDomains';

let secure: TestService;
let plain: TestService;
beforeAll(async () => {
  [secure, plain] = await Promise.all([startTestService({ issuer: 'https://id.example.test' }), startTestService()]);
});
afterAll(async () => {
  await Promise.all([secure?.close(), plain?.close()]);
});

const base = (service: TestService) => `http://127.0.0.1:${service.port}`;
const get = (url: string) => send(url, { method: 'GET' });

/** One request of each route group and outcome: [what, answer]. */
async function answersOf(service: TestService): Promise<Array<[string, Reply]>> {
  const url = base(service);
  const owner = await service.core.registration.createUser({
    email: `owner-${service.port}@example.com`,
    password: 'owner password 1',
    accountType: 'business',
  });
  const { client, clientSecret } = await service.core.registration.createApiClient({
    name: 'Transport app',
    scope: 'messaging',
    ownerId: owner.svcnumId,
  });
  const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
  return Promise.all(
    (
      [
        [
          'token: issued',
          postForm(`${url}/oauth/token`, {
            grant_type: 'client_credentials',
            client_id: client.clientId,
            client_secret: clientSecret!,
          }),
        ],
        ['token: refused', postForm(`${url}/oauth/token`, { grant_type: 'password' })],
        ['token: 405', get(`${url}/oauth/token`)],
        ['revoke', postForm(`${url}/oauth/revoke`, { token: 'nothing' })],
        ['discovery', get(`${url}/.well-known/openid-configuration`)],
        ['jwks', get(`${url}/.well-known/jwks.json`)],
        ['userinfo: 401', get(`${url}/oauth/userinfo`)],
        ['messages: 401', send(`${url}/api/messages`, { method: 'POST', body: 'to=1', headers: form })],
        ['resolve: 400', get(`${url}/api/resolve`)],
        ['discover: 400', get(`${url}/api/discover`)],
        ['sign-in page', get(`${url}/login`)],
        ['authorize: error page', get(`${url}/oauth/authorize`)],
        ['stylesheet', get(`${url}/assets/style.css`)],
      ] as const
    ).map(async ([what, answer]) => [what, await answer] as [string, Reply]),
  );
}

describe('Strict-Transport-Security', () => {
  it('is on every answer of every route group when the issuer is https', async () => {
    const answers = await answersOf(secure);
    expect(answers.find(([what]) => what === 'token: issued')![1].status).toBe(200);
    expect(answers.find(([what]) => what === 'jwks')![1].status).toBe(200);
    for (const [what, answer] of answers) expect(answer.headers.get('strict-transport-security'), what).toBe(HSTS);
  });

  it('is on no answer when the issuer is plain http (a browser would not honour it there anyway)', async () => {
    for (const [what, answer] of await answersOf(plain))
      expect(answer.headers.get('strict-transport-security'), what).toBeNull();
  });
});

describe("the local runner's own answers", () => {
  it('a path no route serves: JSON 404, never cached or sniffed', async () => {
    for (const service of [secure, plain]) {
      const answer = await get(`${base(service)}/no/such/path`);
      expect(answer.status).toBe(404);
      expect(answer.json).toEqual({ error: 'not_found', error_description: 'no such endpoint' });
      expect(answer.headers.get('content-type')).toBe('application/json');
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('a body over the limit: 413, not sniffed either', async () => {
    const answer = await send(`${base(plain)}/oauth/token`, {
      method: 'POST',
      body: new Uint8Array(1024 * 1024 + 1),
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    expect(answer.status).toBe(413);
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  });
});
