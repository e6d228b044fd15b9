import * as oauth from 'oauth4webapi';
import * as oidc from 'openid-client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../core/kernel/model';
import { Browser } from './support/browser';
import { dpopKey } from './support/dpop';
import { authorizeInBrowser, createUser, obtainCode, postForm, REDIRECT_URI, send } from './support/flow';
import { startTestService, type TestService } from './support/service';

// DPoP (RFC 9449) with certified relying-party libraries, openid-client 6 and oauth4webapi 3, against
// the real service on loopback: code + PKCE + DPoP (with dpop_jkt), UserInfo with DPoP, refresh with
// the same key (another key refused), client_credentials with DPoP; then, by hand, a replayed proof,
// a bound token sent as Bearer, and a `required` client without a proof. Nonces: dpop-nonces.test.ts.

let service: TestService;
let login: { email: string; password: string; user: { svcnumId: string } };
let rp: Client;
let api: { client: Client; clientSecret: string };
let browser: Browser;

beforeAll(async () => {
  service = await startTestService();
  const registration = service.core.registration;
  rp = (
    await registration.createLoginClient({
      name: 'DPoP RP',
      scope: 'openid profile email',
      redirectUris: [REDIRECT_URI],
      refreshResponse: 'omit',
    })
  ).client;
  api = (await registration.createApiClient({ name: 'DPoP partner', scope: 'messaging poll' })) as typeof api;
  login = await createUser(service);
  browser = new Browser(service.issuer);
});
afterAll(() => service?.close());

interface Tokens {
  access_token: string;
  token_type: string;
  refresh_token?: string;
}

/** One library's DPoP calls, so that both run through the same assertions. */
interface DpopParty {
  name: string;
  alg: 'ES256' | 'EdDSA';
  /** Code + PKCE with this key pair's proof (and dpop_jkt): the tokens. */
  signIn(keys: oauth.CryptoKeyPair): Promise<Tokens>;
  userInfo(keys: oauth.CryptoKeyPair, accessToken: string): Promise<Record<string, unknown>>;
  refresh(keys: oauth.CryptoKeyPair, refreshToken: string): Promise<Tokens>;
  clientCredentials(keys: oauth.CryptoKeyPair): Promise<Tokens>;
}

/** Our pages from the library's authorization URL; the callback URL. */
async function callbackFor(url: URL): Promise<URL> {
  const final = await authorizeInBrowser(browser, rp, login, Object.fromEntries(url.searchParams));
  return new URL(final.location!);
}

const openidClient: DpopParty = (() => {
  const configure = (clientId: string, auth: oidc.ClientAuth = oidc.None()) =>
    oidc.discovery(new URL(service.issuer), clientId, undefined, auth, { execute: [oidc.allowInsecureRequests] });
  return {
    name: 'openid-client',
    alg: 'ES256',
    async signIn(keys) {
      const config = await configure(rp.clientId);
      const DPoP = oidc.getDPoPHandle(config, keys);
      const verifier = oidc.randomPKCECodeVerifier();
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: REDIRECT_URI,
        scope: 'openid profile email',
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        state: 'dpop-state',
        dpop_jkt: await DPoP.calculateThumbprint(),
      });
      const callback = await callbackFor(url);
      return oidc.authorizationCodeGrant(
        config,
        callback,
        { pkceCodeVerifier: verifier, expectedState: 'dpop-state' },
        undefined,
        { DPoP },
      );
    },
    async userInfo(keys, accessToken) {
      const config = await configure(rp.clientId);
      const DPoP = oidc.getDPoPHandle(config, keys);
      return { ...(await oidc.fetchUserInfo(config, accessToken, login.user.svcnumId, { DPoP })) };
    },
    async refresh(keys, refreshToken) {
      const config = await configure(rp.clientId);
      return oidc.refreshTokenGrant(config, refreshToken, undefined, { DPoP: oidc.getDPoPHandle(config, keys) });
    },
    async clientCredentials(keys) {
      const config = await configure(api.client.clientId, oidc.ClientSecretBasic(api.clientSecret));
      return oidc.clientCredentialsGrant(config, { scope: 'messaging' }, { DPoP: oidc.getDPoPHandle(config, keys) });
    },
  };
})();

