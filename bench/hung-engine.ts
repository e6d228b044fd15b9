import { credentials } from '@grpc/grpc-js';
import { AgentServiceClient } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  NumberServiceClient,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import type { TestRedis } from '../test/support/redis';
import { createHttpClient } from './http-client';
import { runLoad, type LoadResult } from './load';
import { CHANNEL_OPTIONS, messageParties, provisioningToken, setupCall } from './provisioning';
import type { BenchServerInfo } from './server-process';

// A hung engine (issue 24, item 5): the runner publishes every wake-up to a redis-server, which is
// stopped with SIGSTOP (its connections stay open, nothing is answered) for the second half. The
// same three runs, engine healthy then stopped: POST /api/messages with `concurrency` senders and
// with one, and ProvisionNumber one at a time (each publishes an owner wake-up). Each run is
// `seconds` long after a `warmupSeconds` warm-up; with the engine stopped, the warm-up also covers
// the publisher's first command timeout (1 s), after which it stops sending to the engine.

export interface HungEngineOptions {
  seconds: number;
  warmupSeconds: number;
  concurrency: number;
  log: (message: string) => void;
  signal?: AbortSignal;
}

export interface HungEngineRuns {
  sends: LoadResult;
  sendsOneAtATime: LoadResult;
  provisionNumber: LoadResult;
}

export interface HungEngineResult {
  healthy: HungEngineRuns;
  stopped: HungEngineRuns;
}

/** Numbers ProvisionNumber may take: under 80/s one at a time here, in two runs with their warm-ups (and room). */
export const hungEnginePoolNumbers = (seconds: number, warmupSeconds: number) =>
  4 * 80 * (seconds + warmupSeconds) + 10;

export async function hungEngineBenchmarks(
  server: BenchServerInfo,
  redis: TestRedis,
  options: HungEngineOptions,
): Promise<HungEngineResult> {
  const { log, signal } = options;
  const address = `127.0.0.1:${server.grpcPort}`;
  const numbers = new NumberServiceClient(address, credentials.createInsecure(), CHANNEL_OPTIONS);
  const agents = new AgentServiceClient(address, credentials.createInsecure(), CHANNEL_OPTIONS);
  const http = createHttpClient('http', server.issuer, Math.max(options.concurrency, 16));
  try {
    const token = await provisioningToken(server);
    const parties = await messageParties(numbers, agents, token, 'Hung-engine');
    const inbox = parties.inbox;
    const sender = await parties.senderToken();
    const headers = { Authorization: `Bearer ${sender}`, 'Content-Type': 'application/json' };
    let sent = 0;
    const send = async () =>
      (
        await http.request(
          'POST',
          '/api/messages',
          headers,
          JSON.stringify({ to: inbox.svcnum, text: `hung-engine #${sent++}` }),
        )
      ).status;
    const provision = async () => {
      await setupCall<ProvisionNumberRequest, ProgrammableNumber>(
        'ProvisionNumber',
        numbers.provisionNumber.bind(numbers),
        ProvisionNumberRequest.fromPartial({}),
        token,
      );
      return 200;
    };
    const run = (concurrency: number, request: () => Promise<number>) =>
      runLoad({
        concurrency,
        seconds: options.seconds,
        warmupSeconds: options.warmupSeconds,
        request,
        serverPid: server.pid,
        signal,
      });
    const runs = async (state: string): Promise<HungEngineRuns> => {
      log(`hung engine: engine ${state}: POST /api/messages, ${options.concurrency} senders`);
      const sends = await run(options.concurrency, send);
      log(`hung engine: engine ${state}: POST /api/messages, one at a time`);
      const sendsOneAtATime = await run(1, send);
      log(`hung engine: engine ${state}: ProvisionNumber, one at a time`);
      const provisionNumber = await run(1, provision);
      return { sends, sendsOneAtATime, provisionNumber };
    };
    const healthy = await runs('healthy');
    redis.pause();
    try {
      return { healthy, stopped: await runs('stopped (SIGSTOP)') };
    } finally {
      redis.resume();
    }
  } finally {
    http.close();
    numbers.close();
    agents.close();
  }
}

/** The report's lines: p50 and rate of each run, healthy and stopped, and the ratio of the p50s. */
export function hungEngineLines(result: HungEngineResult): string[] {
  const fmt = (value: number) => value.toFixed(1);
  const row = (name: string, healthy: LoadResult, stopped: LoadResult) =>
    `${name.padEnd(34)} ${fmt(healthy.p50).padStart(8)} ${fmt(stopped.p50).padStart(8)} ` +
    `${`${fmt((stopped.p50 / healthy.p50) * 100)} %`.padStart(9)}` +
    ` ${fmt(healthy.rps).padStart(9)} ${fmt(stopped.rps).padStart(9)} ` +
    `${String(healthy.errors + stopped.errors).padStart(7)}`;
  return [
    `${'run'.padEnd(34)} ${'p50 ms'.padStart(8)} ${'stopped'.padStart(8)} ${'of healthy'.padStart(9)} ` +
      `${'/s'.padStart(9)} ${'stopped'.padStart(9)} ${'errors'.padStart(7)}`,
    row('POST /api/messages (concurrent)', result.healthy.sends, result.stopped.sends),
    row('POST /api/messages (one at a time)', result.healthy.sendsOneAtATime, result.stopped.sendsOneAtATime),
    row('ProvisionNumber (one at a time)', result.healthy.provisionNumber, result.stopped.provisionNumber),
  ];
}
