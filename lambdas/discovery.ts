import { DPOP_ALGORITHMS } from '../core/kernel/access';
import { httpsIssuer } from '../core/kernel/config';
import { loginScopes, externalApiScopes } from '../core/kernel/scopes';
import { grantTypesSupported, oauthModule, type Modules } from '../core/registry';
import { edgeHandler } from './edge';
import { ANY_ORIGIN, publicJson } from './http';
import { lambdaHandler } from './runtime';

// OIDC Discovery 1.0 and RFC 8414 metadata: only what the service really supports.

/**
 * `grantTypes`: the names in the token endpoint's table of grants (core/registry.ts
 * `grantTypesSupported`), so the list cannot drift from what it serves.
 */
export function discoveryDocument(issuer: string, grantTypes: readonly string[]) {
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    userinfo_endpoint: `${issuer}/oauth/userinfo`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    end_session_endpoint: `${issuer}/logout`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    scopes_supported: [...Object.keys(loginScopes), ...Object.keys(externalApiScopes)],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: [...grantTypes],
    code_challenge_methods_supported: ['S256'],
    dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
    subject_types_supported: ['public'],
    // EdDSA by default; RS256 for the clients registered for it (--id-token-alg RS256).
    id_token_signing_alg_values_supported: ['EdDSA', 'RS256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
    claims_supported: [
      'sub',
      'svcnum',
      'email',
      'email_verified',
      'created_at',
      'account_type',
      'iss',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'azp',
    ],
    prompt_values_supported: ['none', 'login', 'consent'],
    authorization_response_iss_parameter_supported: true,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    claims_parameter_supported: false,
  };
}

/** The modules this group's routes use: oauth's issuer and published keys (it reads no store). */
export const discoveryModules = [oauthModule] as const;

export function createDiscoveryHandler({ oauth }: Pick<Modules, 'oauth'>) {
  const document = discoveryDocument(oauth.config.issuer, grantTypesSupported);
  return edgeHandler(
    {
      '/.well-known/openid-configuration': { GET: async () => publicJson(document, 3600) },
      // Short cache: a key added for rotation must reach verifiers well before it signs.
      '/.well-known/jwks.json': { GET: async () => publicJson({ keys: await oauth.publicKeys() }, 300) },
    },
    { errorHeaders: ANY_ORIGIN, secure: httpsIssuer(oauth.config) },
  );
}

export const handler = lambdaHandler(discoveryModules, createDiscoveryHandler, {});