const oauth4webapi: DpopParty = (() => {
  const insecure = { [oauth.allowInsecureRequests]: true };
  const server = async () =>
    oauth.processDiscoveryResponse(
      new URL(service.issuer),
      await oauth.discoveryRequest(new URL(service.issuer), insecure),
    );
  const client = (registered: Client): oauth.Client => ({ client_id: registered.clientId });
  return {
    name: 'oauth4webapi',
    alg: 'EdDSA',
    async signIn(keys) {
      const as = await server();
      const DPoP = oauth.DPoP(client(rp), keys);
      const verifier = oauth.generateRandomCodeVerifier();
      const url = new URL(as.authorization_endpoint!);
      const params = {
        client_id: rp.clientId,
        response_type: 'code',
        redirect_uri: REDIRECT_URI,
        scope: 'openid profile email',
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        dpop_jkt: await DPoP.calculateThumbprint(),
      };
      for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
      const callback = oauth.validateAuthResponse(as, client(rp), await callbackFor(url), oauth.skipStateCheck);
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client(rp),
        oauth.None(),
        callback,
        REDIRECT_URI,
        verifier,
        { ...insecure, DPoP },
      );
      return oauth.processAuthorizationCodeResponse(as, client(rp), response, { requireIdToken: true });
    },
    async userInfo(keys, accessToken) {
      const as = await server();
      const DPoP = oauth.DPoP(client(rp), keys);
      const response = await oauth.userInfoRequest(as, client(rp), accessToken, { ...insecure, DPoP });
      return { ...(await oauth.processUserInfoResponse(as, client(rp), login.user.svcnumId, response)) };
    },
    async refresh(keys, refreshToken) {
      const as = await server();
      const DPoP = oauth.DPoP(client(rp), keys);
      const response = await oauth.refreshTokenGrantRequest(as, client(rp), oauth.None(), refreshToken, {
        ...insecure,
        DPoP,
      });
      return oauth.processRefreshTokenResponse(as, client(rp), response);
    },
    async clientCredentials(keys) {
      const as = await server();
      const DPoP = oauth.DPoP(client(api.client), keys);
      const auth = oauth.ClientSecretBasic(api.clientSecret);
      const response = await oauth.clientCredentialsGrantRequest(
        as,
        client(api.client),
        auth,
        { scope: 'messaging' },
        { ...insecure, DPoP },
      );
      return oauth.processClientCredentialsResponse(as, client(api.client), response);
    },
  };
})();

/** The OAuth error code a library's rejection carries (openid-client wraps oauth4webapi's errors). */
async function refusedWith(promise: Promise<unknown>): Promise<string | undefined> {
  let cause: unknown = await promise.then(
    () => new Error('expected a refusal'),
    (reason: unknown) => reason,
  );
  while (cause instanceof Error && typeof (cause as { error?: unknown }).error !== 'string') cause = cause.cause;
  return (cause as { error?: string } | undefined)?.error;
}

describe.each([openidClient, oauth4webapi])('$name with DPoP', (library) => {
  let keys: oauth.CryptoKeyPair;
  let tokens: Tokens;
  beforeAll(async () => {
    keys = await oauth.generateKeyPair(library.alg);
    tokens = await library.signIn(keys);
  });

  it('redeems a code bound by dpop_jkt: token_type DPoP, access token with cnf.jkt', async () => {
    expect(tokens.token_type.toLowerCase()).toBe('dpop');
    const jkt = await oauth.DPoP({}, keys).calculateThumbprint();
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt });
  });

  it('reads UserInfo with the DPoP-bound token and a proof', async () => {
    expect(await library.userInfo(keys, tokens.access_token)).toMatchObject({ sub: login.user.svcnumId });
  });

  it('refreshes with the same key, and refuses another key or none', async () => {
    const refreshed = await library.refresh(keys, tokens.refresh_token!);
    const form = { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: rp.clientId };
    expect((await postForm(`${service.issuer}/oauth/token`, form)).json).toMatchObject({ error: 'invalid_dpop_proof' });
    expect(refreshed.token_type.toLowerCase()).toBe('dpop');
    const other = await oauth.generateKeyPair(library.alg);
    expect(await refusedWith(library.refresh(other, tokens.refresh_token!))).toBe('invalid_grant');
  });

  it('gets a DPoP-bound client_credentials token', async () => {
    const issued = await library.clientCredentials(keys);
    expect(issued.token_type.toLowerCase()).toBe('dpop');
    expect(decodeJwt(issued.access_token).cnf).toHaveProperty('jkt');
  });
});

