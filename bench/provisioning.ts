import {
  credentials,
  Metadata,
  status,
  type ChannelOptions,
  type ClientUnaryCall,
  type ServiceError,
} from '@grpc/grpc-js';
import { createRequire } from 'node:module';
import {
  AgentServiceClient,
  CreateAgentRequest,
  ExchangeTokenRequest,
  IssueAgentTokenRequest,
  type CreateAgentResponse,
  type ExchangeTokenResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import type { AccessToken } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  CreateMaskRequest,
  MaskServiceClient,
  type Mask,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import {
  NumberServiceClient,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { createHttpClient, formBody, FORM_HEADERS } from './http-client';
import { runLoad, type LoadResult } from './load';
import type { BenchPoolInfo, BenchServerInfo } from './server-process';
import { countersDelta, type StoreCounters } from './store-counters';

// The gRPC provisioning API under load, against the local runner in a child process:
//   MaskService.CreateMask          each call leases a number from the pool (seeded by the child)
//   AgentService.IssueAgentToken    one independent agent, created at setup
//   AgentService.ExchangeToken      RFC 8693 (a): a programmable number lent to that agent
// Every run keeps `concurrency` unary calls in flight through ONE grpc-js client (one channel,
// one HTTP/2 connection) per service; the calls are multiplexed as HTTP/2 streams on it.
// A call that ends in a non-OK status is an error, counted under the status name.

export interface ProvisioningOptions {
  concurrency: number;
  seconds: number;
  warmupSeconds: number;
  log: (message: string) => void;
  /** Aborts the runs (the server died). */
  signal?: AbortSignal;
  /** The server's store call counters (its stats), read at the edges of the timed CreateMask run. */
  storeCounters?: () => Promise<StoreCounters>;
}

export interface RpcLoadResult extends LoadResult {
  /** The first status message seen for each failed status name (warm-up included). */
  errorSamples: Record<string, string>;
}

export interface ProvisioningResult {
  /** How the load generator talks to the server, for the report. */
  channel: string;
  pool: BenchPoolInfo & {
    /** Numbers taken at setup (the programmable number, the agent's number and its fallback). */
    usedSetup: number;
    /** Masks created (= numbers taken) in the CreateMask warm-up and timed run. */
    usedWarmup: number;
    usedTimed: number;
    /** Seeded numbers not taken. */
    left: number;
    /** A CreateMask call failed because the pool was empty. */
    ranDry: boolean;
  };
  createMask: RpcLoadResult & {
    /**
     * Store calls (DynamoDB round trips) per OK CreateMask in the timed run, in all and by method; absent without
     * `storeCounters`.
     */
    storeCallsPerCall?: { calls: number; byMethod: Record<string, number> };
  };
  issueAgentToken: RpcLoadResult;
  exchangeToken: RpcLoadResult;
}

/** Numbers taken from the pool before the runs: ProvisionNumber (1) and CreateAgent (number + fallback). */
export const SETUP_NUMBERS = 3;
/**
 * CreateMask rate the pool is sized for: far above what one local runner (embedded dynalite)
 * does (a few hundred per second at most), so the pool does not run dry: 1000/s × (2 s + 10 s) = 12,000 by default.
 */
export const MASK_RPS_CEILING = 1000;

/** Numbers to seed so that CreateMask cannot empty the pool in the warm-up plus the timed run. */
export function poolNumbersFor(seconds: number, warmupSeconds: number): number {
  return Math.ceil(MASK_RPS_CEILING * (seconds + warmupSeconds)) + SETUP_NUMBERS;
}

const TOKEN_TYPE_SVCNUM_ID = 'urn:svcnum:params:oauth:token-type:svcnum-id';
const TOKEN_TYPE_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const MASK_TTL_SECONDS = 3600;
const POOL_EMPTY = /no number is free in the pool/;

/**
 * Each client gets its own subchannel pool, so it has its own connection instead of sharing
 * grpc-js's process-wide one with the other clients.
 */
export const CHANNEL_OPTIONS: ChannelOptions = { 'grpc.use_local_subchannel_pool': 1 };

export type Unary<Request, Response> = (
  request: Request,
  metadata: Metadata,
  callback: (error: ServiceError | null, response: Response) => void,
) => ClientUnaryCall;

function isServiceError(error: unknown): error is ServiceError {
  return error instanceof Error && typeof (error as Partial<ServiceError>).code === 'number' && 'details' in error;
}

/** One unary call with `authorization: Bearer <token>`; resolves with the response or rejects with the ServiceError. */
function invoke<Request, Response>(
  method: Unary<Request, Response>,
  request: Request,
  token: string,
): Promise<Response> {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) => {
    method(request, metadata, (error, response) => (error ? reject(error) : resolve(response)));
  });
}

