import { oauthError } from './errors';

/** Request parameters with every value kept, so that repeated parameters can be refused. */
export type Params = ReadonlyMap<string, readonly string[]>;

/** Largest single parameter value we accept (redirect URIs, state, tokens all fit well within). */
export const MAX_PARAMETER_LENGTH = 4096;

export function paramsFrom(entries: Iterable<[string, string]>): Params {
  const params = new Map<string, string[]>();
  for (const [name, value] of entries) {
    const values = params.get(name);
    if (values) values.push(value);
    else params.set(name, [value]);
  }
  return params;
}

/**
 * One parameter by name. RFC 6749 §3.1/§3.2: parameters MUST NOT be included more than once,
 * and a parameter sent without a value is treated as omitted.
 */
export function optionalParam(params: Params, name: string): string | undefined {
  const values = params.get(name);
  if (!values) return undefined;
  if (values.length > 1) throw oauthError('invalid_request', `${name} must not be repeated`);
  const value = values[0]!;
  if (value.length > MAX_PARAMETER_LENGTH) throw oauthError('invalid_request', `${name} is too long`);
  return value === '' ? undefined : value;
}

export function requiredParam(params: Params, name: string): string {
  const value = optionalParam(params, name);
  if (value === undefined) throw oauthError('invalid_request', `${name} is required`);
  return value;
}
