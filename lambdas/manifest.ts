// Every HTTP route and the Lambda (route group) that serves it, as plain data. The CDK stack
// (lib/), the bundle benchmark and lambdas/routes.ts (which adds each group's handler factory for
// the local runner) all read this one list. It imports nothing, so `cdk synth` loads no handler
// code (test/infra/synth-modules.test.ts).

export type HttpMethod = 'GET' | 'POST';

export interface RouteGroupManifest {
  /** The group's handler module (repo-relative), exporting `handler`: the Lambda's entry. */
  readonly entry: string;
  /** Path → methods served by this group. */
  readonly routes: Readonly<Record<string, readonly HttpMethod[]>>;
}

export const routeManifest = {
  browser: {
    entry: 'lambdas/browser.ts',
    routes: {
      '/oauth/authorize': ['GET'],
      '/login': ['GET', 'POST'],
      '/login/passkey': ['POST'],
      '/consent': ['GET', 'POST'],
      '/account': ['GET'],
      '/account/revoke': ['GET', 'POST'],
      '/account/passkeys': ['POST'],
      '/account/passkeys/options': ['POST'],
      '/account/passkeys/confirm': ['GET', 'POST'],
      '/account/passkeys/rename': ['GET', 'POST'],
      '/account/passkeys/remove': ['GET', 'POST'],
      '/logout': ['GET', 'POST'],
      '/assets/style.css': ['GET'],
      '/assets/favicon.svg': ['GET'],
      '/assets/passkeys.js': ['GET'],
    },
  },
  token: {
    entry: 'lambdas/token.ts',
    routes: { '/oauth/token': ['POST'], '/oauth/revoke': ['POST'] },
  },
  userinfo: {
    entry: 'lambdas/userinfo.ts',
    routes: { '/oauth/userinfo': ['GET', 'POST'] },
  },
  messages: {
    entry: 'lambdas/messages.ts',
    routes: { '/api/messages': ['POST'] },
  },
  discovery: {
    entry: 'lambdas/discovery.ts',
    routes: { '/.well-known/openid-configuration': ['GET'], '/.well-known/jwks.json': ['GET'] },
  },
  public: {
    entry: 'lambdas/public.ts',
    routes: { '/api/resolve': ['GET'], '/api/discover': ['GET'] },
  },
} as const satisfies Record<string, RouteGroupManifest>;

export type RouteGroup = keyof typeof routeManifest;

export const routeGroupNames = Object.keys(routeManifest) as RouteGroup[];

/**
 * The one function that serves no route: the wake-up relay on the messages table's stream
 * (lambdas/wakeup-relay.ts; lib/wakeup-relay.ts deploys it), bundled like the route groups.
 */
export const wakeupRelayManifest = { entry: 'lambdas/wakeup-relay.ts' } as const;
