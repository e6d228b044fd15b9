import type { AccessTokenIssuer } from '../kernel/access';
import type { AgentClients, DiscoverIndex, TokenStanding } from '../kernel/capabilities';
import { inService, type AgentKind, type NumberState, type User } from '../kernel/model';
import { formatScope, isSubset, parseScope } from '../kernel/scopes';
import { idTime } from '../kernel/ids';
import { sha256 } from '../kernel/secrets';
import type { ProvisioningPort } from './store';
import type { ProvisioningParts } from './context';
import { DomainError, failedPrecondition, invalidArgument, notFound } from '../kernel/errors';
import { listPage, type PagedList } from '../kernel/paging';
import type { PageKey } from '../kernel/paging';
import type { Caller } from './programmable';
import { quotaLimit } from './quota';
import { afterCommit, Steps, type Held } from './steps';
import { agentScopeField, capabilitiesField, displayNameField, svcnumIdField } from './validation';

// AI agents. An independent agent has client credentials of its own; a dependent (sub-) agent
// has none and gets its tokens from its owner through token exchange. Every agent holds a
// number and a pre-reserved fallback number that RotateAgentSvcnum switches to.

export interface AgentView {
  svcnumId: string;
  svcnum: string;
  kind: AgentKind;
  /** The direct owner: the owner account, or (dependent agents) possibly one of its agents. */
  ownerSvcnumId: string;
  displayName: string;
  capabilities: string[];
  discoverable: boolean;
  scope: string;
  state: NumberState;
  clientId: string;
  createTime: number;
}

export function agentView(agent: User): AgentView {
  return {
    svcnumId: agent.svcnumId,
    svcnum: agent.svcnum,
    kind: agent.agentKind ?? 'independent',
    ownerSvcnumId: agent.parentId ?? agent.ownerId ?? '',
    displayName: agent.displayName ?? '',
    capabilities: agent.capabilities ?? [],
    discoverable: agent.discoverable ?? false,
    scope: formatScope(agent.scopes ?? []),
    state: agent.numberState ?? 'active',
    clientId: agent.clientId ?? '',
    createTime: agent.createdAt,
  };
}

/**
 * Page keys of ListAgents: the byOwner index; a token continues only a listing of the kind it was
 * issued for.
 */
function agentPages(kind: AgentKind | 'all'): PagedList<User> {
  return {
    name: 'agents',
    filter: kind,
    keyOf: (agent) => ({
      svcnumId: agent.svcnumId,
      ownerId: agent.ownerId!,
      ownerSort: agent.ownerSort ?? `ai_agent#${agent.svcnumId}`,
    }),
  };
}

/** An independent agent's client id: derived from its svcnum_id (22 characters, like any client id). */
export const agentClientId = (svcnumId: string) => sha256(`agent-client:${svcnumId}`).slice(0, 22);

export interface AgentInput {
  requestId?: string;
  displayName?: string;
  capabilities?: string[];
  discoverable?: boolean;
  scope?: string;
}

/**
 * What the agents' operations work with: the shared parts, and the agents' clients, their tokens
 * and the discover index.
 */
export interface AgentsContext extends ProvisioningParts {
  accounts: AgentClients;
  issuer: AccessTokenIssuer;
  discoverIndex: DiscoverIndex;
  standing: Pick<TokenStanding, 'tokenRefusal'>;
}

/** Who provisions an agent: its owner account (and parent), its kind, and whose quota it takes. */
interface AgentOwner {
  ownerId: string;
  parentId?: string;
  kind: AgentKind;
  quotaOwner: User;
  caller: Caller;
}

/** One of the caller's agents (independent or dependent), or NOT_FOUND. */
async function ownedAgent(store: ProvisioningPort, caller: Caller, svcnumId: string | undefined): Promise<User> {
  const id = svcnumIdField(svcnumId, 'svcnum_id');
  const agent = await store.getUser(id);
  if (agent?.accountType !== 'ai_agent' || agent.ownerId !== caller.ownerId) {
    throw notFound(`no agent ${id} in your account`);
  }
  return agent;
}

