// Single use across a deployment: a SAML assertion (its issuer and ID) and a websso login state are
// each claimed once, and kept until they expire. In this process always; with Redis (REDIS_URL), also
// in Redis, so that every node refuses what another node accepted. Redis out of reach: by default the
// claim fails (503), since a replay could not be told from a first use; a caller with a second
// single-use check behind it (websso: the provider's code) may settle for this node's memory.

import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Clock } from '../support/clock.ts';

export interface ReplayCache {
  /** True when this is the first use of the key (now claimed until `expiresAt`, ms since the epoch). */
  claim(key: string, expiresAt: number): Promise<boolean>;
}

/** Redis could not be asked whether an assertion was already used. */
export class ReplayCacheUnavailableError extends Error {
  override name = 'ReplayCacheUnavailableError';
}

/** This process's claims, bounded: the soonest-expiring entries go first when full. */
export class MemoryReplayCache implements ReplayCache {
  private readonly entries = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly maxEntries = 100_000,
  ) {}

  async claim(key: string, expiresAt: number): Promise<boolean> {
    return this.claimNow(key, expiresAt);
  }

  claimNow(key: string, expiresAt: number): boolean {
    const now = this.clock.now();
    const existing = this.entries.get(key);
    if (existing !== undefined && existing > now) return false;
    if (this.entries.size >= this.maxEntries) this.prune(now);
    this.entries.set(key, expiresAt);
    return true;
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  /** Drops expired entries; still full, the soonest to expire (they would be refused by time soon anyway). */
  private prune(now: number): void {
    for (const [key, expiresAt] of this.entries) if (expiresAt <= now) this.entries.delete(key);
    if (this.entries.size < this.maxEntries) return;
    const sorted = [...this.entries.entries()].sort((a, b) => a[1] - b[1]);
    for (const [key] of sorted.slice(0, Math.ceil(this.maxEntries / 10))) this.entries.delete(key);
  }
}

/**
 * Claims in Redis (SET NX with the expiry), in front of this process's own. `unreachable`: what a
 * claim does when Redis does not answer — 'refuse' (ReplayCacheUnavailableError), or 'this-node'
 * (this process's claim stands, logged).
 */
export class RedisReplayCache implements ReplayCache {
  private readonly local: MemoryReplayCache;

  constructor(
    private readonly redis: Pick<Redis, 'set'>,
    private readonly prefix: string,
    private readonly clock: Clock,
    private readonly unreachable: { fallback: 'refuse' } | { fallback: 'this-node'; log: { warn(object: object, message: string): void }; message: string } = { fallback: 'refuse' },
  ) {
    this.local = new MemoryReplayCache(clock);
  }

  async claim(key: string, expiresAt: number): Promise<boolean> {
    if (!this.local.claimNow(key, expiresAt)) return false;
    const ttlMs = Math.max(1000, expiresAt - this.clock.now());
    let answer: string | null;
    try {
      answer = await this.redis.set(`${this.prefix}${key}`, '1', 'PX', ttlMs, 'NX');
    } catch (error) {
      if (this.unreachable.fallback === 'this-node') {
        this.unreachable.log.warn({ cause: (error as Error).message }, this.unreachable.message);
        return true;
      }
      this.local.forget(key);
      throw new ReplayCacheUnavailableError(`Redis: ${(error as Error).message}`);
    }
    return answer === 'OK';
  }
}

/** The cache key of an assertion: its issuer and ID, hashed (both are attacker-chosen lengths). */
export function replayKey(issuer: string, assertionId: string): string {
  return createHash('sha256').update(issuer).update('\u0000').update(assertionId).digest('base64url');
}
