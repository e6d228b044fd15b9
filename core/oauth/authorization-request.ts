import { limits } from '../kernel/config';
import { DomainError, oauthError } from '../kernel/errors';
import type { AuthRequest, Client } from '../kernel/model';
import { optionalParam, type Params } from '../kernel/params';
import type { Clock, Random } from '../kernel/ports';
import { parseScope } from '../kernel/scopes';
import { randomSecret } from '../kernel/secrets';

// The parameters of GET /oauth/authorize, once the client and its redirect URI are known: every
// error here may be redirected to the client, so each carries the request's state.

const CODE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const SUPPORTED_PROMPTS = new Set(['none', 'login', 'consent']);
const MAX_STATE_LENGTH = 2048;
const MAX_NONCE_LENGTH = 512;

/** A refusal of an authorization request, with the state to send back with it. */
export type RedirectableError = DomainError & { state?: string };

/** Reads the request's parameters; every refusal carries its state. */
interface RequestReader {
  params: Params;
  param(name: string): string | undefined;
  fail(error: DomainError): never;
}

function requestReader(params: Params, state: string | undefined): RequestReader {
  const fail = (error: DomainError): never => {
    throw Object.assign(error, { state });
  };
  // Repeated or oversized parameters are refused too, and their errors must also carry state.
  const param = (name: string) => {
    try {
      return optionalParam(params, name);
    } catch (error) {
      if (error instanceof DomainError) fail(error);
      throw error;
    }
  };
  return { params, param, fail };
}

function checkResponseType({ params, param, fail }: RequestReader) {
  if (params.has('request')) fail(oauthError('request_not_supported', 'request objects are not supported'));
  if (params.has('request_uri')) fail(oauthError('request_uri_not_supported', 'request_uri is not supported'));
  const responseType = param('response_type');
  if (responseType === undefined) fail(oauthError('invalid_request', 'response_type is required'));
  if (responseType !== 'code') fail(oauthError('unsupported_response_type', 'only response_type=code is supported'));
  const responseMode = param('response_mode');
  if (responseMode !== undefined && responseMode !== 'query') {
    fail(oauthError('invalid_request', 'only response_mode=query is supported'));
  }
}

function readScopes({ param, fail }: RequestReader, client: Client): string[] {
  const scopeValue = param('scope');
  if (scopeValue === undefined) fail(oauthError('invalid_request', 'scope is required'));
  const scopes = parseScope(scopeValue!);
  if (!scopes) fail(oauthError('invalid_scope', 'scope is not a valid space-separated list'));
  // Descriptions never echo what was sent: clients show them to people (a phishing lure
  // otherwise), and RFC 6749 §4.1.2.1 limits their characters.
  if (scopes!.some((scope) => !client.scopes.includes(scope))) {
    fail(oauthError('invalid_scope', `scope not allowed for this client (allowed: ${client.scopes.join(' ')})`));
  }
  return scopes!;
}

function readCodeChallenge({ param, fail }: RequestReader): string {
  const codeChallenge = param('code_challenge');
  const method = param('code_challenge_method');
  if (codeChallenge === undefined) fail(oauthError('invalid_request', 'code_challenge is required (PKCE with S256)'));
  if (method === undefined) fail(oauthError('invalid_request', 'code_challenge_method is required and must be S256'));
  if (method !== 'S256') {
    fail(oauthError('invalid_request', 'code_challenge_method must be S256; plain is not supported'));
  }
  if (!CODE_CHALLENGE.test(codeChallenge!)) {
    const message = 'code_challenge must be the base64url SHA-256 of the code_verifier (43 characters)';
    fail(oauthError('invalid_request', message));
  }
  return codeChallenge!;
}

function readPrompts({ param, fail }: RequestReader): string[] {
  const prompts = (param('prompt') ?? '').split(' ').filter(Boolean);
  const unsupported = prompts.filter((prompt) => !SUPPORTED_PROMPTS.has(prompt));
  if (unsupported.length > 0) {
    fail(oauthError('invalid_request', 'prompt value not supported (supported: none, login, consent)'));
  }
  if (prompts.includes('none') && prompts.length > 1) {
    fail(oauthError('invalid_request', 'prompt=none cannot be combined with other values'));
  }
  return prompts;
}

/**
 * Validates everything the client sent; throws a DomainError (with its OAuth code and the state)
 * for errors that may be redirected.
 */
export function parseAuthorizationRequest(
  ctx: { clock: Clock; random: Random },
  params: Params,
  client: Client,
  redirectUri: string,
): AuthRequest {
  const state = optionalParam(params, 'state');
  const reader = requestReader(params, state);
  const { param, fail } = reader;
  if (state !== undefined && state.length > MAX_STATE_LENGTH) {
    fail(oauthError('invalid_request', `state is longer than ${MAX_STATE_LENGTH} characters`));
  }
  checkResponseType(reader);
  const scopes = readScopes(reader, client);
  const codeChallenge = readCodeChallenge(reader);
  const nonce = param('nonce');
  if (nonce !== undefined && nonce.length > MAX_NONCE_LENGTH) {
    fail(oauthError('invalid_request', `nonce is longer than ${MAX_NONCE_LENGTH} characters`));
  }
  // RFC 9449 §10: the code will be redeemed only with a proof of this key (a base64url SHA-256 thumbprint).
  const dpopJkt = param('dpop_jkt');
  if (dpopJkt !== undefined && !CODE_CHALLENGE.test(dpopJkt)) {
    fail(oauthError('invalid_request', 'dpop_jkt must be a base64url SHA-256 JWK thumbprint (43 characters)'));
  }
  const prompts = readPrompts(reader);
  const maxAgeValue = param('max_age');
  if (maxAgeValue !== undefined && !/^\d{1,9}$/.test(maxAgeValue)) {
    fail(oauthError('invalid_request', 'max_age must be a non-negative integer'));
  }
  return {
    requestId: randomSecret(ctx.random),
    clientId: client.clientId,
    redirectUri,
    scopes,
    ...(state !== undefined ? { state } : {}),
    ...(nonce !== undefined ? { nonce } : {}),
    codeChallenge,
    ...(dpopJkt !== undefined ? { dpopJkt } : {}),
    forceLogin: prompts.includes('login'),
    forceConsent: prompts.includes('consent'),
    promptNone: prompts.includes('none'),
    ...(maxAgeValue !== undefined ? { maxAge: Number(maxAgeValue) } : {}),
    expiresAt: ctx.clock.now() + limits.authRequestTtl,
  };
}