function usable(agent: User) {
  if (!inService(agent)) {
    throw failedPrecondition(`agent ${agent.svcnumId} is ${agent.numberState ?? agent.status}`);
  }
}

/**
 * An independent agent's client. Its id is derived from the agent's, so a client left by an
 * interrupted attempt of the same request is found and reused (with a new secret), not orphaned.
 */
async function agentCredentials(
  ctx: AgentsContext,
  svcnumId: string,
  name: string,
  scopes: string[],
): Promise<{ clientId: string; clientSecret: string }> {
  const clientId = agentClientId(svcnumId);
  const existing = await ctx.store.getClient(clientId);
  if (existing?.kind === 'agent' && existing.subjectId === svcnumId) {
    return { clientId, clientSecret: await ctx.accounts.rotateClientSecret(clientId) };
  }
  const created = await ctx.accounts.createClient('agent', {
    name,
    scope: formatScope(scopes),
    subjectId: svcnumId,
    clientId,
  });
  return { clientId, clientSecret: created.clientSecret! };
}

/** After the commit: the leases made permanent, the slot confirmed, the agent in the discover index. */
const confirmAgent = ({ pool, quota, discoverIndex, clock }: AgentsContext, agent: User) =>
  afterCommit(
    () => pool.confirm(agent.svcnum, agent.svcnumId, 'active'),
    () => pool.confirm(agent.fallbackSvcnum!, agent.svcnumId, 'reserved'),
    // Agents from before slots were named: their lapsed slot is confirmed by the next claim.
    async () => agent.quotaSlot && quota.confirm(agent.quotaSlot, agent.svcnumId),
    // The discover index (discoverable agents only); readers re-check the agent, so a lost write
    // only hides it.
    () => discoverIndex.indexAgent(agent, clock.now()),
  );

/** The agent an interrupted attempt committed under `svcnumId` (confirmations finished), if any. */
async function recoverAgent(
  ctx: AgentsContext,
  caller: Caller,
  svcnumId: string,
  kind: AgentKind,
): Promise<User | undefined> {
  const agent = await ctx.store.getUser(svcnumId);
  if (agent?.accountType !== 'ai_agent' || agent.ownerId !== caller.ownerId || agent.agentKind !== kind) {
    return undefined;
  }
  await confirmAgent(ctx, agent);
  return agent;
}

/**
 * The shared path of both kinds: quota slot, number and fallback, (client), then the agent
 * record under `svcnumId` as the commit point, then confirmations.
 */
async function provisionAgent(ctx: AgentsContext, svcnumId: string, input: AgentInput, owner: AgentOwner, held: Held) {
  const { store, pool, quota, config } = ctx;
  const displayName = displayNameField(input.displayName, true)!;
  const capabilities = capabilitiesField(input.capabilities);
  // A dependent of an agent can do no more than its owner agent.
  const ceiling = owner.quotaOwner.accountType === 'ai_agent' ? (owner.quotaOwner.scopes ?? []) : undefined;
  const scopes = input.scope?.trim() || !ceiling ? agentScopeField(input.scope) : [...ceiling];
  if (ceiling && !isSubset(scopes, ceiling)) {
    throw invalidArgument(`scope must stay within the owner agent's scopes: ${formatScope(ceiling)}`);
  }
  const limit = quotaLimit(owner.quotaOwner, owner.kind, config);
  return Steps.all(async (steps) => {
    const slot = await steps.run(
      () => quota.claim(owner.quotaOwner.svcnumId, owner.kind, svcnumId, limit),
      (key) => quota.release(key, svcnumId),
    );
    const svcnum = await steps.run(
      () => pool.lease(svcnumId, 'ai_agent'),
      (number) => pool.giveBack(number, svcnumId),
    );
    const fallback = await steps.run(
      () => pool.lease(svcnumId, 'ai_agent'),
      (number) => pool.giveBack(number, svcnumId),
    );
    const credentials =
      owner.kind === 'independent'
        ? await steps.run(
            () => agentCredentials(ctx, svcnumId, displayName, scopes),
            (created) => store.deleteClient(created.clientId),
          )
        : undefined;
    // Created when its id was chosen: ListAgents (by id) is then oldest first by create_time too.
    const createdAt = idTime(svcnumId);
    const agent: User = {
      svcnumId,
      svcnum,
      status: 'active',
      accountType: 'ai_agent',
      createdAt,
      updatedAt: createdAt,
      ownerId: owner.ownerId,
      ownerSort: `ai_agent#${svcnumId}`,
      ...(owner.parentId ? { parentId: owner.parentId } : {}),
      agentKind: owner.kind,
      displayName,
      capabilities,
      discoverable: input.discoverable ?? false,
      scopes,
      numberState: 'active',
      fallbackSvcnum: fallback,
      quotaSlot: slot,
      ...(credentials ? { clientId: credentials.clientId } : {}),
    };
    await steps.commit(
      () => store.createUser(agent),
      async () => {
        const stored = await store.getUser(svcnumId);
        return stored?.svcnum === svcnum && stored.fallbackSvcnum === fallback;
      },
    );
    await confirmAgent(ctx, agent);
    return { agent, clientSecret: credentials?.clientSecret };
  }, held);
}

