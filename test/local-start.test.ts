import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin, runBundled } from './support/processes';
import { startRunnerProcess, type RunnerProcess } from './support/runner-process';

// `npm start` and the admin CLI as a person meets them: run as processes, with the environment
// variables of docs/configuration.md, next to each other and next to things that already hold a port.

/** A start that must fail: its exit code and what it printed. */
async function failedStart(env: Record<string, string>) {
  const outcome = await runBundled('local/start.ts', [], env);
  if (outcome.code === 0) throw new Error('the start did not fail');
  return outcome;
}

const admin = runAdmin;

const reachable = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** One line on stderr, naming what to change; no stack trace. */
function expectOneLine(stderr: string, pattern: RegExp) {
  const lines = stderr.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('npm warn'));
  expect(lines, stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(stderr).not.toMatch(/\n\s+at /);
}

let dataDir: string;
let runner: RunnerProcess;
const folders: string[] = [];
async function freshDir() {
  const dir = await mkdtemp(join(tmpdir(), 'svcnum-start-'));
  folders.push(dir);
  return dir;
}

beforeAll(async () => {
  dataDir = await freshDir();
  // DYNAMODB_PORT 0: not the default, so only the runner's note can tell the admin CLI where it is.
  runner = await startRunnerProcess({ DATA_DIR: dataDir, PORT: '0', GRPC_PORT: '0', DYNAMODB_PORT: '0', ISSUER: '' });
}, 60_000);
afterAll(async () => {
  await runner?.stop();
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
});

describe('npm start', () => {
  it('listens on 127.0.0.1 only, HTTP as well as gRPC', async () => {
    const port = Number(new URL(runner.issuer).port);
    expect(runner.output).toContain(`HTTP listens on 127.0.0.1:${port}`);
    expect(await reachable('127.0.0.1', port)).toBe(true);
    expect(await reachable('127.0.0.1', runner.grpcPort)).toBe(true);
    const external = Object.values(networkInterfaces())
      .flat()
      .find((address) => address && address.family === 'IPv4' && !address.internal);
    if (external) {
      expect(await reachable(external.address, port)).toBe(false);
      expect(await reachable(external.address, runner.grpcPort)).toBe(false);
    }
  });

  it('names the variable to change when a port is taken, every taken port in one line', async () => {
    const other = await freshDir();
    const httpPort = new URL(runner.issuer).port;
    expectOneLine(
      (await failedStart({ DATA_DIR: other, PORT: httpPort, GRPC_PORT: '0', DYNAMODB_PORT: '0' })).stderr,
      /port \d+ on 127\.0\.0\.1 is already in use; set PORT /,
    );
    expectOneLine(
      (await failedStart({ DATA_DIR: other, PORT: '0', GRPC_PORT: String(runner.grpcPort), DYNAMODB_PORT: '0' }))
        .stderr,
      /set GRPC_PORT /,
    );
    const result = await failedStart({
      DATA_DIR: other,
      PORT: '0',
      GRPC_PORT: '0',
      DYNAMODB_PORT: String(runner.dynamoPort),
    });
    expect(result.code).toBe(1);
    expectOneLine(result.stderr, /set DYNAMODB_PORT /);
    // A second `npm start` with the defaults of the first: all three at once, not one per try.
    const all = await failedStart({
      DATA_DIR: other,
      PORT: httpPort,
      GRPC_PORT: String(runner.grpcPort),
      DYNAMODB_PORT: String(runner.dynamoPort),
    });
    expectOneLine(
      all.stderr,
      new RegExp(
        `ports already in use: ${httpPort} on 127\\.0\\.0\\.1 \\(PORT\\), ${runner.grpcPort} on 127\\.0\\.0\\.1 \\(GRPC_PORT\\), ${runner.dynamoPort} on 127\\.0\\.0\\.1 \\(DYNAMODB_PORT\\); set PORT, GRPC_PORT, DYNAMODB_PORT to free ports`,
      ),
    );
  }, 60_000);

  it('refuses one port for two variables, and a port another server holds on ::1 (where clients may look for localhost)', async () => {
    const other = await freshDir();
    expectOneLine(
      (await failedStart({ DATA_DIR: other, PORT: '4567', GRPC_PORT: '4567', DYNAMODB_PORT: '0' })).stderr,
      /PORT and GRPC_PORT are both 4567; give each its own port/,
    );
    const shadow: Server = createServer();
    const listening = await new Promise<boolean>((resolve) => {
      shadow.once('error', () => resolve(false));
      shadow.listen(0, '::1', () => resolve(true));
    });
    if (!listening) return; // no IPv6 loopback here: nothing can shadow the service on it
    try {
      const port = (shadow.address() as { port: number }).port;
      expectOneLine(
        (await failedStart({ DATA_DIR: other, PORT: String(port), GRPC_PORT: '0', DYNAMODB_PORT: '0' })).stderr,
        new RegExp(`port ${port} on ::1 is already in use; set PORT `),
      );
    } finally {
      await new Promise<void>((resolve) => shadow.close(() => resolve()));
    }
  }, 60_000);

  it('starts without the demo app for an issuer no login client may redirect to, and keeps the demo user for later', async () => {
    const dir = await freshDir();
    // What HOST=0.0.0.0 with ISSUER set to the machine's address looks like: plain http, not loopback.
    const open = await startRunnerProcess({
      DATA_DIR: dir,
      PORT: '0',
      GRPC_PORT: '0',
      DYNAMODB_PORT: '0',
      ISSUER: 'http://192.0.2.10:3000',
    });
    try {
      expect(open.output).toMatch(/demo app not available: redirect URI .* must use https/);
      expect(open.output).not.toContain('Try a sign-in');
      expect(open.output).not.toMatch(/\n\s+at /);
    } finally {
      await open.stop();
    }
    const local = await startRunnerProcess({
      DATA_DIR: dir,
      PORT: '0',
      GRPC_PORT: '0',
      DYNAMODB_PORT: '0',
      ISSUER: '',
    });
    try {
      expect(local.output).toMatch(/sign in as demo@example\.com with password \S+/);
    } finally {
      await local.stop();
    }
  }, 60_000);

  it('refuses a data folder another runner holds, and a malformed variable, in one line', async () => {
    expectOneLine(
      (await failedStart({ DATA_DIR: dataDir, PORT: '0', GRPC_PORT: '0', DYNAMODB_PORT: '0' })).stderr,
      /data in .* is in use by another process.*DATA_DIR/,
    );
    expectOneLine((await failedStart({ DATA_DIR: dataDir, PORT: 'eighty' })).stderr, /PORT must be a port number/);
  }, 60_000);
});

