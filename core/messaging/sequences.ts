import type { MessagingPort } from './store';

// Sequence claims, grouped. Every append to an inbox takes its sequence from the inbox's counter
// (one conditional-free UpdateItem). Under load into one inbox that counter is the hot item:
// each append would wait its turn for one round trip on it. Here, appends to one inbox in this
// process that arrive while a claim is in flight wait for the next claim, which takes a block of
// exactly as many sequences as appends wait (ADD lastSeq :n), one each. A lone append claims at
// once, as before.
//
// Nothing about ordering or gaps changes: every sequence of a block has a writer that writes it
// right after, as a lone claim's does; a writer that dies leaves a gap the readers tombstone after
// their grace period (core/messaging/follow.ts), as before. No sequence is held back for later
// appends, so a block never leaves a gap by going unused.

/** At most this many appends share one claim (each message is still its own conditional write). */
export const MAX_CLAIM_BLOCK = 100;

export function createSequenceClaims(store: Pick<MessagingPort, 'nextSeq'>) {
  /** Per inbox: appends waiting for the next claim, while one is in flight. */
  const waiting = new Map<string, Array<{ resolve: (seq: number) => void; reject: (error: unknown) => void }>>();

  async function claimInTurn(inboxId: string, queue: NonNullable<ReturnType<typeof waiting.get>>) {
    while (queue.length > 0) {
      const block = queue.splice(0, MAX_CLAIM_BLOCK);
      try {
        const first = await store.nextSeq(inboxId, block.length);
        block.forEach((claim, index) => {
          claim.resolve(first + index);
        });
      } catch (error) {
        // Each append of the block fails as a lone claim would (they retry, or answer the error).
        for (const claim of block) claim.reject(error);
      }
    }
    waiting.delete(inboxId);
  }

  /** The next sequence of `inboxId` for one append. */
  return function claim(inboxId: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const queue = waiting.get(inboxId);
      if (queue) {
        queue.push({ resolve, reject });
        return;
      }
      const started = [{ resolve, reject }];
      waiting.set(inboxId, started);
      void claimInTurn(inboxId, started);
    });
  };
}
