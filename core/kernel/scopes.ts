import type { AccountType, ClientKind } from './model';

// The scope catalog (spec 5.3): which scopes exist, who may hold them, and how the consent page
// explains them to a person.

export const loginScopes = {
  openid: 'Confirm who you are (your account id)',
  profile: 'See your number',
  email: 'See your email address',
  // OIDC Core §11. Refresh tokens do not depend on it (login clients always get one, RFC 6749
  // §1.5): it is granted and shown on the consent page like any scope, so that libraries adding
  // it (express-openid-connect, …) are not refused.
  offline_access: "Stay connected when you're not using it",
} as const;

export const externalApiScopes = {
  messaging: 'Use the Messaging API',
  poll: 'Use the Poll API',
} as const;

export const provisioningScopes = {
  'prov:numbers': 'Provision and configure programmable numbers',
  'prov:masks': 'Create and manage mask numbers',
  'prov:agents': 'Create and manage AI agents',
} as const;

export type LoginScope = keyof typeof loginScopes;
export type ProvisioningScope = keyof typeof provisioningScopes;

/** What an AI agent's own token may carry: sign-in claims and the Messaging API. */
export const agentScopes = ['openid', 'profile', 'messaging'] as const;

/**
 * The catalog of grantable provisioning scopes per account type of the owner (spec 5.4 leaves it
 * to us): people run agents; businesses also run programmable numbers and masks.
 */
export const provisioningScopesByAccountType: Record<AccountType, readonly ProvisioningScope[]> = {
  person: ['prov:agents'],
  business: ['prov:numbers', 'prov:masks', 'prov:agents'],
  programmable: [],
  ai_agent: [],
};

const scopesByClientKind: Record<ClientKind, readonly string[]> = {
  login: Object.keys(loginScopes),
  api: Object.keys(externalApiScopes),
  provisioning: Object.keys(provisioningScopes),
  agent: agentScopes,
};

/** RFC 6749 §3.3 scope-token: printable ASCII without space, double quote or backslash. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/** Splits a scope parameter; `undefined` when it is not a valid space-separated list. */
export function parseScope(value: string): string[] | undefined {
  const scopes = value.split(' ').filter((scope) => scope !== '');
  if (scopes.length === 0 || !scopes.every((scope) => SCOPE_TOKEN.test(scope))) return undefined;
  return [...new Set(scopes)];
}

export const formatScope = (scopes: readonly string[]) => scopes.join(' ');

export const allowedScopes = (kind: ClientKind) => scopesByClientKind[kind];

/** Scopes of `requested` that a client of this kind may not hold. */
export function scopesNotAllowed(kind: ClientKind, requested: readonly string[]): string[] {
  const allowed = new Set(scopesByClientKind[kind]);
  return requested.filter((scope) => !allowed.has(scope));
}

const descriptions: Record<string, string> = { ...loginScopes, ...externalApiScopes, ...provisioningScopes };

// Own properties only: a requested `constructor` or `toString` is a word, not Object's function.
export const scopeDescription = (scope: string) => (Object.hasOwn(descriptions, scope) ? descriptions[scope]! : scope);

export const isSubset = (subset: readonly string[], superset: readonly string[]) => {
  const all = new Set(superset);
  return subset.every((scope) => all.has(scope));
};
