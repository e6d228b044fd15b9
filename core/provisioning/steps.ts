// A multi-item operation without transactions: each step may register how to undo itself;
// if a later step fails, the undo actions run in reverse order and the error is rethrown.
// Undo failures are swallowed: what they leave behind is held under a lease that lapses.
// Once the operation's commit write succeeded (or may have), nothing is undone any more:
// confirmations that follow are best effort, and a lapsed lease of a committed holder is rolled
// forward by the next allocator (see pool.ts and quota.ts).
//
// A create with a request_id runs under its request record's lease (requests.ts): once `held`
// says the lease is (nearly) over, a retry may own the same resource id, so the steps neither
// commit nor undo any more; what they hold is the retry's to use, or lapses.

import { DomainError } from '../kernel/errors';

/** `code` of the refusal below: the request log tells it from the refusals that come before any write. */
export const LEASE_LOST = 'lease_lost';

/**
 * An attempt of a create that outlived its request record's lease: a retry may have taken the
 * record over and be building the same resource, so this attempt neither commits nor undoes.
 */
const leaseLost = () =>
  new DomainError('aborted', 'this call took longer than its request_id may be held; retry it to get its result', {
    code: LEASE_LOST,
  });

/** Whether the attempt running the steps still holds its request (always, without a request_id). */
export type Held = () => boolean;

export class Steps {
  private readonly undo: Array<() => Promise<unknown>> = [];

  constructor(private readonly held: Held = () => true) {}

  async run<T>(step: () => Promise<T>, undo?: (result: T) => Promise<unknown>): Promise<T> {
    const result = await step();
    if (undo) this.undo.push(() => undo(result));
    return result;
  }

  /** Runs the commit write; from then on the operation has happened and is never undone. */
  async commit<T>(write: () => Promise<T>): Promise<T>;
  /**
   * A commit write whose failure may be a lost answer (DynamoDB applied it, then timed out):
   * `applied` reads whether this write took effect. If it did, the operation has happened; if
   * that cannot be told, nothing is undone either (the leases lapse, and whoever finds the
   * record rolls them forward); only a write that certainly failed is rolled back.
   */
  async commit(write: () => Promise<void>, applied: () => Promise<boolean>): Promise<void>;
  async commit<T>(write: () => Promise<T>, applied?: () => Promise<boolean>): Promise<T | undefined> {
    if (!this.held()) throw leaseLost();
    try {
      const result = await write();
      this.undo.length = 0;
      return result;
    } catch (error) {
      const took = applied ? await applied().catch(() => undefined) : false;
      if (took === false) throw error;
      this.undo.length = 0;
      if (took === undefined) throw error;
    }
  }

  /** A step after the commit: its failure is tolerated (what it left is rolled forward later). */
  async afterCommit(step: () => Promise<unknown>): Promise<void> {
    await afterCommit(step);
  }

  private async rollBack(): Promise<void> {
    for (const action of this.undo.reverse()) await action().catch(() => undefined);
    this.undo.length = 0;
  }

  /** Runs `work`; on failure rolls back the steps taken and rethrows. */
  static async all<T>(work: (steps: Steps) => Promise<T>, held?: Held): Promise<T> {
    const steps = new Steps(held);
    try {
      return await work(steps);
    } catch (error) {
      // Whatever failed, an attempt that lost its lease leaves everything to the retry.
      if (!steps.held()) throw leaseLost();
      await steps.rollBack();
      throw error;
    }
  }
}

/**
 * The steps after a commit (confirmations), in order, each tolerated to fail; also what a retry
 * runs for a resource whose creating attempt was interrupted after its commit.
 */
export async function afterCommit(...steps: Array<() => Promise<unknown>>): Promise<void> {
  for (const step of steps) await step().catch(() => undefined);
}
