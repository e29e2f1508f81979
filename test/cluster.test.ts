import t from 'tap';
import { RestartBackoff } from '../src/cluster.ts';

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
