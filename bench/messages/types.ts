// The shapes of the message-flow benchmark's options and results (written to bench/results/messages.json).
import type { LoadResult } from '../load';

export interface MessagesOptions {
  /** Measured seconds of each sustained-rate run. */
  seconds: number;
  /** Unmeasured sustained-rate run before each measured one. */
  warmupSeconds: number;
  /** Senders in flight in the sustained-rate runs. */
  concurrency: number;
  /** Messages per latency run, sent one every `intervalMs`. */
  messages: number;
  intervalMs: number;
  /** Concurrent streams held open on P3: one fresh P3 for each count. */
  streams: number[];
  /** gRPC channels (HTTP/2 connections) those streams are spread over. */
  streamChannels: number;
  log: (message: string) => void;
  /** Aborts the runs (the runner died). */
  signal?: AbortSignal;
  /** The runner's pub/sub engine (VALKEY_URL), for the idle-reads phase; without, that phase is skipped. */
  engineUrl?: string;
  /**
   * Numbers the owner gets for the idle-reads phase (every one watched), its idle window, and the messages delivered
   * after it.
   */
  idleInboxes: number;
  idleSeconds: number;
  idleMessages: number;
  /** P5's hub intervals are the defaults divided by this (1-30; see the top). */
  idleScale: number;
}

