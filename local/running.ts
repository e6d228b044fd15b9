import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

// While a local runner is up it owns DATA_DIR (the embedded database's files are locked to one
// process). It leaves a note there saying where it listens, so that the admin CLI started with
// the same DATA_DIR talks to it instead of opening the locked files, whatever ports it was given.

export interface RunningService {
  pid: number;
  issuer: string;
  dynamoEndpoint: string;
  grpcAddress: string;
}

const runnerFile = (dataDir: string) => join(dataDir, 'runner.json');

export async function announceRunning(dataDir: string, service: RunningService): Promise<void> {
  await writeFile(runnerFile(dataDir), `${JSON.stringify(service, null, 2)}\n`, { mode: 0o600 });
}

/** Removes the note, only if it is still ours (another runner may have taken the folder over). */
export async function withdrawRunning(dataDir: string, pid = process.pid): Promise<void> {
  if ((await readNote(dataDir))?.pid === pid) await rm(runnerFile(dataDir), { force: true });
}

async function readNote(dataDir: string): Promise<RunningService | undefined> {
  try {
    const note = JSON.parse(await readFile(runnerFile(dataDir), 'utf8')) as Partial<RunningService>;
    if (typeof note.pid !== 'number' || typeof note.dynamoEndpoint !== 'string' || typeof note.issuer !== 'string' || typeof note.grpcAddress !== 'string') return undefined;
    return note as RunningService;
  } catch {
    return undefined;
  }
}

/** The runner that holds `dataDir`, if its note is there and its process is alive (a note left by `kill -9` is ignored). */
export async function runningService(dataDir: string): Promise<RunningService | undefined> {
  const note = await readNote(dataDir);
  if (!note) return undefined;
  try {
    process.kill(note.pid, 0);
  } catch (error) {
    // EPERM: alive but not ours to signal; ESRCH: gone.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  return note;
}
