import { execFile, fork, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { copyFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Context } from 'aws-lambda';
import type { Metafile } from 'esbuild';
import type { HttpEvent, HttpResult } from '../../lambdas/http';
import { routeManifest, type RouteGroup } from '../../lambdas/manifest';
import { createServiceApp } from '../../lib/app';
import { PUBLIC_KEYS_RESOURCE_TYPE } from '../../lib/public-keys';
import { EXAMPLE_SETTINGS_FILE, resolveConfigs } from '../../lib/settings';
import { repoRoot } from '../../lib/util';
import { grpcImageEnvironment, grpcImageStage } from './grpc-image';

// The deployed artifacts as AWS runs them: what the stack gives each process (read from the
// synthesized template), the gRPC image's bundle built as its Dockerfile builds it, and child
// processes that run a Lambda bundle or the gRPC bundle under plain Node with nothing but that
// environment. Every child preloads loopback-only.mjs: no connection leaves the machine.

const here = (file: string) => fileURLToPath(new URL(`./artifacts/${file}`, import.meta.url));
const guard = ['--import', here('loopback-only.mjs')];
/** What loopback-only.mjs writes on stderr for a refused connection. */
export const BLOCKED_MARK = 'loopback-only: blocked';

const run = promisify(execFile);

type Json = Record<string, unknown>;

export interface FunctionSettings {
  functionName: string;
  /** The Handler property: `<file>.<export>`. */
  handler: string;
  environment: Record<string, string>;
}

export interface StackSettings {
  region: string;
  account: string;
  lambdas: Record<RouteGroup, FunctionSettings>;
  /** The gRPC container's environment. */
  task: Record<string, string>;
  /** How the task's health is checked: the NLB target group's HTTP check and the container's command. */
  taskHealth: TaskHealthChecks;
  /** ARNs the template's environment values resolve to, by key kind. */
  /** The KMS keys the environments name: Ed25519 signing, HMAC, and RSA (RS256 ID tokens). */
  keys: { signing: string[]; mac: string[]; rsa: string[] };
}

export interface TaskHealthChecks {
  targetGroup: {
    protocol: string;
    port: number;
    path: string;
    httpCode: string;
    intervalSeconds: number;
    timeoutSeconds: number;
    unhealthyThreshold: number;
  };
  container: { command: string[]; intervalSeconds: number; timeoutSeconds: number; retries: number };
}

/**
 * What KMS_PUBLIC_KEYS resolves to here: the deploy-time custom resource's attribute has no value
 * before a deploy; `withPublicKeys` puts in the stand-in's keys, as the custom resource would.
 */
export const PUBLIC_KEYS_MARK = '(published public keys)';

/**
 * What the wake-up engine's primary endpoint resolves to here: loopback, where nothing listens on
 * its port. The flows of the artifacts test never open the engine (connections open on first use:
 * a stream's subscription, a publish), so the task starts with the stack's VALKEY_* as it would.
 */
export const ENGINE_HOST = '127.0.0.1';

/** `environment` with KMS_PUBLIC_KEYS as the custom resource would publish it: `der(keyId)` of every signing key (Ed25519 and RSA). */
export function withPublicKeys(
  environment: Record<string, string>,
  settings: StackSettings,
  der: (keyId: string) => string,
): Record<string, string> {
  if (environment.KMS_PUBLIC_KEYS !== PUBLIC_KEYS_MARK)
    throw new Error("KMS_PUBLIC_KEYS is not the custom resource's attribute");
  return {
    ...environment,
    KMS_PUBLIC_KEYS: JSON.stringify(
      Object.fromEntries([...settings.keys.signing, ...settings.keys.rsa].map((keyId) => [keyId, der(keyId)])),
    ),
  };
}

/** What the sandbox template is made from: the stacks, the domain core they read, the settings, the packages. */
const TEMPLATE_INPUTS = ['lib', 'core', 'lambdas', 'grpc-service', 'bin', 'deploy'];

/**
 * A hash of every file of TEMPLATE_INPUTS, cdk.json (the app's context), the lock files and this file:
 * any edit gives another key.
 */
function templateInputsKey(): string {
  const hash = createHash('sha256');
  const files = TEMPLATE_INPUTS.flatMap((folder) =>
    readdirSync(join(repoRoot, folder), { recursive: true, encoding: 'utf8' }).map((name) => join(folder, name)),
  );
  const others = ['cdk.json', 'package-lock.json', 'node_modules/.package-lock.json'];
  for (const file of [...files.sort(), ...others, relative(repoRoot, fileURLToPath(import.meta.url))]) {
    const path = join(repoRoot, file);
    if (statSync(path, { throwIfNoEntry: false })?.isFile()) hash.update(`\0${file}\0`).update(readFileSync(path));
  }
  return hash.digest('hex').slice(0, 24);
}

/**
 * The sandbox stack's settings (below), kept in node_modules/.cache by the hash of all they are made
 * from: a synthesis costs a fresh process about 10 s of CPU (loading aws-cdk-lib), and the files
 * that read the settings run in processes of their own (the isolated project) or in any worker.
 */
export function stackSettings(): StackSettings {
  const file = join(
    repoRoot,
    'node_modules',
    '.cache',
    'svcnum-tests',
    'stack-settings',
    `${templateInputsKey()}.json`,
  );
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as StackSettings;
  } catch {
    // not synthesized from these inputs yet
  }
  const settings = synthesizedStackSettings();
  mkdirSync(dirname(file), { recursive: true });
  const written = `${file}.${process.pid}.tmp`;
  writeFileSync(written, JSON.stringify(settings));
  renameSync(written, file);
  return settings;
}

