import {
  createFileRegistry,
  fromBinary,
  ScalarType,
  type DescField,
  type DescMessage,
  type DescMethod,
} from '@bufbuild/protobuf';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDescriptorSet } from '../grpc-service/reflection';
import { MAX_REQUEST_BYTES, SERVICE_NAMES } from '../grpc-service/server';
import {
  AgentKind,
  CreateAgentRequest,
  ListAgentsRequest,
  RotateAgentSvcnumRequest,
  type Agent,
  type CreateAgentResponse,
  type ListAgentsResponse,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import {
  ProvisionNumberRequest,
  type ProgrammableNumber,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/number_service';
import { call, failure, provisioningApp, rejects, seedPool, type ProvisioningApp } from './support/grpc';
import { fuzzSeed, oddValue, Prng, PROPERTY_NAMES, runConcurrently } from './support/fuzz';
import { startTestService, type TestService } from './support/service';

// Every RPC of every service the server offers (ours, grpc.health.v1, both reflection versions)
// gets requests built from its own schema: right and wrong wire types, int64 and int32 at their
// edges and beyond, unknown enum values, invalid UTF-8, garbage inside nested messages, unknown
// fields, truncated messages and random bytes, with and without a valid token. No call may end
// INTERNAL or UNKNOWN unless its bytes are not protobuf at all; a request made deliberately not to
// fit its message must be INVALID_ARGUMENT; the server keeps serving.

const CALLS = 1200;
const CONCURRENCY = 8;
/** How long a stream that would run forever (StreamAllMessages, Health.Watch) is listened to. */
const STREAM_LISTEN_MS = 150;

const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readDescriptorSet()));
const servedServices = [
  ...SERVICE_NAMES,
  'grpc.health.v1.Health',
  'grpc.reflection.v1.ServerReflection',
  'grpc.reflection.v1alpha.ServerReflection',
];
const methods: DescMethod[] = servedServices.flatMap((name) => registry.getService(name)!.methods);

const identity = (bytes: Buffer) => bytes;

/** Whether these bytes are protobuf at all: a sequence of well-formed fields, read to the end. */
function isProtobuf(bytes: Uint8Array): boolean {
  const reader = new BinaryReader(bytes);
  try {
    while (reader.pos < reader.len) {
      const [number, wireType] = reader.tag();
      if (wireType === WireType.EndGroup) return false;
      // A varint is at most 10 bytes (skip() would pass a longer one).
      if (wireType === WireType.Varint) reader.uint64();
      else reader.skip(wireType, number);
    }
    return reader.pos === reader.len;
  } catch {
    return false;
  }
}

interface Built {
  bytes: Uint8Array;
  misfit?: string;
  kind: string;
}

const INT64_IN_RANGE = [
  '0',
  '1',
  '-1',
  '60',
  '3600',
  '86400',
  String(Number.MAX_SAFE_INTEGER),
  String(-Number.MAX_SAFE_INTEGER),
];
const INT64_OUT_OF_RANGE = [
  '9007199254740992',
  '9007199254740993',
  '9223372036854775807',
  '-9223372036854775808',
  '-9007199254740993',
];
const INT32_VALUES = [0, 1, -1, 10, 100, 101, 1000, 2 ** 31 - 1, -(2 ** 31)];

class RequestBuilder {
  /** Whether the message being built may get deliberate misfits (half do not, so calls reach the core). */
  private spoil = true;

  constructor(
    private readonly random: Prng,
    private readonly knownIds: string[],
  ) {}

  private chanceToSpoil(probability: number) {
    return this.spoil && this.random.chance(probability);
  }

  private stringValue(field: DescField): string {
    if (/svcnum_id|alias|mask_id/.test(field.name) && this.random.chance(0.4)) return this.random.pick(this.knownIds);
    return oddValue(this.random);
  }

