// Lifetimes and limits of the service (spec section 8 and the design brief). One place, so the
// docs, the tests and the code agree.

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

export const limits = {
  authorizationCodeTtl: 5 * MINUTE,
  accessTokenTtl: HOUR,
  idTokenTtl: HOUR,
  /** Refresh tokens expire after this long without use (sliding window, no rotation). */
  refreshIdleTtl: 180 * DAY,
  /** The sliding window is pushed forward at most this often per grant: one write a day, not one per refresh. */
  refreshTouchInterval: DAY,
  /** A parked /oauth/authorize request must be finished (sign-in, consent) within this time. */
  authRequestTtl: 10 * MINUTE,
  sessionTtl: 12 * HOUR,
  /**
   * Sign-in throttle, per identifier and per device cookie (core/oauth/sign-in-guard.ts): this many
   * failures are free; then each failure delays the next check, doubling from the first delay up
   * to the longest. A count is forgotten a day after its last failure, or at a success.
   */
  signInFreeFailures: 5,
  signInFirstDelay: 30 * SECOND,
  signInMaxDelay: 15 * MINUTE,
  signInFailureMemory: DAY,
  /**
   * A browser that signed in is trusted this long (device cookie), while it has fewer than
   * `signInFreeFailures` failures.
   */
  deviceCookieTtl: 90 * DAY,
  /** A WebAuthn challenge (registration or passkey sign-in) must be answered within this time, once. */
  passkeyChallengeTtl: 5 * MINUTE,
  /** Adding a passkey needs a sign-in at most this old (else the password is asked first). */
  passkeyRecentSignIn: 5 * MINUTE,
  /** Passkeys per account (each one a row on /account). */
  passkeysPerAccount: 20,
  /** The sign-in form's CSRF token (a browser-session cookie). */
  signInCsrfTtl: DAY,
  codeVerifierMin: 43,
  codeVerifierMax: 128,
} as const;

export interface ServiceConfig {
  /** The issuer identifier: base URL of the service, no trailing slash. */
  issuer: string;
  /** Whether cookies get `Secure` and the `__Host-` prefix (everything but plain-http local runs). */
  secureCookies: boolean;
  /**
   * The gRPC API's public origin (`https://grpc.…`: GRPC_ORIGIN, which the stack sets): the htu of a
   * call's DPoP proof starts with it. Unset (npm start on loopback), the call's own :authority.
   */
  grpcOrigin?: string;
}

export function serviceConfig(issuer: string, grpcOrigin?: string): ServiceConfig {
  const normalised = issuer.replace(/\/+$/, '');
  return {
    issuer: normalised,
    secureCookies: normalised.startsWith('https://'),
    ...(grpcOrigin ? { grpcOrigin } : {}),
  };
}

/** Whether the service is served over https (its issuer says so): HSTS on every answer, secure cookies. */
export const httpsIssuer = (config: Pick<ServiceConfig, 'issuer'>) => config.issuer.startsWith('https://');

/** The audience of access tokens for the service's own APIs (UserInfo, External API). */
export const apiAudience = (config: ServiceConfig) => config.issuer;
