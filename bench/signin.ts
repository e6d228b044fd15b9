import { Browser, pkcePair } from '../test/support/browser';
import { dpopKey, type DpopKey } from '../test/support/dpop';
import {
  createHttpClient,
  formBody,
  FORM_HEADERS,
  type HttpClient,
  type HttpClientKind,
  type HttpResponse,
} from './http-client';
import { EXHAUSTED, runLoad, type LoadResult } from './load';
import type { BenchServerInfo } from './server-process';
import type { ServerMeter } from './server-meter';

// Sign-in endpoints under load against the local runner in a child process:
//   POST /oauth/token  authorization_code   (each request redeems a fresh, pre-generated code)
//   POST /oauth/token  refresh_token        (a handful of refresh tokens, reused; no rotation)
//   GET  /oauth/userinfo                    (one Bearer access token)
//   POST /oauth/token  client_credentials   with a DPoP proof (RFC 9449; a fresh proof per request)
//   GET  /oauth/userinfo                    with one DPoP-bound access token and a fresh proof each
// Codes come from GET /oauth/authorize with a signed-in session and remembered consent, which
// answers straight with a 302 to the client; that rate is reported too.

export interface SignInOptions {
  concurrency: number;
  seconds: number;
  warmupSeconds: number;
  httpClient: HttpClientKind;
  /** Upper bound on codes generated for the timed exchange run. */
  maxCodes: number;
  log: (message: string) => void;
  /** Aborts the runs (the server died). */
  signal?: AbortSignal;
  /** Reads the server's counters around the warm-up and the measured phase of these runs (bench/hot-paths.ts). */
  meters?: Partial<Record<MeteredRun, ServerMeter>>;
}

/** The runs a meter can be given to. */
export type MeteredRun = 'codeExchange' | 'refresh' | 'userinfo' | 'dpopClientCredentials' | 'dpopUserinfo';

export interface CodeExchangeResult extends LoadResult {
  codes: {
    /** Codes minted in total (warm-up pool + timed-run pool). */
    generated: number;
    /** Codes redeemed (successfully or not) in the warm-up and in the timed run. */
    usedWarmup: number;
    usedTimed: number;
    /** Exchange rate seen in the warm-up, used to size the pool. */
    probeRps: number;
    /** Seconds from the first code of the timed pool to the start of the timed run (code TTL is 300 s). */
    poolAgeSeconds: number;
  };
}

export interface SignInResult {
  httpClient: string;
  authorizeWithSession: LoadResult;
  codeExchange: CodeExchangeResult;
  refresh: LoadResult & { refreshTokens: number };
  userinfo: LoadResult;
  dpopClientCredentials: LoadResult;
  dpopUserinfo: LoadResult;
}

interface Code {
  code: string;
  verifier: string;
}

const REFRESH_TOKENS = 8;
/** Codes for the exchange warm-up; it stops early if they run out. */
const WARMUP_CODES = 2000;
/** Headroom over the warm-up rate when sizing the pool for the timed run. */
const POOL_HEADROOM = 1.5;
/** Authorization codes live 5 minutes (core/kernel/config.ts). */
const CODE_TTL_SECONDS = 300;

function authorizePath(server: BenchServerInfo, challenge: string, state: string) {
  return `/oauth/authorize?${new URLSearchParams({
    response_type: 'code',
    client_id: server.clientId,
    redirect_uri: server.redirectUri,
    scope: server.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString()}`;
}

function codeFrom(location: string | undefined, server: BenchServerInfo): string {
  if (!location) throw new Error('no Location header');
  const url = new URL(location, server.issuer);
  const code = url.searchParams.get('code');
  if (`${url.origin}${url.pathname}` !== server.redirectUri || !code) {
    throw new Error(`no code in redirect (${url.searchParams.get('error') ?? url.pathname})`);
  }
  return code;
}

