import { connect } from 'node:net';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { invalidToken, requireScope } from '../core/oauth/bearer';
import { DomainError, oauthError, type ErrorKind, type OAuthErrorCode } from '../core/kernel/errors';
import type { AccessTokenClaims } from '../core/oauth/tokens';
import { authenticate, grpcError, logger } from '../grpc-service/calls';
import { ListNumbersRequest } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { errorResult } from '../lambdas/http';
import { send, type Reply } from './support/flow';
import { asCall, failure, provisioningApp, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// One domain error type, one mapper per edge. The table: every kind and every OAuth code the
// HTTP and gRPC edges answer, unit by unit; then the same faults sent to /oauth/userinfo,
// /api/messages and a gRPC call get the same answer from each.

const body = (result: { body: string }) => JSON.parse(result.body) as Record<string, unknown>;
const trailer = (error: ServiceError) => error.metadata.get('oauth-error');

function refusal(check: () => unknown): DomainError {
  try {
    check();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('the mapping table', () => {
  // kind → HTTP status, the body's `error` word, gRPC status.
  const kinds: Array<[ErrorKind, number, string, status]> = [
    ['invalid_argument', 400, 'invalid_request', status.INVALID_ARGUMENT],
    ['unauthenticated', 401, 'unauthenticated', status.UNAUTHENTICATED],
    ['forbidden', 403, 'forbidden', status.PERMISSION_DENIED],
    ['not_found', 404, 'not_found', status.NOT_FOUND],
    ['gone', 410, 'gone', status.NOT_FOUND],
    ['conflict', 409, 'conflict', status.ALREADY_EXISTS],
    ['failed_precondition', 409, 'failed_precondition', status.FAILED_PRECONDITION],
    ['exhausted', 429, 'exhausted', status.RESOURCE_EXHAUSTED],
    ['aborted', 409, 'aborted', status.ABORTED],
    ['unavailable', 503, 'unavailable', status.UNAVAILABLE],
  ];

  it.each(kinds)('%s: HTTP %i {error: %s}, gRPC %s, no challenge, no trailer', (kind, httpStatus, word, grpcStatus) => {
    const error = new DomainError(kind, 'what went wrong');
    const result = errorResult(error, 'test');
    expect(result.statusCode).toBe(httpStatus);
    expect(body(result)).toEqual({ error: word, error_description: 'what went wrong' });
    expect(result.headers).toMatchObject({ 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    expect(result.headers?.['WWW-Authenticate']).toBeUndefined();
    expect(result.headers?.['Retry-After']).toBeUndefined();
    const mapped = grpcError(error, 'Test.Call');
    expect({ code: status[mapped.code], details: mapped.details }).toEqual({
      code: status[grpcStatus],
      details: 'what went wrong',
    });
    expect(trailer(mapped)).toEqual([]);
  });

  // OAuth code → HTTP status (RFC 6749 §5.2, RFC 6750 §3.1, RFC 8693 §2.2.2), gRPC status of its kind.
  const codes: Array<[OAuthErrorCode, number, status]> = [
    ['invalid_request', 400, status.INVALID_ARGUMENT],
    ['invalid_client', 401, status.UNAUTHENTICATED],
    ['invalid_grant', 400, status.INVALID_ARGUMENT],
    ['unauthorized_client', 400, status.PERMISSION_DENIED],
    ['unsupported_grant_type', 400, status.INVALID_ARGUMENT],
    ['invalid_scope', 400, status.INVALID_ARGUMENT],
    ['invalid_target', 400, status.INVALID_ARGUMENT],
    ['unsupported_token_type', 400, status.INVALID_ARGUMENT],
    ['invalid_token', 401, status.UNAUTHENTICATED],
    ['insufficient_scope', 403, status.PERMISSION_DENIED],
    ['temporarily_unavailable', 503, status.UNAVAILABLE],
    ['server_error', 500, status.UNAVAILABLE],
  ];

  it.each(codes)(
    '%s: HTTP %i with the code as error; gRPC %s with the code in the message and the oauth-error trailer',
    (code, httpStatus, grpcStatus) => {
      const error = oauthError(code, 'refused');
      const result = errorResult(error, 'test');
      expect(result.statusCode).toBe(httpStatus);
      expect(body(result)).toEqual({ error: code, error_description: 'refused' });
      expect(result.headers?.['WWW-Authenticate']).toBeUndefined();
      const mapped = grpcError(error, 'Test.Call');
      expect({ code: status[mapped.code], details: mapped.details }).toEqual({
        code: status[grpcStatus],
        details: `${code}: refused`,
      });
      expect(trailer(mapped)).toEqual([code]);
    },
  );

  it('an OAuth code wins over the kind for the HTTP status; the kind gives the gRPC status (token exchange)', () => {
    const error = new DomainError('not_found', 'subject_token names nothing of yours', { oauth: 'invalid_request' });
    expect(errorResult(error, 'oauth').statusCode).toBe(400);
    const mapped = grpcError(error, 'AgentService.ExchangeToken');
    expect({ code: mapped.code, trailer: trailer(mapped) }).toEqual({
      code: status.NOT_FOUND,
      trailer: ['invalid_request'],
    });
  });

  it("a documented code is the body's error; Retry-After travels with exhausted", () => {
    const suspended = errorResult(
      new DomainError('failed_precondition', 'number 1 is suspended', { code: 'not_in_service' }),
      'messaging',
    );
    expect({ status: suspended.statusCode, body: body(suspended) }).toEqual({
      status: 409,
      body: { error: 'not_in_service', error_description: 'number 1 is suspended' },
    });
    const limited = errorResult(
      new DomainError('exhausted', 'slow down', { code: 'rate_limited', retryAfterSeconds: 7 }),
      'public',
      { 'Access-Control-Allow-Origin': '*' },
    );
    expect(limited.statusCode).toBe(429);
    expect(body(limited).error).toBe('rate_limited');
    expect(limited.headers).toMatchObject({ 'Retry-After': '7', 'Access-Control-Allow-Origin': '*' });
  });

  it('Bearer refusals: the bare challenge without an OAuth code, the code and scope in the challenge otherwise, and no trailer on gRPC', () => {
    const bare = errorResult(new DomainError('unauthenticated', 'send a token', { challenge: 'Bearer' }), 'userinfo');
    expect({ status: bare.statusCode, body: bare.body, challenge: bare.headers?.['WWW-Authenticate'] }).toEqual({
      status: 401,
      body: '{}',
      challenge: 'Bearer realm="userinfo"',
    });

    const expired = errorResult(invalidToken('the access token expired'), 'messaging');
    expect(expired.statusCode).toBe(401);
    expect(expired.headers?.['WWW-Authenticate']).toBe(
      'Bearer realm="messaging", error="invalid_token", error_description="the access token expired"',
    );

    const claims = { sub: 's', client_id: 'c', scope: 'poll' } as AccessTokenClaims;
    const scope = refusal(() => requireScope(claims, 'messaging'));
    const forbidden = errorResult(scope, 'messaging');
    expect({ status: forbidden.statusCode, error: body(forbidden).error }).toEqual({
      status: 403,
      error: 'insufficient_scope',
    });
    expect(forbidden.headers?.['WWW-Authenticate']).toBe(
      'Bearer realm="messaging", error="insufficient_scope", error_description="this call needs a token with the messaging scope", scope="messaging"',
    );

    // Quotes and backslashes cannot appear inside an auth-param's quoted-string (RFC 6750 §3).
    const quoted = errorResult(
      new DomainError('unauthenticated', 'send one "Bearer" \\ header', {
        oauth: 'invalid_request',
        challenge: 'Bearer',
      }),
      'userinfo',
    );
    expect(quoted.statusCode).toBe(400);
    expect(quoted.headers?.['WWW-Authenticate']).toMatch(/^Bearer( [a-z_]+="[^"\\]*",?)+$/);
    expect(body(quoted).error_description).toBe('send one "Bearer" \\ header');

    for (const error of [
      new DomainError('unauthenticated', 'send a token', { challenge: 'Bearer' }),
      invalidToken('expired'),
      scope,
    ]) {
      const mapped = grpcError(error, 'Test.Call');
      expect(trailer(mapped)).toEqual([]);
      expect(mapped.details).toBe(error.message);
    }
    expect(grpcError(scope, 'Test.Call').code).toBe(status.PERMISSION_DENIED);
  });

  it('invalid_client: 401, with a Basic challenge only when the client tried Basic', () => {
    const viaBasic = errorResult(
      oauthError('invalid_client', 'client authentication failed', { challenge: 'Basic' }),
      'oauth',
    );
    expect({ status: viaBasic.statusCode, challenge: viaBasic.headers?.['WWW-Authenticate'] }).toEqual({
      status: 401,
      challenge: 'Basic realm="oauth", charset="UTF-8"',
    });
    const posted = errorResult(oauthError('invalid_client', 'client authentication failed'), 'oauth');
    expect({ status: posted.statusCode, challenge: posted.headers?.['WWW-Authenticate'] }).toEqual({
      status: 401,
      challenge: undefined,
    });
  });

  it('anything that is not a DomainError is INTERNAL with a generic message, logged on the server only', () => {
    const logged = vi.spyOn(logger, 'error').mockImplementation(() => undefined);
    try {
      const mapped = grpcError(new Error('table local-users at 10.0.0.7'), 'Test.Call');
      expect({ code: mapped.code, details: mapped.details, trailer: trailer(mapped) }).toEqual({
        code: status.INTERNAL,
        details: 'the service failed; retry the call',
        trailer: [],
      });
      expect(logged).toHaveBeenCalledWith('call failed', expect.objectContaining({ method: 'Test.Call' }));
    } finally {
      logged.mockRestore();
    }
  });
});

describe('the same fault gets the same answer at every edge', () => {
  let service: TestService;
  let app: ProvisioningApp;

  beforeAll(async () => {
    service = await startTestService();
    app = await provisioningApp(service);
  });

  afterAll(async () => {
    app?.close();
    await service?.close();
  });

  const http = (path: string, authorization?: string) =>
    send(`${service.issuer}${path}`, {
      method: 'POST',
      headers: {
        ...(authorization !== undefined ? { Authorization: authorization } : {}),
        'Content-Type': 'application/json',
      },
      body: JSON.stringify({ to: '10000000000', text: 'x' }),
    });
  const grpc = (authorization?: string, client = app) => {
    const metadata = new Metadata();
    if (authorization !== undefined) metadata.set('authorization', authorization);
    return failure(
      new Promise((resolve, reject) => {
        client.numbers.listNumbers(ListNumbersRequest.fromPartial({}), metadata, (error, response) =>
          error ? reject(error) : resolve(response),
        );
      }),
    );
  };
  const answer = (reply: Reply) => ({
    status: reply.status,
    body: reply.json,
    challenge: reply.headers.get('www-authenticate'),
  });

  /** The HTTP answer at both Bearer routes, each in its own realm; the gRPC refusal with the same message. */
  async function sameEverywhere(
    authorization: string | undefined,
    expected: { status: number; error?: string; grpc: status },
  ) {
    const userinfo = answer(await http('/oauth/userinfo', authorization));
    const messages = answer(await http('/api/messages', authorization));
    const refused = await grpc(authorization);
    expect(userinfo.status).toBe(expected.status);
    expect(messages.status).toBe(expected.status);
    expect(messages.body).toEqual(userinfo.body);
    expect(messages.challenge?.replace('realm="messaging"', 'realm="userinfo"')).toBe(userinfo.challenge);
    expect(refused.code).toBe(expected.grpc);
    expect(trailer(refused)).toEqual([]);
    if (expected.error) {
      expect(userinfo.body.error).toBe(expected.error);
      expect(userinfo.challenge).toMatch(new RegExp(`^Bearer realm="userinfo", error="${expected.error}"`));
      expect(refused.details).toBe(userinfo.body.error_description);
    } else {
      expect(userinfo.body).toEqual({});
      expect(userinfo.challenge).toBe('Bearer realm="userinfo"');
      expect(refused.details).toMatch(/^send one "authorization: Bearer/);
    }
    return { userinfo, messages, refused };
  }

  it('no credential, or another scheme: the bare challenge (401 {}), UNAUTHENTICATED', async () => {
    for (const authorization of [undefined, 'Basic dXNlcjpwYXNz', app.token]) {
      await sameEverywhere(authorization, { status: 401, grpc: status.UNAUTHENTICATED });
    }
  });

  it('a malformed Bearer header: 400 invalid_request (also at /api/messages, which answered 401 before), UNAUTHENTICATED', async () => {
    for (const authorization of ['Bearer', 'Bearer a b', `Bearer ${app.token} extra`]) {
      const { userinfo } = await sameEverywhere(authorization, {
        status: 400,
        error: 'invalid_request',
        grpc: status.UNAUTHENTICATED,
      });
      expect(userinfo.body.error_description).toBe('the authorization header must be: Bearer <access token>');
    }
  });

  it('two Authorization headers (RFC 6750 §3.1), same or different case, even both valid: 400 invalid_request, as on gRPC', async () => {
    /**
     * Raw HTTP/1.1 on a socket: header lines exactly as given (node:http would merge names that differ in case only).
     */
    const raw = (path: string, headerLines: string[]) =>
      new Promise<{ status: number; body: Record<string, unknown>; challenge?: string }>((resolve, reject) => {
        const payload = JSON.stringify({ to: '10000000000', text: 'x' });
        const socket = connect(service.port, service.host);
        let text = '';
        socket
          .setEncoding('utf8')
          .on('data', (chunk: string) => {
            text += chunk;
          })
          .on('error', reject)
          .on('end', () => {
            const [head, body = ''] = text.split('\r\n\r\n');
            const lines = head!.split('\r\n');
            const challenge = lines.find((line) => /^www-authenticate:/i.test(line))?.replace(/^[^:]+:\s*/, '');
            resolve({
              status: Number(lines[0]!.split(' ')[1]),
              body: JSON.parse(body) as Record<string, unknown>,
              ...(challenge ? { challenge } : {}),
            });
          });
        // Written, not ended: the server closes the connection after its answer (Connection: close).
        socket.write(
          [
            `POST ${path} HTTP/1.1`,
            `Host: ${service.host}:${service.port}`,
            ...headerLines,
            'Content-Type: application/json',
            `Content-Length: ${Buffer.byteLength(payload)}`,
            'Connection: close',
            '',
            payload,
          ].join('\r\n'),
        );
      });
    const token = `Bearer ${app.token}`;
    // gRPC: grpc-js will not send two `authorization` values (test/grpc-server.test.ts), so the call's
    // authentication is given them directly.
    const metadata = new Metadata();
    metadata.add('authorization', token);
    metadata.add('authorization', token);
    const refused = await authenticate(service.core, asCall(metadata), 'prov:numbers').then(
      () => undefined,
      (error: ServiceError) => error,
    );
    expect(refused?.code).toBe(status.UNAUTHENTICATED);
    for (const headerLines of [
      [`Authorization: ${token}`, `Authorization: ${token}`],
      [`Authorization: ${token}`, 'Authorization: Bearer garbage'],
      [`Authorization: ${token}`, `authorization: ${token}`],
    ]) {
      for (const [path, realm] of [
        ['/oauth/userinfo', 'userinfo'],
        ['/api/messages', 'messaging'],
      ] as const) {
        const reply = await raw(path, headerLines);
        expect({ path, status: reply.status, body: reply.body }).toEqual({
          path,
          status: 400,
          body: { error: 'invalid_request', error_description: refused?.details },
        });
        expect(reply.challenge).toMatch(new RegExp(`^Bearer realm="${realm}", error="invalid_request"`));
      }
    }
    // One header is judged on its token (this provisioning token lacks the openid scope).
    expect((await raw('/oauth/userinfo', [`Authorization: ${token}`])).body.error).toBe('insufficient_scope');
  });

  it('a garbage or expired token: 401 invalid_token, UNAUTHENTICATED, with the same message', async () => {
    const { userinfo: garbage } = await sameEverywhere('Bearer garbage', {
      status: 401,
      error: 'invalid_token',
      grpc: status.UNAUTHENTICATED,
    });
    expect(garbage.body.error_description).toBe('the access token is invalid');
    service.clock.advance(61 * 60_000);
    const { userinfo: expired } = await sameEverywhere(`Bearer ${app.token}`, {
      status: 401,
      error: 'invalid_token',
      grpc: status.UNAUTHENTICATED,
    });
    expect(expired.body.error_description).toBe('the access token expired');
  });

  it('a token without the scope: 403 insufficient_scope naming it, PERMISSION_DENIED', async () => {
    const agentsOnly = await provisioningApp(service, { scope: 'prov:agents' });
    try {
      const token = `Bearer ${agentsOnly.token}`;
      const userinfo = answer(await http('/oauth/userinfo', token));
      const messages = answer(await http('/api/messages', token));
      const refused = await grpc(token, agentsOnly);
      for (const [reply, scope] of [
        [userinfo, 'openid'],
        [messages, 'messaging'],
      ] as const) {
        expect({ status: reply.status, error: reply.body.error, description: reply.body.error_description }).toEqual({
          status: 403,
          error: 'insufficient_scope',
          description: `this call needs a token with the ${scope} scope`,
        });
        expect(reply.challenge).toContain(`error="insufficient_scope"`);
        expect(reply.challenge).toContain(`scope="${scope}"`);
      }
      expect({ code: refused.code, details: refused.details, trailer: trailer(refused) }).toEqual({
        code: status.PERMISSION_DENIED,
        details: 'this call needs a token with the prov:numbers scope',
        trailer: [],
      });
    } finally {
      agentsOnly.close();
    }
  });
});
