import { createFileRegistry, fromBinary, toBinary, type DescFile } from '@bufbuild/protobuf';
import { nestedTypes } from '@bufbuild/protobuf/reflect';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import {
  status,
  type Metadata,
  type Server,
  type ServerDuplexStream,
  type ServiceDefinition as GrpcServiceDefinition,
} from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  ServerReflectionService as ReflectionV1,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from './gen/grpc/reflection/v1/reflection';
import { ServerReflectionService as ReflectionV1Alpha } from './gen/grpc/reflection/v1alpha/reflection';
import { logger } from './calls';

// gRPC server reflection (grpc.reflection.v1, and v1alpha for older grpcurl) served from the
// descriptor set that `buf build` writes at `npm run gen`: every file under its real name, with
// its real imports (google/protobuf ones included) and its comments. @grpc/reflection cannot do
// this: it rebuilds files through proto-loader (one merged file per package, imports and
// comments lost; grpc-node issue #2958), so buf curl and grpcurl fail to resolve our services.

/**
 * Written next to the generated code by `npm run gen`. This module sits directly in
 * grpc-service/ and `npm run build:grpc` bundles it to dist/grpc-service/main.mjs with the set
 * copied to dist/grpc-service/gen/, so the same relative URL holds in source and in the bundle.
 */
const descriptorSetFile = fileURLToPath(new URL('./gen/descriptors.binpb', import.meta.url));

/** Far more than buf curl or grpcurl ask to resolve every type of our schema on one stream. */
const MAX_REQUESTS_PER_STREAM = 1000;

/**
 * The largest reflection request, in bytes. A request names one file, symbol or type (our longest
 * names are under 100 characters), so a larger one is refused: the stream ends with
 * RESOURCE_EXHAUSTED and nothing of it is kept or echoed.
 */
export const MAX_REFLECTION_REQUEST_BYTES = 1024;

/**
 * Reflection answers the server holds that their clients have not taken yet (HTTP/2 flow control),
 * in bytes, across all streams of a server (a process runs one). Each stream holds at most one
 * answer (the largest, a file with its imports, is about 30 KB); beyond this, further requests end
 * their stream with RESOURCE_EXHAUSTED until clients read or go.
 */
export const MAX_UNREAD_REFLECTION_BYTES = 16 * 1024 * 1024;

/** What the deserializer hands on instead of a request over MAX_REFLECTION_REQUEST_BYTES. */
class OversizedRequest {
  constructor(readonly bytes: number) {}
}

/** A reflection service whose requests over MAX_REFLECTION_REQUEST_BYTES are not decoded. */
function sizeLimited(definition: GrpcServiceDefinition): GrpcServiceDefinition {
  return Object.fromEntries(
    Object.entries(definition).map(([name, method]) => [
      name,
      {
        ...method,
        requestDeserialize: (bytes: Buffer) =>
          bytes.length > MAX_REFLECTION_REQUEST_BYTES
            ? new OversizedRequest(bytes.length)
            : method.requestDeserialize(bytes),
      },
    ]),
  );
}

/** A grpc-js or proto-loader service definition: its methods' paths are `/package.Service/Method`. */
type ServiceDefinition = Record<string, { path: string }>;

const serviceNameOf = (definition: ServiceDefinition) => Object.values(definition)[0]!.path.split('/')[1]!;

export function readDescriptorSet(): Uint8Array {
  try {
    return readFileSync(descriptorSetFile);
  } catch (error) {
    throw new Error(
      `${descriptorSetFile}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}; \`npm run gen\` writes it`,
    );
  }
}

/** What `admit` judges a reflection stream by: its metadata and, for a DPoP proof, its path and authority. */
export interface AdmittedCall {
  metadata: Metadata;
  getPath(): string;
  getHost(): string;
}

export interface ReflectionOptions {
  /** Ends open reflection streams when the server drains. */
  closing?: AbortSignal;
  /**
   * Admits a stream by its metadata before any request is read; its rejection (a gRPC status
   * error, UNAUTHENTICATED or PERMISSION_DENIED) ends the stream. Without: reflection is open.
   */
  admit?: (call: AdmittedCall) => Promise<unknown>;
}

