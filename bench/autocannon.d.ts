// autocannon ships no types; only what bench/load.ts uses is declared (autocannon 9 README).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Options {
    url: string;
    method?: 'GET' | 'POST';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    /** Each completed response's body; a falsy answer counts it in `mismatches`. */
    verifyBody?: (body: string) => boolean;
  }

  export interface Instance extends EventEmitter {
    stop(): void;
    on(
      event: 'response',
      listener: (client: unknown, statusCode: number, bytes: number, milliseconds: number) => void,
    ): this;
    /** A response whose body `verifyBody` refused. */
    on(event: 'reqMismatch', listener: (body: string) => void): this;
    /** A connection error or timeout: a request that completed no response. */
    on(event: 'reqError', listener: (error: Error) => void): this;
  }

  export default function autocannon(options: Options, done: (error: Error | null) => void): Instance;
}
