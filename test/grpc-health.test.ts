import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect as http2Connect, type ClientHttp2Session } from 'node:http2';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  HealthClient,
  healthCheckResponse_ServingStatusToJSON as statusName,
} from '../grpc-service/gen/grpc/health/v1/health';
import {
  awsRuntimeEnvironment,
  buildGrpcBundle,
  stackSettings,
  startGrpcTask,
  withPublicKeys,
  type GrpcBundle,
  type GrpcTask,
  type StackSettings,
} from './support/artifacts';
import { startKmsStandIn, type KmsStandIn } from './support/kms-standin';

// Health that means it: the bundled gRPC process (built and started as the image runs it, with the
// task definition's environment) is asked exactly as the NLB's target group and the container's
// health check ask it, both read from the synthesized template. A serving task passes both; a
// wedged one (SIGSTOP: its event loop runs nothing, while the kernel still accepts TCP connections,
// which is all a TCP check sees) fails both within their own timeouts; a draining one answers
// 503 NOT_SERVING until it stops. grpc.health.v1 stays open over gRPC (grpcurl, buf curl).

let root: string;
let settings: StackSettings;
let bundle: GrpcBundle;
let kms: KmsStandIn;
const tasks: GrpcTask[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'svcnum-health-'));
  const building = buildGrpcBundle(join(root, 'grpc'));
  settings = stackSettings();
  kms = await startKmsStandIn(settings.keys);
  bundle = await building;
}, 180_000);

afterAll(async () => {
  await Promise.all(tasks.map((task) => task.kill()));
  await kms?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/**
 * The task as ECS starts it, on free ports; DRAIN_SECONDS as given (the drain test holds a call open instead of racing
 * it).
 */
async function startTask(drainSeconds = settings.task.DRAIN_SECONDS!): Promise<GrpcTask> {
  // No table is read here: DynamoDB's endpoint is a closed loopback port.
  const runtime = awsRuntimeEnvironment(settings, { dynamodb: 'http://127.0.0.1:9', kms: kms.endpoint });
  const task = await startGrpcTask(bundle, {
    ...withPublicKeys(settings.task, settings, kms.publicKeyDer),
    GRPC_PORT: '0',
    HEALTH_PORT: '0',
    DRAIN_SECONDS: drainSeconds,
    ...runtime,
  });
  tasks.push(task);
  return task;
}

type CheckResult =
  | { healthy: true; status: number; body: string }
  | { healthy: false; status?: number; body?: string; failure?: string };

/** One check of the NLB's target group: GET its path, healthy only on its code, within its timeout. */
function targetGroupCheck(task: GrpcTask): Promise<CheckResult> {
  const check = settings.taskHealth.targetGroup;
  return new Promise((resolve) => {
    const sent = request(
      {
        host: '127.0.0.1',
        port: task.healthPort,
        path: check.path,
        method: 'GET',
        timeout: check.timeoutSeconds * 1000,
        agent: false,
      },
      (response) => {
        let body = '';
        response
          .setEncoding('utf8')
          .on('data', (chunk: string) => {
            body += chunk;
          })
          .on('end', () => {
            const status = response.statusCode!;
            resolve(
              String(status) === check.httpCode ? { healthy: true, status, body } : { healthy: false, status, body },
            );
          });
      },
    );
    sent.on('timeout', () => {
      sent.destroy();
      resolve({ healthy: false, failure: 'timeout' });
    });
    sent.on('error', (error) => resolve({ healthy: false, failure: error.message }));
    sent.end();
  });
}

/**
 * The container's health check: its command from the task definition (the image's node), killed at its timeout as ECS
 * does.
 */
function containerCheck(task: GrpcTask): Promise<{ healthy: boolean; code: number | null }> {
  const { command, timeoutSeconds } = settings.taskHealth.container;
  const [form, program, ...args] = command;
  expect([form, program]).toEqual(['CMD', 'node']);
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      args,
      { env: { PATH: process.env.PATH, HEALTH_PORT: String(task.healthPort) }, timeout: timeoutSeconds * 1000 },
      () => undefined,
    );
    child.once('exit', (code) => resolve({ healthy: code === 0, code }));
  });
}

