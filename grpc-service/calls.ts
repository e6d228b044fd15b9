import {
  Metadata,
  ServerInterceptingCall,
  status,
  type sendUnaryData,
  type ServerInterceptor,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceError,
} from '@grpc/grpc-js';
import { once } from 'node:events';
import { createLogger } from '../core/adapters/log';
import { insufficientScope, invalidToken } from '../core/oauth/bearer';
import { DomainError, type ErrorKind } from '../core/kernel/errors';
import { httpsIssuer, type ServiceConfig } from '../core/kernel/config';
import type { ProvisioningScope } from '../core/kernel/scopes';
import type { CallerRefusals, ScopedCaller } from '../core/provisioning/callers';
import type { Caller } from '../core/provisioning/programmable';
import type { Modules } from '../core/registry';

// How every RPC is served. Two server interceptors: `logCalls` writes one structured line per
// call (never a token or secret), `authenticateCalls` finds the provisioning client behind a call
// and checks its scope before the handler runs. Handlers (`unary`, `serverStream`) run the core
// call; whatever they throw becomes a gRPC status through `grpcError`, the one mapping.

export const logger = createLogger('svcnum-provisioning');

const STATUS: Record<ErrorKind, status> = {
  invalid_argument: status.INVALID_ARGUMENT,
  unauthenticated: status.UNAUTHENTICATED,
  forbidden: status.PERMISSION_DENIED,
  not_found: status.NOT_FOUND,
  // gRPC has no "gone": the thing is not there (AIP-193).
  gone: status.NOT_FOUND,
  conflict: status.ALREADY_EXISTS,
  failed_precondition: status.FAILED_PRECONDITION,
  exhausted: status.RESOURCE_EXHAUSTED,
  aborted: status.ABORTED,
  unavailable: status.UNAVAILABLE,
};

const serviceError = (code: status, details: string, metadata = new Metadata()): ServiceError =>
  Object.assign(new Error(details), { code, details, metadata });

/** `/svcnum.provisioning.v1alpha1.AgentService/ListAgents` → `AgentService.ListAgents`. */
const methodName = (path: string) => {
  const [, service = '', rpc = ''] = path.split('/');
  return `${service.slice(service.lastIndexOf('.') + 1)}.${rpc}`;
};

/**
 * A failure as the status the caller gets: a DomainError by its kind, with its message; anything
 * else is INTERNAL with a generic message, the details logged here only. A refused token request
 * (RFC 8693 §2.2.2) names its OAuth code in the message and the `oauth-error` trailer; a refused
 * credential (one with a challenge, RFC 6750) is said by UNAUTHENTICATED / PERMISSION_DENIED
 * alone, as HTTP says it in WWW-Authenticate rather than as a token endpoint error.
 */
export function grpcError(error: unknown, method: string): ServiceError {
  if (!(error instanceof DomainError)) {
    logger.error('call failed', { method, error: error as Error });
    return serviceError(status.INTERNAL, 'the service failed; retry the call');
  }
  // RFC 9449: a DPoP refusal names its code (invalid_dpop_proof, invalid_token).
  if (error.challenge === 'DPoP') return serviceError(STATUS[error.kind], `${error.oauth}: ${error.message}`);
  if (!error.oauth || error.challenge) return serviceError(STATUS[error.kind], error.message);
  const trailers = new Metadata();
  trailers.set('oauth-error', error.oauth);
  return serviceError(STATUS[error.kind], `${error.oauth}: ${error.message}`, trailers);
}

/**
 * The scope an RPC needs, or a list of which the token must carry at least one (the core then checks the one the
 * resource needs).
 */
export type CallScope = ProvisioningScope | readonly ProvisioningScope[];

/** A refused caller as RFC 6750 says it (UNAUTHENTICATED / PERMISSION_DENIED here). */
const BEARER_REFUSALS: CallerRefusals = {
  client: () => invalidToken('the token does not belong to an enabled provisioning client'),
  scope: insufficientScope,
  // Reached only if the owner was disabled between tokenInForce and this check: the same refusal.
  owner: () => invalidToken('this token can no longer be used: its owner account is not active'),
};