describe('admin CLI next to npm start', () => {
  it('finds the running service through DATA_DIR alone, whatever DYNAMODB_PORT says', async () => {
    const listed = await admin(['user', 'list'], { DATA_DIR: dataDir, DYNAMODB_PORT: '8000' });
    expect(listed.code, listed.stderr).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as { users: Array<{ email?: string }> }).users.map((user) => user.email),
    ).toContain('demo@example.com');
  });

  it('says in one line what to do when the data is held by a process that is not a runner', async () => {
    const dir = await freshDir();
    const held = new Level(join(dir, 'dynamodb'));
    await held.open();
    try {
      const result = await admin(['user', 'list'], { DATA_DIR: dir });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expectOneLine(result.stderr, /in use by another process/);
    } finally {
      await held.close();
    }
  });

  it('believes a runner.json only while the data is held: a stale or planted note sends nothing anywhere', async () => {
    const dir = await freshDir();
    // A loopback "DynamoDB" that records whether anyone talks to it.
    let contacted = 0;
    const decoy: Server = createServer((socket) => {
      contacted++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => decoy.listen(0, '127.0.0.1', () => resolve()));
    const port = (decoy.address() as { port: number }).port;
    try {
      // Left by a runner killed with -9 (its pid may even be alive again), or committed to a clone.
      await writeFile(
        join(dir, 'runner.json'),
        JSON.stringify({ pid: process.pid, dynamoEndpoint: `http://127.0.0.1:${port}` }),
      );
      const result = await admin(['user', 'list'], { DATA_DIR: dir });
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ users: [] });
      expect(contacted).toBe(0);
    } finally {
      await new Promise<void>((resolve) => decoy.close(() => resolve()));
    }
  });

  it('never follows a note to another machine, and says in one line when the service it names does not answer', async () => {
    const dir = await freshDir();
    const held = new Level(join(dir, 'dynamodb'));
    await held.open();
    try {
      await writeFile(
        join(dir, 'runner.json'),
        JSON.stringify({ pid: process.pid, dynamoEndpoint: 'http://example.com:8000' }),
      );
      expectOneLine((await admin(['user', 'list'], { DATA_DIR: dir })).stderr, /in use by another process/);

      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
      const port = (closed.address() as { port: number }).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      await writeFile(
        join(dir, 'runner.json'),
        JSON.stringify({ pid: process.pid, dynamoEndpoint: `http://127.0.0.1:${port}` }),
      );
      const result = await admin(['user', 'list'], { DATA_DIR: dir });
      expect(result.code).toBe(1);
      expectOneLine(
        result.stderr,
        new RegExp(`nothing answers at http://127\\.0\\.0\\.1:${port}, where .*runner\\.json says its service is`),
      );
    } finally {
      await held.close();
    }
  });
});

describe('admin CLI help', () => {
  // Help and usage errors touch no data; a folder of their own shows it (it stays empty).
  let env: { DATA_DIR: string };
  beforeAll(async () => {
    env = { DATA_DIR: await freshDir() };
  });
  afterAll(async () => {
    expect(await readdir(env.DATA_DIR)).toEqual([]);
  });

  it('prints the usage on stdout and exits 0 for help, help GROUP and --help', async () => {
    const all = await admin(['help'], env);
    expect(all.code).toBe(0);
    expect(all.stderr).toBe('');
    expect(all.stdout).toMatch(/^usage: npm run --silent admin -- <command>/);
    for (const group of ['client create', 'user create', 'prov-client create', 'number seed', 'key list'])
      expect(all.stdout).toContain(group);

    for (const args of [
      ['help', 'user'],
      ['user', '--help'],
      ['user', 'create', '--help'],
      ['user', 'create', '-h'],
    ]) {
      const one = await admin(args, env);
      expect(one.code, args.join(' ')).toBe(0);
      expect(one.stdout).toContain('user create --email E');
      expect(one.stdout).not.toContain('client create');
    }
  });

  it('answers argument errors with one line on stderr and exit 2', async () => {
    for (const args of [
      [],
      ['frobnicate'],
      ['client'],
      ['client', 'frob'],
      ['user', 'create', '--bogus'],
      ['user', 'create', '--email'],
      ['prov-client', 'create', '--refresh-response', 'omit'],
    ]) {
      const result = await admin(args, env);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expectOneLine(result.stderr, /\(see: admin help\)$/);
    }
  });
});