  /** A value of the field's element type, right or (noted in `misfit`) deliberately wrong. */
  private element(writer: BinaryWriter, field: DescField, depth: number, built: { misfit?: string }) {
    const kind = field.fieldKind === 'list' ? field.listKind : field.fieldKind;
    if (kind === 'enum') {
      const known = field.enum!.values.map((value) => value.number);
      if (this.chanceToSpoil(0.3)) {
        const unknown = this.random.pick([99, -1, 2 ** 31 - 1, Math.max(...known) + 1]);
        writer.int32(unknown);
        built.misfit ??= `unknown enum ${field.name}=${unknown}`;
      } else writer.int32(this.random.pick(known));
      return;
    }
    if (kind === 'message') {
      if (depth >= 3 || this.chanceToSpoil(0.1)) {
        // Not a message inside: garbage bytes in a message field.
        const garbage = Buffer.from([0x0f, 0xff, 0xff]);
        writer.bytes(garbage);
        built.misfit ??= `garbage in ${field.name}`;
        return;
      }
      writer.fork();
      this.fields(writer, field.message!, depth + 1, built);
      writer.join();
      return;
    }
    switch (field.scalar) {
      case ScalarType.STRING:
        if (this.chanceToSpoil(0.05)) {
          writer.bytes(Buffer.from([0x61, 0xff, 0xfe, 0x62]));
          built.misfit ??= `invalid UTF-8 in ${field.name}`;
        } else writer.string(this.stringValue(field));
        return;
      case ScalarType.INT64:
        if (this.chanceToSpoil(0.3)) {
          const value = this.random.pick(INT64_OUT_OF_RANGE);
          writer.int64(value);
          built.misfit ??= `${field.name}=${value}`;
        } else writer.int64(this.random.pick(INT64_IN_RANGE));
        return;
      case ScalarType.INT32:
        if (this.chanceToSpoil(0.15)) {
          writer.int64('4294967296');
          built.misfit ??= `${field.name}=2^32`;
        } else writer.int32(this.random.pick(INT32_VALUES));
        return;
      case ScalarType.BOOL:
        writer.uint32(this.random.pick([0, 1, 2, 1000]));
        return;
      case ScalarType.BYTES:
        writer.bytes(this.random.bytes(this.random.int(20)));
        return;
      default:
        throw new Error(`no generator for ${ScalarType[field.scalar!]} (${field.name})`);
    }
  }

  private expectedWireType(field: DescField): WireType {
    const kind = field.fieldKind === 'list' ? field.listKind : field.fieldKind;
    if (kind === 'enum') return WireType.Varint;
    if (kind === 'message' || field.scalar === ScalarType.STRING || field.scalar === ScalarType.BYTES)
      return WireType.LengthDelimited;
    return WireType.Varint;
  }

  private fields(writer: BinaryWriter, message: DescMessage, depth: number, built: { misfit?: string }) {
    for (const field of message.fields) {
      if (this.random.chance(0.3)) continue;
      const repeats = field.fieldKind === 'list' || this.random.chance(0.05) ? this.random.int(3) + 1 : 1;
      for (let index = 0; index < repeats; index++) {
        const expected = this.expectedWireType(field);
        if (this.chanceToSpoil(0.08)) {
          // The field's number with another wire type (a packed list is a legal form of a varint list).
          const others = [WireType.Varint, WireType.Bit64, WireType.LengthDelimited, WireType.Bit32].filter(
            (wire) => wire !== expected && !(field.fieldKind === 'list' && wire === WireType.LengthDelimited),
          );
          const wire = this.random.pick(others);
          writer.tag(field.number, wire);
          if (wire === WireType.Varint) writer.uint32(this.random.int(1000));
          else if (wire === WireType.Bit64) writer.fixed64(this.random.int(1000));
          else if (wire === WireType.Bit32) writer.fixed32(this.random.int(1000));
          else writer.bytes(this.random.bytes(this.random.int(8)));
          built.misfit ??= `${field.name} sent as wire type ${wire}`;
          continue;
        }
        writer.tag(field.number, expected);
        this.element(writer, field, depth, built);
      }
    }
    if (this.random.chance(0.1)) {
      // Unknown fields are skipped (forward compatibility), whatever their wire type.
      writer.tag(1000 + this.random.int(100), WireType.Varint).uint32(this.random.int(100));
      writer.tag(2000, WireType.LengthDelimited).bytes(this.random.bytes(5));
    }
  }