/** The modules that authenticate a call. */
type CallModules = Pick<Modules, 'oauth' | 'authentication' | 'accounts' | 'tokenExchange'>;

/** A call as authentication sees it: its metadata, path (`/<package.Service>/<Method>`) and `:authority`. */
export interface AuthenticatedCall {
  metadata: Metadata;
  getPath(): string;
  getHost(): string;
}

/**
 * RFC 9449 §4.3 for gRPC (docs/grpc-api.md): a call is an HTTP/2 POST, so a proof's htm is POST and its
 * htu `<GRPC_ORIGIN><path>` (the stack's public origin: a caller's :authority must not choose what a
 * proof is checked against); without one (npm start on loopback) `<scheme>://<:authority><path>`,
 * https when the issuer is, else http.
 */
export const callTarget = (
  config: Pick<ServiceConfig, 'issuer' | 'grpcOrigin'>,
  call: Pick<AuthenticatedCall, 'getPath' | 'getHost'>,
) => ({
  method: 'POST',
  url: `${config.grpcOrigin ?? `${httpsIssuer(config) ? 'https' : 'http'}://${call.getHost()}`}${call.getPath()}`,
});

/**
 * The provisioning client behind the call, or its refusal as a gRPC status (UNAUTHENTICATED,
 * PERMISSION_DENIED): the Bearer or DPoP token as every edge checks it, then a provisioning client
 * of an active account with the scope the RPC needs.
 */
export async function authenticate(
  modules: CallModules,
  call: AuthenticatedCall,
  scope: CallScope,
  method = 'authenticate',
): Promise<ScopedCaller> {
  try {
    return await callerOf(modules, call, scope);
  } catch (error) {
    throw grpcError(error, method);
  }
}

/**
 * `authenticate` before its refusal is a gRPC status (a DomainError). `withProof: false` (a long
 * call checking itself again) skips the DPoP proof, whose jti was used when the call was admitted.
 */
async function callerOf(
  { oauth, authentication, accounts, tokenExchange }: CallModules,
  call: AuthenticatedCall,
  scope: CallScope,
  withProof = true,
): Promise<ScopedCaller> {
  const { metadata } = call;
  const presented = {
    authorization: metadata.get('authorization'),
    dpop: metadata.get('dpop'),
    target: callTarget(oauth.config, call),
  };
  const claims = await authentication.authenticate(presented, withProof);
  // A provisioning client's own token (client_credentials), not one it obtained for someone else.
  if (claims.sub !== claims.client_id) throw BEARER_REFUSALS.client();
  // Disabled means disabled: the client and its owner enabled (UNAUTHENTICATED otherwise), a refusing record read again
  // first.
  const client = await accounts.tokenInForce(claims);
  return await tokenExchange.provisioningCaller(client, claims.scope.split(' '), scope, BEARER_REFUSALS);
}

/** A call's caller, and how to check again that it may still call (a long stream does, now and then). */
interface CallerOfCall {
  caller: ScopedCaller;
  /** Authenticates the call's token again as at its start; rejects with the refusal (a DomainError). */
  recheck: () => Promise<ScopedCaller>;
}

/**
 * Callers by the Metadata object of their call: the object grpc-js hands this interceptor is the
 * one the handler gets as `call.metadata`. Nothing a client sends can put an entry here.
 */
const callers = new WeakMap<Metadata, CallerOfCall>();

/**
 * Authenticates every call of a method in `scopes` (by path) before its handler runs; other
 * methods (health, reflection) pass as they are. Our authenticated methods are unary or server
 * streaming, so at half-close the request has arrived and passed the schema check (a misfit is
 * refused before this, and never reaches here): a refused call ends with its status, an admitted
 * one reaches the handler with its caller.
 */