/** One real sign-in through the pages: authorize → sign-in → consent. Returns the session cookie. */
async function signIn(server: BenchServerInfo): Promise<string> {
  const browser = new Browser(server.issuer);
  let step = await browser.request(authorizePath(server, pkcePair().challenge, 'bench'));
  for (let hops = 0; hops < 6; hops++) {
    if (step.status !== 302 && step.status !== 303)
      throw new Error(`sign-in: unexpected status ${step.status} ${step.body.slice(0, 200)}`);
    const location = new URL(step.location!, server.issuer);
    if (location.origin !== new URL(server.issuer).origin) {
      codeFrom(step.location, server);
      const session = browser.cookies.get('session') ?? browser.cookies.get('__Host-session');
      if (!session) throw new Error('sign-in: no session cookie');
      return [...browser.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    }
    const page = await browser.request(location.pathname + location.search);
    if (location.pathname === '/login') {
      step = await browser.request('/login', {
        form: {
          request: Browser.field(page.body, 'request'),
          csrf: Browser.field(page.body, 'csrf'),
          identifier: server.email,
          password: server.password,
        },
      });
    } else if (location.pathname === '/consent') {
      step = await browser.request('/consent', {
        form: {
          request: Browser.field(page.body, 'request'),
          csrf: Browser.field(page.body, 'csrf'),
          decision: 'allow',
        },
      });
    } else {
      step = page;
    }
  }
  throw new Error('sign-in: too many redirects');
}

/**
 * Makes `target` attempts to mint a code with the session, `concurrency` at a time; the run is the authorize benchmark.
 */
async function mintCodes(
  http: HttpClient,
  server: BenchServerInfo,
  cookie: string,
  target: number,
  concurrency: number,
  signal?: AbortSignal,
) {
  const codes: Code[] = [];
  let started = 0;
  const result = await runLoad({
    concurrency,
    serverPid: server.pid,
    signal,
    seconds: 3600, // ends when `target` codes are minted
    ok: (status) => status === 302,
    request: async () => {
      if (started >= target) return EXHAUSTED;
      started++;
      const { verifier, challenge } = pkcePair();
      const response = await http.request('GET', authorizePath(server, challenge, 'bench'), { Cookie: cookie });
      // A failed attempt is counted as an error and not retried: the pool may come out short.
      if (response.status === 302) codes.push({ code: codeFrom(response.location, server), verifier });
      return response.status;
    },
  });
  return { codes, result };
}

/** The status, after a cheap check that a 200 carries what it should (else it counts as an error). */
export function checked(response: HttpResponse, needle: string): number {
  if (response.status === 200 && !response.body.includes(needle)) throw new Error(`200 without ${needle}`);
  return response.status;
}

function exchangeRequest(http: HttpClient, server: BenchServerInfo, code: Code) {
  return http.request(
    'POST',
    '/oauth/token',
    FORM_HEADERS,
    formBody({
      grant_type: 'authorization_code',
      code: code.code,
      redirect_uri: server.redirectUri,
      client_id: server.clientId,
      code_verifier: code.verifier,
    }),
  );
}

/** A load request that redeems the next code of `pool`; EXHAUSTED when none is left. */
function exchangeFrom(http: HttpClient, server: BenchServerInfo, pool: Code[]) {
  let next = 0;
  return {
    used: () => Math.min(next, pool.length),
    request: async () => {
      const code = pool[next++];
      if (!code) return EXHAUSTED;
      return checked(await exchangeRequest(http, server, code), '"access_token"');
    },
  };
}

/**
 * The DPoP runs (RFC 9449): client_credentials of the External API client with a proof, and UserInfo
 * with a token bound by refreshing `refreshToken` with a proof of the same key. Each request signs a
 * fresh proof on the load generator's side (the server checks it and writes its jti once).
 */
async function dpopRuns(
  http: HttpClient,
  server: BenchServerInfo,
  refreshToken: string,
  options: SignInOptions,
): Promise<Pick<SignInResult, 'dpopClientCredentials' | 'dpopUserinfo'>> {
  const { concurrency, seconds, warmupSeconds, log, meters = {} } = options;
  const key: DpopKey = await dpopKey('EdDSA');
  const tokenUrl = `${server.issuer}/oauth/token`;
  const { clientId, clientSecret, scope } = server.apiClient;
  const credentials = `${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`;
  const basic = `Basic ${Buffer.from(credentials).toString('base64')}`;
  const grant = formBody({ grant_type: 'client_credentials', scope });
  const run = (name: MeteredRun, request: () => Promise<number>) =>
    runLoad({
      concurrency,
      seconds,
      warmupSeconds,
      serverPid: server.pid,
      signal: options.signal,
      onPhase: meters[name]?.onPhase,
      request,
    });
  log(`DPoP client_credentials (${warmupSeconds} s warm-up + ${seconds} s)`);
  const dpopClientCredentials = await run('dpopClientCredentials', async () => {
    const headers = { ...FORM_HEADERS, Authorization: basic, DPoP: await key.proof('POST', tokenUrl) };
    return checked(await http.request('POST', '/oauth/token', headers, grant), '"token_type":"DPoP"');
  });
  const refreshed = await http.request(
    'POST',
    '/oauth/token',
    { ...FORM_HEADERS, DPoP: await key.proof('POST', tokenUrl) },
    formBody({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: server.clientId }),
  );
  const bound = JSON.parse(refreshed.body) as { access_token?: string; token_type?: string };
  if (bound.token_type !== 'DPoP') throw new Error(`DPoP refresh failed: ${refreshed.status} ${refreshed.body}`);
  const userinfoUrl = `${server.issuer}/oauth/userinfo`;
  log(`DPoP userinfo (${warmupSeconds} s warm-up + ${seconds} s)`);
  const dpopUserinfo = await run('dpopUserinfo', async () => {
    const proof = await key.proof('GET', userinfoUrl, { accessToken: bound.access_token! });
    const headers = { Authorization: `DPoP ${bound.access_token}`, DPoP: proof };
    return checked(await http.request('GET', '/oauth/userinfo', headers), '"sub"');
  });
  return { dpopClientCredentials, dpopUserinfo };
}

export async function signInBenchmarks(server: BenchServerInfo, options: SignInOptions): Promise<SignInResult> {
  const { concurrency, seconds, warmupSeconds, log, meters = {} } = options;
  const http = createHttpClient(options.httpClient, server.issuer, concurrency);
  try {
    log('signing in through the pages (session + remembered consent)');
    const cookie = await signIn(server);

    // Refresh tokens and an access token for the refresh and UserInfo runs.
    const setup = await mintCodes(http, server, cookie, REFRESH_TOKENS, 1, options.signal);
    const tokens = await Promise.all(
      setup.codes.map(async (code) => {
        const response = await exchangeRequest(http, server, code);
        if (response.status !== 200) throw new Error(`setup exchange failed: ${response.status} ${response.body}`);
        return JSON.parse(response.body) as { access_token: string; refresh_token: string };
      }),
    );
    if (tokens.length < REFRESH_TOKENS)
      throw new Error(`setup: only ${tokens.length} codes minted: ${JSON.stringify(setup.result.errorKinds)}`);

    // Code exchange: warm up on a first pool, size the timed pool from the rate seen, mint it, run.
    log(`minting ${WARMUP_CODES} codes for the exchange warm-up`);
    const warmupPool = await mintCodes(http, server, cookie, WARMUP_CODES, concurrency, options.signal);
    log(`exchange warm-up (${warmupSeconds} s, at most ${warmupPool.codes.length} codes)`);
    const warmupExchange = exchangeFrom(http, server, warmupPool.codes);
    const probe = await runLoad({
      concurrency,
      seconds: warmupSeconds,
      serverPid: server.pid,
      signal: options.signal,
      request: warmupExchange.request,
      onPhase: meters.codeExchange?.asWarmup,
    });
    const wanted = Math.ceil(Math.max(probe.rps, 100) * seconds * POOL_HEADROOM) + 4 * concurrency;
    const target = Math.min(wanted, options.maxCodes);
    log(`minting ${target} codes for the timed exchange run (warm-up rate ${probe.rps} req/s)`);
    const poolStarted = performance.now();
    const pool = await mintCodes(http, server, cookie, target, concurrency, options.signal);
    const poolAgeSeconds = Math.round((performance.now() - poolStarted) / 10) / 100;
    if (poolAgeSeconds + seconds > CODE_TTL_SECONDS - 10)
      log(`warning: minting took ${poolAgeSeconds} s; codes may expire during the run`);
    log(`code exchange (${seconds} s)`);
    const timedExchange = exchangeFrom(http, server, pool.codes);
    const exchange = await runLoad({
      concurrency,
      seconds,
      serverPid: server.pid,
      signal: options.signal,
      request: timedExchange.request,
      onPhase: meters.codeExchange?.onPhase,
    });
    if (exchange.exhausted) log(`note: the code pool ran out after ${exchange.seconds} s`);

    log(`refresh grant (${warmupSeconds} s warm-up + ${seconds} s)`);
    let turn = 0;
    const refresh = await runLoad({
      concurrency,
      seconds,
      warmupSeconds,
      serverPid: server.pid,
      signal: options.signal,
      onPhase: meters.refresh?.onPhase,
      request: async () => {
        const token = tokens[turn++ % tokens.length]!;
        const response = await http.request(
          'POST',
          '/oauth/token',
          FORM_HEADERS,
          formBody({ grant_type: 'refresh_token', refresh_token: token.refresh_token, client_id: server.clientId }),
        );
        return checked(response, '"access_token"');
      },
    });

    log(`userinfo (${warmupSeconds} s warm-up + ${seconds} s)`);
    const bearer = { Authorization: `Bearer ${tokens[0]!.access_token}` };
    const userinfo = await runLoad({
      concurrency,
      seconds,
      warmupSeconds,
      serverPid: server.pid,
      signal: options.signal,
      onPhase: meters.userinfo?.onPhase,
      request: async () => checked(await http.request('GET', '/oauth/userinfo', bearer), '"sub"'),
    });

    const dpop = await dpopRuns(http, server, tokens[1]!.refresh_token, options);

    // Warm-up pool failures are reported with the authorize run they belong to.
    const authorize = pool.result;
    authorize.warmupCount = warmupPool.result.count;
    authorize.warmupErrors = warmupPool.result.errors;
    return {
      httpClient: http.description,
      authorizeWithSession: authorize,
      codeExchange: {
        ...exchange,
        warmupCount: probe.count,
        warmupErrors: probe.errors,
        codes: {
          generated: setup.codes.length + warmupPool.codes.length + pool.codes.length,
          usedWarmup: warmupExchange.used(),
          usedTimed: timedExchange.used(),
          probeRps: probe.rps,
          poolAgeSeconds,
        },
      },
      refresh: { ...refresh, refreshTokens: tokens.length },
      userinfo,
      ...dpop,
    };
  } finally {
    http.close();
  }
}
