import { createServer } from 'node:http';
import type { ServingStatus } from 'grpc-health-check';

// grpc.health.v1 over plain HTTP, for the callers that cannot speak gRPC: the NLB's target health
// check and the container's health check (lib/provisioning.ts). GET /health answers 200 while the
// process's overall status ('' in grpc.health.v1) is SERVING and 503 otherwise (draining), with the
// status name as its body. It runs on the event loop of the gRPC calls, so a wedged loop answers
// nothing at all and the caller's timeout counts the task unhealthy.

export const HEALTH_PATH = '/health';

export interface RunningHealthEndpoint {
  port: number;
  close(): Promise<void>;
}

export async function startHealthEndpoint(
  status: () => ServingStatus,
  options: { port: number; host?: string },
): Promise<RunningHealthEndpoint> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== HEALTH_PATH) return void response.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return void response.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain' }).end();
    const current = status();
    response
      .writeHead(current === 'SERVING' ? 200 : 503, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-store' })
      .end(`${current}\n`);
  });
  // Probes send one small request: nothing here waits long for a slow or silent peer.
  server.requestTimeout = 5_000;
  server.headersTimeout = 5_000;
  server.keepAliveTimeout = 1_000;
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve((server.address() as { port: number }).port));
  });
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
