import { Redis } from 'ioredis';
import t from 'tap';
import { MemoryRateLimiter, RedisRateLimiter, type RateLimiter } from '../../src/token/rate-limiter.ts';
import { ManualClock } from '../helpers/clock.ts';
import { TEST_REDIS_URL, testRedis } from '../helpers/redis.ts';

const WINDOW = 60_000;

/** The same behaviour, whatever keeps the counters. */
async function slidingWindow(t: Pick<typeof import('tap').default, 'equal' | 'same'>, limiter: RateLimiter, clock: ManualClock) {
  // Start exactly at a window boundary so the weights below are exact.
  clock.set(Math.ceil(clock.now() / WINDOW) * WINDOW);
  for (let i = 0; i < 5; i++) t.equal((await limiter.consume('k', 5, WINDOW)).allowed, true, `attempt ${i + 1}`);
  const refused = await limiter.consume('k', 5, WINDOW);
  t.same(refused, { allowed: false, window: refused.window, retryAfterSeconds: 72 }, 'full: the rest of this window, then 12 s of decay');
  t.equal((await limiter.consume('other', 5, WINDOW)).allowed, true, 'keys are independent');

  clock.advance(71_000);
  t.equal((await limiter.consume('k', 5, WINDOW)).allowed, false, 'one second early');
  clock.advance(1000);
  t.equal((await limiter.consume('k', 5, WINDOW)).allowed, true, 'previous window weighs 4/5: one more fits');
  const again = await limiter.consume('k', 5, WINDOW);
  t.equal(again.allowed, false);
  if (!again.allowed) t.equal(again.retryAfterSeconds, 12, 'until the previous window weighs 3/5');

  // A refund gives the unit back to the window it was taken from.
  clock.advance(2 * WINDOW);
  const taken = [];
  for (let i = 0; i < 5; i++) taken.push(await limiter.consume('r', 5, WINDOW));
  t.equal((await limiter.consume('r', 5, WINDOW)).allowed, false);
  await limiter.refund('r', taken[0]!);
  t.equal((await limiter.consume('r', 5, WINDOW)).allowed, true, 'the refunded unit is usable again');

  // Two windows later nothing is left of it.
  clock.advance(2 * WINDOW);
  for (let i = 0; i < 5; i++) t.equal((await limiter.consume('k', 5, WINDOW)).allowed, true);
}

t.test('in-process sliding window on the injected clock', async (t) => {
  const clock = new ManualClock();
  await slidingWindow(t, new MemoryRateLimiter(clock), clock);
});

t.test('in-process counters are bounded', async (t) => {
  const clock = new ManualClock();
  const limiter = new MemoryRateLimiter(clock, 3);
  for (const key of ['a', 'b', 'c', 'd']) await limiter.consume(key, 1, WINDOW);
  t.equal((await limiter.consume('a', 1, WINDOW)).allowed, true, 'the oldest key was dropped');
  t.equal((await limiter.consume('d', 1, WINDOW)).allowed, false, 'recent keys are kept');
});

t.test('Redis sliding window: shared by every limiter on the same Redis', async (t) => {
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, `no Redis at ${TEST_REDIS_URL}`);
  const clock = new ManualClock();
  const log = { warn: () => {} };
  await slidingWindow(t, new RedisRateLimiter(redis.redis, redis.prefix, clock, log), clock);

  // Two nodes: the second sees the first one's attempts.
  const nodeA = new RedisRateLimiter(redis.redis, redis.prefix, clock, log);
  const nodeB = new RedisRateLimiter(redis.redis, redis.prefix, clock, log);
  for (let i = 0; i < 3; i++) t.equal((await nodeA.consume('shared', 3, WINDOW)).allowed, true);
  t.equal((await nodeB.consume('shared', 3, WINDOW)).allowed, false, 'the limit is per cluster, not per node');
  const keys = await redis.redis.keys(`${redis.prefix}*`);
  t.ok(keys.length > 0 && keys.every((key) => key.startsWith(redis.prefix)), 'every key under the prefix');
  t.ok((await redis.redis.pttl(keys[0]!)) > 0, 'keys expire by themselves');
});

t.test('Redis unreachable: each node limits on its own counters', async (t) => {
  const clock = new ManualClock();
  const redis = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  const warnings: string[] = [];
  const limiter = new RedisRateLimiter(redis, 'unused:', clock, { warn: (_object, message) => warnings.push(message) });
  for (let i = 0; i < 2; i++) t.equal((await limiter.consume('k', 2, WINDOW)).allowed, true);
  t.equal((await limiter.consume('k', 2, WINDOW)).allowed, false, 'still limited');
  t.equal(warnings.length, 1, 'one warning, not one per request');
  redis.disconnect();
});
