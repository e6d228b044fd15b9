// Errors of the provisioning API. The code names the gRPC status the edge answers with; the
// message is written for the developer calling the API and never carries internals.

export type ProvisioningErrorCode =
  | 'invalid_argument' | 'not_found' | 'already_exists' | 'failed_precondition'
  | 'resource_exhausted' | 'permission_denied' | 'aborted' | 'unavailable';

export class ProvisioningError extends Error {
  override name = 'ProvisioningError';
  constructor(
    readonly code: ProvisioningErrorCode,
    message: string,
    /** RFC 8693 / RFC 6749 error code, for token exchange failures. */
    readonly oauthError?: 'invalid_request' | 'invalid_scope' | 'invalid_target',
  ) {
    super(oauthError ? `${oauthError}: ${message}` : message);
  }
}

/**
 * An attempt of a create that outlived its request record's lease: a retry may have taken the
 * record over and be building the same resource, so this attempt neither commits nor undoes.
 */
export class LeaseLost extends ProvisioningError {
  override name = 'LeaseLost';
  constructor() {
    super('aborted', 'this call took longer than its request_id may be held; retry it to get its result');
  }
}

export const invalidArgument = (message: string) => new ProvisioningError('invalid_argument', message);
export const notFound = (message: string) => new ProvisioningError('not_found', message);
export const failedPrecondition = (message: string) => new ProvisioningError('failed_precondition', message);
