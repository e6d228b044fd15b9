import { randomInt } from 'node:crypto';
import * as z from 'zod/mini';
import { newUlid } from '../kernel/ids';
import { invalidArgument } from '../kernel/errors';
import {
  isDpopMode,
  isRefreshResponse,
  DPOP_MODES,
  type DpopMode,
  REFRESH_RESPONSES,
  type AccountType,
  type Client,
  type ClientKind,
  type RefreshResponse,
  type User,
} from '../kernel/model';
import type { ClientInput } from '../kernel/capabilities';
import { isSigningAlg, SIGNING_ALGS, type Clock, type Random, type SigningAlg } from '../kernel/ports';
import { allowedScopes, parseScope, provisioningScopesByAccountType, scopesNotAllowed } from '../kernel/scopes';
import { hashPassword, randomSecret, type ScryptCost, sha256 } from '../kernel/secrets';
import { normaliseEmail } from './lookups';
import type { RegistrationPort } from './store';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Registered redirect URIs are compared byte for byte later, so they are checked once here:
 * absolute, https (http only on loopback, for local development), no fragment (RFC 6749 §3.1.2),
 * no user info.
 */
export function validateRedirectUri(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidArgument(`redirect URI '${value}' is not an absolute URL`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname))) {
    throw invalidArgument(`redirect URI '${value}' must use https (http is allowed only for localhost)`);
  }
  if (url.hash || value.includes('#')) throw invalidArgument(`redirect URI '${value}' must not contain a fragment`);
  if (url.username || url.password) throw invalidArgument(`redirect URI '${value}' must not contain user info`);
  if (value.length > 2000) throw invalidArgument('redirect URI is longer than 2000 characters');
  return value;
}

function checkScopes(kind: ClientKind, scope: string): string[] {
  const scopes = parseScope(scope);
  if (!scopes) throw invalidArgument('scope must be a space-separated list of scopes');
  const refused = scopesNotAllowed(kind, scopes);
  if (refused.length > 0) {
    const allowed = allowedScopes(kind).join(' ');
    throw invalidArgument(`scope ${refused.join(', ')} is not available to ${kind} clients (allowed: ${allowed})`);
  }
  return scopes;
}

/** DPoP per client (RFC 9449): `optional` unless given. */
function checkDpop(value = 'optional'): DpopMode {
  if (!isDpopMode(value)) throw invalidArgument(`dpop must be ${DPOP_MODES.join(' or ')}, not '${value}'`);
  return value;
}

function checkRefreshResponse(value = 'null'): RefreshResponse {
  if (!isRefreshResponse(value)) {
    throw invalidArgument(`refresh response must be ${REFRESH_RESPONSES.join(' or ')}, not '${value}'`);
  }
  return value;
}

function checkIdTokenAlg(value = 'EdDSA'): SigningAlg {
  if (!isSigningAlg(value)) {
    throw invalidArgument(`ID token algorithm must be ${SIGNING_ALGS.join(' or ')}, not '${value}'`);
  }
  return value;
}

/**
 * What only login clients have: post-logout redirect URIs (RP-Initiated Logout; checked like redirect
 * URIs, compared exactly) and the ID token algorithm.
 */
function loginOnly(kind: ClientKind, input: ClientInput): Partial<Client> {
  const postLogout = [...new Set((input.postLogoutRedirectUris ?? []).map(validateRedirectUri))];
  if (kind !== 'login') {
    if (postLogout.length > 0) throw invalidArgument(`${kind} clients have no post-logout redirect URIs`);
    return {};
  }
  return {
    ...(input.idTokenAlg ? { idTokenAlg: input.idTokenAlg } : {}),
    ...(postLogout.length > 0 ? { postLogoutRedirectUris: postLogout } : {}),
  };
}

// zod/mini: tree-shakable, so a Lambda bundle carries only these checks (classic zod is ~460 KiB).
// Built on first use, not at import: a bundle that imports this module without registering
// anything (through the registry) carries no zod at all.
const buildSchemas = () => ({
  clientName: z
    .string()
    .check(z.trim(), z.minLength(1, 'name is required'), z.maxLength(100, 'name is longer than 100 characters')),
  email: z.email('email is not a valid address').check(z.maxLength(254, 'email is longer than 254 characters')),
  password: z
    .string()
    .check(
      z.minLength(8, 'password needs at least 8 characters'),
      z.maxLength(256, 'password is longer than 256 characters'),
    ),
});
let builtSchemas: ReturnType<typeof buildSchemas> | undefined;
const schemas = () => (builtSchemas ??= buildSchemas());

