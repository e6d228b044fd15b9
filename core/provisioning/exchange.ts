import { inService, type User } from '../kernel/model';
import type { Clock } from '../kernel/ports';
import { formatScope, isSubset, parseScope } from '../kernel/scopes';
import type { ProvisioningPort } from './store';
import { apiAudience, type ServiceConfig } from '../kernel/config';
import {
  type AccessTokenClaims,
  type AccessTokenVerifier,
  type AccessTokenIssuer as TokenIssuer,
  tokenType,
} from '../kernel/access';
import { DomainError, oauthError } from '../kernel/errors';
import type { Caller } from './programmable';
import type { TokenStanding } from '../kernel/capabilities';

// RFC 8693 token exchange (the ExchangeToken RPC and grant_type token-exchange at the token
// endpoint run this one function), for two delegations:
//  - lend a number: subject = one of the caller's programmable numbers (by svcnum_id), actor =
//    an independent agent of the caller (its own access token); the token's sub is the number, act.sub the agent;
//  - a dependent agent's token: subject = the dependent (by svcnum_id); its owner acts (an actor
//    token, if sent, must be the owner agent's own); the token's sub is the dependent, act.sub its owner.
// Delegation does not chain: an actor token is an agent's own token (client_credentials or
// IssueAgentToken), never an exchanged one, so `act` never nests. Scopes only narrow; the token
// never outlives its actor token; and it is issued only if it would be in force (every party it
// names enabled: core/accounts/token-standing.ts), as every path that accepts it then checks.

export const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
export const TOKEN_TYPE_SVCNUM_ID = 'urn:svcnum:params:oauth:token-type:svcnum-id';

/** What a lent number lets an agent do: send and receive messages as the number. */
const LENDABLE_SCOPES = ['messaging'];

export interface ExchangeInput {
  subjectToken?: string;
  subjectTokenType?: string;
  actorToken?: string;
  actorTokenType?: string;
  requestedTokenType?: string;
  scope?: string;
  audience?: string;
  /** RFC 8707, sent only at the token endpoint: our API is the one resource. */
  resource?: string;
  /** RFC 9449, at the token endpoint only: the request's DPoP key; the token is bound to it. */
  jkt?: string;
}

export interface ExchangeResult {
  accessToken: string;
  issuedTokenType: string;
  tokenType: 'Bearer' | 'DPoP';
  expiresIn: number;
  scope: string;
}

const invalidRequest = (message: string) => oauthError('invalid_request', message);

/** The store methods token exchange calls: it reads accounts only. */
export type TokenExchangePort = Pick<ProvisioningPort, 'getUser'>;

/** What token exchange works with. */
interface ExchangeContext {
  store: TokenExchangePort;
  clock: Clock;
  issuer: TokenIssuer;
  verify: AccessTokenVerifier;
  config: ServiceConfig;
  standing: Pick<TokenStanding, 'tokenRefusal'>;
}

/** Who the exchanged token is delegated to: its scopes, its `act` claim and its client. */
interface Delegation {
  scopes: string[];
  act: Record<string, unknown>;
  clientId: string;
}

async function actorClaims(verify: AccessTokenVerifier, input: ExchangeInput): Promise<AccessTokenClaims | undefined> {
  if (!input.actorToken) {
    if (input.actorTokenType) throw invalidRequest('actor_token_type was sent without an actor_token');
    return undefined;
  }
  if (input.actorTokenType !== TOKEN_TYPE_ACCESS_TOKEN) {
    throw invalidRequest(`actor_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN}`);
  }
  let claims: AccessTokenClaims;
  try {
    claims = await verify(input.actorToken);
  } catch (error) {
    // RFC 8693 §2.2.2: a token sent as a parameter is the request's fault, not the caller's credential.
    if (error instanceof DomainError && error.oauth === 'invalid_token') {
      throw invalidRequest('actor_token is invalid or expired');
    }
    throw error;
  }
  // RFC 8693 §2.2.2: unacceptable by policy is invalid_request. Delegation does not chain.
  if (claims.act !== undefined) {
    throw invalidRequest("actor_token must be an agent's own access token, not one obtained by token exchange");
  }
  // RFC 9449 §7.2: a DPoP-bound token is never usable as a bearer token, here neither: only an
  // exchange proven with its key (the token endpoint's DPoP proof) may present it.
  if (claims.cnf?.jkt !== undefined && claims.cnf.jkt !== input.jkt) {
    throw invalidRequest('actor_token is DPoP-bound: send the exchange with a DPoP proof of its key');
  }
  return claims;
}

