import { Logger } from '@aws-lambda-powertools/logger';
import { Metadata, status, type sendUnaryData, type ServerUnaryCall, type ServerWritableStream, type ServiceError } from '@grpc/grpc-js';
import { once } from 'node:events';
import type { ProvisioningScope } from '../core/scopes';
import { DomainError } from '../core/kernel/errors';
import { ProvisioningError, type ProvisioningErrorCode } from '../core/provisioning/errors';
import type { Caller } from '../core/provisioning/programmable';
import type { Core } from '../core/service';
import { bearerToken, InvalidTokenError } from '../core/tokens';

// Every RPC goes through `unary`: authenticate the bearer token, check the RPC's prov:* scope,
// run the core call, and turn failures into gRPC statuses with messages a developer can act on.
// One structured log line per call; never a token or secret.

export const logger = new Logger({ serviceName: 'svcnum-provisioning' });

const CODES: Record<ProvisioningErrorCode, status> = {
  invalid_argument: status.INVALID_ARGUMENT,
  not_found: status.NOT_FOUND,
  already_exists: status.ALREADY_EXISTS,
  failed_precondition: status.FAILED_PRECONDITION,
  resource_exhausted: status.RESOURCE_EXHAUSTED,
  permission_denied: status.PERMISSION_DENIED,
  aborted: status.ABORTED,
  unavailable: status.UNAVAILABLE,
};

export class CallError extends Error {
  constructor(readonly code: status, message: string, readonly trailers?: Metadata) {
    super(message);
  }
}

function serviceError(error: CallError): Partial<ServiceError> {
  return { code: error.code, details: error.message, ...(error.trailers ? { metadata: error.trailers } : {}) };
}



/** A caller and the scopes its token carries (for RPCs whose scope depends on the resource). */
export type ScopedCaller = Caller & { scopes: readonly string[] };

/**
 * The provisioning client behind the call, or UNAUTHENTICATED / PERMISSION_DENIED. `scope` is the
 * scope the RPC needs, or a list of which the token must carry at least one (the core then
 * checks the one the resource needs).
 */
export async function authenticate(core: Core, metadata: Metadata, scope: ProvisioningScope | readonly ProvisioningScope[]): Promise<ScopedCaller> {
  const values = metadata.get('authorization');
  if (values.length !== 1 || typeof values[0] !== 'string') throw new CallError(status.UNAUTHENTICATED, 'send one "authorization: Bearer <access token>" header (client_credentials grant)');
  const token = bearerToken(values[0]);
  if (!token) throw new CallError(status.UNAUTHENTICATED, 'the authorization header must be "Bearer <access token>"');
  let claims;
  try {
    claims = await core.verifyAccessToken(token);
  } catch (error) {
    if (error instanceof InvalidTokenError) throw new CallError(status.UNAUTHENTICATED, error.message);
    throw error;
  }
  const client = await core.getClient(claims.client_id);
  if (!client || client.disabled || client.kind !== 'provisioning' || claims.sub !== client.clientId || !client.ownerId) {
    throw new CallError(status.UNAUTHENTICATED, 'the token does not belong to an enabled provisioning client');
  }
  const granted = claims.scope.split(' ');
  const anyOf: readonly ProvisioningScope[] = typeof scope === 'string' ? [scope] : scope;
  if (!anyOf.some((needed) => granted.includes(needed))) throw new CallError(status.PERMISSION_DENIED, `this call needs a token with the ${anyOf.join(' or ')} scope`);
  if (!(await core.accountActive(client.ownerId))) throw new CallError(status.PERMISSION_DENIED, 'the account of this provisioning client is not active');
  return { ownerId: client.ownerId, clientId: client.clientId, scopes: granted };
}

/** A core failure as the status the caller gets; anything unexpected becomes INTERNAL, logged here only. */
function toCallError(error: unknown, method: string): CallError {
  if (error instanceof CallError) return error;
  // Bridge until the one gRPC mapper (issue 10) maps every DomainError kind: the page-token codec's refusals.
  if (error instanceof DomainError && error.kind === 'invalid_argument') return new CallError(status.INVALID_ARGUMENT, error.message);
  if (error instanceof ProvisioningError) {
    if (!error.oauthError) return new CallError(CODES[error.code], error.message);
    // RFC 8693 error code, machine-readable next to the status.
    const trailers = new Metadata();
    trailers.set('oauth-error', error.oauthError);
    return new CallError(CODES[error.code], error.message, trailers);
  }
  logger.error('call failed', { method, error: error as Error });
  return new CallError(status.INTERNAL, 'the service failed; retry the call');
}

export function unary<Request, Response>(core: Core, method: string, scope: ProvisioningScope | readonly ProvisioningScope[], run: (caller: ScopedCaller, request: Request) => Promise<Response>) {
  return (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => {
    const started = performance.now();
    authenticate(core, call.metadata, scope)
      .then((caller) => run(caller, call.request))
      .then(
        (response) => {
          logger.info('call', { method, code: 'OK', durationMs: Math.round((performance.now() - started) * 10) / 10 });
          callback(null, response);
        },
        (error: unknown) => {
          const failure = toCallError(error, method);
          logger.info('call', { method, code: status[failure.code], durationMs: Math.round((performance.now() - started) * 10) / 10 });
          callback(serviceError(failure), null);
        },
      );
  };
}

/**
 * A server-streaming RPC: authenticated like `unary`; `run` writes through `send` (which waits
 * when the client reads slowly) until it returns, the client cancels, or `closing` (server
 * drain) aborts; then the call ends normally. Failures become statuses as in `unary`.
 */
export function serverStream<Request, Response>(
  core: Core, method: string, scope: ProvisioningScope, closing: AbortSignal,
  run: (caller: Caller, request: Request, send: (response: Response) => Promise<void>, signal: AbortSignal) => Promise<void>,
) {
  return (call: ServerWritableStream<Request, Response>) => {
    const started = performance.now();
    const stop = new AbortController();
    const abort = () => stop.abort();
    call.on('cancelled', abort);
    closing.addEventListener('abort', abort);
    let sent = 0;
    const send = async (response: Response) => {
      sent++;
      if (!call.write(response)) await once(call, 'drain', { signal: stop.signal }).catch(() => undefined);
    };
    authenticate(core, call.metadata, scope)
      .then((caller) => run(caller, call.request, send, stop.signal))
      .then(
        () => {
          logger.info('stream', { method, code: 'OK', messages: sent, durationMs: Math.round(performance.now() - started) });
          if (!call.cancelled) call.end();
        },
        (error: unknown) => {
          const failure = toCallError(error, method);
          logger.info('stream', { method, code: status[failure.code], messages: sent, durationMs: Math.round(performance.now() - started) });
          if (!call.cancelled) call.emit('error', serviceError(failure));
        },
      )
      .finally(() => closing.removeEventListener('abort', abort));
  };
}
