import type { Clock } from '../../src/support/clock.ts';

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(private current: number = Date.UTC(2026, 10, 22, 12, 0, 0)) {}
  now(): number {
    return this.current;
  }
  advance(milliseconds: number): void {
    this.current += milliseconds;
  }
  /** Waiting on this clock moves it: nothing in a test sleeps. */
  sleep(milliseconds: number): Promise<void> {
    this.current += milliseconds;
    return Promise.resolve();
  }
  set(milliseconds: number): void {
    this.current = milliseconds;
  }
}
