import type { Clock } from '../../core/kernel/ports';

/**
 * A clock the test moves by hand: expiry is tested without sleeping. For boundaries to the
 * millisecond it can be frozen at an exact instant, then released where it stood, so that time
 * never runs backwards.
 */
export class TestClock implements Clock {
  private offset = 0;
  private frozen: number | undefined;

  now = () => this.frozen ?? Date.now() + this.offset;

  advance(ms: number) {
    this.offset += ms;
  }

  /** Stops the clock at `instant` (by default where it stands: one reading, no race with the ms tick). */
  freeze(instant?: number): number {
    this.release();
    if (instant !== undefined && instant < this.now()) throw new Error(`cannot freeze the clock in the past (${instant} < ${this.now()})`);
    const at = instant ?? this.now();
    this.frozen = at;
    return at;
  }

  /** Lets the clock run again from at least the frozen instant. */
  release() {
    if (this.frozen === undefined) return;
    const running = Date.now() + this.offset;
    this.offset += Math.max(0, this.frozen - running);
    this.frozen = undefined;
  }
}