/**
 * Synthesizes the sandbox stack (no bundling, no cdk-nag: only its template is read) and returns
 * each process's environment. Values that are CloudFormation references resolve as AWS would
 * resolve them: a KMS key's Ref or Arn to `arn:aws:kms:<region>:<account>:key/<logical id>`, the
 * wake-up engine's primary endpoint to ENGINE_HOST; any other reference is refused, so a new kind of
 * value is noticed here.
 */
function synthesizedStackSettings(): StackSettings {
  const outdir = mkdtempSync(join(tmpdir(), 'svcnum-artifacts-cdk-'));
  try {
    const { app, stacks } = createServiceApp({
      outdir,
      nag: false,
      environments: ['sandbox'],
      configs: { sandbox: resolveConfigs(EXAMPLE_SETTINGS_FILE, ['svcnum-sandbox'], repoRoot).configs.sandbox! },
      context: { 'aws:cdk:bundling-stacks': [] },
    });
    const assembly = app.synth();
    const stack = stacks.sandbox;
    const template = JSON.parse(readFileSync(assembly.getStackArtifact(stack.artifactId).templateFullPath, 'utf8')) as {
      Resources: Record<string, { Type: string; Properties: Json }>;
    };
    const { region, account } = stack;
    const keys = { signing: [] as string[], mac: [] as string[], rsa: [] as string[] };
    const keyArn = (id: string) => {
      const resource = template.Resources[id];
      if (resource?.Type !== 'AWS::KMS::Key')
        throw new Error(`an environment value refers to ${id} (${resource?.Type}), which this test cannot resolve`);
      const arn = `arn:aws:kms:${region}:${account}:key/${id}`;
      const spec = resource.Properties.KeySpec;
      const kind = spec === 'HMAC_256' ? keys.mac : spec === 'RSA_2048' ? keys.rsa : keys.signing;
      if (!kind.includes(arn)) kind.push(arn);
      return arn;
    };
    const resolve = (value: unknown): string => {
      if (typeof value === 'string') return value;
      const token = value as Json;
      if (typeof token.Ref === 'string') return keyArn(token.Ref);
      const getAtt = token['Fn::GetAtt'] as [string, string] | undefined;
      if (getAtt && getAtt[1] === 'Arn') return keyArn(getAtt[0]);
      if (getAtt && getAtt[1] === 'PublicKeys' && template.Resources[getAtt[0]]?.Type === PUBLIC_KEYS_RESOURCE_TYPE)
        return PUBLIC_KEYS_MARK;
      if (
        getAtt &&
        getAtt[1] === 'PrimaryEndPoint.Address' &&
        template.Resources[getAtt[0]]?.Type === 'AWS::ElastiCache::ReplicationGroup'
      )
        return ENGINE_HOST;
      const joined = token['Fn::Join'] as [string, unknown[]] | undefined;
      if (joined) return joined[1].map(resolve).join(joined[0]);
      throw new Error(`unresolvable environment value ${JSON.stringify(value)}`);
    };
    const resolveAll = (entries: Array<[string, unknown]>) =>
      Object.fromEntries(entries.map(([name, value]) => [name, resolve(value)]));

    const lambdas = {} as Record<RouteGroup, FunctionSettings>;
    let task: Record<string, string> | undefined;
    let containerHealth: TaskHealthChecks['container'] | undefined;
    let targetHealth: TaskHealthChecks['targetGroup'] | undefined;
    for (const resource of Object.values(template.Resources)) {
      const properties = resource.Properties;
      if (resource.Type === 'AWS::Lambda::Function') {
        const group = (Object.keys(routeManifest) as RouteGroup[]).find(
          (name) => properties.FunctionName === `svcnum-sandbox-${name}`,
        );
        if (!group) continue; // CDK's own custom-resource functions
        const variables = (properties.Environment as { Variables?: Json } | undefined)?.Variables ?? {};
        lambdas[group] = {
          functionName: properties.FunctionName as string,
          handler: properties.Handler as string,
          environment: resolveAll(Object.entries(variables)),
        };
      }
      if (resource.Type === 'AWS::ECS::TaskDefinition') {
        const [container] = properties.ContainerDefinitions as Array<{
          Environment?: Array<{ Name: string; Value: unknown }>;
          HealthCheck: { Command: string[]; Interval: number; Timeout: number; Retries: number };
        }>;
        task = resolveAll((container!.Environment ?? []).map(({ Name, Value }) => [Name, Value]));
        const check = container!.HealthCheck;
        containerHealth = {
          command: check.Command,
          intervalSeconds: check.Interval,
          timeoutSeconds: check.Timeout,
          retries: check.Retries,
        };
      }
      if (resource.Type === 'AWS::ElasticLoadBalancingV2::TargetGroup') {
        targetHealth = {
          protocol: properties.HealthCheckProtocol as string,
          port: Number(properties.HealthCheckPort),
          path: properties.HealthCheckPath as string,
          httpCode: (properties.Matcher as { HttpCode: string }).HttpCode,
          intervalSeconds: properties.HealthCheckIntervalSeconds as number,
          timeoutSeconds: properties.HealthCheckTimeoutSeconds as number,
          unhealthyThreshold: properties.UnhealthyThresholdCount as number,
        };
      }
    }
    const missing = Object.keys(routeManifest).filter((group) => !lambdas[group as RouteGroup]);
    if (missing.length || !task || !containerHealth || !targetHealth) {
      throw new Error(
        `the template lacks ${[...missing, ...(task ? [] : ['the task definition']), ...(targetHealth ? [] : ['the target group'])].join(', ')}`,
      );
    }
    return {
      region,
      account,
      lambdas,
      task,
      taskHealth: { targetGroup: targetHealth, container: containerHealth },
      keys,
    };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/**
 * What a real AWS process has on top of its configured environment: region, credentials (here
 * fake ones; signing is real) and, for this test, the SDK's endpoint overrides.
 */
export function awsRuntimeEnvironment(
  settings: StackSettings,
  endpoints: { dynamodb: string; kms: string },
): Record<string, string> {
  return {
    AWS_REGION: settings.region,
    AWS_DEFAULT_REGION: settings.region,
    AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    AWS_SESSION_TOKEN: 'artifacts-test-session',
    AWS_ENDPOINT_URL_DYNAMODB: endpoints.dynamodb,
    AWS_ENDPOINT_URL_KMS: endpoints.kms,
  };
}

/** What the Lambda service itself sets for a function (a subset: the runtime's own variables). */
export const lambdaRuntimeEnvironment = (functionName: string, directory: string): Record<string, string> => ({
  AWS_LAMBDA_FUNCTION_NAME: functionName,
  AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
  AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
  AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
  LAMBDA_TASK_ROOT: directory,
  TZ: ':UTC',
});

/** Output a child wrote, kept for assertions (no secret in a log) and for failure messages. */
export interface ChildOutput {
  stdout: string;
  stderr: string;
}

function collect(child: ChildProcess): ChildOutput {
  const output = { stdout: '', stderr: '' };
  child.stdout?.on('data', (chunk: Buffer) => {
    output.stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output.stderr += chunk.toString('utf8');
  });
  return output;
}

export interface LambdaHost {
  settings: FunctionSettings;
  output: ChildOutput;
  /** The bundle's module load in the child (informational, never asserted). */
  loadMs: number;
  invoke(event: HttpEvent, context: Context): Promise<HttpResult>;
  close(): Promise<void>;
}

/** Starts a child that imports the bundle in `directory` as the Lambda runtime would. */
export async function startLambdaHost(
  directory: string,
  settings: FunctionSettings,
  environment: Record<string, string>,
): Promise<LambdaHost> {
  const child = fork(here('lambda-host.mjs'), [directory, settings.handler], {
    cwd: directory,
    env: environment,
    execArgv: guard,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const output = collect(child);
  const pending = new Map<number, { resolve: (result: HttpResult) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let failWith: ((error: Error) => void) | undefined;
  const ready = new Promise<number>((resolve, reject) => {
    failWith = reject;
    child.on(
      'message',
      (message: {
        ready?: boolean;
        loadMs?: number;
        id?: number;
        result?: HttpResult;
        error?: { name: string; message: string; stack?: string };
      }) => {
        if (message.ready === true) return resolve(message.loadMs!);
        if (message.ready === false)
          return reject(new Error(`${settings.functionName}: the bundle failed to load: ${message.error?.stack}`));
        const waiting = pending.get(message.id!);
        pending.delete(message.id!);
        if (message.error)
          waiting?.reject(
            new Error(
              `${settings.functionName} threw ${message.error.name}: ${message.error.message}\n${message.error.stack}`,
            ),
          );
        else waiting?.resolve(message.result!);
      },
    );
  });
  child.on('exit', (code, signal) => {
    const error = new Error(
      `${settings.functionName} exited (${code ?? signal})\n${output.stderr}\n${output.stdout}`.slice(0, 8000),
    );
    failWith?.(error);
    for (const waiting of pending.values()) waiting.reject(error);
    pending.clear();
  });
  const loadMs = await ready;
  return {
    settings,
    output,
    loadMs,
    invoke: (event, context) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve, reject });
        // IPC serialises as JSON: the context's functions are rebuilt by the host.
        child.send({ id, event, context });
      }),
    close: async () => {
      await stop(child);
    },
  };
}

function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill(signal);
  });
}