  build(method: DescMethod): Built {
    const mode = this.random.int(20);
    if (mode === 0) return { bytes: this.random.bytes(this.random.int(40)), kind: 'random bytes' };
    if (mode === 1) return { bytes: Buffer.from(PROPERTY_NAMES.join(',')), kind: 'text' };
    this.spoil = this.random.chance(0.5);
    const built: { misfit?: string } = {};
    const writer = new BinaryWriter();
    this.fields(writer, method.input, 0, built);
    const bytes = writer.finish();
    if (mode === 2 && bytes.length > 1)
      return { bytes: bytes.subarray(0, this.random.int(bytes.length - 1) + 1), kind: 'truncated' };
    return { bytes, kind: 'schema', ...(built.misfit ? { misfit: built.misfit } : {}) };
  }
}

interface Outcome {
  code: status;
  details: string;
}

function oddMetadata(random: Prng, token: string): Metadata {
  const metadata = new Metadata();
  const choice = random.int(10);
  if (choice < 7) metadata.set('authorization', `Bearer ${token}`);
  else if (choice === 7)
    metadata.set('authorization', random.pick(['Bearer', 'Bearer x.y.z', 'Basic Y29uc3RydWN0b3I6MQ==', 'bearer  ']));
  // (Two authorization values: the grpc-js client itself refuses to send them.)
  for (const name of PROPERTY_NAMES)
    if (random.chance(0.2)) metadata.set(name.toLowerCase(), random.pick(PROPERTY_NAMES));
  return metadata;
}

/**
 * One call. `refusal`: the request must be refused, so a server stream is not cancelled after
 * STREAM_LISTEN_MS but waited on until its status (on a loaded machine the refusal may come later).
 * The deadline only guards against a hang.
 */
function invoke(
  client: Client,
  method: DescMethod,
  bytes: Uint8Array,
  metadata: Metadata,
  random: Prng,
  refusal = false,
): Promise<Outcome> {
  const path = `/${method.parent.typeName}/${method.name}`;
  const request = Buffer.from(bytes);
  const deadline = Date.now() + 60_000;
  return new Promise((resolve) => {
    const done = (error: ServiceError | null) =>
      resolve(error ? { code: error.code, details: error.details } : { code: status.OK, details: '' });
    if (method.methodKind === 'unary') {
      client.makeUnaryRequest(path, identity, identity, request, metadata, { deadline }, (error) => done(error));
      return;
    }
    if (method.methodKind === 'server_streaming') {
      const stream = client.makeServerStreamRequest(path, identity, identity, request, metadata, { deadline });
      stream.on('data', () => undefined);
      // A stream that is still open after a moment is healthy: cancelled by us (CANCELLED).
      const timer = refusal ? undefined : setTimeout(() => stream.cancel(), STREAM_LISTEN_MS);
      stream.on('status', (result) => {
        clearTimeout(timer);
        resolve({ code: result.code, details: result.details });
      });
      stream.on('error', () => undefined);
      return;
    }
    // Bidirectional (reflection): one to three requests, then half-close.
    const stream = client.makeBidiStreamRequest(path, identity, identity, metadata, { deadline });
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.on('status', (result) => resolve({ code: result.code, details: result.details }));
    const count = random.int(3) + 1;
    for (let index = 0; index < count; index++) stream.write(request);
    stream.end();
  });
}

let service: TestService;
let app: ProvisioningApp;
let client: Client;
const knownIds: string[] = [];

