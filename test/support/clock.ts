import type { Clock } from '../../core/ports';

/** A clock the test moves by hand: expiry is tested without sleeping. */
export class TestClock implements Clock {
  private offset = 0;
  now = () => Date.now() + this.offset;
  advance(ms: number) {
    this.offset += ms;
  }
}