export interface GrpcBundle {
  /** Laid out like the image's /app: main.mjs, gen/descriptors.binpb, package.json, node_modules. */
  directory: string;
  metafile: Metafile;
  /** The repository paths the Dockerfile's build stage copies in (COPY <path> ./<path>). */
  dockerBuildContext: string[];
  /** The image's own ENV (its last stage): the task's environment comes on top. */
  imageEnvironment: Record<string, string>;
}

/**
 * The gRPC bundle built as grpc-service/Dockerfile builds it: package.json's `build:grpc` esbuild
 * command (after `npm run gen`, whose output is already in the tree), written to a temporary
 * folder instead of dist/. The image installs the production dependencies next to it; here
 * node_modules is a link to the repository's (the test checks the bundle imports only
 * dependencies, never devDependencies).
 */
export async function buildGrpcBundle(directory: string): Promise<GrpcBundle> {
  const packageJson = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const command = packageJson.scripts['build:grpc']!.split('&&').at(-1)!.trim().split(/\s+/);
  if (command[0] !== 'esbuild')
    throw new Error(`build:grpc does not end in an esbuild command: ${packageJson.scripts['build:grpc']}`);
  const metafilePath = join(directory, '..', `${Date.now()}-grpc-meta.json`);
  const args = [
    ...command.slice(1).filter((arg) => !arg.startsWith('--outdir=')),
    `--outdir=${directory}`,
    `--metafile=${metafilePath}`,
    '--log-level=warning',
  ];
  await run(join(repoRoot, 'node_modules', '.bin', 'esbuild'), args, { cwd: repoRoot });
  const metafile = JSON.parse(readFileSync(metafilePath, 'utf8')) as Metafile;
  rmSync(metafilePath, { force: true });
  await copyFile(join(repoRoot, 'package.json'), join(directory, 'package.json'));
  await symlink(join(repoRoot, 'node_modules'), join(directory, 'node_modules'), 'dir');
  const dockerBuildContext = [...grpcImageStage('build').matchAll(/^COPY (?!--)(.+) \S+$/gm)].flatMap((match) =>
    match[1]!.split(/\s+/),
  );
  const imageEnvironment = grpcImageEnvironment();
  return { directory, metafile, dockerBuildContext, imageEnvironment };
}

