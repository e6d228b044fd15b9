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

/**
 * Fails with an explained error if `port` cannot be listened on. For servers that report a taken
 * port in their own words (grpc-js logs "No address added…" before failing): we ask first.
 */
export async function ensurePortFree(port: number, host: string, variable: PortVariable): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listenOrExplain(probe, port, host, variable);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}