/** Milliseconds. */
export interface Distribution {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface LatencyResult {
  /** POSTs made, answered 202, and of those received on the stream (once or more). */
  sent: number;
  accepted: number;
  received: number;
  /** Accepted and never received within the delivery timeout. */
  missing: number;
  /** Receipts of a message already received (at-least-once redelivery). */
  duplicates: number;
  /** POSTs that did not answer 202, by status or error. */
  errorKinds: Record<string, number>;
  /** Rate the POSTs actually went out at. */
  sendRatePerSecond: number;
  /** The measurement: POST start → the stream's 'data' event, in this process. */
  sendToReceipt: Distribution;
  /** POST start → its 202 (the ingress's own latency). */
  sendToAccepted: Distribution;
  /**
   * The message's create_time (accepting process's Date.now(), ms) → receipt (this process's performance.timeOrigin +
   * now()).
   */
  createTimeToReceipt: Distribution;
  /** Messages that reached the stream before their POST had its 202. */
  receivedBeforeResponse: number;
  /** The streaming process's store calls during the run: stream reads (one Query per wake and inbox) and hub polls. */
  streamProcess: StreamProcessCalls;
  /** CPU, percent of one core: the accepting process, the streaming process (same for "same process"), this process. */
  cpu: { ingressPercent: number | null; streamPercent: number | null; benchPercent: number };
}

export interface ThroughputResult {
  /** The POSTs (closed loop, `concurrency` in flight); `cpu.serverPercent` is the accepting process. */
  ingress: LoadResult;
  accepted: number;
  acceptedPerSecond: number;
  /** Messages of the run received by the end of the ingress window, per second of it. */
  receivedInWindow: number;
  receivedPerSecond: number;
  /** Received in all (after the drain), missing, duplicates. */
  received: number;
  missing: number;
  duplicates: number;
  /** From the end of the ingress window until the stream had the last message. */
  drainMs: number;
  /** POST start → receipt, over every message of the run. */
  lag: Distribution;
  /** 202 → receipt: how far the stream trails the ingress (negative: received before the 202 arrived). */
  lagAfterAccepted: Distribution;
  streamProcess: StreamProcessCalls;
  /** Most messages accepted (202) but not yet received at any moment. */
  maxBacklog: number;
  /** CPU of the streaming process during the window (percent of one core). */
  streamCpuPercent: number | null;
  /**
   * Store calls of the accepting process (P1) per accepted message, by method (on the same-process path, its stream's
   * too).
   */
  ingressCallsPerMessage: Record<string, number>;
}

export interface StreamProcessCalls {
  /** store.readInbox calls (one DynamoDB Query each), in all and per message of the run. */
  streamQueries: number;
  streamQueriesPerMessage: number;
  /** store.inboxHeads calls (the hub's polls) and the BatchGetItem requests they made. */
  polls: number;
  batchGetItems: number;
}

export interface MemoryFigures {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

export interface StreamsResult {
  streams: number;
  channels: number;
  /** Streams that failed (an error status) instead of staying open. */
  streamErrors: Record<string, number>;
  /** Seconds from opening the first stream until every stream had received the readiness probe. */
  openSeconds: number;
  /** Streams that received the readiness probe (all, unless some failed). */
  live: number;
  memory: {
    before: MemoryFigures;
    open: MemoryFigures;
    closed: MemoryFigures;
    /** (open − before) / streams, bytes. */
    perStream: MemoryFigures;
  };
  /** One message, sent to P1 while every stream on P3 is idle: send → receipt per stream. */
  fanOut: Distribution & { streamQueries: number };
  /** P3's hub with the streams open and idle. */
  polling: {
    watchedInboxes: number;
    pollIntervalMs: number;
    windowSeconds: number;
    pollsPerSecond: number;
    batchGetItemsPerSecond: number;
    idsPerPoll: number;
    /** Stream reads while nothing arrives (should be 0: idle streams only cost the poll). */
    streamQueriesPerSecond: number;
  };
}

/** Store item reads of one stream process in the idle-reads phase (bench/store-counters.ts `itemsRead`). */
export interface IdleReadsMode {
  pid: number;
  /** Distinct inboxes its hub watched. */
  watchedInboxes: number;
  /** Its hub's poll interval while idle, and its streams' re-list interval (ms), as run (scaled). */
  pollIntervalMs: number;
  relistIntervalMs: number;
  /**
   * Its intervals were the defaults divided by this (1: the defaults); the per-minute figures below are scaled back by
   * it.
   */
  intervalScale: number;
  windowSeconds: number;
  /**
   * In the window: the hub's counter polls (store.inboxHeads calls) and the stream's listings of the owner's numbers
   * (store.listOwned pages).
   */
  polls: number;
  listingPages: number;
  /**
   * Items read while nothing arrived, per watched inbox per minute at the default intervals (measured ÷ intervalScale):
   * in all, and by store method.
   */
  itemReadsPerIdleInboxPerMinute: number;
  byMethodPerIdleInboxPerMinute: Record<string, number>;
  /** The same as measured, at the scaled intervals. */
  measuredItemReadsPerIdleInboxPerMinute: number;
  /**
   * The paced messages after the idle window: delivered to its stream; items read per delivered
   * message, in all and without the hub's counter polls (timer-driven: the idle cost, counted
   * above; with the engine one may fall in the run or not); inbox Queries per delivered message.
   */
  delivered: number;
  itemReadsPerDeliveredMessage: number;
  itemReadsPerDeliveredMessageWithoutPolls: number;
  /** Items read per delivered message by store method. */
  deliveredByMethod: Record<string, number>;
  streamQueriesPerDeliveredMessage: number;
}

export interface IdleReadsResult {
  inboxes: number;
  /** Streams per process (all of the one owner). */
  streamsPerProcess: number;
  withoutEngine: IdleReadsMode;
  withEngine: IdleReadsMode;
}

export interface MessagesResult {
  setup: {
    numberSvcnum: string;
    agentSvcnum: string;
    channel: string;
    p2Pid: number;
    p2bPid: number;
    p3Pids: number[];
  };
  /**
   * crossProcess: P2 woken through the engine (when the bench has one); crossProcessPolling: P2b without one, polling
   * (the design before the engine).
   */
  latency: { sameProcess: LatencyResult; crossProcess: LatencyResult; crossProcessPolling: LatencyResult };
  throughput: { sameProcess: ThroughputResult; crossProcess: ThroughputResult; crossProcessPolling: ThroughputResult };
  /** One per count of `options.streams`, each on a fresh P3. */
  streams: StreamsResult[];
  /** Without an engine URL: not measured. */
  idleReads?: IdleReadsResult;
  /** Stream messages no run was waiting for (should be 0). */
  strayMessages: number;
}