/** A setup call that must succeed. */
export async function setupCall<Request, Response>(
  name: string,
  method: Unary<Request, Response>,
  request: Request,
  token: string,
): Promise<Response> {
  try {
    return await invoke(method, request, token);
  } catch (error) {
    if (isServiceError(error)) throw new Error(`setup ${name} failed: ${status[error.code]}: ${error.details}`);
    throw error;
  }
}

/**
 * A load request for runLoad: the gRPC status code of one call (OK = 0). The response is checked
 * by `check`, which throws if an OK answer lacks what it should carry.
 */
function rpcRequest<Request, Response>(
  method: Unary<Request, Response>,
  request: () => Request,
  token: string,
  samples: Record<string, string>,
  check: (response: Response) => void,
) {
  return async (): Promise<number> => {
    try {
      check(await invoke(method, request(), token));
      return status.OK;
    } catch (error) {
      if (!isServiceError(error)) throw error;
      samples[status[error.code] ?? String(error.code)] ??= error.details;
      return error.code;
    }
  };
}

const statusName = (code: number) => status[code] ?? `status ${code}`;

function need(value: string | undefined, what: string): void {
  if (!value) throw new Error(`OK without ${what}`);
}

/** A client_credentials token of the child's provisioning client, over HTTP. */
export async function provisioningToken(server: BenchServerInfo): Promise<string> {
  const http = createHttpClient('http', server.issuer, 1);
  try {
    const { clientId, clientSecret, scope } = server.provisioning;
    const response = await http.request(
      'POST',
      '/oauth/token',
      FORM_HEADERS,
      formBody({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, scope }),
    );
    if (response.status !== 200) throw new Error(`client_credentials token: ${response.status} ${response.body}`);
    return (JSON.parse(response.body) as { access_token: string }).access_token;
  } finally {
    http.close();
  }
}

/** The two ends of the message benches: a programmable number (the inbox) and an agent that sends to it. */
export async function messageParties(
  numbers: NumberServiceClient,
  agents: AgentServiceClient,
  token: string,
  label: string,
): Promise<{ inbox: ProgrammableNumber; agentSvcnum: string; senderToken: () => Promise<string> }> {
  const inbox = await setupCall<ProvisionNumberRequest, ProgrammableNumber>(
    'ProvisionNumber',
    numbers.provisionNumber.bind(numbers),
    ProvisionNumberRequest.fromPartial({ displayName: `${label} inbox` }),
    token,
  );
  const created = await setupCall<CreateAgentRequest, CreateAgentResponse>(
    'CreateAgent',
    agents.createAgent.bind(agents),
    CreateAgentRequest.fromPartial({ displayName: `${label} sender` }),
    token,
  );
  const agent = created.agent!;
  const issue = agents.issueAgentToken.bind(agents);
  const request = IssueAgentTokenRequest.fromPartial({ svcnumId: agent.svcnumId });
  /** A fresh IssueAgentToken token (scope includes `messaging`) each call, so none expires mid-run. */
  const senderToken = async () =>
    (await setupCall<IssueAgentTokenRequest, AccessToken>('IssueAgentToken', issue, request, token)).accessToken;
  return { inbox, agentSvcnum: agent.svcnum, senderToken };
}

