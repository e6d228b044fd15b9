// OAuth errors (RFC 6749 §4.1.2.1, §5.2; RFC 6750 §3.1; OIDC Core §3.1.2.6; RFC 7009 §2.2.1).

export type OAuthErrorCode =
  | 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unauthorized_client'
  | 'unsupported_grant_type' | 'invalid_scope' | 'access_denied' | 'unsupported_response_type'
  | 'server_error' | 'temporarily_unavailable' | 'invalid_token' | 'insufficient_scope'
  | 'unsupported_token_type' | 'login_required' | 'consent_required' | 'interaction_required'
  | 'request_not_supported' | 'request_uri_not_supported' | 'account_setup_required';

/** An error meant for the caller: its code and description are safe to show. */
export class OAuthError extends Error {
  constructor(readonly error: OAuthErrorCode, readonly description: string) {
    super(description);
    this.name = 'OAuthError';
  }
}
