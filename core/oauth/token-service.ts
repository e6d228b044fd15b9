import { type DomainError, oauthError } from '../kernel/errors';
import type { ClientLookup } from '../kernel/capabilities';
import type { Client } from '../kernel/model';
import { readGrantParameters, type TokenResponse } from '../kernel/grant-type';
import { optionalParam, requiredParam, type Params } from '../kernel/params';
import type { Clock } from '../kernel/ports';
import { OPAQUE_SECRET, safeEqual, sha256 } from '../kernel/secrets';
import type { AuthorizationValues } from './bearer';
import type { ProofTarget } from './dpop';
import type { GrantTable } from './grants/table';
import type { OAuthPort } from './store';
import { liveGrant, REFRESH_TOKEN } from './user-grants';

// POST /oauth/token and POST /oauth/revoke (RFC 6749 §2.3, §5; RFC 7009): client authentication,
// dispatch from the table of grant types (core/kernel/grant-type.ts), revocation.

/** Credentials as they arrived: HTTP Basic (RFC 6749 §2.3.1) and/or form fields. */
export interface PresentedCredentials {
  basic?: { clientId: string; clientSecret: string };
  /** Set when an Authorization header was sent that is not valid Basic. */
  malformedAuthorization?: boolean;
}

/** A token request's DPoP header values (RFC 9449 §5) and the request as its proof must name it. */
export interface PresentedProof {
  dpop: AuthorizationValues;
  target: ProofTarget;
}

/** The thumbprint of a token request's valid DPoP proof, undefined without one, or the refusal (token-endpoint.ts). */
export type TokenRequestKey = (presented: PresentedProof | undefined) => Promise<string | undefined>;

/**
 * Why `client` may not be used with what was presented (no secret, or one whose SHA-256 is
 * `secretHash`; undefined for a secret of the wrong form), or undefined when it may.
 */
function clientRefusal(
  client: Client | undefined,
  sentSecret: boolean,
  secretHash: string | undefined,
): string | undefined {
  if (!client || client.disabled) return 'unknown or disabled client';
  // Only login clients are public: every other kind proves a secret, so one without a secret
  // cannot be used.
  if (!sentSecret) {
    const mustProve = client.secretHash || client.kind !== 'login';
    return mustProve ? 'this client must authenticate with its client secret' : undefined;
  }
  if (!client.secretHash) return 'this client is public and has no client secret';
  const proven = secretHash !== undefined && safeEqual(secretHash, client.secretHash);
  return proven ? undefined : 'client authentication failed';
}

/** invalid_client (RFC 6749 §5.2): 401, with a Basic challenge when the client tried Basic. */
const invalidClient = (description: string, usedBasic: boolean): DomainError =>
  oauthError('invalid_client', description, usedBasic ? { challenge: 'Basic' } : {});

/**
 * Who is calling. Confidential clients (External API, provisioning) prove a secret, by Basic or
 * by client_secret_post but not both; login clients are public and only name themselves.
 */
