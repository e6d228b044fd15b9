import { oauthError } from '../../kernel/errors';
import { isSubset, parseScope } from '../../kernel/scopes';

/** The `scope` parameter, if sent: a subset of `allowed` (RFC 6749 §3.3, §6), else invalid_scope. */
export function requestedScope(value: string | undefined, allowed: readonly string[]): string[] | undefined {
  if (value === undefined) return undefined;
  const scopes = parseScope(value);
  if (!scopes) throw oauthError('invalid_scope', 'scope is not a valid space-separated list');
  if (!isSubset(scopes, allowed)) {
    const beyond = scopes.filter((scope) => !allowed.includes(scope));
    throw oauthError('invalid_scope', `scope exceeds what was granted: ${beyond.join(' ')}`);
  }
  return scopes;
}
