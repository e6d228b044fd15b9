import { limits } from './kernel/config';
import { DomainError, oauthError } from './kernel/errors';
import { inService, type Client, type Grant } from './kernel/model';
import { optionalParam, requiredParam, type Params } from './kernel/params';
import type { Clock, Random } from './kernel/ports';
import { formatScope, isSubset, parseScope } from './kernel/scopes';
import { pkceChallenge, randomSecret, safeEqual, sha256 } from './kernel/secrets';
import type { OAuthPort as Store } from './oauth/store';
import type { TokenIssuer } from './oauth/tokens';

// POST /oauth/token and POST /oauth/revoke (RFC 6749 §4.1.3, §4.4, §6; RFC 7636; RFC 7009).

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token?: string | null;
  id_token?: string;
  scope: string;
}

/** Credentials as they arrived: HTTP Basic (RFC 6749 §2.3.1) and/or form fields. */
export interface PresentedCredentials {
  basic?: { clientId: string; clientSecret: string };
  /** Set when an Authorization header was sent that is not valid Basic. */
  malformedAuthorization?: boolean;
}

/** invalid_client (RFC 6749 §5.2): 401, with a Basic challenge when the client tried Basic. */
const invalidClient = (description: string, usedBasic: boolean): DomainError =>
  oauthError('invalid_client', description, usedBasic ? { challenge: 'Basic' } : {});

/** A grant is in force until revoked or idle for the refresh token's inactivity lifetime (checked on every read). */
export const grantInForce = (grant: Grant, now: number): boolean =>
  grant.revokedAt === undefined && grant.lastUsedAt + limits.refreshIdleTtl > now;

const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const OPAQUE_SECRET = /^[A-Za-z0-9_-]{16,128}$/;
const REFRESH_TOKEN = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

