import t from 'tap';
import { RestartBackoff, workerHeapFlags } from '../src/cluster.ts';
import { loadConfig } from '../src/config.ts';

t.test('a crashed worker is replaced at once; repeated crashes wait longer, up to a cap', async (t) => {
  const backoff = new RestartBackoff(60_000, 1000, 30_000);
  let now = 1_000_000;
  t.equal(backoff.next(now), 0, 'an occasional crash: no wait');
  const delays = [];
  for (let index = 0; index < 7; index++) delays.push(backoff.next((now += 100)));
  t.same(delays, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
  t.equal(backoff.next((now += 61_000)), 0, 'a minute without crashes: no wait again');
  t.equal(backoff.next((now += 100)), 1000);
});

t.test('workers get the configured heap limits; none by default', async (t) => {
  const heap = (environment: Record<string, string>) => loadConfig(environment).workerHeap;
  t.same(workerHeapFlags(heap({})), [], 'node decides');
  t.same(workerHeapFlags(heap({ WORKER_MAX_OLD_SPACE_MB: '200', WORKER_MAX_SEMI_SPACE_MB: '1' })), ['--max-old-space-size=200', '--max-semi-space-size=1']);
  t.same(workerHeapFlags(heap({ WORKER_MAX_SEMI_SPACE_MB: '4' })), ['--max-semi-space-size=4']);
});
