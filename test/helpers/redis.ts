import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

export interface TestRedis {
  redis: Redis;
  /** Unique to this run: every key and stream a test creates starts with it. */
  prefix: string;
}

/**
 * A Redis connection and a key prefix of this test only; every key under the prefix is deleted at
 * teardown. Undefined when no Redis answers (the caller skips).
 */
export async function testRedis(t: { teardown(fn: () => unknown): void }): Promise<TestRedis | undefined> {
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 1000, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
  } catch {
    redis.disconnect();
    return undefined;
  }
  const prefix = `kg-test-${randomBytes(6).toString('hex')}:`;
  t.teardown(async () => {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
    redis.disconnect();
  });
  return { redis, prefix };
}
