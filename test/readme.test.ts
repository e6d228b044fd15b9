import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser } from './support/browser';
import { signInFrom } from './support/flow';
import { startRunnerProcess, type RunnerProcess } from './support/runner-process';

// The README's shell blocks, run literally in bash against `npm start`, in the order a newcomer
// meets them: the walk-through, "Getting a provisioning client", the calls of "Calling it" (with
// buf curl: grpcurl is not installed here) and "Sending". Two things are not literal: the ports
// (the runner listens on free ones: the walk-through's `PORT=3000` and `GRPC_PORT=50051` lines get
// them, as a reader who started it on other ports would write) and the browser step, which a
// browser of the test's own does where the README asks a person to paste the address.

const run = promisify(execFile);

/** The ```sh blocks of the README's section `heading` (up to the next heading of that level or above). */
function shellBlocks(readme: string, heading: string): string[] {
  const level = heading.indexOf(' ');
  const blocks: string[] = [];
  let inSection = false;
  // Lines of the fenced block being read (`#` lines in there are comments, not headings).
  let fence: { shell: boolean; lines: string[] } | undefined;
  for (const line of readme.split('\n')) {
    if (fence) {
      if (line !== '```') fence.lines.push(line);
      else {
        if (inSection && fence.shell) blocks.push(`${fence.lines.join('\n')}\n`);
        fence = undefined;
      }
    } else if (line.startsWith('```')) {
      fence = { shell: line === '```sh', lines: [] };
    } else if (line === heading) {
      inSection = true;
    } else if (inSection && /^#{1,6} /.test(line) && line.indexOf(' ') <= level) {
      break;
    }
  }
  if (!inSection) throw new Error(`README has no heading ${heading}`);
  return blocks;
}

/** Runs `script` in bash (errors stop it), with the admin CLI pointed at the runner's data. */
async function bash(script: string, env: Record<string, string>) {
  const { stdout } = await run('bash', ['-c', `set -euo pipefail\n${script}`], {
    env: { ...process.env, ...env },
    maxBuffer: 1 << 20,
    timeout: 120_000,
  });
  return stdout;
}

let runner: RunnerProcess;
let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'svcnum-readme-'));
  runner = await startRunnerProcess({ DATA_DIR: dataDir, PORT: '0', GRPC_PORT: '0', DYNAMODB_PORT: '0', ISSUER: '' });
}, 60_000);
afterAll(async () => {
  await runner?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('README', () => {
  it('walk-through, provisioning client, gRPC calls and first message work as written', async () => {
    const readme = await readFile('README.md', 'utf8');
    const port = new URL(runner.issuer).port;
    const literal = (block: string) =>
      block.replace(/^PORT=3000$/m, `PORT=${port}`).replace(/^GRPC_PORT=50051$/m, `GRPC_PORT=${runner.grpcPort}`);
    const blocks = [
      ...shellBlocks(readme, '## Walk-through with curl'),
      ...shellBlocks(readme, '### Getting a provisioning client'),
      ...shellBlocks(readme, '### Calling it').filter((block) => block.includes('call() {')),
      shellBlocks(readme, '### Sending: `POST /api/messages`')[0]!,
    ].map(literal);
    const script = blocks.join('\n');
    // The ports are set once, at the top of the walk-through; no command names them again.
    expect(script).toMatch(new RegExp(`^PORT=${port}\n`));
    expect(script).toContain(`\nGRPC_PORT=${runner.grpcPort}\n`);
    expect(script).not.toMatch(/:3000|%3A3000|:50051/);
    const paste = /^CALLBACK='[^']*'$/m.exec(script);
    expect(paste, 'the walk-through asks for the callback address').not.toBeNull();
    const beforePaste = script.slice(0, paste!.index);
    const afterPaste = script.slice(paste!.index + paste![0].length);
    const env = { DATA_DIR: dataDir };

    // Up to the browser step; the variables it set are carried over, as in one terminal.
    const carried = [...new Set([...beforePaste.matchAll(/^([A-Z_]+)=/gm)].map((match) => match[1]!))];
    const first = await bash(`${beforePaste}\ndeclare -p ${carried.join(' ')}`, env);
    const authorizeUrl = first.split('\n').find((line) => line.startsWith(`${runner.issuer}/oauth/authorize?`));
    expect(authorizeUrl).toBeDefined();
    const state = first
      .split('\n')
      .filter((line) => line.startsWith('declare '))
      .join('\n');

    const signedIn = await signInFrom(new Browser(runner.issuer), authorizeUrl!.slice(runner.issuer.length), {
      email: 'me@example.com',
      password: 'a long passphrase',
    });
    expect(signedIn.status).toBe(303);
    const callback = new URL(signedIn.location!);
    expect(`${callback.origin}${callback.pathname}`).toBe('http://localhost:8080/callback');
    expect(callback.searchParams.get('iss')).toBe(runner.issuer);

    const output = await bash(`${state}\nCALLBACK='${callback.href}'\n${afterPaste}`, env);
    // curl prints one JSON object per line; buf curl and the admin CLI print indented ones.
    const objects = output
      .split('\n')
      .filter((line) => line.startsWith('{"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const [tokens, userInfo, refreshed, apiToken, sent] = objects;
    expect(output).toContain('"status": "SERVING"');
    expect(output).toContain('"autoReply": "We are closed"');
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'openid profile email' });
    expect(typeof tokens!.refresh_token).toBe('string');
    expect(userInfo).toMatchObject({ email: 'me@example.com', email_verified: true });
    expect(refreshed).toMatchObject({ token_type: 'Bearer', refresh_token: null });
    expect(apiToken).toMatchObject({ token_type: 'Bearer', scope: 'poll' });
    expect(sent).toMatchObject({ message_id: expect.any(String), to: userInfo!.svcnum });
    expect(objects).toHaveLength(5);
  }, 180_000);
});
