import { execFile } from 'node:child_process';
import { bundledScript } from './bundled';

// Our commands as a person runs them: a child process with the environment they would set
// (added to ours), its exit code and what it printed.

export interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** `node <bundle of script> …args` (./bundled.ts), with `input` on stdin when given; never rejects. */
export const runBundled = async (
  script: string,
  args: string[],
  env: Record<string, string | undefined>,
  input?: string,
): Promise<Outcome> => runNode([await bundledScript(script), ...args], env, input);

/** `node --import tsx <script> …args`, for a test that looks at the sources a run loads; never rejects. */
export const runScript = (
  script: string,
  args: string[],
  env: Record<string, string | undefined>,
  input?: string,
): Promise<Outcome> => runNode(['--import', 'tsx', script, ...args], env, input);

function runNode(argv: string[], env: Record<string, string | undefined>, input?: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      argv,
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        // A kill (the timeout, or a signal) says so in stderr: an exit code alone would not.
        const killed = error?.killed || error?.signal ? `\n(killed${error.signal ? ` by ${error.signal}` : ''})` : '';
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr: stderr + killed });
      },
    );
    if (input !== undefined) child.stdin!.end(input);
  });
}

export interface AdminOutcome extends Outcome {
  json: Record<string, unknown> | undefined;
}

/**
 * `npm run --silent admin -- …args` (its launcher and bundle): with its JSON answer parsed when it succeeded with one.
 */
export async function runAdmin(
  args: string[],
  env: Record<string, string | undefined>,
  input?: string,
): Promise<AdminOutcome> {
  const outcome = await runNode(['local/admin-cli.mjs', ...args], env, input);
  let json: Record<string, unknown> | undefined;
  if (outcome.code === 0 && outcome.stdout.startsWith('{'))
    json = JSON.parse(outcome.stdout) as Record<string, unknown>;
  return { ...outcome, json };
}
