// The grant_type values OAuth's own plug-ins serve (RFC 6749 §4.1, §6, §4.4), in the order the
// token endpoint registers them. Data only: discovery reads the list without building a grant.

export const AUTHORIZATION_CODE = 'authorization_code';
export const REFRESH_TOKEN = 'refresh_token';
export const CLIENT_CREDENTIALS = 'client_credentials';

export const oauthGrantTypes = [AUTHORIZATION_CODE, REFRESH_TOKEN, CLIENT_CREDENTIALS] as const;