export async function provisioningBenchmarks(
  server: BenchServerInfo,
  options: ProvisioningOptions,
): Promise<ProvisioningResult> {
  const { concurrency, seconds, warmupSeconds, log, signal } = options;
  const address = `127.0.0.1:${server.grpcPort}`;
  const insecure = credentials.createInsecure();
  const numbers = new NumberServiceClient(address, insecure, CHANNEL_OPTIONS);
  const masks = new MaskServiceClient(address, insecure, CHANNEL_OPTIONS);
  const agents = new AgentServiceClient(address, insecure, CHANNEL_OPTIONS);
  const load = {
    concurrency,
    seconds,
    warmupSeconds,
    serverPid: server.pid,
    signal,
    ok: (code: number) => code === status.OK,
    statusName,
  };
  try {
    log('provisioning setup: client_credentials token, a programmable number, an agent and its token');
    const token = await provisioningToken(server);
    const number = await setupCall<ProvisionNumberRequest, ProgrammableNumber>(
      'ProvisionNumber',
      numbers.provisionNumber.bind(numbers),
      ProvisionNumberRequest.fromPartial({ displayName: 'Bench number' }),
      token,
    );
    const created = await setupCall<CreateAgentRequest, CreateAgentResponse>(
      'CreateAgent',
      agents.createAgent.bind(agents),
      CreateAgentRequest.fromPartial({ displayName: 'Bench agent', capabilities: ['bench'] }),
      token,
    );
    const agentId = created.agent!.svcnumId;
    const issueAgentToken: Unary<IssueAgentTokenRequest, AccessToken> = agents.issueAgentToken.bind(agents);
    const actor = await setupCall(
      'IssueAgentToken',
      issueAgentToken,
      IssueAgentTokenRequest.fromPartial({ svcnumId: agentId }),
      token,
    );

    // CreateMask: participant pairs round-robin (every ordered pair of distinct participants).
    const people = server.provisioning.participants;
    const pairs = people.flatMap((a) => people.filter((b) => b !== a).map((b) => [a, b] as const));
    if (pairs.length === 0) throw new Error('the bench server created fewer than two mask participants');
    let turn = 0;
    let masksCreated = 0;
    const maskSamples: Record<string, string> = {};
    const createMask = rpcRequest<CreateMaskRequest, Mask>(
      masks.createMask.bind(masks),
      () => {
        const [participantA, participantB] = pairs[turn++ % pairs.length]!;
        return CreateMaskRequest.fromPartial({
          ttlSeconds: MASK_TTL_SECONDS,
          participantA,
          participantB,
          scope: 'bench.mask',
        });
      },
      token,
      maskSamples,
      (mask) => {
        masksCreated++;
        need(mask.svcnum, 'svcnum');
      },
    );
    log(
      `MaskService.CreateMask (${warmupSeconds} s warm-up + ${seconds} s; pool of ${server.provisioning.pool.added} ` +
        `numbers)`,
    );
    const storeCounters = options.storeCounters;
    let storeBefore: StoreCounters | undefined;
    let storeCalls: { calls: number; byMethod: Record<string, number> } | undefined;
    const createMaskResult = await runLoad({
      ...load,
      request: createMask,
      ...(storeCounters
        ? {
            onPhase: async (edge) => {
              if (edge === 'measured-start') storeBefore = await storeCounters();
              if (edge === 'measured-end' && storeBefore)
                storeCalls = countersDelta(storeBefore, await storeCounters());
            },
          }
        : {}),
    });

    log(`AgentService.IssueAgentToken (${warmupSeconds} s warm-up + ${seconds} s)`);
    const issueSamples: Record<string, string> = {};
    const issueResult = await runLoad({
      ...load,
      request: rpcRequest(
        issueAgentToken,
        () => IssueAgentTokenRequest.fromPartial({ svcnumId: agentId }),
        token,
        issueSamples,
        (issued) => need(issued.accessToken, 'access_token'),
      ),
    });

    log(`AgentService.ExchangeToken (${warmupSeconds} s warm-up + ${seconds} s)`);
    const exchangeSamples: Record<string, string> = {};
    const exchangeRequest = ExchangeTokenRequest.fromPartial({
      subjectToken: number.svcnumId,
      subjectTokenType: TOKEN_TYPE_SVCNUM_ID,
      actorToken: actor.accessToken,
      actorTokenType: TOKEN_TYPE_ACCESS_TOKEN,
    });
    const exchangeResult = await runLoad({
      ...load,
      request: rpcRequest<ExchangeTokenRequest, ExchangeTokenResponse>(
        agents.exchangeToken.bind(agents),
        () => exchangeRequest,
        token,
        exchangeSamples,
        (exchanged) => need(exchanged.accessToken, 'access_token'),
      ),
    });

    const pool = server.provisioning.pool;
    // Every OK CreateMask took one number; the timed run's OK calls are its count minus its errors.
    const usedTimed = createMaskResult.count - createMaskResult.errors;
    return {
      channel:
        `grpc-js ${grpcVersion()}, insecure loopback ${address}; one client (one channel, own subchannel pool:` +
        ` one HTTP/2 connection) per service, shared by all ${concurrency} workers`,
      pool: {
        ...pool,
        usedSetup: SETUP_NUMBERS,
        usedWarmup: masksCreated - usedTimed,
        usedTimed,
        left: pool.added - SETUP_NUMBERS - masksCreated,
        ranDry: POOL_EMPTY.test(maskSamples.FAILED_PRECONDITION ?? ''),
      },
      createMask: {
        ...createMaskResult,
        errorSamples: maskSamples,
        ...(storeCalls && usedTimed > 0 ? { storeCallsPerCall: perCall(storeCalls, usedTimed) } : {}),
      },
      issueAgentToken: { ...issueResult, errorSamples: issueSamples },
      exchangeToken: { ...exchangeResult, errorSamples: exchangeSamples },
    };
  } finally {
    numbers.close();
    masks.close();
    agents.close();
  }
}

const round2 = (value: number) => Math.round(value * 100) / 100;

/** Store calls divided by `count` (2 decimals), in all and by method. */
function perCall(calls: { calls: number; byMethod: Record<string, number> }, count: number) {
  return {
    calls: round2(calls.calls / count),
    byMethod: Object.fromEntries(Object.entries(calls.byMethod).map(([method, n]) => [method, round2(n / count)])),
  };
}

export function grpcVersion(): string {
  try {
    return (createRequire(import.meta.url)('@grpc/grpc-js/package.json') as { version: string }).version;
  } catch {
    return '?';
  }
}
