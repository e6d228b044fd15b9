import { ScalarType, type DescEnum, type DescField, type DescMessage, type Registry } from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import {
  Server,
  ServerInterceptingCall,
  status,
  type ServerInterceptor,
  type ServerOptions,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';

// Requests are checked against their message's schema before the generated decoder sees them.
// The generated decoders skip a known field sent with another wire type, silently wrap an
// out-of-range int32, throw on an int64 beyond 2^53 (grpc-js then answers INTERNAL) and let
// unknown enum values through. Here every such request is protobuf that does not fit the
// method's message: INVALID_ARGUMENT with the field's name. Only bytes that are not protobuf at
// all (truncated, illegal wire types or tags) still fail the decoder: grpc-js answers INTERNAL
// "Error deserializing request", as other gRPC servers do.

/** What the deserializer hands on instead of a request that does not fit its message. */
export class MalformedRequest {
  constructor(readonly reason: string) {}
}

/** The bytes are protobuf but do not fit the schema (thrown and caught inside this module only). */
class Misfit extends Error {}

/** Values beyond these lose precision as JavaScript numbers (the generated code uses numbers). */
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;
const UINT32_MAX = 2n ** 32n - 1n;

/** Deeper than any request of ours nests (ConfigureProgrammableRequest: two levels). */
const MAX_DEPTH = 32;

const WIRE_NAMES: Record<number, string> = {
  [WireType.Varint]: 'varint',
  [WireType.Bit64]: '64-bit',
  [WireType.LengthDelimited]: 'length-delimited',
  [WireType.StartGroup]: 'group',
  [WireType.EndGroup]: 'end-group',
  [WireType.Bit32]: '32-bit',
};

const utf8 = new TextDecoder('utf-8', { fatal: true });

function scalarWireType(type: ScalarType): WireType {
  switch (type) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

/** A message field sent as a group (proto2 or editions delimited encoding). */
const grouped = (field: DescField) => 'delimitedEncoding' in field && field.delimitedEncoding === true;

/** The wire type one element of `field` is sent with (a list's element; a map entry). */
function elementWireType(field: DescField): WireType {
  if (field.fieldKind === 'map') return WireType.LengthDelimited;
  const kind = field.fieldKind === 'list' ? field.listKind : field.fieldKind;
  if (kind === 'message') return grouped(field) ? WireType.StartGroup : WireType.LengthDelimited;
  if (kind === 'enum') return WireType.Varint;
  return scalarWireType(field.scalar!);
}

function checkInteger(value: bigint, min: bigint, max: bigint, name: string) {
  if (value < min || value > max) throw new Misfit(`${name} ${value} is out of range (${min} to ${max})`);
}

function checkScalar(reader: BinaryReader, type: ScalarType, name: string) {
  switch (type) {
    case ScalarType.INT32:
      return checkInteger(BigInt(reader.int64()), INT32_MIN, INT32_MAX, name);
    case ScalarType.SINT32:
      return checkInteger(BigInt(reader.sint64()), INT32_MIN, INT32_MAX, name);
    case ScalarType.UINT32:
      return checkInteger(BigInt(reader.uint64()), 0n, UINT32_MAX, name);
    case ScalarType.INT64:
      return checkInteger(BigInt(reader.int64()), -MAX_SAFE, MAX_SAFE, name);
    case ScalarType.SINT64:
      return checkInteger(BigInt(reader.sint64()), -MAX_SAFE, MAX_SAFE, name);
    case ScalarType.SFIXED64:
      return checkInteger(BigInt(reader.sfixed64()), -MAX_SAFE, MAX_SAFE, name);
    case ScalarType.UINT64:
      return checkInteger(BigInt(reader.uint64()), 0n, MAX_SAFE, name);
    case ScalarType.FIXED64:
      return checkInteger(BigInt(reader.fixed64()), 0n, MAX_SAFE, name);
    case ScalarType.STRING:
      try {
        utf8.decode(reader.bytes());
      } catch (error) {
        if (error instanceof TypeError) throw new Misfit(`${name} is not valid UTF-8`);
        throw error;
      }
      return;
    default:
      // bool, float, double, fixed32, sfixed32, bytes: every value read is a valid one.
      reader.skip(scalarWireType(type));
  }
}

/** proto3 enums are open on the wire; a request naming a value we do not know is refused. */
function checkEnum(reader: BinaryReader, type: DescEnum, name: string) {
  const value = BigInt(reader.int64());
  if (!type.values.some((known) => BigInt(known.number) === value))
    throw new Misfit(`${name} ${value} is not a value of ${type.name}`);
}

function checkElement(reader: BinaryReader, field: DescField, name: string, depth: number) {
  const kind = field.fieldKind === 'list' ? field.listKind : field.fieldKind;
  if (kind === 'scalar') checkScalar(reader, field.scalar!, name);
  else if (kind === 'enum') checkEnum(reader, field.enum!, name);
  else if (kind === 'message' && !grouped(field)) {
    const bytes = reader.bytes();
    // The request around it is protobuf: garbage inside one field is that field's fault.
    insideField(name, `a ${field.message!.name} message`, () =>
      checkMessage(new BinaryReader(bytes), field.message!, `${name}.`, depth + 1),
    );
  } else reader.skip(elementWireType(field), field.number); // map entries and groups: no request of ours has one
}

/** Runs `check` on the content of one length-delimited field: bytes that do not parse there misfit that field. */
function insideField(name: string, what: string, check: () => void) {
  try {
    check();
  } catch (error) {
    if (error instanceof Misfit) throw error;
    throw new Misfit(`${name} is not ${what}`);
  }
}

function checkMessage(reader: BinaryReader, message: DescMessage, prefix: string, depth: number) {
  if (depth > MAX_DEPTH) throw new Misfit(`${prefix.slice(0, -1)} is nested too deeply`);
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    const field = message.fields.find((each) => each.number === number);
    if (wireType === WireType.EndGroup) throw new Error('unbalanced end-group tag');
    if (!field) {
      reader.skip(wireType, number);
      continue;
    }
    const name = `${prefix}${field.name}`;
    const expected = elementWireType(field);
    const packable =
      field.fieldKind === 'list' && expected !== WireType.LengthDelimited && expected !== WireType.StartGroup;
    if (packable && wireType === WireType.LengthDelimited) {
      const packed = new BinaryReader(reader.bytes());
      insideField(name, 'a packed list', () => {
        while (packed.pos < packed.len) checkElement(packed, field, name, depth);
        if (packed.pos > packed.len) throw new RangeError('premature EOF');
      });
      continue;
    }
    if (wireType !== expected) {
      throw new Misfit(
        `${name} (field ${number}) must be sent as ${WIRE_NAMES[expected]}, ` +
          `not as ${WIRE_NAMES[wireType] ?? `wire type ${wireType}`}`,
      );
    }
    checkElement(reader, field, name, depth);
  }
  if (reader.pos > reader.len) throw new RangeError('premature EOF');
}

/**
 * Why `bytes` is protobuf that does not fit `message`, or undefined when it fits. Throws when the
 * bytes are not protobuf at all.
 */
export function misfit(bytes: Uint8Array, message: DescMessage): string | undefined {
  try {
    checkMessage(new BinaryReader(bytes), message, '', 0);
    return undefined;
  } catch (error) {
    if (error instanceof Misfit) return error.message;
    throw error;
  }
}

type MethodDefinition = ServiceDefinition[string];

function inputOf(registry: Registry, path: string): DescMessage {
  const [, serviceName, methodName] = path.split('/');
  const method = registry.getService(serviceName!)?.methods.find((each) => each.name === methodName);
  if (!method) throw new Error(`${path} is served but missing from the descriptor set (npm run gen)`);
  return method.input;
}

function strictMethod(registry: Registry, method: MethodDefinition): MethodDefinition {
  const input = inputOf(registry, method.path);
  return {
    ...method,
    requestDeserialize: (bytes: Buffer) => {
      const reason = misfit(bytes, input);
      return reason === undefined ? method.requestDeserialize(bytes) : new MalformedRequest(reason);
    },
  };
}

/** A malformed request ends its call with INVALID_ARGUMENT before any handler sees it. */
const refuseMalformed: ServerInterceptor = (method, call) =>
  new ServerInterceptingCall(call, {
    start: (next) => {
      let refused = false;
      next({
        onReceiveMessage: (message, pass) => {
          if (!(message instanceof MalformedRequest)) return pass(message);
          refused = true;
          call.sendStatus({
            code: status.INVALID_ARGUMENT,
            details: `the request is not a valid ${method.path.split('/')[2]} request: ${message.reason}`,
          });
        },
        onReceiveHalfClose: (pass) => {
          if (!refused) pass();
        },
      });
    },
  });

/**
 * A grpc-js server whose every service (ours, health, reflection) gets its requests checked
 * against `registry` (the descriptor set reflection serves, so both agree on the schema).
 * `options.interceptors` see only calls whose request fits; `observers` (logging) sit closer to
 * the wire and see every call, a refused one included.
 */
export class StrictServer extends Server {
  constructor(
    private readonly registry: Registry,
    options: ServerOptions = {},
    observers: ServerInterceptor[] = [],
  ) {
    super({ ...options, interceptors: [...observers, refuseMalformed, ...(options.interceptors ?? [])] });
  }

  override addService(service: ServiceDefinition, implementation: UntypedServiceImplementation): void {
    const strict = Object.fromEntries(
      Object.entries(service).map(([name, method]) => [name, strictMethod(this.registry, method)]),
    );
    super.addService(strict, implementation);
  }
}