const fingerprint = (input: AgentInput, extra: Record<string, unknown> = {}) => ({
  displayName: input.displayName,
  capabilities: input.capabilities ?? [],
  discoverable: input.discoverable ?? false,
  scope: input.scope ?? '',
  ...extra,
});

/** The caller's owner account, which must be active to provision agents. */
async function activeAccount(store: ProvisioningPort, caller: Caller): Promise<User> {
  const account = await store.getUser(caller.ownerId);
  if (account?.status !== 'active') throw failedPrecondition('the account of this client is not active');
  return account;
}

/** An independent agent with client credentials of its own; the secret is in this answer only. */
async function createIndependentAgent(
  ctx: AgentsContext,
  caller: Caller,
  input: AgentInput,
): Promise<{ agent: AgentView; clientId: string; clientSecret: string }> {
  const owner = await activeAccount(ctx.store, caller);
  // A retry gets the same agent. The first secret cannot be shown again (it is stored hashed),
  // so the agent gets a new one and the earlier one stops working: the caller always ends
  // up holding working credentials.
  const withNewSecret = async (agent: User) => {
    const clientSecret = await ctx.accounts.rotateClientSecret(agent.clientId!);
    return { agent: agentView(agent), clientId: agent.clientId!, clientSecret };
  };
  const request = {
    ownerId: caller.ownerId,
    method: 'CreateAgent',
    requestId: input.requestId,
    request: fingerprint(input),
  };
  return ctx.once(request, {
    async create(svcnumId, held) {
      const agentOwner: AgentOwner = { ownerId: caller.ownerId, kind: 'independent', quotaOwner: owner, caller };
      const { agent, clientSecret } = await provisionAgent(ctx, svcnumId, input, agentOwner, held);
      return { agent: agentView(agent), clientId: agent.clientId!, clientSecret: clientSecret! };
    },
    async recover(svcnumId) {
      const agent = await recoverAgent(ctx, caller, svcnumId, 'independent');
      return agent && withNewSecret(agent);
    },
    replay: async (svcnumId) => withNewSecret(await ownedAgent(ctx.store, caller, svcnumId)),
  });
}

