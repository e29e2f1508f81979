import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import t from 'tap';
import { startTestApp } from './helpers/app.ts';
import { waitFor } from './helpers/processes.ts';
import { TEST_REDIS_URL } from './helpers/redis.ts';

/** Open sockets and timers of this process, by kind. */
function activeResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

async function redisAnswers(): Promise<boolean> {
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 1000, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

t.test('a build that fails half-way stops what it had started (Redis connections, timers, watchers)', async (t) => {
  if (!(await redisAnswers())) return t.plan(0, 'no Redis at ' + TEST_REDIS_URL);
  const emptyPolicies = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-no-policies-'));
  t.teardown(() => fs.rmSync(emptyPolicies, { recursive: true, force: true }));
  const before = activeResources();

  // The event bus, the revocation poll, the token key reloads and the command connection to Redis
  // are all started before the gateway policy loads; a directory without model.conf fails that.
  await t.rejects(startTestApp(t, { REDIS_URL: TEST_REDIS_URL, POLICY_DIR: emptyPolicies }), /model\.conf|polic/i);

  await waitFor(
    async () => ['TCPSocketWrap', 'Timeout', 'FSEventWrap', 'StatWatcher'].every((kind) => (activeResources().get(kind) ?? 0) <= (before.get(kind) ?? 0)),
    'the half-built application to release its sockets and timers',
    10_000,
  );
  t.pass('nothing left running');
});
