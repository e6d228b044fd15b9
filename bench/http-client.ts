import { Agent, request as httpRequest, type OutgoingHttpHeaders } from 'node:http';

// A minimal HTTP client for load generation. Two implementations so they can be compared:
//   http   node:http with a keep-alive Agent (maxSockets = concurrency): the lighter one, default
//   fetch  Node's global fetch (undici), keep-alive by default
// Choose with BENCH_HTTP_CLIENT=http|fetch.

export interface HttpResponse {
  status: number;
  /** Location header, if any (redirects are never followed). */
  location: string | undefined;
  body: string;
}

export interface HttpClient {
  /** How the client is built, for the report. */
  readonly description: string;
  request(method: 'GET' | 'POST', path: string, headers?: Record<string, string>, body?: string): Promise<HttpResponse>;
  close(): void;
}

export type HttpClientKind = 'http' | 'fetch';

export function createHttpClient(kind: HttpClientKind, base: string, maxSockets: number): HttpClient {
  return kind === 'fetch' ? fetchClient(base) : nodeHttpClient(base, maxSockets);
}

function nodeHttpClient(base: string, maxSockets: number): HttpClient {
  const url = new URL(base);
  const agent = new Agent({ keepAlive: true, maxSockets });
  return {
    description: `node:http Agent(keepAlive, maxSockets=${maxSockets})`,
    request(method, path, headers = {}, body) {
      return new Promise((resolve, reject) => {
        const outgoing: OutgoingHttpHeaders = { ...headers };
        if (body !== undefined) outgoing['Content-Length'] = Buffer.byteLength(body);
        const req = httpRequest(
          { agent, hostname: url.hostname, port: url.port, method, path, headers: outgoing },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('error', reject);
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                location: res.headers.location,
                body: Buffer.concat(chunks).toString('utf8'),
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}

function fetchClient(base: string): HttpClient {
  return {
    description: 'global fetch (undici, keep-alive)',
    async request(method, path, headers = {}, body) {
      const response = await fetch(`${base}${path}`, {
        method,
        headers,
        redirect: 'manual',
        ...(body !== undefined ? { body } : {}),
      });
      const text = await response.text();
      return { status: response.status, location: response.headers.get('location') ?? undefined, body: text };
    },
    close: () => undefined,
  };
}

export const formBody = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
export const FORM_HEADERS = { 'Content-Type': 'application/x-www-form-urlencoded' } as const;