/** A dependent agent under the caller's account or one of its independent agents. */
async function createDependentAgent(
  ctx: AgentsContext,
  caller: Caller,
  input: AgentInput & { ownerSvcnumId?: string },
): Promise<AgentView> {
  const account = await activeAccount(ctx.store, caller);
  let parent = account;
  if (input.ownerSvcnumId && input.ownerSvcnumId !== caller.ownerId) {
    parent = await ownedAgent(ctx.store, caller, input.ownerSvcnumId);
    if (parent.agentKind !== 'independent') {
      throw invalidArgument('owner_svcnum_id must be your account or one of your independent agents');
    }
    usable(parent);
  }
  const request = {
    ownerId: caller.ownerId,
    method: 'CreateDependentAgent',
    requestId: input.requestId,
    request: fingerprint(input, { owner: parent.svcnumId }),
  };
  const agentOwner: AgentOwner = {
    ownerId: caller.ownerId,
    parentId: parent.svcnumId,
    kind: 'dependent',
    quotaOwner: parent,
    caller,
  };
  return ctx.once(request, {
    create: async (svcnumId, held) => agentView((await provisionAgent(ctx, svcnumId, input, agentOwner, held)).agent),
    async recover(svcnumId) {
      const agent = await recoverAgent(ctx, caller, svcnumId, 'dependent');
      return agent && agentView(agent);
    },
    replay: async (svcnumId) => agentView(await ownedAgent(ctx.store, caller, svcnumId)),
  });
}

function listAgents(
  { store, pageTokens }: AgentsContext,
  caller: Caller,
  input: { pageSize?: number; pageToken?: string; kind?: AgentKind },
) {
  return listPage(
    pageTokens,
    input,
    caller.ownerId,
    agentPages(input.kind ?? 'all'),
    async (limit, startKey) => {
      // A kind filter reads on until `limit` agents match.
      let next: PageKey | undefined = startKey;
      const agents: User[] = [];
      do {
        const page = await store.listOwned(caller.ownerId, 'ai_agent', limit - agents.length, next);
        agents.push(...page.items.filter((agent) => !input.kind || agent.agentKind === input.kind));
        next = page.nextKey;
      } while (next && agents.length < limit);
      return { items: agents, ...(next ? { nextKey: next } : {}) };
    },
    agentView,
  );
}

/** A token for one of the caller's independent agents (dependents get theirs by exchange). */
async function issueAgentToken(ctx: AgentsContext, caller: Caller, input: { svcnumId?: string; scope?: string }) {
  const agent = await ownedAgent(ctx.store, caller, input.svcnumId);
  if (agent.agentKind !== 'independent' || !agent.clientId) {
    throw failedPrecondition('a dependent agent has no token of its own; use ExchangeToken');
  }
  usable(agent);
  const allowed = agent.scopes ?? [];
  let scopes = allowed;
  if (input.scope?.trim()) {
    const requested = parseScope(input.scope);
    if (!requested) throw invalidArgument('scope must be a space-separated list');
    if (!isSubset(requested, allowed)) {
      throw invalidArgument(`scope may only narrow the agent's scopes: ${formatScope(allowed)}`);
    }
    scopes = requested;
  }
  // Disabled means disabled: no token its first use would refuse (the agent's client disabled, or
  // its owner).
  const refused = await ctx.standing.tokenRefusal({ client_id: agent.clientId, sub: agent.svcnumId });
  if (refused) throw failedPrecondition(`agent ${agent.svcnumId} cannot get a token: ${refused}`);
  const { token, expiresIn } = await ctx.issuer.accessToken({
    subject: agent.svcnumId,
    clientId: agent.clientId,
    scopes,
  });
  return { accessToken: token, tokenType: 'Bearer' as const, expiresIn, scope: formatScope(scopes) };
}

/**
 * Switches the agent to its fallback number, reserves a new fallback, and quarantines the old
 * number. One rotation of an agent runs at a time (it holds the agent record under a lease), so
 * a rotation that died half way is finished by the next one once its lease lapsed, and the agent
 * record switches in one conditional write.
 */