/** grpc.health.v1 Check over gRPC, without credentials, as grpcurl or buf curl would. */
async function grpcHealth(task: GrpcTask): Promise<string> {
  const client = new HealthClient(`127.0.0.1:${task.port}`, credentials.createInsecure());
  try {
    return await new Promise<string>((resolve, reject) =>
      client.check({ service: '' }, (error, response) =>
        error ? reject(error) : resolve(statusName(response.status)),
      ),
    );
  } finally {
    client.close();
  }
}

/** Whether a TCP connection to the gRPC port completes: all the NLB's former TCP check asked. */
function tcpConnects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

describe("the gRPC task's health, as the NLB and ECS ask it", () => {
  it('is checked over HTTP on HEALTH_PORT by the target group, and by the container with node (the image has no curl)', () => {
    expect(settings.taskHealth.targetGroup).toMatchObject({
      protocol: 'HTTP',
      port: Number(settings.task.HEALTH_PORT),
      httpCode: '200',
    });
    expect(settings.taskHealth.container.command.slice(0, 2)).toEqual(['CMD', 'node']);
  });

  it("a serving task: SERVING over gRPC, 200 SERVING to the target group's check, the container's check passes", async () => {
    const task = await startTask();
    expect(await grpcHealth(task)).toBe('SERVING');
    expect(await targetGroupCheck(task)).toEqual({ healthy: true, status: 200, body: 'SERVING\n' });
    expect(await containerCheck(task)).toEqual({ healthy: true, code: 0 });
    await task.kill();
  }, 60_000);

  it('a wedged task (SIGSTOP): TCP still connects, but both checks fail within their own timeouts; after SIGCONT both pass', async () => {
    const task = await startTask();
    expect((await targetGroupCheck(task)).healthy).toBe(true);
    task.signal('SIGSTOP');
    try {
      // The kernel completes the handshake for a stopped process: a TCP check would keep it in service.
      expect(await tcpConnects(task.port)).toBe(true);
      expect(await targetGroupCheck(task)).toEqual({ healthy: false, failure: 'timeout' });
      expect((await containerCheck(task)).healthy).toBe(false);
    } finally {
      task.signal('SIGCONT');
    }
    expect((await targetGroupCheck(task)).healthy).toBe(true);
    expect((await containerCheck(task)).healthy).toBe(true);
    expect(await grpcHealth(task)).toBe('SERVING');
    await task.kill();
  }, 60_000);

  it('a draining task (SIGTERM) answers 503 NOT_SERVING while a call is in flight, then exits 0 once it ends', async () => {
    // Long enough that the drain cannot end by its timer before the call does.
    const task = await startTask('120');
    // A call in flight: a health Check whose request never ends (no END_STREAM), on its own connection.
    const session: ClientHttp2Session = http2Connect(`http://127.0.0.1:${task.port}`);
    const stream = session.request(
      {
        ':method': 'POST',
        ':path': '/grpc.health.v1.Health/Check',
        'content-type': 'application/grpc',
        te: 'trailers',
      },
      { endStream: false },
    );
    stream.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    });
    expect((await targetGroupCheck(task)).healthy).toBe(true);

    task.signal('SIGTERM');
    let check = await targetGroupCheck(task);
    while (check.healthy) check = await targetGroupCheck(task);
    expect(check).toEqual({ healthy: false, status: 503, body: 'NOT_SERVING\n' });
    expect((await containerCheck(task)).healthy).toBe(false);
    expect(task.output.stdout).toContain('SIGTERM: draining');

    // The call ends (the client gives up): the drain completes and the process exits cleanly.
    session.destroy();
    expect(await task.exited).toBe(0);
  }, 60_000);
});
