import type { Store } from '../../core/store';

// Fault injection for the store (`startTestService({ wrapStore: faults.wrap })`): fail the Nth
// call of a named method from now on, replace a method's answer, or run a hook (a gate) before
// it. Calls are counted per method only while something is armed for it, so setting up a test
// (creating owners, clients, tokens) never uses up an armed fault.

export type StoreMethod = {
  [K in keyof Store]: Store[K] extends (...args: never[]) => unknown ? K : never;
}[keyof Store];

type Args<M extends StoreMethod> = Parameters<Store[M]>;
type Result<M extends StoreMethod> = Awaited<ReturnType<Store[M]>>;

interface Armed {
  /** Calls seen since arming. */
  seen: number;
  /** 1-based call numbers that fail. */
  failAt: Set<number>;
  error: () => Error;
  /** Replaces the real call for the listed call numbers (an answer the store could give). */
  answerAt?: Set<number>;
  answer?: (...args: unknown[]) => unknown;
  before?: (...args: unknown[]) => Promise<void> | void;
}

export class StoreFaults {
  private armed = new Map<string, Armed>();
  /** Every injected failure and replaced answer, in order (what fired, for assertions). */
  readonly fired: string[] = [];

  /** Fails the `nth` call (1-based, counted from now) of `method`; more numbers fail more calls. */
  failOn<M extends StoreMethod>(
    method: M,
    nth: number | number[] = 1,
    error: () => Error = () => new Error(`injected failure in ${method}`),
  ): this {
    this.armed.set(method, { seen: 0, failAt: new Set([nth].flat()), error });
    return this;
  }

  /** The `nth` call of `method` does not reach the store and answers `answer(...args)` instead. */
  answerOn<M extends StoreMethod>(
    method: M,
    nth: number,
    answer: (...args: Args<M>) => Result<M> | Promise<Result<M>>,
  ): this {
    this.armed.set(method, {
      seen: 0,
      failAt: new Set(),
      error: () => new Error('unused'),
      answerAt: new Set([nth]),
      answer: answer as (...args: unknown[]) => unknown,
    });
    return this;
  }

  /** Runs `hook` before every call of `method` (for example, awaits a gate). */
  before<M extends StoreMethod>(method: M, hook: (...args: Args<M>) => Promise<void> | void): this {
    this.armed.set(method, {
      seen: 0,
      failAt: new Set(),
      error: () => new Error('unused'),
      before: hook as (...args: unknown[]) => Promise<void>,
    });
    return this;
  }

  /** How many calls of `method` were seen since it was armed. */
  calls(method: StoreMethod): number {
    return this.armed.get(method)?.seen ?? 0;
  }

  /** Disarms everything. */
  reset(): void {
    this.armed.clear();
    this.fired.length = 0;
  }

  /** The `wrapStore` option: every method goes through the armed faults first. */
  readonly wrap = (store: Store): Store =>
    new Proxy(store, {
      get: (target, property, receiver) => {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        return async (...args: unknown[]) => {
          const armed = this.armed.get(property);
          if (armed) {
            armed.seen++;
            if (armed.before) await armed.before(...args);
            if (armed.failAt.has(armed.seen)) {
              this.fired.push(`${property}#${armed.seen}`);
              throw armed.error();
            }
            if (armed.answerAt?.has(armed.seen)) {
              this.fired.push(`${property}#${armed.seen}=answer`);
              return armed.answer!(...args);
            }
          }
          return Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
        };
      },
    });
}

/**
 * Counts every store call by method (`startTestService({ wrapStore: calls.wrap })`): the round
 * trips a request costs, each port method being one.
 */
export class StoreCallCounter {
  private counts: Record<string, number> = {};

  /** The store calls `work` made (nothing else may use the store meanwhile). */
  async during(work: () => Promise<unknown>): Promise<Record<string, number>> {
    this.counts = {};
    await work();
    const counted = this.counts;
    this.counts = {};
    return counted;
  }

  readonly wrap = (store: Store): Store =>
    new Proxy(store, {
      get: (target, property, receiver) => {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        return (...args: unknown[]) => {
          this.counts[property] = (this.counts[property] ?? 0) + 1;
          return Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
        };
      },
    });
}

/** The number of calls in a StoreCallCounter count. */
export const totalCalls = (counted: Record<string, number>) =>
  Object.values(counted).reduce((sum, calls) => sum + calls, 0);