function parse<T>(schema: z.ZodMiniType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (!result.success) throw invalidArgument(result.error.issues[0]?.message ?? 'invalid input');
  return result.data;
}

/** Service numbers: 11 digits, never starting with 0, drawn at random and claimed uniquely. */
function randomServiceNumber(): string {
  return String(randomInt(1, 10)) + Array.from({ length: 10 }, () => randomInt(0, 10)).join('');
}

export interface CreatedClient {
  client: Client;
  clientSecret?: string;
}

export interface UserInput {
  email?: string;
  password?: string;
  setupRequired?: boolean;
  accountType?: AccountType;
}

/** What registering works with: the store and the sources of time and randomness. */
interface RegistrationContext {
  store: RegistrationPort;
  clock: Clock;
  random: Random;
  passwordCost: ScryptCost | undefined;
}

/** The owner account of a client: it must exist and be active. */
async function activeOwner({ store }: RegistrationContext, ownerId: string) {
  const owner = await store.getUser(ownerId);
  if (!owner) throw invalidArgument(`no account ${ownerId}`);
  if (owner.status !== 'active') throw invalidArgument(`account ${ownerId} is ${owner.status}`);
  return owner;
}

/**
 * A provisioning client acts for an active person or business, and only with scopes the catalog
 * grants that account type.
 */
async function checkProvisioningOwner(ctx: RegistrationContext, ownerId: string | undefined, scopes: string[]) {
  if (!ownerId) throw invalidArgument('a provisioning client needs an owner (--owner SVCNUM_ID)');
  const owner = await activeOwner(ctx, ownerId);
  const grantable = provisioningScopesByAccountType[owner.accountType];
  const refused = scopes.filter((scope) => !(grantable as readonly string[]).includes(scope));
  if (refused.length > 0) {
    const offered = grantable.join(' ') || 'none';
    throw invalidArgument(`a ${owner.accountType} account may not hold ${refused.join(' ')} (grantable: ${offered})`);
  }
}

async function createClient(ctx: RegistrationContext, kind: ClientKind, input: ClientInput): Promise<CreatedClient> {
  const { store, clock, random } = ctx;
  const name = parse(schemas().clientName, input.name);
  const scopes = checkScopes(kind, input.scope);
  if (kind === 'provisioning') await checkProvisioningOwner(ctx, input.ownerId, scopes);
  const redirectUris = (input.redirectUris ?? []).map(validateRedirectUri);
  if (kind === 'login' && redirectUris.length === 0) {
    throw invalidArgument('a login client needs at least one redirect URI');
  }
  if (kind !== 'login' && redirectUris.length > 0) throw invalidArgument(`${kind} clients have no redirect URIs`);
  // Login clients are public (PKCE authenticates them); everyone else gets a secret, shown once.
  const clientSecret = kind === 'login' ? undefined : randomSecret(random);
  const client: Client = {
    // Given by the caller only where it is derived from something unique (an agent's client).
    clientId: input.clientId ?? randomSecret(random, 16),
    kind,
    name,
    redirectUris: [...new Set(redirectUris)],
    scopes,
    ...(clientSecret ? { secretHash: sha256(clientSecret) } : {}),
    ...(input.ownerId ? { ownerId: input.ownerId } : {}),
    ...(input.subjectId ? { subjectId: input.subjectId } : {}),
    ...(input.refreshResponse ? { refreshResponse: input.refreshResponse } : {}),
    ...loginOnly(kind, input),
    ...(input.dpop ? { dpop: input.dpop } : {}),
    disabled: false,
    createdAt: clock.now(),
  };
  await store.createClient(client);
  return clientSecret ? { client, clientSecret } : { client };
}

/** Claims a free service number for a new account, or throws. */
async function claimServiceNumber(
  { store, clock }: RegistrationContext,
  svcnumId: string,
  accountType: AccountType,
): Promise<string> {
  let svcnum: string | undefined;
  for (let attempt = 0; attempt < 8 && !svcnum; attempt++) {
    const candidate = randomServiceNumber();
    const claimed = await store.claimNumber({
      svcnum: candidate,
      svcnumId,
      entityType: accountType,
      state: 'active',
      updatedAt: clock.now(),
    });
    if (claimed) svcnum = candidate;
  }
  if (!svcnum) throw new Error('could not allocate a free service number');
  return svcnum;
}

