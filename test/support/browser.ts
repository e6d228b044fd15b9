import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';

/** What Chromium sends with a form posted from one of our own pages (Referrer-Policy: same-origin). */
export const sameOriginFormHeaders = (origin: string): Record<string, string> => ({
  Origin: origin,
  'Sec-Fetch-Site': 'same-origin',
  'Sec-Fetch-Mode': 'navigate',
  'Sec-Fetch-Dest': 'document',
  'Sec-Fetch-User': '?1',
});

/**
 * A minimal browser: a cookie jar and manual redirects, over real HTTP. Forms are posted with the
 * headers a real browser adds; `headers` overrides them, and `undefined` leaves one out.
 */
export class Browser {
  readonly cookies = new Map<string, string>();

  /** `sourceIp`: a loopback address (127.x.y.z) to send from, a distinct client for per-IP limits. */
  constructor(
    readonly base: string,
    readonly sourceIp?: string,
  ) {}

  async request(
    path: string,
    init: { method?: string; form?: Record<string, string>; headers?: Record<string, string | undefined> } = {},
  ) {
    const url = path.startsWith('http') ? path : `${this.base}${path}`;
    const merged = { ...(init.form ? sameOriginFormHeaders(new URL(this.base).origin) : {}), ...init.headers };
    const headers = Object.fromEntries(
      Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== undefined),
    );
    if (this.cookies.size) headers.Cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    if (init.form) headers['Content-Type'] = 'application/x-www-form-urlencoded';
    const method = init.method ?? (init.form ? 'POST' : 'GET');
    const payload = init.form ? new URLSearchParams(init.form).toString() : undefined;
    const response = this.sourceIp
      ? await sendFrom(this.sourceIp, url, method, headers, payload)
      : await fetch(url, { method, headers, redirect: 'manual', ...(payload !== undefined ? { body: payload } : {}) });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const index = pair!.indexOf('=');
      const name = pair!.slice(0, index);
      const value = pair!.slice(index + 1);
      if (/Max-Age=0/i.test(cookie)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const body = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      body,
      location: response.headers.get('location') ?? undefined,
    };
  }

  /** The value of a hidden form field in the last page. */
  static field(html: string, name: string): string {
    const match = new RegExp(`name="${name}" value="([^"]*)"`).exec(html);
    if (!match) throw new Error(`no field ${name} in page`);
    return match[1]!.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code)));
  }
}

/** One request over node:http from a chosen local address (fetch cannot pick one), as a fetch Response. */
function sendFrom(
  localAddress: string,
  url: string,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method, headers, localAddress, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const replyHeaders = new Headers();
        for (let index = 0; index < response.rawHeaders.length; index += 2)
          replyHeaders.append(response.rawHeaders[index]!, response.rawHeaders[index + 1]!);
        resolve(
          new Response(response.statusCode === 204 || response.statusCode === 304 ? null : Buffer.concat(chunks), {
            status: response.statusCode ?? 0,
            headers: replyHeaders,
          }),
        );
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

export function pkcePair() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}
