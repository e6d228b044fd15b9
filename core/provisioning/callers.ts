import type { DomainError } from '../kernel/errors';
import type { Client } from '../kernel/model';
import type { Caller } from './programmable';

// Who may call the provisioning API: an enabled provisioning client of an active owner account,
// holding a scope the call needs. The gRPC edge checks this for the client behind a Bearer token
// (with the token's scopes), the token endpoint for a client that proved its secret (with its
// registered scopes, for token exchange). Each answers a refusal in its own protocol's words.

/** A caller and the scopes it holds (for calls whose scope depends on the resource). */
export type ScopedCaller = Caller & { scopes: readonly string[] };

/** How an entry point words each refusal. */
export interface CallerRefusals {
  /** Not an enabled provisioning client with an owner account. */
  client(): DomainError;
  /** None of the needed scopes is held. */
  scope(needed: readonly string[]): DomainError;
  /** The owner account is not active. */
  owner(): DomainError;
}

export function createProvisioningCallers(accountActive: (svcnumId: string) => Promise<boolean>) {
  /** The caller behind `client` holding `granted`, if it holds one of `anyOf`; else the refusal. */
  return async function provisioningCaller(
    client: Client | undefined,
    granted: readonly string[],
    anyOf: string | readonly string[],
    refuse: CallerRefusals,
  ): Promise<ScopedCaller> {
    if (!client || client.disabled || client.kind !== 'provisioning' || !client.ownerId) throw refuse.client();
    const needed = typeof anyOf === 'string' ? [anyOf] : anyOf;
    if (!needed.some((scope) => granted.includes(scope))) throw refuse.scope(needed);
    if (!(await accountActive(client.ownerId))) throw refuse.owner();
    return { ownerId: client.ownerId, clientId: client.clientId, scopes: granted };
  };
}

export type ProvisioningCallers = ReturnType<typeof createProvisioningCallers>;
