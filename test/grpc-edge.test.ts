import { credentials, Metadata, status } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { connect, type ClientHttp2Session, type Settings } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthClient } from '../grpc-service/gen/grpc/health/v1/health';
import {
  ServerReflectionClient,
  ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../grpc-service/gen/grpc/reflection/v1/reflection';
import { CreateAgentRequest } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { MAX_UNREAD_REFLECTION_BYTES } from '../grpc-service/reflection';
import { MAX_STREAMS_PER_CONNECTION } from '../grpc-service/server';
import { bufCurl } from './support/buf';
import { provisioningApp, type ProvisioningApp } from './support/grpc';
import { grpcImageNodeOptions } from './support/grpc-image';
import { startSecondProcess, type SecondProcess } from './support/second-service';
import { startTestService, type TestService } from './support/service';

// The gRPC edge (docs/grpc-api.md#limits): a client that never reads against the server process
// as it runs (its own process, with the image's NODE_OPTIONS), its memory read from
// /proc/<pid>/status; and reflection that wants a provisioning token, as the stacks set it.

/** VmRSS of a process, in MB. */
function rssMegabytes(pid: number): number {
  const kilobytes = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (!kilobytes) throw new Error(`no VmRSS for ${pid}`);
  return Number(kilobytes) / 1024;
}

/** A gRPC length-prefixed message (uncompressed). */
function frame(message: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(message.length + 5);
  framed.writeUInt8(0, 0);
  framed.writeUInt32BE(message.length, 1);
  framed.set(message, 5);
  return framed;
}

function healthCheck(port: number): Promise<void> {
  const client = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise<void>((resolve, reject) =>
    client.check({ service: '' }, (error) => (error ? reject(error) : resolve())),
  ).finally(() => client.close());
}

interface Flood {
  session: ClientHttp2Session;
  /** The grpc-status each stream ended with, by stream; undefined while it has not ended. */
  statuses: Array<number | undefined>;
}

/**
 * One HTTP/2 connection that opens `streams` calls of `path` and writes `requests` copies of
 * `message` on each, never reading what the server answers (a raw client: no library reads
 * for it; unread DATA is never acknowledged, so the server's sends stop at the flow-control window).
 */
function flood(port: number, path: string, message: Uint8Array, streams: number, requests: number): Flood {
  // Node's own limit on what a session queues (10 MB) would cancel this client's streams first.
  const session = connect(`http://127.0.0.1:${port}`, { maxSessionMemory: 100_000 });
  session.on('error', () => undefined);
  const framed = frame(message);
  const statuses: Array<number | undefined> = [];
  for (let index = 0; index < streams; index++) {
    statuses.push(undefined);
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stream.on('error', () => undefined);
    const ended = (headers: Record<string, unknown>) => {
      if (headers['grpc-status'] !== undefined) statuses[index] = Number(headers['grpc-status']);
    };
    stream.on('response', ended);
    stream.on('trailers', ended);
    // The same buffer each time: the client holds one copy, however much the server leaves unread.
    for (let request = 0; request < requests; request++) stream.write(framed);
  }
  return { session, statuses };
}

/**
 * Waits until the flood makes no more progress: the bytes the client got onto the wire do not
 * change across three health checks in a row on another connection (each a full turn of the
 * server's event loop), so whatever the server accepted it has read and handled.
 */
async function settled(floods: Flood[], port: number): Promise<void> {
  let last = -1;
  let unchanged = 0;
  for (let round = 0; round < 5_000 && unchanged < 3; round++) {
    await healthCheck(port);
    const sent = floods.reduce((sum, flood) => sum + flood.session.socket.bytesWritten, 0);
    unchanged = sent === last ? unchanged + 1 : 0;
    last = sent;
  }
}

let service: TestService;
/** The gRPC server process with reflection open (as locally), and one that wants a token (as in AWS). */
let open: SecondProcess;
let guarded: SecondProcess;
beforeAll(async () => {
  service = await startTestService();
  const env = { NODE_OPTIONS: [grpcImageNodeOptions(), process.env.NODE_OPTIONS ?? ''].join(' ').trim() };
  [open, guarded] = await Promise.all([
    startSecondProcess(service, env),
    startSecondProcess(service, { ...env, GRPC_REFLECTION: 'token' }),
  ]);
});
afterAll(async () => {
  await Promise.all([open?.stop(), guarded?.stop()]);
  await service?.close();
});

const REFLECTION_INFO = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';
const CREATE_AGENT = '/svcnum.provisioning.v1alpha1.AgentService/CreateAgent';
const statusNames = (flood: Flood) => [
  ...new Set(flood.statuses.map((code) => (code === undefined ? 'open' : status[code]))),
];

describe('a client that never reads', () => {
  it('advertises at most 100 concurrent streams per connection', async () => {
    const session = connect(`http://127.0.0.1:${open.grpcPort}`);
    try {
      const settings = await new Promise<Settings>((resolve) => session.once('remoteSettings', resolve));
      expect(settings.maxConcurrentStreams).toBe(MAX_STREAMS_PER_CONNECTION);
      expect(MAX_STREAMS_PER_CONNECTION).toBe(100);
    } finally {
      session.destroy();
    }
  });

  it('40 streams × 10 requests of ~0.9 MB on one connection (reflection, CreateAgent) are refused', async () => {
    await healthCheck(open.grpcPort);
    const before = rssMegabytes(open.child.pid!);
    const big = 'x'.repeat(900_000);
    const floods = [
      flood(
        open.grpcPort,
        REFLECTION_INFO,
        ServerReflectionRequest.encode({ host: '', fileContainingSymbol: big }).finish(),
        40,
        10,
      ),
      flood(
        open.grpcPort,
        CREATE_AGENT,
        CreateAgentRequest.encode(CreateAgentRequest.fromPartial({ displayName: big })).finish(),
        40,
        10,
      ),
    ];
    await settled(floods, open.grpcPort);
    const grown = rssMegabytes(open.child.pid!) - before;
    for (const each of floods) each.session.destroy();
    // Each request is over the server's limit: grpc-js ends its call before reading it whole.
    expect(floods.map(statusNames)).toEqual([['RESOURCE_EXHAUSTED'], ['RESOURCE_EXHAUSTED']]);
    // grpc-js still reads what the client sends after the status, and drops it: 720 MB here,
    // whose garbage RSS counts until V8 collects it (40–60 MB measured; 533 MB held before).
    expect(grown).toBeLessThanOrEqual(128);
  });

  it('100 reflection streams × 1,000 requests for the largest answer on one connection: one answer per stream is held, the RSS grows by at most 64 MB', async () => {
    await healthCheck(open.grpcPort);
    const before = rssMegabytes(open.child.pid!);
    // agent_service.proto and its imports: about 30 KB, the largest answer (after the first, the file alone: 19 KB).
    const request = ServerReflectionRequest.encode({
      host: '',
      fileByFilename: 'svcnum/provisioning/v1alpha1/agent_service.proto',
    }).finish();
    const held = flood(open.grpcPort, REFLECTION_INFO, request, MAX_STREAMS_PER_CONNECTION, 1_000);
    await settled([held], open.grpcPort);
    const grown = rssMegabytes(open.child.pid!) - before;
    // The streams wait for the client to read (its requests sit in HTTP/2 flow-control windows).
    expect(statusNames(held)).toEqual(['open']);
    held.session.destroy();
    expect(grown).toBeLessThanOrEqual(64);
  });

  it(`8 such connections, one request per stream: answers unread stay within ${MAX_UNREAD_REFLECTION_BYTES / 2 ** 20} MB per process, further ones are refused, and a client that goes gives its share back`, async () => {
    await healthCheck(open.grpcPort);
    const before = rssMegabytes(open.child.pid!);
    const request = ServerReflectionRequest.encode({
      host: '',
      fileByFilename: 'svcnum/provisioning/v1alpha1/agent_service.proto',
    }).finish();
    const floods = Array.from({ length: 8 }, () =>
      flood(open.grpcPort, REFLECTION_INFO, request, MAX_STREAMS_PER_CONNECTION, 1),
    );
    await settled(floods, open.grpcPort);
    const grown = rssMegabytes(open.child.pid!) - before;
    const codes = floods.flatMap((each) => each.statuses);
    // Streams left open: those whose answer the budget holds (about 30 KB each: some 570), and
    // those whose answer went out into the client's flow-control window (64 KB per connection: two each).
    expect(new Set(codes.map((code) => (code === undefined ? 'open' : status[code])))).toEqual(
      new Set(['open', 'RESOURCE_EXHAUSTED']),
    );
    expect(codes.filter((code) => code === undefined).length).toBeLessThanOrEqual(
      Math.floor(MAX_UNREAD_REFLECTION_BYTES / (29 * 1024)) + floods.length * 2,
    );
    expect(grown).toBeLessThanOrEqual(64);
    for (const each of floods) each.session.destroy();
    // Their streams are cancelled and their answers let go (by the time the server has answered
    // a call made after they went): reflection answers again.
    await healthCheck(open.grpcPort);
    const again = flood(open.grpcPort, REFLECTION_INFO, request, 1, 1);
    await settled([again], open.grpcPort);
    expect(again.statuses).toEqual([undefined]);
    again.session.destroy();
  });
});

describe('reflection with GRPC_REFLECTION=token (as in AWS)', () => {
  let app: ProvisioningApp;
  beforeAll(async () => {
    // A person's provisioning client: prov:agents alone (any prov:* scope will do).
    app = await provisioningApp(service, { accountType: 'person' });
  });
  afterAll(() => app?.close());

  /** Lists services through reflection with the generated client: the status it ended with. */
  async function listServices(port: number, token?: string): Promise<{ code: number; services: string[] }> {
    const client = new ServerReflectionClient(`127.0.0.1:${port}`, credentials.createInsecure());
    const metadata = new Metadata();
    if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
    try {
      const stream = client.serverReflectionInfo(metadata);
      const services: string[] = [];
      stream.on('data', (answer: ServerReflectionResponse) =>
        services.push(...(answer.listServicesResponse?.service ?? []).map((each) => each.name)),
      );
      const code = new Promise<number>((resolve) =>
        stream.on('status', (final: { code: number }) => resolve(final.code)),
      );
      stream.on('error', () => undefined);
      stream.write({ host: '', listServices: '*' });
      stream.end();
      return { code: await code, services };
    } finally {
      client.close();
    }
  }

  it('refuses a stream without a token or with a bad one (UNAUTHENTICATED) before reading a request', async () => {
    expect(await listServices(guarded.grpcPort)).toEqual({ code: status.UNAUTHENTICATED, services: [] });
    expect(await listServices(guarded.grpcPort, 'not-a-token')).toEqual({ code: status.UNAUTHENTICATED, services: [] });
    expect((await listServices(guarded.grpcPort, app.token)).code).toBe(status.OK);
    // Locally (the default) it stays open.
    expect((await listServices(open.grpcPort)).code).toBe(status.OK);
  });

  it('works with a provisioning token through buf curl (-H with --reflect-header), and health needs none', async () => {
    const base = `http://127.0.0.1:${guarded.grpcPort}`;
    const refused = await bufCurl(['--list-services', base]);
    expect(refused.code).not.toBe(0);
    // buf says a refused reflection request in its own words (its registry's login hint).
    expect(refused.stderr).toMatch(/not authenticated/);
    const listed = await bufCurl([
      '-H',
      `authorization: Bearer ${app.token}`,
      '--reflect-header',
      '*',
      '--list-services',
      base,
    ]);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(listed.stdout.trim().split('\n')).toContain('svcnum.provisioning.v1alpha1.AgentService');
    const agents = await bufCurl([
      '-H',
      `authorization: Bearer ${app.token}`,
      '--reflect-header',
      '*',
      '-d',
      '{}',
      `${base}/svcnum.provisioning.v1alpha1.AgentService/ListAgents`,
    ]);
    expect(agents).toMatchObject({ code: 0, stderr: '' });
    await healthCheck(guarded.grpcPort);
  });
});
