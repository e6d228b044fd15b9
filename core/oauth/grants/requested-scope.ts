import { oauthError } from '../../kernel/errors';
import { optionalParam, type Params } from '../../kernel/params';
import { isSubset, parseScope } from '../../kernel/scopes';

/** The `scope` parameter, if sent: a subset of `allowed` (RFC 6749 §3.3, §6), else invalid_scope. */
export function requestedScope(params: Params, allowed: readonly string[]): string[] | undefined {
  const value = optionalParam(params, 'scope');
  if (value === undefined) return undefined;
  const scopes = parseScope(value);
  if (!scopes) throw oauthError('invalid_scope', 'scope is not a valid space-separated list');
  if (!isSubset(scopes, allowed)) throw oauthError('invalid_scope', `scope exceeds what was granted: ${scopes.filter((s) => !allowed.includes(s)).join(' ')}`);
  return scopes;
}