/**
 * Adds both reflection services to `server`. `served` are the other services the server offers:
 * list_services names them and the reflection services, and each must be in the descriptor set.
 */
export function addReflection(
  server: Server,
  descriptorSet: Uint8Array,
  served: ServiceDefinition[],
  options: ReflectionOptions = {},
): void {
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet));
  const services = [...served, ReflectionV1, ReflectionV1Alpha].map(serviceNameOf);
  for (const name of services) {
    if (!registry.getService(name))
      throw new Error(`${name} is served but missing from the descriptor set (npm run gen)`);
  }
  const encoded = new Map<string, Buffer>();
  // Every name file_containing_symbol may ask for, as grpc-go resolves them: types, methods,
  // fields, oneofs, and enum values (which live in the scope around their enum).
  const fileOfSymbol = new Map<string, DescFile>();
  for (const file of registry.files) {
    encoded.set(file.proto.name, Buffer.from(toBinary(FileDescriptorProtoSchema, file.proto)));
    for (const type of nestedTypes(file)) {
      fileOfSymbol.set(type.typeName, file);
      const scope = type.typeName.slice(0, type.typeName.lastIndexOf('.') + 1);
      const members =
        type.kind === 'service'
          ? type.methods.map((method) => `${type.typeName}.${method.name}`)
          : type.kind === 'message'
            ? [...type.fields, ...type.oneofs].map((member) => `${type.typeName}.${member.name}`)
            : type.kind === 'enum'
              ? type.values.map((value) => `${scope}${value.name}`)
              : [];
      for (const member of members) fileOfSymbol.set(member, file);
    }
  }

  /** The file itself, then its imports, transitively, that this stream has not had yet (like grpc-go). */
  function withDependencies(file: DescFile, sent: Set<string>): Buffer[] {
    const files = [file];
    sent.add(file.proto.name);
    for (const current of files) {
      for (const dependency of current.dependencies) {
        if (sent.has(dependency.proto.name)) continue;
        sent.add(dependency.proto.name);
        files.push(dependency);
      }
    }
    return files.map((each) => encoded.get(each.proto.name)!);
  }

  /** The request an answer echoes in original_request: its message_request alone (valid_host echoes the host). */
  const echoOf = (request: ServerReflectionRequest): ServerReflectionRequest => ({ ...request, host: '' });

  function answer(request: ServerReflectionRequest, sent: Set<string>): ServerReflectionResponse {
    const reply = (fields: Partial<ServerReflectionResponse>): ServerReflectionResponse => ({
      validHost: request.host,
      originalRequest: echoOf(request),
      ...fields,
    });
    const error = (code: status, message: string) =>
      reply({ errorResponse: { errorCode: code, errorMessage: message } });
    const files = (file: DescFile | undefined, missing: string) =>
      file
        ? reply({ fileDescriptorResponse: { fileDescriptorProto: withDependencies(file, sent) } })
        : error(status.NOT_FOUND, missing);

    if (request.listServices !== undefined)
      return reply({ listServicesResponse: { service: services.map((name) => ({ name })) } });
    if (request.fileByFilename !== undefined)
      return files(registry.getFile(request.fileByFilename), `file not found: ${request.fileByFilename}`);
    if (request.fileContainingSymbol !== undefined)
      return files(fileOfSymbol.get(request.fileContainingSymbol), `symbol not found: ${request.fileContainingSymbol}`);
    if (request.fileContainingExtension !== undefined) {
      const { containingType, extensionNumber } = request.fileContainingExtension;
      const extendee = registry.getMessage(containingType);
      return files(
        extendee && registry.getExtensionFor(extendee, extensionNumber)?.file,
        `extension not found: ${containingType} ${extensionNumber}`,
      );
    }
    if (request.allExtensionNumbersOfType !== undefined) {
      const baseTypeName = request.allExtensionNumbersOfType;
      if (!registry.getMessage(baseTypeName)) return error(status.NOT_FOUND, `type not found: ${baseTypeName}`);
      const extensionNumber = [...registry].flatMap((type) =>
        type.kind === 'extension' && type.extendee.typeName === baseTypeName ? [type.number] : [],
      );
      return reply({ allExtensionNumbersResponse: { baseTypeName, extensionNumber } });
    }
    return error(status.INVALID_ARGUMENT, 'the request names no message_request');
  }

  /** Bytes of answers written and not yet taken by their clients, on every stream (MAX_UNREAD_REFLECTION_BYTES). */
  let unread = 0;

  // v1 and v1alpha differ only in their package name: the messages are identical. A stream is
  // held to what its client reads: one answer at a time, the next request read only once the
  // answer has gone out (grpc-js calls a write's callback when HTTP/2 flow control let it go; the
  // stream's own buffer would take 16 answers before `write` said to wait). A stream asks at most
  // MAX_REQUESTS_PER_STREAM questions (a tool needs a few dozen for our whole schema), each at
  // most MAX_REFLECTION_REQUEST_BYTES. With `admit`, nothing is read before the caller is admitted.
  const implementation = {
    serverReflectionInfo(
      call: ServerDuplexStream<ServerReflectionRequest | OversizedRequest, ServerReflectionResponse>,
    ) {
      const sent = new Set<string>();
      let asked = 0;
      let ended = false;
      /** The size of the answer this stream has out, counted in `unread` until it goes out or the stream closes. */
      let holding = 0;
      const release = () => {
        unread -= holding;
        holding = 0;
      };
      /** Ends the stream with a status; what the client still sends is not read. */
      const refuse = (error: { code: status; details: string }) => {
        if (ended) return;
        ended = true;
        call.pause();
        call.emit('error', error);
      };
      const stop = () => {
        ended = true;
        call.end();
      };
      options.closing?.addEventListener('abort', stop, { once: true });
      call.on('close', () => {
        release();
        options.closing?.removeEventListener('abort', stop);
      });

      const onRequest = (request: ServerReflectionRequest | OversizedRequest) => {
        if (ended) return;
        if (request instanceof OversizedRequest) {
          return refuse({
            code: status.RESOURCE_EXHAUSTED,
            details: `a reflection request is at most ${MAX_REFLECTION_REQUEST_BYTES} bytes, not ${request.bytes}`,
          });
        }
        if (++asked > MAX_REQUESTS_PER_STREAM) {
          return refuse({
            code: status.RESOURCE_EXHAUSTED,
            details: `at most ${MAX_REQUESTS_PER_STREAM} requests per reflection stream; open a new one`,
          });
        }
        let reply: ServerReflectionResponse;
        try {
          reply = answer(request, sent);
        } catch (error) {
          logger.error('reflection request failed', { error: error as Error });
          reply = {
            validHost: request.host,
            originalRequest: echoOf(request),
            errorResponse: { errorCode: status.INTERNAL, errorMessage: 'the request could not be answered' },
          };
        }
        // An upper bound of the encoded answer: its files, and at most a request's size besides.
        const size = (reply.fileDescriptorResponse?.fileDescriptorProto ?? []).reduce(
          (sum, file) => sum + file.length,
          MAX_REFLECTION_REQUEST_BYTES,
        );
        // Refused streams are logged as every call is (logCalls), with their status.
        if (unread + size > MAX_UNREAD_REFLECTION_BYTES) {
          return refuse({
            code: status.RESOURCE_EXHAUSTED,
            details: 'the server holds too many unread reflection answers; retry later',
          });
        }
        unread += size;
        holding = size;
        call.pause();
        call.write(reply, () => {
          release();
          if (!ended) call.resume();
        });
      };
      const start = () => {
        if (ended) return;
        call.on('data', onRequest);
        call.on('end', stop);
      };
      if (!options.admit) return start();
      options.admit(call).then(start, refuse);
    },
  };
  server.addService(sizeLimited(ReflectionV1), implementation);
  server.addService(sizeLimited(ReflectionV1Alpha), implementation);
}