beforeAll(async () => {
  service = await startTestService();
  await seedPool(service, '77', 40);
  app = await provisioningApp(service);
  const number = await call<ProvisionNumberRequest, ProgrammableNumber>(
    app.numbers,
    'provisionNumber',
    ProvisionNumberRequest.fromPartial({ requestId: 'fuzz-number', displayName: 'Fuzz' }),
    app.token,
  );
  const agent = await call<CreateAgentRequest, CreateAgentResponse>(
    app.agents,
    'createAgent',
    CreateAgentRequest.fromPartial({ requestId: 'fuzz-agent', displayName: 'Fuzz agent' }),
    app.token,
  );
  knownIds.push(
    number.svcnumId,
    agent.agent!.svcnumId,
    app.owner.svcnumId,
    'svcnum.provisioning.v1alpha1.AgentService',
  );
  client = new Client(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  app?.close();
  await service?.close();
});

async function healthy(): Promise<Outcome> {
  return invoke(
    client,
    registry.getService('grpc.health.v1.Health')!.methods.find((each) => each.name === 'Check')!,
    new Uint8Array(),
    new Metadata(),
    new Prng(0),
  );
}

describe('gRPC fuzz', () => {
  it(`${CALLS} generated calls over every RPC: no INTERNAL or UNKNOWN but for non-protobuf bytes; misfits are INVALID_ARGUMENT, requests over 64 KB RESOURCE_EXHAUSTED`, async () => {
    const seed = fuzzSeed(20_240_509);
    const random = new Prng(seed);
    const builder = new RequestBuilder(random, knownIds);
    // Built up front, in order, so the same seed gives the same calls whatever the timing.
    const plan = Array.from({ length: CALLS }, (_, index) => {
      const method = methods[index % methods.length]!;
      return {
        method,
        built: builder.build(method),
        metadata: oddMetadata(random, app.token),
        random: new Prng(seed + index),
      };
    });
    const failures: string[] = [];
    const codes = new Map<string, number>();
    await runConcurrently(plan.length, CONCURRENCY, async (index) => {
      const { method, built, metadata, random: callRandom } = plan[index]!;
      const protobuf = isProtobuf(built.bytes);
      // A request over the server's limit is refused before it is read, whatever it holds.
      const oversized = built.bytes.length > MAX_REQUEST_BYTES;
      const outcome = await invoke(
        client,
        method,
        built.bytes,
        metadata,
        callRandom,
        oversized || (protobuf && built.misfit !== undefined),
      );
      codes.set(status[outcome.code], (codes.get(status[outcome.code]) ?? 0) + 1);
      const wrong =
        outcome.code === status.UNKNOWN ||
        (outcome.code === status.INTERNAL && protobuf) ||
        (oversized
          ? outcome.code !== status.RESOURCE_EXHAUSTED
          : protobuf && built.misfit !== undefined && outcome.code !== status.INVALID_ARGUMENT);
      if (wrong) {
        failures.push(
          `seed ${seed} call ${index} ${method.parent.name}.${method.name} (${built.kind}${built.misfit ? `, ${built.misfit}` : ''}) ` +
            `bytes ${Buffer.from(built.bytes).toString('hex').slice(0, 400)} -> ${status[outcome.code]}: ${outcome.details}`,
        );
      }
    });
    console.info(
      `gRPC fuzz seed ${seed}: ${plan.length} calls over ${methods.length} methods`,
      Object.fromEntries(codes),
    );
    expect(failures, `FUZZ_SEED=${seed} reproduces this run`).toEqual([]);
    expect(await healthy()).toEqual({ code: status.OK, details: '' });
  }, 120_000);

  const createMask = registry.getMessage('svcnum.provisioning.v1alpha1.CreateMaskRequest')!;
  const rawCall = (path: string, bytes: Uint8Array, metadata = new Metadata()) => {
    metadata.set('authorization', `Bearer ${app.token}`);
    const method = registry.getService(path.split('/')[1]!)!.methods.find((each) => each.name === path.split('/')[2])!;
    return invoke(client, method, bytes, metadata, new Prng(1));
  };
  const ttlRequest = (ttl: string) =>
    new BinaryWriter().tag(1, WireType.LengthDelimited).string('ttl-edge').tag(2, WireType.Varint).int64(ttl).finish();

  it('an int64 beyond 2^53 or at the int64 minimum is INVALID_ARGUMENT naming the field; in range, the core judges it', async () => {
    expect(createMask.fields.find((field) => field.name === 'ttl_seconds')?.scalar).toBe(ScalarType.INT64);
    for (const ttl of ['9007199254740993', '9223372036854775807', '-9223372036854775808', '-9007199254740992']) {
      const outcome = await rawCall('/svcnum.provisioning.v1alpha1.MaskService/CreateMask', ttlRequest(ttl));
      expect(outcome).toEqual({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(new RegExp(`ttl_seconds ${ttl} is out of range`)),
      });
    }
    for (const ttl of ['-1', '9007199254740991']) {
      const outcome = await rawCall('/svcnum.provisioning.v1alpha1.MaskService/CreateMask', ttlRequest(ttl));
      expect(outcome).toEqual({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/^ttl_seconds must be an integer from/),
      });
    }
  });

  it('an int32 beyond its range is INVALID_ARGUMENT (not silently wrapped)', async () => {
    const bytes = new BinaryWriter().tag(1, WireType.Varint).int64('4294967297').finish();
    expect(await rawCall('/svcnum.provisioning.v1alpha1.NumberService/ListNumbers', bytes)).toEqual({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/page_size 4294967297 is out of range/),
    });
  });

  it('ListAgents with an unknown kind is INVALID_ARGUMENT; UNSPECIFIED still lists every kind', async () => {
    await rejects(
      call(app.agents, 'listAgents', ListAgentsRequest.fromPartial({ kind: 99 as AgentKind }), app.token),
      status.INVALID_ARGUMENT,
      /kind 99 is not a value of AgentKind/,
    );
    await rejects(
      call(app.agents, 'listAgents', ListAgentsRequest.fromPartial({ kind: -1 as AgentKind }), app.token),
      status.INVALID_ARGUMENT,
      /kind -1 is not a value of AgentKind/,
    );
    const all = await call<ListAgentsRequest, ListAgentsResponse>(
      app.agents,
      'listAgents',
      ListAgentsRequest.fromPartial({ kind: AgentKind.AGENT_KIND_UNSPECIFIED }),
      app.token,
    );
    expect(all.agents.length).toBeGreaterThan(0);
    const independent = await call<ListAgentsRequest, ListAgentsResponse>(
      app.agents,
      'listAgents',
      ListAgentsRequest.fromPartial({ kind: AgentKind.AGENT_KIND_INDEPENDENT }),
      app.token,
    );
    expect(independent.agents.map((agent) => agent.kind)).toEqual(
      all.agents.filter((agent) => agent.kind === AgentKind.AGENT_KIND_INDEPENDENT).map((agent) => agent.kind),
    );
    expect(independent.agents.length).toBeGreaterThan(0);
  });

  it('a known field with another wire type is INVALID_ARGUMENT naming it; bytes that are not protobuf are INTERNAL and nothing breaks', async () => {
    const mistyped = new BinaryWriter().tag(2, WireType.LengthDelimited).string('3600').finish();
    expect(await rawCall('/svcnum.provisioning.v1alpha1.MaskService/CreateMask', mistyped)).toEqual({
      code: status.INVALID_ARGUMENT,
      details:
        'the request is not a valid CreateMask request: ttl_seconds (field 2) must be sent as varint, not as length-delimited',
    });
    const garbageConfig = new BinaryWriter()
      .tag(2, WireType.LengthDelimited)
      .bytes(Buffer.from([0x0f, 0xff]))
      .finish();
    expect(await rawCall('/svcnum.provisioning.v1alpha1.NumberService/ConfigureProgrammable', garbageConfig)).toEqual({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/config is not a ProgrammableConfig message/),
    });
    const truncated = Buffer.from([0x0a, 0x10, 0x61]);
    expect(isProtobuf(truncated)).toBe(false);
    expect(await rawCall('/svcnum.provisioning.v1alpha1.MaskService/CreateMask', truncated)).toEqual({
      code: status.INTERNAL,
      details: 'Error deserializing request',
    });
    expect(await healthy()).toEqual({ code: status.OK, details: '' });
  });

  it('concurrent RotateAgentSvcnum calls on one agent (found by this fuzz test): one at a time wins, the others are ABORTED, never INTERNAL', async () => {
    const created = await call<CreateAgentRequest, CreateAgentResponse>(
      app.agents,
      'createAgent',
      CreateAgentRequest.fromPartial({ displayName: 'Rotated in parallel' }),
      app.token,
    );
    const rotate = () =>
      call<RotateAgentSvcnumRequest, Agent>(
        app.agents,
        'rotateAgentSvcnum',
        RotateAgentSvcnumRequest.fromPartial({ svcnumId: created.agent!.svcnumId }),
        app.token,
      );
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, () =>
        rotate().then(
          () => 'OK',
          async (error: ServiceError) => status[(await failure(Promise.reject(error))).code],
        ),
      ),
    );
    expect(outcomes).toContain('OK');
    expect(outcomes.filter((outcome) => outcome !== 'OK' && outcome !== 'ABORTED')).toEqual([]);
    // The agent is whole: its number and fallback are its own, and it rotates again.
    const before = (await service.core.store.getUser(created.agent!.svcnumId))!;
    expect((await service.core.provisioning.lifecycle.show(before.svcnum!)).state).toBe('active');
    expect((await rotate()).svcnum).toBe(before.fallbackSvcnum);
  });
});
