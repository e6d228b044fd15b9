import { createServer, type Server } from 'node:net';

// Start-up failures a person can fix (a port taken, a data folder in use): `npm start` and the
// admin CLI print their message as one line, without a stack trace.

export class LocalStartError extends Error {}

/** Which environment variable sets each listening port of the local runner. */
export type PortVariable = 'PORT' | 'GRPC_PORT' | 'DYNAMODB_PORT';

/** A listen failure, told as what to change. Other failures are returned unchanged. */
function explainListenError(error: NodeJS.ErrnoException, variable: PortVariable, host: string, port: number): Error {
  switch (error.code) {
    case 'EADDRINUSE': return new LocalStartError(`port ${port} on ${host} is already in use; set ${variable} to a free port (0 picks one)`);
    case 'EACCES': return new LocalStartError(`port ${port} on ${host} needs privileges this process does not have; set ${variable} to a port above 1023`);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND': return new LocalStartError(`${host} is not an address of this machine; set HOST to one (default 127.0.0.1)`);
    default: return error;
  }
}

/** `server.listen`, with a failure explained by `explainListenError`. */
export function listenOrExplain(server: Server, port: number, host: string, variable: PortVariable): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const failed = (error: Error) => reject(explainListenError(error, variable, host, port));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

export interface Listener { port: number; host: string; variable: PortVariable }

/**
 * Checks up front that every port can be listened on, so that all taken ports are named in one
 * line rather than one per attempt (and grpc-js, which logs "No address added…" in its own words
 * before failing, is never asked to bind a taken port). Port 0 (any free one) needs no check.
 */
export async function ensurePortsFree(listeners: Listener[]): Promise<void> {
  const failures = await Promise.all(listeners.filter((listener) => listener.port !== 0).map(async (listener) => {
    const probe = createServer();
    try {
      await listenOrExplain(probe, listener.port, listener.host, listener.variable);
      await new Promise<void>((resolve) => probe.close(() => resolve()));
      return undefined;
    } catch (error) {
      return { listener, error };
    }
  }));
  const failed = failures.filter((failure) => failure !== undefined);
  const taken = failed.filter((failure) => /already in use/.test(String((failure.error as Error).message)));
  if (taken.length > 1) {
    const names = taken.map(({ listener }) => `${listener.port} on ${listener.host} (${listener.variable})`).join(', ');
    throw new LocalStartError(`ports already in use: ${names}; set ${taken.map(({ listener }) => listener.variable).join(', ')} to free ports (0 picks one)`);
  }
  if (failed[0]) throw failed[0].error;
}
