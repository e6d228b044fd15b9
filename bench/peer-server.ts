// The peer of the token endpoint benchmark (bench/hot-paths.ts), in its own process like our
// runner (spawned through bench/server-process.ts startBenchPeer): node-oidc-provider with its
// memory adapter and one confidential client doing client_credentials with client_secret_basic.
// Its access tokens are RFC 9068 JWTs signed EdDSA with an Ed25519 key, as ours are: the resource
// indicators feature gives every client_credentials token one resource server whose format is jwt.
// Prints one JSON line on stdout:
// {"ready":true,"role":"peer","pid":…,"issuer":…,"version":…,"warnings":[…],"clientId":…,"clientSecret":…,
//  "scope":…,"resource":…}
// and answers stats requests on stdin like bench/server.ts (bench/child.ts).

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { answerStats, lifetime } from './child';
import type { BenchPeerInfo } from './server-process';

/** The same scope our bench API client asks for. */
const SCOPE = 'messaging';
const RESOURCE = 'https://api.bench.example';
/**
 * node-oidc-provider's own warnings ("oidc-provider WARNING: …"): at import, that it prefers Node 22
 * LTS (it works on 20, which this machine has); at start, that the memory adapter is for
 * development. Both are expected here: they are held back and reported in the ready line.
 */
function holdBackWarnings(): { warnings: string[]; restore: () => void } {
  const warn = console.warn;
  const warnings: string[] = [];
  console.warn = (...args: unknown[]) => {
    const text = args.map(String).join(' ');
    if (text.startsWith('oidc-provider WARNING:')) warnings.push(text);
    else warn(...args);
  };
  return {
    warnings,
    restore: () => {
      console.warn = warn;
    },
  };
}

async function main() {
  const held = holdBackWarnings();
  const { default: Provider } = await import('oidc-provider');
  // Resolved as node resolves the package (the file runs bundled from dist/bench, or as source).
  const packageJson = createRequire(import.meta.url)('oidc-provider/package.json') as { version: string };
  const signingKey = {
    ...generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' }),
    kid: 'bench-peer',
    alg: 'EdDSA',
    use: 'sig',
  };
  const clientId = 'bench-peer-client';
  const clientSecret = randomBytes(32).toString('base64url');

  // The issuer names the port, known only once the server listens: requests wait for the provider.
  let handle: ((request: IncomingMessage, response: ServerResponse) => void) | undefined;
  const server = createServer((request, response) => handle!(request, response));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://localhost:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
        // Its only key is Ed25519, so every signed response of the client says so (the default is RS256).
        id_token_signed_response_alg: 'EdDSA',
        scope: SCOPE,
      },
    ],
    jwks: { keys: [signingKey] },
    scopes: [SCOPE],
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: SCOPE,
          audience: RESOURCE,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'EdDSA' } },
        }),
      },
    },
  });
  handle = provider.callback();
  held.restore();

  lifetime(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  answerStats(() => ({}));
  const info: BenchPeerInfo = {
    ready: true,
    role: 'peer',
    pid: process.pid,
    issuer,
    version: packageJson.version,
    warnings: held.warnings,
    clientId,
    clientSecret,
    scope: SCOPE,
    resource: RESOURCE,
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench peer failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
