import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../../lib/util';

// What grpc-service/Dockerfile says about the image, for whatever runs its bundle outside Docker
// (the deployed-artifact tests, the bench's gRPC processes), so they run it as the image does,
// and for the test of the image's own build (test/infra/image.test.ts).

const dockerfile = () => readFileSync(join(repoRoot, 'grpc-service', 'Dockerfile'), 'utf8');

/** The Dockerfile's stages, each from its FROM line on. */
export const grpcImageStages = () =>
  dockerfile()
    .split(/^FROM /m)
    .slice(1);

/** A stage by its name (`FROM … AS <name>`). */
export function grpcImageStage(name: string): string {
  const stage = grpcImageStages().find((text) => new RegExp(`^\\S+ AS ${name}\\s*$`, 'im').test(text.split('\n')[0]!));
  if (!stage) throw new Error(`grpc-service/Dockerfile has no stage '${name}'`);
  return stage;
}

/** The build arguments declared before the first FROM, with their defaults. */
export function grpcImageArguments(): Record<string, string> {
  const preamble = dockerfile().split(/^FROM /m)[0]!;
  return Object.fromEntries([...preamble.matchAll(/^ARG ([A-Z_]+)=(\S+)$/gm)].map((match) => [match[1]!, match[2]!]));
}

/** The final stage's `ENV NAME=value …` pairs (values without spaces or quotes; a value may contain `=`). */
export function grpcImageEnvironment(): Record<string, string> {
  const pairs = [
    ...grpcImageStages()
      .at(-1)!
      .matchAll(/^ENV (.+)$/gm),
  ].flatMap((match) => match[1]!.trim().split(/\s+/));
  return Object.fromEntries(
    pairs.map((pair) => {
      const equals = pair.indexOf('=');
      if (equals <= 0) throw new Error(`grpc-service/Dockerfile: ENV '${pair}' is not NAME=value`);
      return [pair.slice(0, equals), pair.slice(equals + 1)];
    }),
  );
}

/** The image's NODE_OPTIONS ('' without). */
export const grpcImageNodeOptions = () => grpcImageEnvironment().NODE_OPTIONS ?? '';
