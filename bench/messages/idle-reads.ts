// Scenario 4 (see run.ts): store reads of idle watched inboxes, without (P4) and with (P5) the engine.
import { credentials } from '@grpc/grpc-js';
import {
  NumberServiceClient,
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import {
  ENGINE_LOST_POLL_INTERVAL_MS,
  INBOX_REFRESH_MS,
  RELIST_SAFETY_POLLS,
  SAFETY_POLL_INTERVAL_MS,
} from '../../core/messaging/hub-polling';
import { CHANNEL_OPTIONS, setupCall } from '../provisioning';
import { startBenchGrpcServer, type BenchChildStats, type BenchGrpcServer } from '../server-process';
import { methodCalls } from '../store-counters';
import type { FlowContext } from './one-stream';
import {
  DELIVERY_TIMEOUT_MS,
  FAN_OUT_TIMEOUT_MS,
  follow,
  round2,
  SETTLE_MS,
  sleep,
  streamFailure,
  TEXT,
  until,
  type Follower,
} from './tracking';
import type { IdleReadsMode, IdleReadsResult } from './types';

/** The intervals of the engine's hub divided by `scale` (P5), and its re-list period with the engine ready. */
export function scaledEngineIntervals(scale: number) {
  const safetyPollMs = Math.round(SAFETY_POLL_INTERVAL_MS / scale);
  const relistMs = Math.round(INBOX_REFRESH_MS / scale);
  return {
    safetyPollMs,
    relistMs,
    engineLostPollMs: Math.round(ENGINE_LOST_POLL_INTERVAL_MS / scale),
    /** As core/messaging/hub.ts relistIntervalMs with the engine ready. */
    readyRelistMs: Math.max(relistMs, RELIST_SAFETY_POLLS * safetyPollMs),
  };
}

const DELIVERY_TAG = 'idle-delivery';

/** P4 (no engine) and P5 (the engine, scaled intervals), one stream each, watching every inbox of the owner. */
interface IdleProcesses {
  p4: BenchGrpcServer;
  p5: BenchGrpcServer;
  clients: NumberServiceClient[];
  followers: Follower[];
  /** Delivery messages each stream got (P4, P5). */
  got: [number, number];
}

export async function idleReads(context: FlowContext, engineUrl: string, children: BenchGrpcServer[]) {
  const { options } = context;
  options.log(`idle reads: provisioning ${options.idleInboxes} more numbers for the owner`);
  await provisionNumbers(context, options.idleInboxes);
  const watched = options.idleInboxes + 1;
  const scaled = scaledEngineIntervals(options.idleScale);
  const processes = await startIdleProcesses(context, engineUrl, scaled);
  children.push(processes.p4, processes.p5);
  try {
    const { p4, p5 } = processes;
    const periods = `safety poll ${scaled.safetyPollMs} ms, re-list ${scaled.readyRelistMs} ms`;
    const intervals = `intervals ÷${options.idleScale}: ${periods}`;
    options.log(
      `idle reads: one stream on pid ${p4.info.pid} (no engine) and one on pid ${p5.info.pid}` +
        ` (engine ${engineUrl}, ${intervals}), each watching ${watched} inboxes`,
    );
    await settle(context, processes, watched, scaled.safetyPollMs);
    options.log(`idle reads: ${options.idleSeconds} s with both streams idle`);
    const idleBefore = await Promise.all([p4.stats(), p5.stats()]);
    const idleStarted = performance.now();
    await sleep(options.idleSeconds * 1000);
    const idleAfter = await Promise.all([p4.stats(), p5.stats()]);
    const idleSeconds = (performance.now() - idleStarted) / 1000;
    await deliver(context, processes);
    const deliveryAfter = await Promise.all([p4.stats(), p5.stats()]);
    const mode = (index: 0 | 1, scale: number, relistIntervalMs: number) =>
      modeFigures({
        pid: [p4, p5][index]!.info.pid,
        delivered: processes.got[index],
        stats: [idleBefore[index]!, idleAfter[index]!, deliveryAfter[index]!],
        watched,
        idleSeconds,
        scale,
        relistIntervalMs,
      });
    return {
      inboxes: watched,
      streamsPerProcess: 1,
      withoutEngine: mode(0, 1, INBOX_REFRESH_MS),
      withEngine: mode(1, options.idleScale, scaled.readyRelistMs),
    } satisfies IdleReadsResult;
  } finally {
    for (const follower of processes.followers) follower.cancel();
    for (const client of processes.clients) client.close();
    await Promise.all([processes.p4.stop(), processes.p5.stop()]);
  }
}

/** Provisions `count` numbers for the owner, `options.concurrency` calls at once. */
async function provisionNumbers(context: FlowContext, count: number): Promise<ProgrammableNumber[]> {
  const numbers = new NumberServiceClient(
    `127.0.0.1:${context.runner.info.grpcPort}`,
    credentials.createInsecure(),
    CHANNEL_OPTIONS,
  );
  const provisioned: ProgrammableNumber[] = [];
  let next = 0;
  try {
    const workers = Array.from({ length: Math.min(context.options.concurrency, count) }, async () => {
      while (next < count) {
        next++;
        const request = ProvisionNumberRequest.fromPartial({ displayName: `Idle inbox ${next}` });
        const call = numbers.provisionNumber.bind(numbers);
        provisioned.push(await setupCall('ProvisionNumber', call, request, context.token));
      }
    });
    await Promise.all(workers);
  } finally {
    numbers.close();
  }
  return provisioned;
}

async function startIdleProcesses(
  context: FlowContext,
  engineUrl: string,
  scaled: ReturnType<typeof scaledEngineIntervals>,
): Promise<IdleProcesses> {
  const messageIntervals = {
    MESSAGE_SAFETY_POLL_MS: String(scaled.safetyPollMs),
    MESSAGE_RELIST_MS: String(scaled.relistMs),
    MESSAGE_ENGINE_LOST_POLL_MS: String(scaled.engineLostPollMs),
  };
  const [p4, p5] = await Promise.all([
    startBenchGrpcServer(context.runner.info),
    startBenchGrpcServer(context.runner.info, { engineUrl, messageIntervals }),
  ]);
  const insecure = credentials.createInsecure();
  const clients = [p4, p5].map(
    (child) => new NumberServiceClient(`127.0.0.1:${child.info.grpcPort}`, insecure, CHANNEL_OPTIONS),
  );
  const processes: IdleProcesses = { p4, p5, clients, followers: [], got: [0, 0] };
  processes.followers = clients.map((client, index) =>
    follow(client, context.token, context.cursor, (message) => {
      if (TEXT.exec(message.text)?.[1] === DELIVERY_TAG) processes.got[index as 0 | 1]++;
    }),
  );
  return processes;
}

/**
 * Waits until both hubs watch every inbox (P5's engine ready), then until each stream's first read of
 * every inbox (one Query each), the engine's catch-up poll and the re-list that follows settle: no
 * store call but the hub's polls for SETTLE_MS. Then half a safety-net poll more, so that P5's timers
 * (the poll, and the re-list one period after the last) fall inside the window, not on its edges.
 */
async function settle(context: FlowContext, processes: IdleProcesses, watched: number, safetyPollMs: number) {
  const { p4, p5, followers } = processes;
  const { signal } = context.options;
  const deadline = performance.now() + FAN_OUT_TIMEOUT_MS;
  for (;;) {
    const [a, b] = await Promise.all([p4.stats(), p5.stats()]);
    if (a.hub.watchedInboxes === watched && b.hub.watchedInboxes === watched && b.hub.engineReady) break;
    const failure = followers.map((follower) => streamFailure(follower)()).find(Boolean);
    if (failure) throw new Error(`idle reads: ${failure}`);
    if (performance.now() > deadline) {
      const seen = `${a.hub.watchedInboxes}, ${b.hub.watchedInboxes}; engine ready: ${b.hub.engineReady}`;
      throw new Error(`idle reads: the streams did not watch ${watched} inboxes (${seen})`);
    }
    signal?.throwIfAborted();
    await sleep(100);
  }
  const quietCalls = (stats: BenchChildStats) => stats.store.calls - methodCalls(stats.store, 'inboxHeads');
  for (let last = [-1, -1]; ; ) {
    const now = (await Promise.all([p4.stats(), p5.stats()])).map(quietCalls);
    if (now.every((calls, index) => calls === last[index])) break;
    if (performance.now() > deadline) throw new Error('idle reads: the streams did not settle');
    last = now;
    signal?.throwIfAborted();
    await sleep(SETTLE_MS);
  }
  await sleep(safetyPollMs / 2);
}

/** `options.idleMessages` paced messages after the idle window, delivered to both streams. */
async function deliver(context: FlowContext, processes: IdleProcesses): Promise<void> {
  const { options } = context;
  const every = `one every ${options.intervalMs} ms`;
  options.log(`idle reads: ${options.idleMessages} messages, ${every}, delivered to both streams`);
  const run = context.runs.create(DELIVERY_TAG);
  const bearer = await context.senderToken();
  for (let index = 0; index < options.idleMessages; index++) {
    await context.sender.send(run, index, bearer).catch(() => undefined);
    await sleep(options.intervalMs);
  }
  const delivered = () => processes.got.every((count) => count >= run.accepted);
  await until(delivered, DELIVERY_TIMEOUT_MS, { signal: options.signal });
}

/** One process's figures: idle reads per watched inbox per minute, reads per delivered message. */
function modeFigures(input: {
  pid: number;
  delivered: number;
  /** Its stats before and after the idle window, and after the delivery. */
  stats: [BenchChildStats, BenchChildStats, BenchChildStats];
  watched: number;
  idleSeconds: number;
  scale: number;
  relistIntervalMs: number;
}): IdleReadsMode {
  const { delivered, watched, idleSeconds, scale } = input;
  const [idleBefore, idleAfter, deliveryAfter] = input.stats;
  const per = (value: number) => (delivered > 0 ? round2(value / delivered) : 0);
  const [idle, after] = [idleAfter.store, deliveryAfter.store];
  const items = after.itemsRead - idle.itemsRead;
  const pollItems = (after.itemsReadByMethod.inboxHeads ?? 0) - (idle.itemsReadByMethod.inboxHeads ?? 0);
  const deliveredByMethod: Record<string, number> = {};
  for (const [method, count] of Object.entries(after.itemsReadByMethod)) {
    const delta = count - (idle.itemsReadByMethod[method] ?? 0);
    if (delta > 0) deliveredByMethod[method] = per(delta);
  }
  return {
    pid: input.pid,
    watchedInboxes: idleAfter.hub.watchedInboxes,
    pollIntervalMs: idleAfter.hub.pollIntervalMs,
    relistIntervalMs: input.relistIntervalMs,
    intervalScale: scale,
    windowSeconds: round2(idleSeconds),
    ...idleFigures(idleBefore, idleAfter, watched, idleSeconds, scale),
    delivered,
    itemReadsPerDeliveredMessage: per(items),
    itemReadsPerDeliveredMessageWithoutPolls: per(items - pollItems),
    deliveredByMethod,
    streamQueriesPerDeliveredMessage: per(methodCalls(after, 'readInbox') - methodCalls(idle, 'readInbox')),
  };
}

/**
 * Items read per watched inbox per minute between two stats of one process, in all and by method:
 * as measured, and divided by `scale` (the process ran with its intervals divided by it).
 */
function idleFigures(before: BenchChildStats, after: BenchChildStats, watched: number, seconds: number, scale: number) {
  const perInboxPerMinute = (items: number) => items / watched / (seconds / 60);
  const byMethod: Record<string, number> = {};
  for (const [method, items] of Object.entries(after.store.itemsReadByMethod)) {
    const delta = items - (before.store.itemsReadByMethod[method] ?? 0);
    if (delta > 0) byMethod[method] = round2(perInboxPerMinute(delta) / scale);
  }
  const measured = perInboxPerMinute(after.store.itemsRead - before.store.itemsRead);
  return {
    itemReadsPerIdleInboxPerMinute: round2(measured / scale),
    byMethodPerIdleInboxPerMinute: byMethod,
    measuredItemReadsPerIdleInboxPerMinute: round2(measured),
    polls: methodCalls(after.store, 'inboxHeads') - methodCalls(before.store, 'inboxHeads'),
    listingPages: methodCalls(after.store, 'listOwned') - methodCalls(before.store, 'listOwned'),
  };
}
