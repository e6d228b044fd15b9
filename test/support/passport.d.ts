// The part of passport 0.7 that test/rp-browser.test.ts uses (passport ships no types; @types/passport
// would be one more dependency for four lines).
declare module 'passport' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  type Middleware = (request: IncomingMessage, response: ServerResponse, next: (error?: unknown) => void) => void;

  export class Passport {
    use(name: string, strategy: unknown): this;
    authenticate(
      name: string,
      options: { session: boolean },
      callback: (error: unknown, user: Record<string, string> | false, info: unknown) => void,
    ): Middleware;
  }
}
