import type { Clock } from '../../core/kernel/ports';

/**
 * A clock the test moves by hand: expiry is tested without sleeping. For boundaries to the
 * millisecond it can be frozen at an exact instant, then released where it stood, so that time
 * never runs backwards. Real time spent while frozen does not count: however slow the machine,
 * a frozen test sees only the instants it sets.
 */
export class TestClock implements Clock {
  private offset = 0;
  private frozen: number | undefined;

  now = () => this.frozen ?? Date.now() + this.offset;

  /** Moves the clock forward by `ms` (a frozen clock stays frozen, `ms` later). */
  advance(ms: number) {
    if (this.frozen !== undefined) this.frozen += ms;
    else this.offset += ms;
  }

  /** Stops the clock at `instant` (by default where it stands: one reading, no race with the ms tick). */
  freeze(instant?: number): number {
    const current = this.now();
    if (instant !== undefined && instant < current)
      throw new Error(`cannot freeze the clock in the past (${instant} < ${current})`);
    this.frozen = instant ?? current;
    return this.frozen;
  }

  /** Lets the clock run again from the frozen instant (not from where real time has got to meanwhile). */
  release() {
    if (this.frozen === undefined) return;
    this.offset = this.frozen - Date.now();
    this.frozen = undefined;
  }
}