async function authenticateClient(
  getClientRechecked: ClientLookup['getClientRechecked'],
  params: Params,
  credentials: PresentedCredentials,
): Promise<Client> {
  if (credentials.malformedAuthorization) throw invalidClient('the Authorization header is not valid HTTP Basic', true);
  const postedId = optionalParam(params, 'client_id');
  const postedSecret = optionalParam(params, 'client_secret');
  const basic = credentials.basic;
  if (basic && postedSecret !== undefined) {
    throw oauthError('invalid_request', 'use one client authentication method, not both');
  }
  if (basic && postedId !== undefined && postedId !== basic.clientId) {
    throw oauthError('invalid_request', 'client_id does not match the Authorization header');
  }
  const clientId = basic?.clientId ?? postedId;
  const secret = basic?.clientSecret ?? postedSecret;
  const usedBasic = basic !== undefined;
  // An empty user-id in Basic (`:secret`) names no client either (and is not a valid store key).
  if (clientId === undefined || clientId === '') {
    throw invalidClient('client authentication is required (client_id)', usedBasic);
  }
  if (clientId.length > 128) throw invalidClient('unknown or disabled client', usedBasic);
  // Checked against the cached record (up to 30 s old: a disabled client or a replaced secret
  // may keep working that long); a refusal is checked again against the record read anew, so a
  // new secret or a re-enabled client works at once. A secret of the wrong form can never match.
  const secretHash = secret !== undefined && OPAQUE_SECRET.test(secret) ? sha256(secret) : undefined;
  const refusal = (client: Client | undefined) => clientRefusal(client, secret !== undefined, secretHash);
  const client = await getClientRechecked(
    clientId,
    (cached) => refusal(cached) === undefined || (secret !== undefined && secretHash === undefined),
  );
  const refused = refusal(client);
  if (refused) throw invalidClient(refused, usedBasic);
  return client!;
}

export function createTokenService(deps: {
  store: Pick<OAuthPort, 'getGrant' | 'revokeGrant'>;
  clock: Clock;
  /** The grant types this endpoint serves. */
  grants: GrantTable;
  /** Client records, cached (at most 30 s); a record the check refuses is read again first (ClientLookup). */
  getClientRechecked: ClientLookup['getClientRechecked'];
  /** The request's DPoP proof checked (RFC 9449 §5). */
  requestKey: TokenRequestKey;
}) {
  const { store, clock, grants, getClientRechecked, requestKey } = deps;
  const authenticate = (params: Params, credentials: PresentedCredentials) =>
    authenticateClient(getClientRechecked, params, credentials);

  return {
    authenticate,

    /** The grant_type values served, in registration order (discovery's grant_types_supported). */
    grantTypes: grants.names,

    /** POST /oauth/token. */
    async token(params: Params, credentials: PresentedCredentials, proof?: PresentedProof): Promise<TokenResponse> {
      const grantType = requiredParam(params, 'grant_type');
      const grant = grants.find(grantType);
      if (!grant) {
        // RFC 6749 §5.2: error_description is printable ASCII without '"' and '\'; echo only such
        // values.
        const printable = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,64}$/.test(grantType);
        const shown = printable ? `grant_type ${grantType}` : 'this grant_type';
        throw oauthError('unsupported_grant_type', `${shown} is not supported`);
      }
      const client = await authenticate(params, credentials);
      if (!grant.clients.includes(client.kind)) {
        throw oauthError('unauthorized_client', `this client may not use the ${grant.name} grant`);
      }
      // The parameters its declaration names, read before the grant runs (each at most once).
      const parameters = readGrantParameters(params, grant.parameters);
      const dpopJkt = await requestKey(proof);
      if (dpopJkt === undefined && client.dpop === 'required') {
        throw oauthError('invalid_dpop_proof', 'this client must send a DPoP proof with every token request');
      }
      return grant.handle({ client, parameters, ...(dpopJkt !== undefined ? { dpopJkt } : {}) });
    },

    /** POST /oauth/revoke (RFC 7009): unknown tokens are not an error. */
    async revoke(params: Params, credentials: PresentedCredentials): Promise<void> {
      const client = await authenticate(params, credentials);
      const token = requiredParam(params, 'token');
      const hint = optionalParam(params, 'token_type_hint');
      if (REFRESH_TOKEN.test(token)) {
        const grant = await liveGrant(store, token, clock.now());
        // A token of another client is left alone, and the answer does not tell (RFC 7009 §2.1).
        if (grant && grant.clientId === client.clientId) await store.revokeGrant(grant.grantId, clock.now());
        return;
      }
      if (hint === 'access_token' || token.split('.').length === 3) {
        throw oauthError(
          'unsupported_token_type',
          'access tokens are self-contained and expire within an hour; revoke the refresh token instead',
        );
      }
    },
  };
}
