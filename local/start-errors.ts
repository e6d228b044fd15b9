import { createServer, type Server } from 'node:net';

// Start-up failures a person can fix (a port taken, a data folder in use): `npm start` and the
// admin CLI print their message as one line, without a stack trace.

export class LocalStartError extends Error {}

/** Which environment variable sets each listening port of the local runner. */
export type PortVariable = 'PORT' | 'GRPC_PORT' | 'DYNAMODB_PORT';

/** `host:port`, with an IPv6 literal in brackets (`[::1]:3000`), as URLs and gRPC targets write it. */
export const hostPort = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** A listen failure, told as what to change. Other failures are returned unchanged. */
export function explainListenError(
  error: NodeJS.ErrnoException,
  variable: PortVariable,
  host: string,
  port: number,
): Error {
  switch (error.code) {
    case 'EADDRINUSE':
      return new LocalStartError(
        `port ${port} on ${host} is already in use; set ${variable} to a free port (0 picks one)`,
      );
    case 'EACCES':
      return new LocalStartError(
        `port ${port} on ${host} needs privileges this process does not have; set ${variable} to a port above 1023`,
      );
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
      return new LocalStartError(`${host} is not an address of this machine; set HOST to one (default 127.0.0.1)`);
    default:
      return error;
  }
}

/** `server.listen`, with a failure explained by `explainListenError`. */
export function listenOrExplain(server: Server, port: number, host: string, variable: PortVariable): Promise<void> {
  return listen(server, port, host).catch((error: NodeJS.ErrnoException) => {
    throw explainListenError(error, variable, host, port);
  });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export interface Listener {
  port: number;
  host: string;
  variable: PortVariable;
}

/** Why `port` on `host` cannot be listened on now (an errno error), if it cannot. */
async function probe(port: number, host: string): Promise<NodeJS.ErrnoException | undefined> {
  const server = createServer();
  try {
    await listen(server, port, host);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return undefined;
  } catch (error) {
    return error as NodeJS.ErrnoException;
  }
}

/**
 * Checks up front that every port can be listened on, so that all taken ports are named in one
 * line rather than one per attempt (and grpc-js, which logs "No address added…" in its own words
 * before failing, is never asked to bind a taken port). Port 0 (any free one) needs no check.
 * For HTTP on 127.0.0.1 the same port on ::1 must be free too: the issuer says `localhost`, which
 * many clients try as ::1 first, and a server there would silently take our traffic.
 */
export async function ensurePortsFree(listeners: Listener[]): Promise<void> {
  const fixed = listeners.filter((listener) => listener.port !== 0);
  for (const [index, listener] of fixed.entries()) {
    const twin = fixed.slice(index + 1).find((other) => other.port === listener.port);
    if (twin)
      throw new LocalStartError(
        `${listener.variable} and ${twin.variable} are both ${listener.port}; give each its own port (0 picks a ` +
          `free one)`,
      );
  }
  const checks = fixed.flatMap((listener) => [
    { listener, host: listener.host },
    ...(listener.variable === 'PORT' && listener.host === '127.0.0.1'
      ? [{ listener, host: '::1', optional: true }]
      : []),
  ]);
  const failures = (
    await Promise.all(checks.map(async (check) => ({ ...check, error: await probe(check.listener.port, check.host) })))
  )
    // No IPv6 loopback on this machine: nothing can shadow us there.
    .filter(
      (check) => check.error && !(check.optional && ['EADDRNOTAVAIL', 'EAFNOSUPPORT'].includes(check.error.code ?? '')),
    );
  const taken = failures.filter((failure) => failure.error!.code === 'EADDRINUSE');
  if (taken.length > 1) {
    const names = taken.map(({ listener, host }) => `${listener.port} on ${host} (${listener.variable})`).join(', ');
    const variables = [...new Set(taken.map(({ listener }) => listener.variable))];
    throw new LocalStartError(
      `ports already in use: ${names}; set ${variables.join(', ')} to free ports (0 picks one)`,
    );
  }
  const first = failures[0];
  if (first) throw explainListenError(first.error!, first.listener.variable, first.host, first.listener.port);
}
