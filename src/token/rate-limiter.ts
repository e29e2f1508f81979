import type { Redis } from 'ioredis';
import type { Clock } from '../support/clock.ts';

/**
 * Sliding-window counters: the count of the current fixed window plus the previous window's count
 * weighted by how much of it still overlaps the sliding window. Windows are numbered from the
 * injected clock (never from Redis's clock or TTLs), so every node agrees on them and tests move
 * time by hand.
 */
export interface RateLimiter {
  /** Takes one unit from `key` unless that would exceed `limit` per `windowMs`. */
  consume(key: string, limit: number, windowMs: number): Promise<RateDecision>;
  /** Gives back a unit taken by `consume` (to the window it was taken in). */
  refund(key: string, decision: RateDecision): Promise<void>;
}

export type RateDecision =
  | { allowed: true; window: number }
  | { allowed: false; window: number; /** Whole seconds, at least 1. */ retryAfterSeconds: number };

interface WindowCounts {
  window: number;
  elapsedMs: number;
  current: number;
  previous: number;
}

function position(now: number, windowMs: number): { window: number; elapsedMs: number } {
  const window = Math.floor(now / windowMs);
  return { window, elapsedMs: now - window * windowMs };
}

/** Whether one more unit fits, and if not, when it will. */
function decide(counts: WindowCounts, limit: number, windowMs: number): RateDecision {
  const { window, elapsedMs, current, previous } = counts;
  const estimate = (previous * (windowMs - elapsedMs)) / windowMs + current;
  if (estimate + 1 <= limit) return { allowed: true, window };
  let waitMs: number;
  if (current + 1 > limit) {
    // Full on its own: wait for the next window, then until this window's weight has decayed enough.
    waitMs = windowMs - elapsedMs + Math.max(0, windowMs * (1 - (limit - 1) / current));
  } else {
    waitMs = Math.max(0, windowMs * (1 - (limit - 1 - current) / previous) - elapsedMs);
  }
  return { allowed: false, window, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
}

/** One process's counters (no Redis); bounded, oldest keys dropped first. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly counters = new Map<string, { window: number; current: number; previous: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly maxKeys = 100_000,
  ) {}

  async consume(key: string, limit: number, windowMs: number): Promise<RateDecision> {
    return this.consumeNow(key, limit, windowMs);
  }

  /** Synchronous, so the Redis limiter can fall back to it without awaiting. */
  consumeNow(key: string, limit: number, windowMs: number): RateDecision {
    const { window, elapsedMs } = position(this.clock.now(), windowMs);
    const counter = this.roll(key, window);
    const decision = decide({ window, elapsedMs, current: counter.current, previous: counter.previous }, limit, windowMs);
    if (decision.allowed) {
      counter.current++;
      this.counters.delete(key);
      this.counters.set(key, counter);
      while (this.counters.size > this.maxKeys) this.counters.delete(this.counters.keys().next().value!);
    }
    return decision;
  }

  async refund(key: string, decision: RateDecision): Promise<void> {
    const counter = this.counters.get(key);
    if (!counter) return;
    if (counter.window === decision.window && counter.current > 0) counter.current--;
    else if (counter.window === decision.window + 1 && counter.previous > 0) counter.previous--;
  }

  private roll(key: string, window: number): { window: number; current: number; previous: number } {
    const counter = this.counters.get(key);
    if (!counter) return { window, current: 0, previous: 0 };
    if (counter.window === window) return counter;
    const previous = counter.window === window - 1 ? counter.current : 0;
    return { window, current: 0, previous };
  }
}

// Check and take atomically, so concurrent attempts on several nodes cannot overshoot the limit.
const CONSUME_SCRIPT = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local previous = tonumber(redis.call('GET', KEYS[2]) or '0')
if previous * tonumber(ARGV[1]) + current + 1 > tonumber(ARGV[2]) then
  return {0, current, previous}
end
current = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, current, previous}`;

const REFUND_SCRIPT = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current > 0 then redis.call('DECR', KEYS[1]) end
return 0`;

interface Logger {
  warn(object: object, message: string): void;
}

/**
 * Counters shared by every node through Redis (keys `{prefix}{key}:{window}`, expiring after two
 * windows). While Redis cannot be reached, each node limits on its own counters instead of not
 * limiting at all.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly fallback: MemoryRateLimiter;
  private warned = false;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.fallback = new MemoryRateLimiter(clock);
  }

  async consume(key: string, limit: number, windowMs: number): Promise<RateDecision> {
    const { window, elapsedMs } = position(this.clock.now(), windowMs);
    const weight = (windowMs - elapsedMs) / windowMs;
    try {
      const [allowed, current, previous] = (await this.redis.eval(
        CONSUME_SCRIPT,
        2,
        this.windowKey(key, window),
        this.windowKey(key, window - 1),
        String(weight),
        String(limit),
        String(windowMs * 2),
      )) as [number, number, number];
      this.warned = false;
      if (allowed === 1) return { allowed: true, window };
      return decide({ window, elapsedMs, current, previous }, limit, windowMs);
    } catch (error) {
      if (!this.warned) this.log.warn({ err: error }, 'Redis unreachable: rate limits are counted by each node alone');
      this.warned = true;
      return this.fallback.consumeNow(key, limit, windowMs);
    }
  }

  async refund(key: string, decision: RateDecision): Promise<void> {
    try {
      await this.redis.eval(REFUND_SCRIPT, 1, this.windowKey(key, decision.window));
    } catch {
      await this.fallback.refund(key, decision);
    }
  }

  private windowKey(key: string, window: number): string {
    // The braces keep both windows of a key in one Redis Cluster slot.
    return `${this.prefix}{${key}}:${window}`;
  }
}
