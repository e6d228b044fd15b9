import type { AgentKind as CoreAgentKind } from '../../core/kernel/model';
import type { AgentView } from '../../core/provisioning/agents';
import type { Modules } from '../../core/registry';
import { type Agent, AgentKind, type AgentServiceServer } from '../gen/svcnum/provisioning/v1alpha1/agent_service';
import { unary } from '../calls';
import { numberState, timestamp } from './convert';

const KINDS: Record<CoreAgentKind, AgentKind> = {
  independent: AgentKind.AGENT_KIND_INDEPENDENT,
  dependent: AgentKind.AGENT_KIND_DEPENDENT,
};

const kindFilter = (kind: AgentKind): CoreAgentKind | undefined =>
  kind === AgentKind.AGENT_KIND_INDEPENDENT
    ? 'independent'
    : kind === AgentKind.AGENT_KIND_DEPENDENT
      ? 'dependent'
      : undefined;

const toProto = (agent: AgentView): Agent => ({
  svcnumId: agent.svcnumId,
  svcnum: agent.svcnum,
  kind: KINDS[agent.kind],
  ownerSvcnumId: agent.ownerSvcnumId,
  displayName: agent.displayName,
  capabilities: agent.capabilities,
  discoverable: agent.discoverable,
  scope: agent.scope,
  state: numberState(agent.state),
  clientId: agent.clientId,
  createTime: timestamp(agent.createTime),
});

export function agentService({ provisioning }: Pick<Modules, 'provisioning'>): AgentServiceServer {
  const { agents, exchange } = provisioning;
  const input = (request: {
    requestId: string;
    displayName: string;
    capabilities: string[];
    discoverable: boolean;
    scope: string;
  }) => ({
    requestId: request.requestId,
    displayName: request.displayName,
    capabilities: request.capabilities,
    discoverable: request.discoverable,
    scope: request.scope,
  });
  return {
    createAgent: unary(async (caller, request) => {
      const created = await agents.create(caller, input(request));
      return { agent: toProto(created.agent), clientId: created.clientId, clientSecret: created.clientSecret };
    }),
    getAgent: unary(async (caller, request) => toProto(await agents.get(caller, request.svcnumId))),
    listAgents: unary(async (caller, request) => {
      const kind = kindFilter(request.kind);
      const page = await agents.list(caller, {
        pageSize: request.pageSize,
        pageToken: request.pageToken,
        ...(kind ? { kind } : {}),
      });
      return { agents: page.items.map(toProto), nextPageToken: page.nextPageToken };
    }),
    issueAgentToken: unary(async (caller, request) => {
      const token = await agents.issueToken(caller, { svcnumId: request.svcnumId, scope: request.scope });
      return {
        accessToken: token.accessToken,
        tokenType: token.tokenType,
        expiresIn: token.expiresIn,
        scope: token.scope,
      };
    }),
    createDependentAgent: unary(async (caller, request) =>
      toProto(await agents.createDependent(caller, { ...input(request), ownerSvcnumId: request.ownerSvcnumId })),
    ),
    exchangeToken: unary(async (caller, request) => {
      const result = await exchange(caller, {
        subjectToken: request.subjectToken,
        subjectTokenType: request.subjectTokenType,
        actorToken: request.actorToken,
        actorTokenType: request.actorTokenType,
        requestedTokenType: request.requestedTokenType,
        scope: request.scope,
        audience: request.audience,
      });
      return {
        accessToken: result.accessToken,
        issuedTokenType: result.issuedTokenType,
        tokenType: result.tokenType,
        expiresIn: result.expiresIn,
        scope: result.scope,
      };
    }),
    rotateAgentSvcnum: unary(async (caller, request) => toProto(await agents.rotate(caller, request.svcnumId))),
  };
}