describe('DPoP refusals', () => {
  const tokenUrl = () => `${service.issuer}/oauth/token`;
  const basic = (client: Client, secret: string) =>
    `Basic ${Buffer.from(`${client.clientId}:${secret}`).toString('base64')}`;

  async function boundToken() {
    const key = await dpopKey();
    const reply = await postForm(
      tokenUrl(),
      { grant_type: 'client_credentials', scope: 'messaging' },
      { Authorization: basic(api.client, api.clientSecret), DPoP: await key.proof('POST', tokenUrl()) },
    );
    expect(reply.json.token_type).toBe('DPoP');
    return { key, token: String(reply.json.access_token) };
  }

  it('refuses a replayed proof, a bound token sent as Bearer, and a proof of another key', async () => {
    const { key, token } = await boundToken();
    const url = `${service.issuer}/api/messages`;
    const message = (headers: Record<string, string>) =>
      send(url, { headers: { 'Content-Type': 'application/json', ...headers }, body: '{"to":"x","text":"hi"}' });
    const proof = await key.proof('POST', url, { accessToken: token });
    const first = await message({ Authorization: `DPoP ${token}`, DPoP: proof });
    // The proof passed: what follows is the message's own refusal (no such recipient), not the credential's.
    expect(first.status).not.toBe(401);
    const replayed = await message({ Authorization: `DPoP ${token}`, DPoP: proof });
    expect(replayed.status).toBe(401);
    expect(replayed.headers.get('www-authenticate')).toMatch(/^DPoP realm="messaging", error="invalid_dpop_proof"/);
    expect(replayed.json.error_description).toMatch(/used before/);
    const asBearer = await message({ Authorization: `Bearer ${token}` });
    expect(asBearer.status).toBe(401);
    expect(asBearer.headers.get('www-authenticate')).toMatch(
      /^DPoP .*error="invalid_token".*algs="EdDSA Ed25519 ES256"/,
    );
    const otherKey = await dpopKey('EdDSA');
    const wrongKey = await message({
      Authorization: `DPoP ${token}`,
      DPoP: await otherKey.proof('POST', url, { accessToken: token }),
    });
    expect(wrongKey.json).toMatchObject({ error: 'invalid_dpop_proof', error_description: /of another key/ });
  });

  it('answers a refusal after a valid DPoP credential with a DPoP challenge, not a Bearer one (RFC 9449 §7.1)', async () => {
    // A client's messaging token at UserInfo: the proof and token pass, the scope does not.
    const { key, token } = await boundToken();
    const url = `${service.issuer}/oauth/userinfo`;
    const refused = await send(url, {
      method: 'GET',
      headers: { Authorization: `DPoP ${token}`, DPoP: await key.proof('GET', url, { accessToken: token }) },
    });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toMatch(
      /^DPoP realm="userinfo", error="insufficient_scope".*algs="EdDSA Ed25519 ES256"/,
    );
  });

  it('redeems a code asked for with dpop_jkt only with a proof of that key (RFC 9449 §10)', async () => {
    const [asked, other] = await Promise.all([dpopKey(), dpopKey()]);
    // A code is used up by its first redemption, so each case gets its own.
    for (const [key, answer] of [
      [undefined, { error: 'invalid_grant' }],
      [other, { error: 'invalid_grant', error_description: /dpop_jkt/ }],
      [asked, { token_type: 'DPoP' }],
    ] as const) {
      const { code, verifier } = await obtainCode(service, rp, login, { dpop_jkt: asked.jkt }, browser);
      const proof: Record<string, string> = key ? { DPoP: await key.proof('POST', tokenUrl()) } : {};
      const reply = await postForm(
        tokenUrl(),
        {
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT_URI,
          client_id: rp.clientId,
          code_verifier: verifier,
        },
        proof,
      );
      expect(reply.json).toMatchObject(answer);
    }
  });

  it('answers a bad proof at the token endpoint with 400 invalid_dpop_proof', async () => {
    const key = await dpopKey();
    const reply = await postForm(
      tokenUrl(),
      { grant_type: 'client_credentials' },
      { Authorization: basic(api.client, api.clientSecret), DPoP: await key.proof('GET', tokenUrl()) },
    );
    expect(reply.status).toBe(400);
    expect(reply.json).toMatchObject({ error: 'invalid_dpop_proof', error_description: /htm must be POST/ });
  });

  it('refuses a token request of a `required` client without a proof, and serves it with one', async () => {
    const required = (await service.core.registration.createApiClient({
      name: 'DPoP required',
      scope: 'messaging',
      dpop: 'required',
    })) as typeof api;
    const headers = { Authorization: basic(required.client, required.clientSecret) };
    const refused = await postForm(tokenUrl(), { grant_type: 'client_credentials' }, headers);
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ error: 'invalid_dpop_proof', error_description: /must send a DPoP proof/ });
    const key = await dpopKey();
    const served = await postForm(
      tokenUrl(),
      { grant_type: 'client_credentials' },
      { ...headers, DPoP: await key.proof('POST', tokenUrl()) },
    );
    expect(served.json.token_type).toBe('DPoP');
  });

  it('publishes the proof algorithms in discovery', async () => {
    const document = await send(`${service.issuer}/.well-known/openid-configuration`, { method: 'GET' });
    expect(document.json.dpop_signing_alg_values_supported).toEqual(['EdDSA', 'Ed25519', 'ES256']);
  });
});