/** The actor must be an active independent agent of the caller's account, presenting its own token. */
async function actorAgent(store: TokenExchangePort, caller: Caller, claims: AccessTokenClaims): Promise<User> {
  const agent = await store.getUser(claims.sub);
  if (agent?.accountType !== 'ai_agent' || agent.ownerId !== caller.ownerId) {
    throw invalidRequest('actor_token does not belong to an agent of your account');
  }
  if (agent.agentKind === 'dependent' || !agent.clientId || claims.client_id !== agent.clientId) {
    throw invalidRequest("actor_token must be an agent's own access token (client_credentials or IssueAgentToken)");
  }
  if (!inService(agent)) {
    throw new DomainError('failed_precondition', `the acting agent ${agent.svcnumId} is not active`, {
      oauth: 'invalid_request',
    });
  }
  return agent;
}

function narrowed(requested: string | undefined, allowed: readonly string[]): string[] {
  if (allowed.length === 0) throw oauthError('invalid_scope', 'no scope can be delegated here');
  if (!requested?.trim()) return [...allowed];
  const scopes = parseScope(requested);
  if (!scopes || !isSubset(scopes, allowed)) {
    throw oauthError('invalid_scope', `scope may only narrow: at most "${formatScope(allowed)}"`);
  }
  return scopes;
}

/** The request's own parameters: the token type asked for, the audience or resource, the subject's type. */
function checkParameters(config: ServiceConfig, input: ExchangeInput): string {
  if (input.requestedTokenType && input.requestedTokenType !== TOKEN_TYPE_ACCESS_TOKEN) {
    throw invalidRequest(`requested_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN}`);
  }
  if (input.audience && input.audience !== apiAudience(config)) {
    throw oauthError('invalid_target', `audience must be ${apiAudience(config)}`);
  }
  if (input.resource && input.resource !== apiAudience(config)) {
    throw oauthError('invalid_target', `resource must be ${apiAudience(config)}`);
  }
  if (!input.subjectToken) throw invalidRequest('subject_token is required');
  if (input.subjectTokenType !== TOKEN_TYPE_SVCNUM_ID) {
    throw invalidRequest(`subject_token_type must be ${TOKEN_TYPE_SVCNUM_ID}`);
  }
  return input.subjectToken;
}

/** The subject: an active programmable number or dependent agent of the caller's account. */
async function exchangeSubject(store: TokenExchangePort, caller: Caller, subjectToken: string): Promise<User> {
  const subject = await store.getUser(subjectToken.slice(0, 64));
  const yours = subject !== undefined && subject.ownerId === caller.ownerId;
  const exchangeable =
    subject?.accountType === 'programmable' ||
    (subject?.accountType === 'ai_agent' && subject.agentKind === 'dependent');
  if (!yours || !exchangeable) {
    // The contract: NOT_FOUND for anything but a programmable number or a dependent agent of the caller.
    const independent = yours && subject.accountType === 'ai_agent';
    throw new DomainError(
      'not_found',
      independent
        ? 'subject_token names an independent agent, which gets its tokens from IssueAgentToken, not by exchange'
        : 'subject_token names no programmable number or dependent agent of your account',
      { oauth: 'invalid_request' },
    );
  }
  if (!inService(subject)) {
    throw new DomainError('failed_precondition', `subject ${subject.svcnumId} is not active`, {
      oauth: 'invalid_request',
    });
  }
  return subject;
}