export function createTokenService(deps: {
  store: Store;
  clock: Clock;
  random: Random;
  issuer: TokenIssuer;
  getClient: (clientId: string) => Promise<Client | undefined>;
  /** An uncached read, for secret checks (a rotated secret takes effect at once). */
  getClientFresh: (clientId: string) => Promise<Client | undefined>;
}) {
  const { store, clock, random, issuer, getClient, getClientFresh } = deps;

  /**
   * Who is calling. Confidential clients (External API, provisioning) prove a secret, by Basic or
   * by client_secret_post but not both; login clients are public and only name themselves.
   */
  async function authenticate(params: Params, credentials: PresentedCredentials): Promise<Client> {
    if (credentials.malformedAuthorization) throw invalidClient('the Authorization header is not valid HTTP Basic', true);
    const postedId = optionalParam(params, 'client_id');
    const postedSecret = optionalParam(params, 'client_secret');
    const basic = credentials.basic;
    if (basic && postedSecret !== undefined) throw oauthError('invalid_request', 'use one client authentication method, not both');
    if (basic && postedId !== undefined && postedId !== basic.clientId) throw oauthError('invalid_request', 'client_id does not match the Authorization header');
    const clientId = basic?.clientId ?? postedId;
    const secret = basic?.clientSecret ?? postedSecret;
    const usedBasic = basic !== undefined;
    // An empty user-id in Basic (`:secret`) names no client either (and is not a valid store key).
    if (clientId === undefined || clientId === '') throw invalidClient('client authentication is required (client_id)', usedBasic);
    const client = clientId.length > 128 ? undefined : secret === undefined ? await getClient(clientId) : await getClientFresh(clientId);
    if (!client || client.disabled) throw invalidClient('unknown or disabled client', usedBasic);
    if (secret === undefined) {
      if (client.secretHash) throw invalidClient('this client must authenticate with its client secret', usedBasic);
      return client;
    }
    if (!client.secretHash) throw invalidClient('this client is public and has no client secret', usedBasic);
    if (!OPAQUE_SECRET.test(secret) || !safeEqual(sha256(secret), client.secretHash)) {
      throw invalidClient('client authentication failed', usedBasic);
    }
    return client;
  }

  function requestedScopes(params: Params, allowed: readonly string[]): string[] | undefined {
    const value = optionalParam(params, 'scope');
    if (value === undefined) return undefined;
    const scopes = parseScope(value);
    if (!scopes) throw oauthError('invalid_scope', 'scope is not a valid space-separated list');
    if (!isSubset(scopes, allowed)) throw oauthError('invalid_scope', `scope exceeds what was granted: ${scopes.filter((s) => !allowed.includes(s)).join(' ')}`);
    return scopes;
  }

  /** Every access token of a grant names it, the first and each refreshed one: one grant = one consent chain. */
  async function userTokens(grant: Pick<Grant, 'grantId' | 'svcnumId' | 'clientId' | 'authTime'>, scopes: string[]) {
    return issuer.accessToken({ subject: grant.svcnumId, clientId: grant.clientId, scopes, authTime: grant.authTime, grantId: grant.grantId });
  }

  async function authorizationCode(params: Params, client: Client): Promise<TokenResponse> {
    if (client.kind !== 'login') throw oauthError('unauthorized_client', 'this client may not use the authorization_code grant');
    const code = requiredParam(params, 'code');
    const redirectUri = requiredParam(params, 'redirect_uri');
    const verifier = requiredParam(params, 'code_verifier');
    if (!CODE_VERIFIER.test(verifier)) {
      throw oauthError('invalid_request', `code_verifier must be ${limits.codeVerifierMin} to ${limits.codeVerifierMax} characters of [A-Za-z0-9-._~]`);
    }
    if (!OPAQUE_SECRET.test(code)) throw oauthError('invalid_grant', 'the authorization code is invalid or expired');
    const now = clock.now();
    const result = await store.redeemCode(sha256(code), { clientId: client.clientId, redirectUri, codeChallenge: pkceChallenge(verifier) }, now);
    switch (result.outcome) {
      case 'unknown':
      case 'expired':
        throw oauthError('invalid_grant', 'the authorization code is invalid or expired');
      case 'mismatch':
        throw oauthError('invalid_grant', 'the authorization code was issued for another client, redirect_uri or code_verifier');
      case 'replayed':
        // RFC 6749 §4.1.2: a code used twice revokes what it produced.
        await store.revokeGrant(result.grantId, now);
        throw oauthError('invalid_grant', 'the authorization code was already used; tokens issued from it are revoked');
      case 'redeemed':
        break;
    }
    const redeemed = result.code;
    const secret = randomSecret(random);
    const grant: Grant = {
      grantId: redeemed.grantId, secretHash: sha256(secret), clientId: redeemed.clientId, svcnumId: redeemed.svcnumId,
      scopes: redeemed.scopes, authTime: redeemed.authTime, createdAt: now, lastUsedAt: now,
    };
    // Fails only if a replay revoked this grant before it existed (the tombstone wins).
    if (!(await store.createGrant(grant, now + limits.refreshIdleTtl))) {
      throw oauthError('invalid_grant', 'the authorization code was already used; tokens issued from it are revoked');
    }
    // The account may have been disabled while the code was outstanding. Disabling revokes the
    // grants that exist when it lists them; reading the user only after ours exists means one of
    // the two always sees the other. The read runs alongside the signing, so it costs no latency.
    const [user, access, idToken] = await Promise.all([
      store.getUser(grant.svcnumId),
      userTokens(grant, grant.scopes),
      grant.scopes.includes('openid')
        ? issuer.idToken({ subject: grant.svcnumId, clientId: grant.clientId, authTime: grant.authTime, ...(redeemed.nonce !== undefined ? { nonce: redeemed.nonce } : {}) })
        : undefined,
    ]);
    if (user?.status !== 'active') {
      await store.revokeGrant(grant.grantId, now);
      throw oauthError('invalid_grant', 'the account behind this authorization code is no longer active');
    }
    return {
      access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn,
      refresh_token: `${grant.grantId}.${secret}`,
      ...(idToken ? { id_token: idToken } : {}),
      scope: formatScope(grant.scopes),
    };
  }

  /** The grant behind a refresh token, if the token is genuine and still alive. */
  async function liveGrant(refreshToken: string, now: number): Promise<Grant | undefined> {
    const match = REFRESH_TOKEN.exec(refreshToken);
    if (!match) return undefined;
    const grant = await store.getGrant(match[1]!);
    if (!grant || !grantInForce(grant, now) || !safeEqual(sha256(match[2]!), grant.secretHash)) return undefined;
    return grant;
  }

  async function refreshToken(params: Params, client: Client): Promise<TokenResponse> {
    if (client.kind !== 'login') throw oauthError('unauthorized_client', 'this client may not use the refresh_token grant');
    const token = requiredParam(params, 'refresh_token');
    const now = clock.now();
    const grant = await liveGrant(token, now);
    if (!grant || grant.clientId !== client.clientId) {
      throw oauthError('invalid_grant', 'the refresh token is invalid, expired or revoked');
    }
    const scopes = requestedScopes(params, grant.scopes) ?? grant.scopes;
    // Slide the inactivity window, but write at most about once a day per grant.
    if (now - grant.lastUsedAt >= limits.refreshTouchInterval) {
      await store.touchGrant(grant.grantId, now, now + limits.refreshIdleTtl);
    }
    const access = await userTokens(grant, scopes);
    // The same refresh token stays valid: `null` says so per the spec, or the member is left out.
    return {
      access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn,
      ...(client.refreshResponse === 'omit' ? {} : { refresh_token: null }), scope: formatScope(scopes),
    };
  }

  async function clientCredentials(params: Params, client: Client): Promise<TokenResponse> {
    if (!client.secretHash || client.kind === 'login') {
      throw oauthError('unauthorized_client', 'login clients may not use the client_credentials grant');
    }
    const scopes = requestedScopes(params, client.scopes) ?? client.scopes;
    // An agent's client acts as the agent (its svcnum_id is the subject); others act as themselves.
    const subject = client.kind === 'agent' && client.subjectId ? client.subjectId : client.clientId;
    if (client.kind === 'provisioning') {
      const owner = client.ownerId ? await store.getUser(client.ownerId) : undefined;
      if (owner?.status !== 'active') throw oauthError('invalid_grant', 'the account of this provisioning client is not active');
    }
    if (client.kind === 'agent') {
      const agent = await store.getUser(subject);
      if (!inService(agent)) {
        throw oauthError('invalid_grant', 'the agent behind this client is not active');
      }
    }
    const access = await issuer.accessToken({ subject, clientId: client.clientId, scopes });
    return { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn, scope: formatScope(scopes) };
  }

  return {
    authenticate,

    /** POST /oauth/token. */
    async token(params: Params, credentials: PresentedCredentials): Promise<TokenResponse> {
      const grantType = requiredParam(params, 'grant_type');
      const handlers: Record<string, (p: Params, c: Client) => Promise<TokenResponse>> = {
        authorization_code: authorizationCode,
        refresh_token: refreshToken,
        client_credentials: clientCredentials,
      };
      // Own properties only: `constructor`, `toString` or `__proto__` are not grant types.
      const handle = Object.hasOwn(handlers, grantType) ? handlers[grantType] : undefined;
      if (!handle) {
        // RFC 6749 §5.2: error_description is printable ASCII without '"' and '\'; echo only such values.
        const shown = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,64}$/.test(grantType) ? `grant_type ${grantType}` : 'this grant_type';
        throw oauthError('unsupported_grant_type', `${shown} is not supported`);
      }
      const client = await authenticate(params, credentials);
      return handle(params, client);
    },

    /** POST /oauth/revoke (RFC 7009): unknown tokens are not an error. */
    async revoke(params: Params, credentials: PresentedCredentials): Promise<void> {
      const client = await authenticate(params, credentials);
      const token = requiredParam(params, 'token');
      const hint = optionalParam(params, 'token_type_hint');
      if (REFRESH_TOKEN.test(token)) {
        const grant = await liveGrant(token, clock.now());
        // A token of another client is left alone, and the answer does not tell (RFC 7009 §2.1).
        if (grant && grant.clientId === client.clientId) await store.revokeGrant(grant.grantId, clock.now());
        return;
      }
      if (hint === 'access_token' || token.split('.').length === 3) {
        throw oauthError('unsupported_token_type', 'access tokens are self-contained and expire within an hour; revoke the refresh token instead');
      }
    },
  };
}

export type TokenService = ReturnType<typeof createTokenService>;