async function rotateAgent(ctx: AgentsContext, caller: Caller, svcnumId: string | undefined): Promise<AgentView> {
  const { store, clock, pool, config } = ctx;
  const agent = await ownedAgent(store, caller, svcnumId);
  usable(agent);
  const oldNumber = agent.svcnum;
  const oldFallback = agent.fallbackSvcnum;
  if (!oldFallback) throw failedPrecondition(`agent ${agent.svcnumId} has no fallback number`);
  const changed = () => new DomainError('aborted', 'the agent changed during rotation; retry');
  return Steps.all(async (steps) => {
    const held = clock.now() + config.lease;
    await steps.run(
      async () => {
        const expected = { svcnum: oldNumber, fallbackSvcnum: oldFallback };
        if (!(await store.claimRotation(agent.svcnumId, expected, held, clock.now()))) {
          throw new DomainError('aborted', 'the agent is being rotated or changed meanwhile; retry');
        }
      },
      () => store.updateEntity(agent.svcnumId, { rotationUntil: undefined }, { rotationUntil: held }),
    );
    const newFallback = await steps.run(
      () => pool.lease(agent.svcnumId, 'ai_agent'),
      (number) => pool.giveBack(number, agent.svcnumId),
    );
    const now = clock.now();
    await steps.run(
      async () => {
        // The old number cannot be handed out for the whole cool-off, so retiring it first is safe.
        if (await pool.quarantine(oldNumber, agent.svcnumId)) return;
        // Retired already by a rotation of this agent that died before its commit: carry on.
        const number = await store.getNumber(oldNumber);
        if (number?.state !== 'quarantined' || number.previousSvcnumId !== agent.svcnumId) throw changed();
      },
      () => store.restoreNumber(oldNumber, agent.svcnumId, 'active', clock.now()),
    );
    await steps.run(
      async () => {
        const activate = () =>
          store.transitionNumber(oldFallback, ['reserved', 'active'], 'active', now, agent.svcnumId);
        if (await activate()) return;
        // A previous rotation may have committed without confirming this fallback: confirm it, retry.
        await store.confirmNumber(oldFallback, agent.svcnumId, 'reserved', now);
        if (!(await activate())) throw changed();
      },
      () => store.transitionNumber(oldFallback, ['active'], 'reserved', clock.now(), agent.svcnumId),
    );
    // The commit, only while this rotation still holds the agent.
    const switched = await steps.commit(async () => {
      const updated = await store.updateEntity(
        agent.svcnumId,
        {
          svcnum: oldFallback,
          fallbackSvcnum: newFallback,
          numberState: 'active',
          updatedAt: now,
          rotationUntil: undefined,
        },
        { svcnum: oldNumber, fallbackSvcnum: oldFallback, rotationUntil: held },
      );
      if (!updated) throw changed();
      return updated;
    });
    await steps.afterCommit(() => pool.confirm(newFallback, agent.svcnumId, 'reserved'));
    return agentView(switched);
  });
}

/** AI agents of an owner account: each operation is a function of the shared context above. */
export function createAgents(ctx: AgentsContext) {
  return {
    owned: (caller: Caller, svcnumId: string | undefined) => ownedAgent(ctx.store, caller, svcnumId),
    /** An independent agent with client credentials of its own; the secret is in this answer only. */
    create: (caller: Caller, input: AgentInput) => createIndependentAgent(ctx, caller, input),
    /** A dependent agent under the caller's account or one of its independent agents. */
    createDependent: (caller: Caller, input: AgentInput & { ownerSvcnumId?: string }) =>
      createDependentAgent(ctx, caller, input),
    get: async (caller: Caller, svcnumId: string | undefined) =>
      agentView(await ownedAgent(ctx.store, caller, svcnumId)),
    list: (caller: Caller, input: { pageSize?: number; pageToken?: string; kind?: AgentKind }) =>
      listAgents(ctx, caller, input),
    /** A token for one of the caller's independent agents (dependents get theirs by exchange). */
    issueToken: (caller: Caller, input: { svcnumId?: string; scope?: string }) => issueAgentToken(ctx, caller, input),
    /** Switches the agent to its fallback number (see rotateAgent). */
    rotate: (caller: Caller, svcnumId: string | undefined) => rotateAgent(ctx, caller, svcnumId),
  };
}

export type Agents = ReturnType<typeof createAgents>;