export function authenticateCalls(modules: CallModules, scopes: ReadonlyMap<string, CallScope>): ServerInterceptor {
  return (method, call) => {
    const scope = scopes.get(method.path);
    if (!scope) return new ServerInterceptingCall(call);
    let metadata = new Metadata();
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (received, pass) => {
            metadata = received;
            pass(received);
          },
          onReceiveHalfClose: (pass) => {
            const admitted = { metadata, getPath: () => method.path, getHost: () => call.getHost() };
            authenticate(modules, admitted, scope, methodName(method.path)).then(
              (caller) => {
                // The handler's failures become statuses where it runs (`serve`): a refusal on a recheck too.
                callers.set(metadata, { caller, recheck: () => callerOf(modules, admitted, scope, false) });
                pass();
              },
              (refusal: ServiceError) => call.sendStatus(refusal),
            );
          },
        }),
    });
  };
}

/** One log line per call: method, status, duration and, for streams, the messages sent. */
export const logCalls: ServerInterceptor = (method, call) => {
  const started = performance.now();
  let messages = 0;
  let logged = false;
  const log = (code: status) => {
    if (logged) return;
    logged = true;
    const elapsed = performance.now() - started;
    if (method.responseStream)
      logger.info('stream', {
        method: methodName(method.path),
        code: status[code],
        messages,
        durationMs: Math.round(elapsed),
      });
    else
      logger.info('call', {
        method: methodName(method.path),
        code: status[code],
        durationMs: Math.round(elapsed * 10) / 10,
      });
  };
  return new ServerInterceptingCall(call, {
    start: (next) => next({ onCancel: () => log(status.CANCELLED) }),
    sendMessage: (message, next) => {
      messages++;
      next(message);
    },
    sendStatus: (sent, next) => {
      log(sent.code);
      next(sent);
    },
  });
};

/** Runs a handler's work with the call's caller; a failure comes back as the status the caller gets. */
async function serve<T>(
  call: { metadata: Metadata; getPath(): string },
  work: (caller: ScopedCaller, recheck: () => Promise<ScopedCaller>) => Promise<T>,
): Promise<T> {
  try {
    const entry = callers.get(call.metadata);
    // Fails closed: a method missing from the scope table has no caller, and is INTERNAL.
    if (!entry) throw new Error(`${call.getPath()} ran without an authenticated caller`);
    return await work(entry.caller, entry.recheck);
  } catch (error) {
    throw grpcError(error, methodName(call.getPath()));
  }
}

export function unary<Request, Response>(run: (caller: ScopedCaller, request: Request) => Promise<Response>) {
  return (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => {
    serve(call, (caller) => run(caller, call.request)).then(
      (response) => callback(null, response),
      (failure: ServiceError) => callback(failure, null),
    );
  };
}

/**
 * A server-streaming RPC: `run` writes through `send` (which waits when the client reads slowly)
 * until it returns, the client cancels, or `closing` (server drain) aborts. It ends with OK when
 * `run` returns, and with UNAVAILABLE on a drain, as gRPC servers end calls on shutdown: clients
 * and standard retry policies then call again (OK would read as "done"). Failures become statuses
 * as in `unary`. `recheck` authenticates the call again as at its start (its token, client and
 * account): a long stream calls it now and then, and its refusal ends the stream with that status.
 */
export function serverStream<Request, Response>(
  closing: AbortSignal,
  run: (
    caller: Caller,
    request: Request,
    send: (response: Response) => Promise<void>,
    signal: AbortSignal,
    recheck: () => Promise<unknown>,
  ) => Promise<void>,
) {
  return (call: ServerWritableStream<Request, Response>) => {
    const stop = new AbortController();
    const abort = () => stop.abort();
    call.on('cancelled', abort);
    closing.addEventListener('abort', abort);
    const send = async (response: Response) => {
      if (!call.write(response)) await once(call, 'drain', { signal: stop.signal }).catch(() => undefined);
    };
    serve(call, (caller, recheck) => run(caller, call.request, send, stop.signal, recheck))
      .then(
        () => {
          if (call.cancelled) return;
          if (closing.aborted)
            call.emit(
              'error',
              serviceError(status.UNAVAILABLE, 'the server is shutting down: call again with your resume cursor'),
            );
          else call.end();
        },
        (failure: ServiceError) => {
          if (!call.cancelled) call.emit('error', failure);
        },
      )
      .finally(() => closing.removeEventListener('abort', abort));
  };
}
