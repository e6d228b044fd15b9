import { fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { credentials, status } from '@grpc/grpc-js';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthService } from '../grpc-service/gen/grpc/health/v1/health';
import {
  ServerReflectionClient,
  ServerReflectionService,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../grpc-service/gen/grpc/reflection/v1/reflection';
import {
  ServerReflectionClient as ServerReflectionV1AlphaClient,
  ServerReflectionService as ServerReflectionV1AlphaService,
} from '../grpc-service/gen/grpc/reflection/v1alpha/reflection';
import { AgentServiceService } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { AliasServiceService } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/alias_service';
import { MaskServiceService } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';
import { NumberServiceService } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { MAX_REFLECTION_REQUEST_BYTES } from '../grpc-service/reflection';
import { SERVICE_NAMES, startGrpcServer } from '../grpc-service/server';
import { bufCurl, type BufResult } from './support/buf';
import { provisioningApp, seedPool, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// Server reflection as generic tools use it: the real `buf curl` (devDependency @bufbuild/buf)
// lists and calls every RPC with no schema but what the server reflects, over both reflection
// protocols; and the protocol itself: real file names, imports, comments, NOT_FOUND answers.

let service: TestService;
let app: ProvisioningApp;
let base: string;
beforeAll(async () => {
  service = await startTestService();
  // An agent takes two numbers (its own and a fallback), a programmable number one.
  await seedPool(service, '85', 3);
  app = await provisioningApp(service);
  base = `http://127.0.0.1:${service.grpcPort}`;
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

/** `buf curl` of one method with the app's token and a JSON body; the parsed JSON answer. */
async function invoke(method: string, body: object = {}, extra: string[] = []): Promise<Record<string, unknown>> {
  const result = await bufCurl([
    ...extra,
    '-H',
    `authorization: Bearer ${app.token}`,
    '-d',
    JSON.stringify(body),
    `${base}/${method}`,
  ]);
  expect(result, method).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

const lines = (text: string) => text.trim().split('\n').sort();
/** `package.Service/Method` of every method of generated service definitions. */
const methodsOf = (...definitions: Array<Record<string, { path: string }>>) =>
  definitions.flatMap((definition) => Object.values(definition).map((method) => method.path.slice(1)));

const REFLECTION = ['grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection'];
const EVERY_SERVICE = [...SERVICE_NAMES, 'grpc.health.v1.Health', ...REFLECTION].sort();
const OUR_METHODS = methodsOf(NumberServiceService, MaskServiceService, AgentServiceService, AliasServiceService);

describe('buf curl through server reflection alone', () => {
  it('lists every service and every method (grpc-v1 and grpc-v1alpha)', async () => {
    const everyMethod = [
      ...OUR_METHODS,
      ...methodsOf(HealthService, ServerReflectionService, ServerReflectionV1AlphaService),
    ].sort();
    expect(everyMethod).toContain('grpc.health.v1.Health/Check');
    for (const protocol of ['grpc-v1', 'grpc-v1alpha']) {
      const services = await bufCurl(['--reflect-protocol', protocol, '--list-services', base]);
      expect(services, protocol).toMatchObject({ code: 0, stderr: '' });
      expect(lines(services.stdout), protocol).toEqual(EVERY_SERVICE);
      const methods = await bufCurl(['--reflect-protocol', protocol, '--list-methods', base]);
      expect(methods, protocol).toMatchObject({ code: 0, stderr: '' });
      expect(lines(methods.stdout), protocol).toEqual(everyMethod);
    }
  });

  it('resolves the schema of every one of our RPCs (each answers UNAUTHENTICATED without a token)', async () => {
    // buf has to encode the request and decode the answer, so each method's types (Timestamp,
    // FieldMask, Empty included) must come through reflection. A few at a time: 2 shared cores.
    const results: Array<[string, BufResult]> = [];
    for (let at = 0; at < OUR_METHODS.length; at += 4) {
      results.push(
        ...(await Promise.all(
          OUR_METHODS.slice(at, at + 4).map(
            async (method) => [method, await bufCurl(['-d', '{}', `${base}/${method}`])] as [string, BufResult],
          ),
        )),
      );
    }
    for (const [method, result] of results) {
      expect(result.code, `${method}: ${result.stderr}`).toBe(status.UNAUTHENTICATED << 3);
      expect(JSON.parse(result.stderr), method).toMatchObject({ code: 'unauthenticated' });
    }
  });

  it('calls unary RPCs with a provisioning token and answers JSON (Timestamp, FieldMask, Empty)', async () => {
    const created = await invoke('svcnum.provisioning.v1alpha1.AgentService/CreateAgent', {
      displayName: 'Reflected agent',
      capabilities: ['reflection'],
    });
    expect(created).toMatchObject({
      agent: { displayName: 'Reflected agent', kind: 'AGENT_KIND_INDEPENDENT', state: 'NUMBER_STATE_ACTIVE' },
    });
    const listed = await invoke('svcnum.provisioning.v1alpha1.AgentService/ListAgents');
    expect(listed).toMatchObject({ agents: [{ displayName: 'Reflected agent', capabilities: ['reflection'] }] });
    // A Timestamp in its JSON form: buf knows google/protobuf/timestamp.proto from reflection.
    expect((listed.agents as Array<{ createTime: string }>)[0]!.createTime).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/,
    );

    const number = await invoke(
      'svcnum.provisioning.v1alpha1.NumberService/ProvisionNumber',
      { displayName: 'Reflected number', config: { autoReply: 'first' } },
      ['--reflect-protocol', 'grpc-v1alpha'],
    );
    const configured = await invoke('svcnum.provisioning.v1alpha1.NumberService/ConfigureProgrammable', {
      svcnumId: number.svcnumId,
      config: { autoReply: 'second', forwardToSvcnumId: 'ignored: not in the mask' },
      updateMask: 'autoReply',
    });
    expect(configured).toMatchObject({
      svcnumId: number.svcnumId,
      displayName: 'Reflected number',
      config: { autoReply: 'second' },
    });
    expect(configured.config).not.toHaveProperty('forwardToSvcnumId');

    const alias = await invoke('svcnum.provisioning.v1alpha1.AliasService/CreateAlias', {
      alias: 'reflected-agent',
      svcnumId: (created.agent as { svcnumId: string }).svcnumId,
    });
    expect(alias).toMatchObject({ alias: 'reflected-agent' });
    expect(await invoke('svcnum.provisioning.v1alpha1.AliasService/DeleteAlias', { alias: 'reflected-agent' })).toEqual(
      {},
    );
  });

  it('checks health: SERVING overall and for a service, NOT_FOUND for an unknown one', async () => {
    expect(await invoke('grpc.health.v1.Health/Check')).toEqual({ status: 'SERVING' });
    expect(
      await invoke('grpc.health.v1.Health/Check', { service: 'svcnum.provisioning.v1alpha1.AgentService' }, [
        '--reflect-protocol',
        'grpc-v1alpha',
      ]),
    ).toEqual({ status: 'SERVING' });
    const unknown = await bufCurl(['-d', '{"service":"nope.Nope"}', `${base}/grpc.health.v1.Health/Check`]);
    expect(unknown.code).toBe(status.NOT_FOUND << 3);
  });

  it('names a method that is not there clearly', async () => {
    const missing = await bufCurl(['-d', '{}', `${base}/svcnum.provisioning.v1alpha1.AgentService/Nope`]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/Nope/);
  });
});

describe('the reflection protocol', () => {
  type Client = InstanceType<typeof ServerReflectionClient>;
  let v1: Client;
  let v1alpha: Client;
  beforeAll(() => {
    v1 = new ServerReflectionClient(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure());
    v1alpha = new ServerReflectionV1AlphaClient(
      `127.0.0.1:${service.grpcPort}`,
      credentials.createInsecure(),
    ) as unknown as Client;
  });
  afterAll(() => {
    v1?.close();
    v1alpha?.close();
  });

  /** Sends the requests on one stream, one at a time, and collects an answer to each; the stream then ends with OK. */
  async function ask(
    client: Client,
    ...requests: Array<Partial<ServerReflectionRequest>>
  ): Promise<ServerReflectionResponse[]> {
    const stream = client.serverReflectionInfo();
    const ended = new Promise<number>((resolve) =>
      stream.on('status', (final: { code: number }) => resolve(final.code)),
    );
    const answers: ServerReflectionResponse[] = [];
    try {
      for (const request of requests) {
        const answer = new Promise<ServerReflectionResponse>((resolve, reject) => {
          stream.once('data', resolve);
          stream.once('error', reject);
        });
        stream.write({ host: '', ...request });
        answers.push(await answer);
      }
    } finally {
      stream.end();
    }
    expect(await ended).toBe(status.OK);
    return answers;
  }
  const files = (response: ServerReflectionResponse) =>
    response.fileDescriptorResponse!.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes));
  const names = (response: ServerReflectionResponse) => files(response).map((file) => file.name);

  it('lists every service, ours, health and both reflection services', async () => {
    for (const client of [v1, v1alpha]) {
      const [listed] = await ask(client, { listServices: '*' });
      expect(listed!.listServicesResponse!.service.map((entry) => entry.name).sort()).toEqual(EVERY_SERVICE);
    }
  });

  it('serves each file under its real name with its imports, each import once per stream, comments kept', async () => {
    const [byName, again, bySymbol, health] = await ask(
      v1,
      { fileByFilename: 'svcnum/provisioning/v1alpha1/agent_service.proto' },
      { fileByFilename: 'svcnum/provisioning/v1alpha1/agent_service.proto' },
      { fileContainingSymbol: 'svcnum.provisioning.v1alpha1.NumberService' },
      { fileContainingSymbol: 'grpc.health.v1.Health' },
    );
    expect(names(byName!)).toEqual([
      'svcnum/provisioning/v1alpha1/agent_service.proto',
      'google/protobuf/timestamp.proto',
      'svcnum/provisioning/v1alpha1/common.proto',
    ]);
    const [agentFile] = files(byName!);
    expect(agentFile!.dependency).toEqual([
      'google/protobuf/timestamp.proto',
      'svcnum/provisioning/v1alpha1/common.proto',
    ]);
    // Doc comments reach grpcurl describe and buf: source info is kept.
    expect(
      agentFile!.sourceCodeInfo?.location.some((location) =>
        location.leadingComments.includes('Creates and manages the AI agents'),
      ),
    ).toBe(true);
    // The requested file always comes; imports already sent on this stream do not come again.
    expect(names(again!)).toEqual(['svcnum/provisioning/v1alpha1/agent_service.proto']);
    expect(names(bySymbol!)).toEqual([
      'svcnum/provisioning/v1alpha1/number_service.proto',
      'google/protobuf/field_mask.proto',
    ]);
    expect(names(health!)).toEqual(['grpc/health/v1/health.proto']);

    // A fresh stream gets everything again.
    const [fresh] = await ask(v1alpha, { fileByFilename: 'svcnum/provisioning/v1alpha1/number_service.proto' });
    expect(names(fresh!).sort()).toEqual([
      'google/protobuf/field_mask.proto',
      'google/protobuf/timestamp.proto',
      'svcnum/provisioning/v1alpha1/common.proto',
      'svcnum/provisioning/v1alpha1/number_service.proto',
    ]);
  });

  it('finds the file of methods, messages, fields, enums and enum values', async () => {
    const symbols = {
      'svcnum.provisioning.v1alpha1.AgentService.ListAgents': 'svcnum/provisioning/v1alpha1/agent_service.proto',
      'svcnum.provisioning.v1alpha1.Agent.create_time': 'svcnum/provisioning/v1alpha1/agent_service.proto',
      'svcnum.provisioning.v1alpha1.NumberState': 'svcnum/provisioning/v1alpha1/common.proto',
      'svcnum.provisioning.v1alpha1.NUMBER_STATE_ACTIVE': 'svcnum/provisioning/v1alpha1/common.proto',
      'google.protobuf.Timestamp': 'google/protobuf/timestamp.proto',
      'grpc.health.v1.HealthCheckResponse.ServingStatus': 'grpc/health/v1/health.proto',
      'grpc.reflection.v1alpha.ServerReflection': 'grpc/reflection/v1alpha/reflection.proto',
    };
    const answers = await ask(v1, ...Object.keys(symbols).map((fileContainingSymbol) => ({ fileContainingSymbol })));
    expect(answers.map((answer) => names(answer)[0])).toEqual(Object.values(symbols));
  });

  it('describes the health service grpc-health-check serves (proto-vendor holds its very file)', () => {
    const vendored = fileURLToPath(new URL('../proto-vendor/grpc/health/v1/health.proto', import.meta.url));
    expect(readFileSync(vendored, 'utf8')).toBe(readFileSync(healthProtoPath, 'utf8'));
  });

  it('answers unknown files, symbols, extensions and empty requests with an error_response, and the stream goes on', async () => {
    const answers = await ask(
      v1,
      { fileByFilename: 'svcnum/provisioning/v1alpha1/nope.proto' },
      { fileContainingSymbol: 'svcnum.provisioning.v1alpha1.Nope' },
      { fileContainingSymbol: '' },
      { fileContainingExtension: { containingType: 'svcnum.provisioning.v1alpha1.Agent', extensionNumber: 1000 } },
      { allExtensionNumbersOfType: 'svcnum.provisioning.v1alpha1.Nope' },
      {},
      { allExtensionNumbersOfType: 'svcnum.provisioning.v1alpha1.Agent' },
    );
    const errors = answers.map(
      (answer) => answer.errorResponse && [status[answer.errorResponse.errorCode], answer.errorResponse.errorMessage],
    );
    expect(errors).toEqual([
      ['NOT_FOUND', 'file not found: svcnum/provisioning/v1alpha1/nope.proto'],
      ['NOT_FOUND', 'symbol not found: svcnum.provisioning.v1alpha1.Nope'],
      ['NOT_FOUND', 'symbol not found: '],
      ['NOT_FOUND', 'extension not found: svcnum.provisioning.v1alpha1.Agent 1000'],
      ['NOT_FOUND', 'type not found: svcnum.provisioning.v1alpha1.Nope'],
      ['INVALID_ARGUMENT', 'the request names no message_request'],
      undefined,
    ]);
    expect(answers[0]!.originalRequest).toMatchObject({ fileByFilename: 'svcnum/provisioning/v1alpha1/nope.proto' });
    expect(answers[6]!.allExtensionNumbersResponse).toEqual({
      baseTypeName: 'svcnum.provisioning.v1alpha1.Agent',
      extensionNumber: [],
    });
  });

  it('answers at most 1,000 requests on one stream, then ends it with RESOURCE_EXHAUSTED (it needs no token)', async () => {
    const stream = v1.serverReflectionInfo();
    let answered = 0;
    stream.on('data', () => answered++);
    const failed = new Promise<{ code: number; details: string }>((resolve) => stream.on('error', resolve));
    for (let index = 0; index < 1_005; index++) stream.write({ host: '', listServices: '*' });
    const error = await failed;
    expect(error.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(error.details).toMatch(/at most 1000 requests per reflection stream/);
    expect(answered).toBe(1_000);
  });

  it('echoes only the message_request in original_request (the host is in valid_host)', async () => {
    const stream = v1.serverReflectionInfo();
    const answer = new Promise<ServerReflectionResponse>((resolve) => stream.once('data', resolve));
    stream.write({ host: 'grpc.example.com', fileContainingSymbol: 'svcnum.provisioning.v1alpha1.Nope' });
    const { validHost, originalRequest } = await answer;
    stream.end();
    expect({ validHost, originalRequest }).toEqual({
      validHost: 'grpc.example.com',
      originalRequest: { host: '', fileContainingSymbol: 'svcnum.provisioning.v1alpha1.Nope' },
    });
  });

  it(`refuses a request over ${MAX_REFLECTION_REQUEST_BYTES} bytes: RESOURCE_EXHAUSTED ends the stream, nothing is echoed`, async () => {
    const stream = v1.serverReflectionInfo();
    const answers: ServerReflectionResponse[] = [];
    stream.on('data', (answer: ServerReflectionResponse) => answers.push(answer));
    const failed = new Promise<{ code: number; details: string }>((resolve) => stream.on('error', resolve));
    stream.write({ host: '', listServices: '*' });
    stream.write({ host: '', fileContainingSymbol: 'x'.repeat(MAX_REFLECTION_REQUEST_BYTES) });
    const error = await failed;
    expect({ code: status[error.code], details: error.details }).toEqual({
      // The name, its field's tag and its two-byte length.
      code: 'RESOURCE_EXHAUSTED',
      details: `a reflection request is at most ${MAX_REFLECTION_REQUEST_BYTES} bytes, not ${MAX_REFLECTION_REQUEST_BYTES + 3}`,
    });
    expect(answers.map((answer) => Object.keys(answer.listServicesResponse ?? {}))).toEqual([['service']]);
  });

  it('ends open reflection streams when the server drains', async () => {
    const second = await startGrpcServer(service.core, { port: 0, host: '127.0.0.1' });
    const client = new ServerReflectionClient(`127.0.0.1:${second.port}`, credentials.createInsecure());
    try {
      const stream = client.serverReflectionInfo();
      const first = new Promise((resolve) => stream.once('data', resolve));
      stream.write({ host: '', listServices: '*' });
      await first;
      const ended = new Promise<number>((resolve) =>
        stream.on('status', (final: { code: number }) => resolve(final.code)),
      );
      stream.on('data', () => undefined);
      // A stream left open would hold the drain for its whole grace (longer than this test may run).
      await second.drain(60_000);
      expect(await ended).toBe(status.OK);
    } finally {
      client.close();
    }
  });
});