async function createUser(ctx: RegistrationContext, input: UserInput): Promise<User> {
  const { store, clock, random } = ctx;
  const email = input.email === undefined ? undefined : parse(schemas().email, normaliseEmail(input.email));
  const password = input.password === undefined ? undefined : parse(schemas().password, input.password);
  const svcnumId = newUlid(clock, random);
  const passwordHash = password === undefined ? undefined : await hashPassword(password, random, ctx.passwordCost);
  const accountType = input.accountType ?? 'person';

  // No transactions: claim the unique identifiers first, then write the user; undo the claims
  // if a later step fails, so nothing is left half-created.
  const undo: Array<() => Promise<void>> = [];
  try {
    if (email !== undefined) {
      if (!(await store.claimEmail(email, svcnumId))) throw invalidArgument(`email ${email} is already registered`);
      undo.push(() => store.releaseEmail(email, svcnumId));
    }
    const svcnum = await claimServiceNumber(ctx, svcnumId, accountType);
    undo.push(() => store.releaseNumber(svcnum, svcnumId));
    const user: User = {
      svcnumId,
      svcnum,
      ...(email !== undefined ? { email } : {}),
      ...(passwordHash !== undefined ? { passwordHash } : {}),
      status: input.setupRequired ? 'setup_required' : 'active',
      accountType,
      createdAt: clock.now(),
    };
    await store.createUser(user);
    return user;
  } catch (error) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw error;
  }
}

async function disableUser({ store, clock }: RegistrationContext, svcnumId: string): Promise<User | undefined> {
  const user = await store.setUserStatus(svcnumId, 'disabled');
  if (!user) return undefined;
  // A disabled account keeps no working refresh token.
  for (const grant of await store.listGrants(svcnumId)) await store.revokeGrant(grant.grantId, clock.now());
  return user;
}

/**
 * Creating and changing accounts and clients: the admin CLI's commands and agents' clients
 * (provisioning). Only these need the input schemas (zod/mini), so only their bundles carry them.
 */
export function createRegistration(store: RegistrationPort, clock: Clock, random: Random, passwordCost?: ScryptCost) {
  const ctx: RegistrationContext = { store, clock, random, passwordCost };
  return {
    /**
     * `refreshResponse`: `null` (default, the spec's contract) or `omit`; only login clients refresh.
     * `idTokenAlg`: EdDSA (default, as specified) or RS256.
     * `dpop` (every kind below): `optional` (default) or `required` (RFC 9449).
     */
    createLoginClient: async (input: {
      name: string;
      scope: string;
      redirectUris: string[];
      refreshResponse?: string;
      idTokenAlg?: string;
      postLogoutRedirectUris?: string[];
      dpop?: string;
    }) =>
      createClient(ctx, 'login', {
        ...input,
        refreshResponse: checkRefreshResponse(input.refreshResponse),
        idTokenAlg: checkIdTokenAlg(input.idTokenAlg),
        dpop: checkDpop(input.dpop),
      }),
    /** An External API client; with an owner account it may send messages from that account's numbers. */
    async createApiClient(input: { name: string; scope: string; ownerId?: string; dpop?: string }) {
      const dpop = checkDpop(input.dpop);
      if (input.ownerId) await activeOwner(ctx, input.ownerId);
      return createClient(ctx, 'api', { ...input, dpop });
    },
    createProvisioningClient: (input: { name: string; scope: string; ownerId: string; dpop?: string }) =>
      createClient(ctx, 'provisioning', { ...input, dpop: checkDpop(input.dpop) }),
    createClient: (kind: ClientKind, input: ClientInput) => createClient(ctx, kind, input),
    createUser: (input: UserInput) => createUser(ctx, input),

    /** A new secret for a confidential client, shown once; the previous one stops working. */
    async rotateClientSecret(clientId: string): Promise<string> {
      const clientSecret = randomSecret(random);
      if (!(await store.setClientSecret(clientId, sha256(clientSecret)))) {
        throw new Error(`client ${clientId} has no secret to rotate`);
      }
      return clientSecret;
    },

    disableUser: (svcnumId: string) => disableUser(ctx, svcnumId),

    /**
     * A disabled account active again: it may sign in at once. Its revoked grants stay revoked (the
     * person signs in anew). Any other status is left as it is (enabling finishes no setup).
     */
    async enableUser(svcnumId: string): Promise<User | undefined> {
      const user = await store.getUser(svcnumId);
      if (user?.status !== 'disabled') return user;
      return store.setUserStatus(svcnumId, 'active');
    },
  };
}

export type Registration = ReturnType<typeof createRegistration>;

/** A client or user as the admin CLI prints it: never a hash. */
export function publicClient(client: Client) {
  const { secretHash: _secretHash, ...rest } = client;
  return { ...rest, createdAt: new Date(client.createdAt).toISOString() };
}

export function publicUser(user: User) {
  const { passwordHash: _passwordHash, ...rest } = user;
  return { ...rest, createdAt: new Date(user.createdAt).toISOString() };
}
