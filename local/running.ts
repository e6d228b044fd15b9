import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

// While a local runner is up it owns DATA_DIR (the embedded database's files are locked to one
// process). It leaves a note there saying where its embedded DynamoDB listens, so that the admin
// CLI started with the same DATA_DIR talks to it instead of opening the locked files, whatever
// ports it was given. The note is only believed while the files are locked (a note in a folder
// nobody holds, stale or planted, is ignored), and only for an endpoint on this machine.

/** Prefix of the local tables' names (the runner's and the admin CLI's; a deployed stack has its own). */
export const LOCAL_TABLE_PREFIX = 'local-';

export interface RunningService {
  pid: number;
  /** Always http://127.0.0.1:<port>: the embedded DynamoDB listens on loopback only. */
  dynamoEndpoint: string;
}

/** Where the note of the runner that holds `dataDir` is. */
export const runnerFile = (dataDir: string) => join(dataDir, 'runner.json');
const LOOPBACK_ENDPOINT = /^http:\/\/127\.0\.0\.1:\d{1,5}$/;

export async function announceRunning(dataDir: string, service: RunningService): Promise<void> {
  // Replaced, not rewritten in place: a file or link planted at that path is not written through.
  await rm(runnerFile(dataDir), { force: true });
  await writeFile(runnerFile(dataDir), `${JSON.stringify(service, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
}

/** Removes the note, only if it is still ours (another runner may have taken the folder over). */
export async function withdrawRunning(dataDir: string, pid = process.pid): Promise<void> {
  if ((await runnerNote(dataDir))?.pid === pid) await rm(runnerFile(dataDir), { force: true });
}

/** The note in `dataDir`, if there is a well-formed one: a positive pid and a loopback endpoint. */
export async function runnerNote(dataDir: string): Promise<RunningService | undefined> {
  try {
    const note = JSON.parse(await readFile(runnerFile(dataDir), 'utf8')) as Partial<RunningService>;
    if (!Number.isSafeInteger(note.pid) || note.pid! <= 0) return undefined;
    if (typeof note.dynamoEndpoint !== 'string' || !LOOPBACK_ENDPOINT.test(note.dynamoEndpoint)) return undefined;
    return { pid: note.pid!, dynamoEndpoint: note.dynamoEndpoint };
  } catch {
    return undefined;
  }
}
