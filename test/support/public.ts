import { request } from 'node:http';
import { credentials } from '@grpc/grpc-js';
import { AliasServiceClient } from '../../grpc-service/gen/svcnum/provisioning/v1alpha1/alias_service';
import type { TestService } from './service';

// The public endpoints as an anonymous client sees them, from a chosen source address: every
// 127.x.y.z is loopback on Linux, so tests can be "different clients" for the per-IP limiter.

export interface PublicReply {
  status: number;
  json: Record<string, unknown>;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

let next = 0;

/** A loopback source address no other request of this process has used (a fresh limiter bucket). */
export function freshIp(): string {
  next++;
  return `127.1.${Math.floor(next / 250) % 250}.${(next % 250) + 1}`;
}

/** GET `path` (with query) from source address `ip` (a fresh one by default). */
export function publicGet(
  service: TestService,
  path: string,
  options: { ip?: string; method?: string } = {},
): Promise<PublicReply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: service.port,
        path,
        method: options.method ?? 'GET',
        localAddress: options.ip ?? freshIp(),
        agent: false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> = {};
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            // not JSON
          }
          resolve({ status: response.statusCode ?? 0, json, text, headers: response.headers });
        });
        response.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export const resolvePath = (query: string) => `/api/resolve?alias=${encodeURIComponent(query)}`;

/** A generated AliasService client on the service's gRPC port. */
export const aliasClient = (service: TestService) =>
  new AliasServiceClient(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure());

/** `svcnum` written as people write numbers. */
export function formatted(svcnum: string): string[] {
  return [
    `+${svcnum.slice(0, 1)} (${svcnum.slice(1, 4)}) ${svcnum.slice(4, 7)}-${svcnum.slice(7)}`,
    `${svcnum.slice(0, 3)}.${svcnum.slice(3, 6)}.${svcnum.slice(6)}`,
    `+${svcnum.slice(0, 2)} ${svcnum.slice(2, 6)} ${svcnum.slice(6)}`,
    svcnum,
  ];
}