export interface GrpcTask {
  port: number;
  /** HEALTH_PORT as bound: the HTTP health endpoint. */
  healthPort: number;
  output: ChildOutput;
  /** Sends a signal (SIGSTOP, SIGCONT, SIGTERM) and returns at once. */
  signal(signal: NodeJS.Signals): void;
  /** Resolves with the exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** SIGTERM, as ECS stops a task; resolves with the exit code. */
  stop(): Promise<number | null>;
  kill(): Promise<void>;
}

/** `node main.mjs` in the bundle's folder, as the image's CMD, with the image's and then the task's environment. */
export async function startGrpcTask(bundle: GrpcBundle, environment: Record<string, string>): Promise<GrpcTask> {
  const env = { ...bundle.imageEnvironment, ...environment };
  const child = spawn(process.execPath, [...guard, 'main.mjs'], {
    cwd: bundle.directory,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collect(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const { port, healthPort } = await new Promise<{ port: number; healthPort: number }>((resolve, reject) => {
    const timer = setInterval(() => {
      // The first structured log line: {"message":"listening","port":N,"healthPort":M,…}
      for (const line of output.stdout.split('\n')) {
        if (!line.includes('"listening"')) continue;
        const parsed = JSON.parse(line) as { message?: string; port?: number; healthPort?: number };
        if (parsed.message === 'listening' && parsed.port && parsed.healthPort) {
          clearInterval(timer);
          resolve({ port: parsed.port, healthPort: parsed.healthPort });
        }
      }
    }, 50);
    child.once('exit', (code) => {
      clearInterval(timer);
      reject(new Error(`the gRPC task exited (${code})\n${output.stderr}\n${output.stdout}`.slice(0, 8000)));
    });
  });
  return {
    port,
    healthPort,
    output,
    signal: (signal) => {
      child.kill(signal);
    },
    exited,
    stop: () => stop(child, 'SIGTERM'),
    kill: async () => {
      await stop(child);
    },
  };
}
