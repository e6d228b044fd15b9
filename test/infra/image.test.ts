import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lambdaBundle } from '../../lib/bundling';
import { GRPC_PORT, HEALTH_PORT } from '../../lib/provisioning';
import { repoRoot } from '../../lib/util';
import { grpcImageArguments, grpcImageStage, grpcImageStages } from '../support/grpc-image';

// The gRPC image's build (grpc-service/Dockerfile), read as written: reproducible (one base image,
// pinned by digest, the lock file installed exactly), devDependencies in the build stage only, and
// a runtime stage of production dependencies and the bundle. Docker itself is not needed.

const stages = () => grpcImageStages().map((text) => ({ from: text.split('\n')[0]!, body: text }));
const npmCi = (text: string) => [...text.matchAll(/^RUN npm ci\b(.*)$/gm)].map((match) => match[1]!);

describe('the gRPC image', () => {
  it("starts every stage from NODE_IMAGE, a Node 22 slim image pinned by digest (the Lambda runtime's major)", () => {
    const { NODE_IMAGE } = grpcImageArguments();
    expect(NODE_IMAGE).toMatch(/^node:22-[a-z]+-slim@sha256:[0-9a-f]{64}$/);
    expect(lambdaBundle.target).toBe(`node${/^node:(\d+)-/.exec(NODE_IMAGE!)![1]}`);
    const froms = stages().map((stage) => stage.from);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the Dockerfile's own ${NODE_IMAGE} build argument
    expect(froms).toStrictEqual(['${NODE_IMAGE} AS build', '${NODE_IMAGE} AS deps', '${NODE_IMAGE} AS runtime']);
  });

  it('installs devDependencies in the build stage only; every other install omits them; none runs install scripts', () => {
    expect(npmCi(grpcImageStage('build'))).toHaveLength(1);
    expect(npmCi(grpcImageStage('build'))[0]).not.toContain('--omit=dev');
    for (const stage of stages().filter((candidate) => !candidate.from.endsWith(' AS build'))) {
      for (const flags of npmCi(stage.body)) expect(flags, stage.from).toContain('--omit=dev');
    }
    for (const stage of stages()) {
      for (const flags of npmCi(stage.body)) expect(flags, stage.from).toContain('--ignore-scripts');
      // Exactly the lock file: never `npm install`.
      expect(stage.body, stage.from).not.toMatch(/^RUN .*npm (install|i)\b/m);
    }
  });

  it('runs only the bundle and the production dependencies, as the node user, on GRPC_PORT and HEALTH_PORT', () => {
    const runtime = grpcImageStage('runtime');
    expect(grpcImageStages().at(-1)).toBe(runtime);
    // No RUN at all: nothing is installed or built in the image that runs.
    expect(runtime).not.toMatch(/^RUN /m);
    const copies = [...runtime.matchAll(/^COPY (.+)$/gm)].map((match) => match[1]);
    expect(copies).toStrictEqual([
      'package.json ./',
      '--from=deps /app/node_modules ./node_modules',
      '--from=build /src/dist/grpc-service/ ./',
    ]);
    expect(npmCi(grpcImageStage('deps'))).toStrictEqual([' --omit=dev --no-audit --no-fund --ignore-scripts']);
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(new RegExp(`^EXPOSE ${GRPC_PORT} ${HEALTH_PORT}$`, 'm'));
    expect(runtime).toMatch(/^CMD \["node", "main\.mjs"\]$/m);
  });

  it('gets no host node_modules, build output or CDK output in its context (.dockerignore)', () => {
    const ignored = readFileSync(join(repoRoot, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim());
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', 'cdk.out', 'grpc-service/gen', '.git']));
  });
});
