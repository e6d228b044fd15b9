import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser } from './support/browser';
import type { Client } from '../core/kernel/model';
import {
  authorizeInBrowser,
  authorizePath,
  createLoginClient,
  createUser,
  exchange,
  obtainCode,
  postForm,
} from './support/flow';
import { pkcePair } from './support/browser';
import { runAdmin } from './support/processes';
import { startTestService, type TestService } from './support/service';

const admin = runAdmin;
const refreshWith = (client: Client, refreshToken: string) =>
  postForm(`${service.issuer}/oauth/token`, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: client.clientId,
  });

let service: TestService;
let env: Record<string, string>;
beforeAll(async () => {
  service = await startTestService();
  env = { DATA_DIR: service.dataDir, DYNAMODB_PORT: new URL(service.dynamoEndpoint).port };
});
afterAll(() => service?.close());

describe('admin CLI against the running local service', () => {
  it('registers a login client and a user that can sign in through the service', async () => {
    const client = await admin(
      [
        'client',
        'create',
        '--name',
        'Shop',
        '--redirect-uri',
        'https://shop.example/cb',
        '--redirect-uri',
        'http://localhost:8080/cb',
        '--scope',
        'openid profile email',
      ],
      env,
    );
    expect(client.code).toBe(0);
    expect(client.json).toMatchObject({
      kind: 'login',
      name: 'Shop',
      redirect_uris: ['https://shop.example/cb', 'http://localhost:8080/cb'],
      scope: 'openid profile email',
      refresh_response: 'null',
      disabled: false,
    });
    expect(client.json).not.toHaveProperty('client_secret');

    const user = await admin(
      ['user', 'create', '--email', 'Shopper@Example.com', '--password-stdin'],
      env,
      'a long enough password\n',
    );
    expect(user.code).toBe(0);
    expect(user.json).toMatchObject({ email: 'shopper@example.com', status: 'active', account_type: 'person' });
    expect(String(user.json!.svcnum_id)).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(String(user.json!.svcnum)).toMatch(/^\d{11,}$/);
    expect(user.stdout).not.toMatch(/scrypt|password/i);
    // A process started as users start it hashes at the production cost (not the tests' lower one).
    const stored = await service.core.store.getUser(String(user.json!.svcnum_id));
    expect(stored?.passwordHash).toMatch(/^scrypt\$131072\$8\$1\$/);

    const registered = (await service.core.store.getClient(String(client.json!.client_id)))!;
    const final = await authorizeInBrowser(
      new Browser(service.issuer),
      registered,
      { email: 'shopper@example.com', password: 'a long enough password' },
      { code_challenge: pkcePair().challenge },
    );
    expect(new URL(final.location!).searchParams.get('code')).toBeTruthy();

    const shown = await admin(['user', 'show', String(user.json!.svcnum)], env);
    expect(shown.json).toEqual(user.json);
  });

  it('creates an External API client whose secret is shown once and works with client_credentials', async () => {
    const created = await admin(['api-client', 'create', '--name', 'Messenger', '--scope', 'messaging'], env);
    expect(created.code).toBe(0);
    const { client_id: clientId, client_secret: clientSecret } = created.json as {
      client_id: string;
      client_secret: string;
    };
    expect(clientSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const token = await postForm(`${service.issuer}/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    });
    expect(token.status).toBe(200);
    expect(token.json.scope).toBe('messaging');

    const shown = await admin(['client', 'show', clientId], env);
    expect(shown.stdout).not.toContain(clientSecret);
    expect(shown.stdout).not.toMatch(/secret/i);
    const listed = await admin(['client', 'list'], env);
    expect((listed.json!.clients as Array<{ client_id: string }>).some((c) => c.client_id === clientId)).toBe(true);
  });

  it('registers a client with --dpop required (RFC 9449), shown in its JSON; others say optional', async () => {
    const created = await admin(
      ['api-client', 'create', '--name', 'Bound', '--scope', 'poll', '--dpop', 'required'],
      env,
    );
    expect(created.code).toBe(0);
    expect(created.json).toMatchObject({ kind: 'api', dpop: 'required' });
    expect((await service.core.store.getClient(String(created.json!.client_id)))!.dpop).toBe('required');
    const shown = await admin(['client', 'list'], env);
    const clients = shown.json!.clients as Array<{ client_id: string; dpop: string }>;
    expect(clients.every((client) => ['optional', 'required'].includes(client.dpop))).toBe(true);
  });

  it('registers a login client with --refresh-response omit, shown by client show and client list; API clients have none', async () => {
    const created = await admin(
      [
        'client',
        'create',
        '--name',
        'Python app',
        '--redirect-uri',
        'https://python.example/cb',
        '--scope',
        'openid email offline_access',
        '--refresh-response',
        'omit',
      ],
      env,
    );
    expect(created.code).toBe(0);
    expect(created.json).toMatchObject({
      kind: 'login',
      refresh_response: 'omit',
      scope: 'openid email offline_access',
    });
    // The usage names the libraries that need the option.
    const help = await admin(['client', 'create', '--help'], env);
    expect(help.code).toBe(0);
    for (const library of ['openid-client 6', 'oauth4webapi 3', 'authlib', 'requests-oauthlib'])
      expect(help.stdout).toContain(library);
    expect(help.stdout).not.toContain('Auth.js');
    const clientId = String(created.json!.client_id);
    expect((await service.core.store.getClient(clientId))!.refreshResponse).toBe('omit');
    const shown = await admin(['client', 'show', clientId], env);
    // Its exit and stderr first: a failure says why (it once failed on a loaded machine without a word).
    expect({ code: shown.code, stderr: shown.stderr }).toEqual({ code: 0, stderr: '' });
    expect(shown.json).toEqual(created.json);
    // A record stored before the option existed shows the default; only login clients refresh.
    const { refreshResponse: _, ...older } = (await service.core.store.getClient(clientId))!;
    await service.core.store.createClient({ ...older, clientId: `legacy-${clientId}` });
    const { client: apiClient } = await service.core.registration.createApiClient({
      name: 'No refresh',
      scope: 'poll',
    });
    const listed = (await admin(['client', 'list'], env)).json!.clients as Array<Record<string, unknown>>;
    const listedAs = (id: string) => listed.find((c) => c.client_id === id);
    expect(listedAs(clientId)).toEqual(created.json);
    expect(listedAs(`legacy-${clientId}`)).toMatchObject({ kind: 'login', refresh_response: 'null' });
    expect(listedAs(apiClient.clientId)).not.toHaveProperty('refresh_response');
  });

  it('registers a login client with --id-token-alg RS256 and --post-logout-redirect-uri, shown in its JSON', async () => {
    const created = await admin(
      [
        'client',
        'create',
        '--name',
        'Passport app',
        '--redirect-uri',
        'https://passport.example/cb',
        '--scope',
        'openid',
        '--id-token-alg',
        'RS256',
        '--post-logout-redirect-uri',
        'https://passport.example/bye',
        '--post-logout-redirect-uri',
        'http://localhost:8080/bye',
      ],
      env,
    );
    expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' });
    expect(created.json).toMatchObject({
      id_token_alg: 'RS256',
      post_logout_redirect_uris: ['https://passport.example/bye', 'http://localhost:8080/bye'],
    });
    const stored = (await service.core.store.getClient(String(created.json!.client_id)))!;
    expect(stored).toMatchObject({
      idTokenAlg: 'RS256',
      postLogoutRedirectUris: ['https://passport.example/bye', 'http://localhost:8080/bye'],
    });
    const shown = await admin(['client', 'show', stored.clientId], env);
    expect({ code: shown.code, stderr: shown.stderr }).toEqual({ code: 0, stderr: '' });
    expect(shown.json).toEqual(created.json);
    // The default, as specified: EdDSA, and no post-logout redirect.
    const plain = await admin(
      ['client', 'create', '--name', 'Plain', '--redirect-uri', 'https://plain.example/cb', '--scope', 'openid'],
      env,
    );
    expect(plain.json).toMatchObject({ id_token_alg: 'EdDSA', post_logout_redirect_uris: [] });
    const help = await admin(['client', 'create', '--help'], env);
    for (const needs of ['--id-token-alg RS256', 'passport', 'openid-client 5', 'server frameworks'])
      expect(help.stdout).toContain(needs);
    const refused: Array<[string[], number, RegExp]> = [
      [['--id-token-alg', 'HS256'], 2, /--id-token-alg must be EdDSA or RS256/],
      [['--post-logout-redirect-uri', 'http://evil.example/bye'], 1, /must use https/],
      [['--post-logout-redirect-uri', 'https://x.example/bye#frag'], 1, /fragment/],
    ];
    for (const [extra, code, message] of refused) {
      const base = ['client', 'create', '--name', 'X', '--redirect-uri', 'https://x.example/cb', '--scope', 'openid'];
      const result = await admin([...base, ...extra], env);
      expect(result.code, extra.join(' ')).toBe(code);
      expect(result.stderr).toMatch(message);
    }
    const misplaced = await admin(
      ['api-client', 'create', '--name', 'X', '--scope', 'poll', '--post-logout-redirect-uri', 'https://x.example/'],
      env,
    );
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toMatch(/--post-logout-redirect-uri belongs to client create/);
  });

  it('disables a client so that the service refuses it', async () => {
    const created = await admin(
      ['client', 'create', '--name', 'Old app', '--redirect-uri', 'https://old.example/cb', '--scope', 'openid'],
      env,
    );
    const clientId = String(created.json!.client_id);
    const disabled = await admin(['client', 'disable', clientId], env);
    // On failure its stderr says why (it once failed on a loaded CI machine with no trace).
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.json).toMatchObject({ client_id: clientId, disabled: true });
    const registered = (await service.core.store.getClient(clientId))!;
    const page = await new Browser(service.issuer).request(
      authorizePath(registered, { scope: 'openid', code_challenge: pkcePair().challenge }),
    );
    expect(page.status).toBe(400);
    expect(page.location).toBeUndefined();
  });

  it('disables a user named by email: sign-in refused and refresh tokens revoked; enable lets the account sign in and refresh again', async () => {
    const user = await admin(
      ['user', 'create', '--email', 'leaver@example.com', '--password', 'a long enough password'],
      env,
    );
    const client = await createLoginClient(service);
    const login = { email: 'leaver@example.com', password: 'a long enough password' };
    const { code, verifier } = await obtainCode(service, client, login);
    const tokens = await exchange(service, client, code, verifier);
    expect(tokens.status).toBe(200);

    const disabled = await admin(['user', 'disable', 'Leaver@Example.com'], env);
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.json).toEqual({ ...user.json, status: 'disabled' });

    const refresh = await refreshWith(client, String(tokens.json.refresh_token));
    expect(refresh.json.error).toBe('invalid_grant');
    const again = await authorizeInBrowser(new Browser(service.issuer), client, login, {
      code_challenge: pkcePair().challenge,
    });
    expect(again.status).toBe(400);
    expect(again.body).toContain('not right');
    const listed = await admin(['user', 'list'], env);
    expect(
      (listed.json!.users as Array<{ email?: string; status: string }>).find((u) => u.email === 'leaver@example.com')
        ?.status,
    ).toBe('disabled');

    // Named by number this time; the revoked refresh token stays revoked, a new sign-in works at once.
    const enabled = await admin(['user', 'enable', String(user.json!.svcnum)], env);
    expect(enabled.code, enabled.stderr).toBe(0);
    expect(enabled.json).toEqual(user.json);
    expect((await refreshWith(client, String(tokens.json.refresh_token))).json.error).toBe('invalid_grant');
    const signedIn = await obtainCode(service, client, login);
    const fresh = await exchange(service, client, signedIn.code, signedIn.verifier);
    expect(fresh.status).toBe(200);
    const refreshed = await refreshWith(client, String(fresh.json.refresh_token));
    expect(refreshed.status, refreshed.text).toBe(200);
    // Enabling an active account changes nothing.
    expect((await admin(['user', 'enable', String(user.json!.svcnum_id)], env)).json).toEqual(user.json);
  });

  it("lists an account's grants made through the code flow and revokes one: its refresh token fails with invalid_grant at once", async () => {
    const { user, email, password } = await createUser(service);
    const client = await createLoginClient(service);
    const { code, verifier } = await obtainCode(service, client, { email, password });
    const tokens = await exchange(service, client, code, verifier);
    expect(tokens.status).toBe(200);

    const listed = await admin(['user', 'grants', email], env);
    expect(listed.code, listed.stderr).toBe(0);
    const [grant] = await service.core.store.listGrants(user.svcnumId);
    expect(listed.json).toEqual({
      svcnum_id: user.svcnumId,
      grants: [
        {
          grant_id: grant!.grantId,
          client_id: client.clientId,
          client_name: client.name,
          svcnum_id: user.svcnumId,
          scope: 'openid profile email',
          created_at: new Date(grant!.createdAt).toISOString(),
        },
      ],
    });
    expect(String(tokens.json.refresh_token).startsWith(`${grant!.grantId}.`)).toBe(true);
    expect(listed.stdout).not.toContain(grant!.secretHash);

    const revoked = await admin(['grant', 'revoke', grant!.grantId], env);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.json).toMatchObject({
      grant_id: grant!.grantId,
      client_id: client.clientId,
      svcnum_id: user.svcnumId,
      revoked: true,
      revoked_at: expect.stringMatching(/^\d{4}-/),
    });
    const refresh = await refreshWith(client, String(tokens.json.refresh_token));
    expect(refresh.status).toBe(400);
    expect(refresh.json.error).toBe('invalid_grant');
    expect((await admin(['user', 'grants', user.svcnum], env)).json).toEqual({ svcnum_id: user.svcnumId, grants: [] });
    // Again: the same answer, the first revocation time kept.
    expect((await admin(['grant', 'revoke', grant!.grantId], env)).json).toEqual(revoked.json);
    // A mistyped id is refused and leaves nothing behind.
    const unknown = await admin(['grant', 'revoke', 'AAAAAAAAAAAAAAAAAAAAAA'], env);
    expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({
      code: 1,
      stderr: 'no grant AAAAAAAAAAAAAAAAAAAAAA\n',
    });
  });

  it("revokes every grant of an account (--all), or those of one application (--client), as the account page's Revoke access does", async () => {
    const { user, email, password } = await createUser(service);
    const [first, second] = [await createLoginClient(service), await createLoginClient(service)];
    const flow = async (client: typeof first) => {
      const { code, verifier } = await obtainCode(service, client, { email, password });
      return String((await exchange(service, client, code, verifier)).json.refresh_token);
    };
    const [a1, a2, b] = [await flow(first), await flow(first), await flow(second)];
    const grantIds = (await admin(['user', 'grants', user.svcnumId], env)).json!.grants as Array<{
      grant_id: string;
      client_id: string;
    }>;
    expect(grantIds.map((grant) => grant.client_id)).toEqual([first.clientId, first.clientId, second.clientId]);

    const one = await admin(['grant', 'revoke', '--user', email, '--client', first.clientId], env);
    expect(one.code, one.stderr).toBe(0);
    expect((one.json!.revoked as Array<{ grant_id: string }>).map((grant) => grant.grant_id).sort()).toEqual(
      grantIds
        .slice(0, 2)
        .map((grant) => grant.grant_id)
        .sort(),
    );
    for (const token of [a1, a2]) expect((await refreshWith(first, token)).json.error).toBe('invalid_grant');
    expect((await refreshWith(second, b)).status).toBe(200);
    // The consent is forgotten too: the application must ask again.
    expect(await service.core.store.getConsent(user.svcnumId, first.clientId)).toBeUndefined();
    expect(await service.core.store.getConsent(user.svcnumId, second.clientId)).toBeDefined();

    const all = await admin(['grant', 'revoke', '--user', user.svcnum, '--all'], env);
    expect(all.code, all.stderr).toBe(0);
    expect(all.json).toMatchObject({
      svcnum_id: user.svcnumId,
      revoked: [{ grant_id: grantIds[2]!.grant_id, client_id: second.clientId, client_name: second.name }],
    });
    expect((await refreshWith(second, b)).json.error).toBe('invalid_grant');
    expect(await service.core.store.listConsents(user.svcnumId)).toEqual([]);
    expect((await admin(['user', 'grants', email], env)).json!.grants).toEqual([]);
  });

  it("shows an account's live sign-in throttle and forgets it with user unthrottle (no lockout to lift)", async () => {
    const user = await admin(
      ['user', 'create', '--email', 'attacked@example.com', '--password', 'a long enough password'],
      env,
    );
    const browser = new Browser(service.issuer);
    const page = await browser.request('/login');
    const attempt = (password: string) =>
      browser.request('/login', {
        form: { csrf: Browser.field(page.body, 'csrf'), identifier: 'attacked@example.com', password },
      });
    for (let guess = 0; guess < 5; guess++) expect((await attempt(`guess ${guess}`)).status).toBe(400);
    expect((await attempt('a long enough password')).status).toBe(429);
    const shown = await admin(['user', 'show', String(user.json!.svcnum_id)], env);
    expect(shown.json!.sign_in_throttle).toEqual([
      { identifier: 'email', failures: 5, blocked_until: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    ]);
    expect((await admin(['user', 'unthrottle', 'attacked@example.com'], env)).json).toEqual(user.json);
    expect((await admin(['user', 'show', 'attacked@example.com'], env)).json).toEqual(user.json);
    expect((await attempt('a long enough password')).status).toBe(303);
  });

  it("lists an account's passkeys (never a public key) and removes one", async () => {
    const user = await admin(['user', 'create', '--email', 'passkeys@example.com', '--password', 'long password'], env);
    const svcnumId = String(user.json!.svcnum_id);
    const passkey = {
      svcnumId,
      credentialId: 'cred-1',
      userHandle: Buffer.from(svcnumId).toString('base64url'),
      publicKey: 'not-shown',
      counter: 3,
      transports: ['internal'],
      backupEligible: true,
      backedUp: true,
      name: 'Phone',
      createdAt: Date.UTC(2026, 0, 2),
    };
    expect(await service.core.store.putPasskey(passkey)).toBe(true);
    const listed = await admin(['user', 'passkeys', 'passkeys@example.com'], env);
    const shown = {
      credential_id: 'cred-1',
      svcnum_id: svcnumId,
      name: 'Phone',
      created_at: '2026-01-02T00:00:00.000Z',
      last_used_at: null,
      synced: true,
      backup_eligible: true,
      transports: ['internal'],
      counter: 3,
    };
    expect(listed.json).toEqual({ svcnum_id: svcnumId, passkeys: [shown] });
    expect(listed.stdout).not.toContain('not-shown');
    expect((await admin(['user', 'remove-passkey', svcnumId, 'cred-1'], env)).json).toEqual({
      ...shown,
      removed: true,
    });
    expect(await service.core.store.listPasskeys(svcnumId)).toEqual([]);
    const again = await admin(['user', 'remove-passkey', svcnumId, 'cred-1'], env);
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toBe('no passkey cred-1');
    expect((await admin(['user', 'remove-passkey', svcnumId], env)).code).toBe(2);
  });

  it('refuses bad input with one line on stderr and a non-zero exit', async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [
        ['client', 'create', '--name', 'X', '--redirect-uri', 'http://evil.example/cb', '--scope', 'openid'],
        1,
        /https/,
      ],
      [
        ['client', 'create', '--name', 'X', '--redirect-uri', 'https://x.example/cb#frag', '--scope', 'openid'],
        1,
        /fragment/,
      ],
      [
        ['client', 'create', '--name', 'X', '--redirect-uri', 'https://x.example/cb', '--scope', 'openid messaging'],
        1,
        /messaging/,
      ],
      [['client', 'create', '--name', 'X', '--scope', 'openid'], 1, /redirect URI/],
      [['api-client', 'create', '--name', 'X', '--scope', 'openid'], 1, /openid/],
      [['user', 'create', '--email', 'not-an-email', '--password', 'long enough pw'], 1, /email/],
      [['user', 'create', '--email', 'short@example.com', '--password', 'short'], 1, /8 characters/],
      [['user', 'create', '--email', 'shopper@example.com', '--password', 'long enough pw'], 1, /already registered/],
      [['client', 'show', 'nope'], 1, /no client/],
      [['client', 'create', '--bogus'], 2, /Unknown option/],
      [
        [
          'client',
          'create',
          '--name',
          'X',
          '--redirect-uri',
          'https://x.example/cb',
          '--scope',
          'openid',
          '--refresh-response',
          'absent',
        ],
        2,
        /--refresh-response must be null or omit/,
      ],
      [['api-client', 'create', '--name', 'X', '--scope', 'poll', '--dpop', 'sometimes'], 2, /--dpop must be/],
      [['user', 'list', '--dpop', 'required'], 2, /--dpop belongs to client create, api-client create/],
      [['frobnicate'], 2, /unknown command/],
      [['client', 'list', '--env', 'staging'], 2, /sandbox or production/],
      [['user', 'disable', 'nobody@example.com'], 1, /no user nobody@example.com/],
      [['user', 'grants'], 2, /needs a SVCNUM_ID, email or number/],
      [['grant'], 2, /^grant needs one of: revoke \(/],
      [['grant', 'revoke'], 2, /needs a GRANT_ID or --user/],
      [['grant', 'revoke', '--all'], 2, /need --user/],
      [['grant', 'revoke', '--user', 'shopper@example.com'], 2, /--all or --client/],
      [['grant', 'revoke', '--user', 'shopper@example.com', '--all', '--client', 'x'], 2, /--all or --client/],
      [['user', 'show', 'shopper@example.com', '--all'], 2, /--all belongs to grant revoke/],
    ];
    for (const [args, code, message] of cases) {
      const result = await admin(args, env);
      expect(result.code, args.join(' ')).toBe(code);
      expect(result.stdout).toBe('');
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(message);
    }
    // Twenty-one CLI processes one after another: slow when other test files share the cores.
  }, 120_000);
});

describe('admin CLI without a running service', () => {
  it('opens the data folder itself and manages signing keys', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-admin-'));
    try {
      const coldEnv = { DATA_DIR: dataDir, DYNAMODB_PORT: '1' };
      const user = await admin(
        ['user', 'create', '--email', 'cold@example.com', '--password', 'long enough pw'],
        coldEnv,
      );
      expect(user.code).toBe(0);
      const listed = await admin(['user', 'list'], coldEnv);
      expect(listed.json!.users).toHaveLength(1);

      const keys = await admin(['key', 'list'], coldEnv);
      const [first] = keys.json!.keys as Array<{ kid: string; active: boolean }>;
      expect(first!.active).toBe(true);
      const added = await admin(['key', 'add'], coldEnv);
      const kid = String(added.json!.kid);
      expect(added.json!.keys).toHaveLength(2);
      const retireActive = await admin(['key', 'retire', first!.kid], coldEnv);
      expect(retireActive.code).toBe(1);
      // A KID may begin with "-" (base64url): it is taken as the KID, not as an option (here: no such key, exit 1).
      const dashed = await admin(['key', 'retire', '-Xunknown'], coldEnv);
      expect({ code: dashed.code, usage: dashed.stderr.includes('see: admin help') }).toStrictEqual({
        code: 1,
        usage: false,
      });
      expect((await admin(['key', 'activate', kid], coldEnv)).stderr).toBe('');
      const retired = await admin(['key', 'retire', first!.kid], coldEnv);
      expect(retired.code, retired.stderr).toBe(0);
      expect(retired.json!.keys).toEqual([{ kid, active: true }]);

      // The RSA keys of RS256 ID tokens rotate alike, in their own folder; the Ed25519 keys stay as they are.
      const rsa = (await admin(['key', 'list', '--alg', 'RS256'], coldEnv)).json!.keys as Array<{ kid: string }>;
      expect(rsa).toHaveLength(1);
      expect(rsa[0]!.kid).not.toBe(kid);
      const rsaAdded = await admin(['key', 'add', '--alg', 'RS256'], coldEnv);
      const rsaKid = String(rsaAdded.json!.kid);
      expect((await admin(['key', 'activate', rsaKid, '--alg', 'RS256'], coldEnv)).stderr).toBe('');
      const rsaRetired = await admin(['key', 'retire', rsa[0]!.kid, '--alg', 'RS256'], coldEnv);
      expect(rsaRetired.json!.keys).toEqual([{ kid: rsaKid, active: true }]);
      expect((await admin(['key', 'list'], coldEnv)).json!.keys).toEqual([{ kid, active: true }]);
      expect((await admin(['key', 'list', '--alg', 'HS256'], coldEnv)).code).toBe(2);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