/** Lending a number: the agent (actor) acts for the number, with the lendable scopes it holds. */
async function lendNumber(
  store: TokenExchangePort,
  caller: Caller,
  input: ExchangeInput,
  actor: AccessTokenClaims | undefined,
): Promise<Delegation> {
  if (!actor) throw invalidRequest("lending a number needs the agent's access token as actor_token");
  await actorAgent(store, caller, actor);
  return {
    scopes: narrowed(
      input.scope,
      LENDABLE_SCOPES.filter((scope) => actor.scope.split(' ').includes(scope)),
    ),
    act: { sub: actor.sub },
    clientId: actor.client_id,
  };
}

/** A dependent agent's token: its owner acts (with its token, or without as the caller's account). */
async function dependentToken(
  store: TokenExchangePort,
  caller: Caller,
  input: ExchangeInput,
  subject: User,
  actor: AccessTokenClaims | undefined,
): Promise<Delegation> {
  if (actor) {
    await actorAgent(store, caller, actor);
    if (actor.sub !== subject.parentId) {
      throw invalidRequest("actor_token must be the token of the dependent agent's owner");
    }
  } else if (subject.parentId && subject.parentId !== caller.ownerId) {
    // The owner agent acts (act.sub) even without its token: it must be active too.
    const owner = await store.getUser(subject.parentId);
    if (!owner || !inService(owner)) {
      throw new DomainError('failed_precondition', `the owner agent ${subject.parentId} is not active`, {
        oauth: 'invalid_request',
      });
    }
  }
  const allowed = (subject.scopes ?? []).filter((scope) => !actor || actor.scope.split(' ').includes(scope));
  return {
    scopes: narrowed(input.scope, allowed),
    act: { sub: subject.parentId ?? caller.ownerId },
    clientId: actor?.client_id ?? caller.clientId,
  };
}

async function runExchange(ctx: ExchangeContext, caller: Caller, input: ExchangeInput): Promise<ExchangeResult> {
  const { store, clock, issuer, standing } = ctx;
  const subject = await exchangeSubject(store, caller, checkParameters(ctx.config, input));
  const actor = await actorClaims(ctx.verify, input);
  let delegation: Delegation;
  if (subject.accountType === 'programmable') {
    delegation = await lendNumber(store, caller, input, actor);
  } else if (subject.agentKind === 'dependent') {
    delegation = await dependentToken(store, caller, input, subject, actor);
  } else {
    throw invalidRequest('an independent agent gets its token from IssueAgentToken, not by exchange');
  }
  const { scopes, act, clientId } = delegation;
  if (actor?.exp && actor.exp <= Math.floor(clock.now() / 1000)) throw invalidRequest('actor_token is expired');
  // Disabled means disabled: no token is issued that its first use would refuse (the actor's
  // client, the acting agent, the subject and their owner enabled; at most 30 s late, as there).
  const refused = await standing.tokenRefusal({ client_id: clientId, sub: subject.svcnumId, act });
  if (refused) {
    throw new DomainError('failed_precondition', `the token asked for could not be used: ${refused}`, {
      oauth: 'invalid_request',
    });
  }
  const { token, expiresIn } = await issuer.accessToken({
    subject: subject.svcnumId,
    clientId,
    scopes,
    act,
    expiresBy: actor?.exp,
    ...(input.jkt !== undefined ? { jkt: input.jkt } : {}),
  });
  // The actor token may have expired while the checks above ran.
  if (expiresIn <= 0) throw invalidRequest('actor_token is expired');
  return {
    accessToken: token,
    issuedTokenType: TOKEN_TYPE_ACCESS_TOKEN,
    tokenType: tokenType(input.jkt),
    expiresIn,
    scope: formatScope(scopes),
  };
}

/** The exchange function both the ExchangeToken RPC and the token endpoint's grant run. */
export function createTokenExchange(ctx: ExchangeContext) {
  return async function exchange(caller: Caller, input: ExchangeInput): Promise<ExchangeResult> {
    return runExchange(ctx, caller, input);
  };
}

export type TokenExchange = ReturnType<typeof createTokenExchange>;
