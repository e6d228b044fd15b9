// The one error type of the domain. A refusal names its kind (what went wrong, in words every edge
// can map: HTTP status, gRPC status) and, where a standard defines one, the OAuth error code
// (RFC 6749 §5.2, RFC 6750 §3.1, RFC 7009, RFC 8693, OIDC Core §3.1.2.6). The message is written
// for the developer calling us and never carries internals; anything that is not a DomainError is
// a fault of ours, logged by the edge and answered as a plain server error.

export type ErrorKind =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  /** The thing existed and is gone for good (an expired mask): HTTP 410. */
  | 'gone'
  /** Something of that name exists already. */
  | 'conflict'
  /** The request is valid but the state it needs is not there (an inactive number). */
  | 'failed_precondition'
  | 'exhausted'
  /** A concurrent call got in first; retrying the same call resolves it. */
  | 'aborted'
  | 'unavailable';

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'access_denied'
  | 'unsupported_response_type'
  | 'server_error'
  | 'temporarily_unavailable'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'unsupported_token_type'
  | 'login_required'
  | 'consent_required'
  | 'interaction_required'
  | 'request_not_supported'
  | 'request_uri_not_supported'
  | 'account_setup_required'
  /** RFC 9449 §5, §7.1: a DPoP proof that is missing where needed or fails a check. */
  | 'invalid_dpop_proof'
  /** RFC 9449 §8, §9: the proof must carry the server's nonce (sent in DPoP-Nonce). */
  | 'use_dpop_nonce';

export type Challenge = 'Bearer' | 'Basic' | 'DPoP';

export interface DomainErrorOptions {
  /** The OAuth error code, where the refusal is one a standard names. */
  oauth?: OAuthErrorCode;
  /** A fixed, documented word for APIs outside OAuth (`not_in_service`, `rate_limited`). */
  code?: string;
  /** RFC 6750 / RFC 7617 / RFC 9449: the authentication scheme the caller should use (drives WWW-Authenticate). */
  challenge?: Challenge;
  /** RFC 9449 §8: the nonce the caller's next DPoP proof must carry (the DPoP-Nonce header). */
  dpopNonce?: string;
  /** RFC 6750 §3.1: the scope a token lacks (insufficient_scope). */
  scope?: string;
  /** Seconds the caller should wait before retrying (exhausted, unavailable). */
  retryAfterSeconds?: number;
}

export class DomainError extends Error {
  override name = 'DomainError';
  readonly oauth?: OAuthErrorCode;
  readonly code?: string;
  readonly challenge?: Challenge;
  readonly dpopNonce?: string;
  readonly scope?: string;
  readonly retryAfterSeconds?: number;

  constructor(
    readonly kind: ErrorKind,
    message: string,
    options: DomainErrorOptions = {},
  ) {
    super(message);
    if (options.oauth !== undefined) this.oauth = options.oauth;
    if (options.code !== undefined) this.code = options.code;
    if (options.challenge !== undefined) this.challenge = options.challenge;
    if (options.dpopNonce !== undefined) this.dpopNonce = options.dpopNonce;
    if (options.scope !== undefined) this.scope = options.scope;
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

export const invalidArgument = (message: string, options?: DomainErrorOptions) =>
  new DomainError('invalid_argument', message, options);
export const notFound = (message: string, options?: DomainErrorOptions) =>
  new DomainError('not_found', message, options);
export const failedPrecondition = (message: string, options?: DomainErrorOptions) =>
  new DomainError('failed_precondition', message, options);

/**
 * What each OAuth error code is, for refusals named by their code alone (token endpoint,
 * authorization redirects). Refusals that need another kind (a token exchange's NOT_FOUND) say so.
 */
const OAUTH_KINDS: Record<OAuthErrorCode, ErrorKind> = {
  invalid_request: 'invalid_argument',
  invalid_client: 'unauthenticated',
  invalid_grant: 'invalid_argument',
  unauthorized_client: 'forbidden',
  unsupported_grant_type: 'invalid_argument',
  invalid_scope: 'invalid_argument',
  invalid_target: 'invalid_argument',
  access_denied: 'forbidden',
  unsupported_response_type: 'invalid_argument',
  server_error: 'unavailable',
  temporarily_unavailable: 'unavailable',
  invalid_token: 'unauthenticated',
  insufficient_scope: 'forbidden',
  unsupported_token_type: 'invalid_argument',
  login_required: 'unauthenticated',
  consent_required: 'forbidden',
  interaction_required: 'unauthenticated',
  request_not_supported: 'invalid_argument',
  request_uri_not_supported: 'invalid_argument',
  account_setup_required: 'failed_precondition',
  // At the token endpoint (400); a resource server's refusal is unauthenticated (401, core/kernel/access.ts).
  invalid_dpop_proof: 'invalid_argument',
  use_dpop_nonce: 'invalid_argument',
};

export const oauthError = (oauth: OAuthErrorCode, message: string, options?: Omit<DomainErrorOptions, 'oauth'>) =>
  new DomainError(OAUTH_KINDS[oauth], message, { ...options, oauth });
