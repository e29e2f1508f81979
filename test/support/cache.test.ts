import t from 'tap';
import { GenerationCache, LoadingCache } from '../../src/support/cache.js';

t.test('GenerationCache: a bounded LRU whose older generations are misses', async (t) => {
  let generation = 1;
  const cache = new GenerationCache<string, number>(4, () => generation);
  for (const [index, key] of ['a', 'b', 'c', 'd'].entries()) cache.set(key, index, generation);
  t.equal(cache.get('a'), 0);
  t.same(cache.stats, { hits: 1, misses: 0 });

  generation = 2;
  t.equal(cache.get('a'), undefined, 'an entry of an older generation is a miss');
  t.equal(cache.lastKnown('a'), 0, 'but stays the last known value');
  cache.set('stale', 9, 1);
  t.equal(cache.get('stale'), undefined, 'a value computed under an older generation is never current');
  t.equal(cache.lastKnown('stale'), 9, 'but is kept as the last known value (a validation that straddled a change is as good as one finished just before it)');
  cache.set('a', 5, 2);
  cache.set('a', 4, 1);
  t.equal(cache.get('a'), 5, 'and never replaces a value of a newer generation');
  t.same(cache.stats, { hits: 2, misses: 2 });
  t.equal(cache.get('missing'), undefined);
  t.equal(cache.stats.misses, 3);
});

t.test('GenerationCache: the least recently used entry is evicted, hits in the older half are refreshed', async (t) => {
  const cache = new GenerationCache<string, string>(4, () => 0);
  for (const key of ['a', 'b', 'c', 'd']) cache.set(key, key, 0);
  // 'a' was inserted four insertions ago, more than capacity / 2: the hit moves it to the end.
  t.equal(cache.get('a'), 'a');
  cache.set('e', 'e', 0);
  t.equal(cache.size, 4);
  t.equal(cache.lastKnown('b'), undefined, "'b' is now the least recently used and goes first");
  t.equal(cache.lastKnown('a'), 'a', "'a' was kept by its hit");

  // 'e' was inserted last: a hit leaves it where it is (it is nowhere near eviction).
  t.equal(cache.get('e'), 'e');
  cache.set('f', 'f', 0);
  t.equal(cache.lastKnown('c'), undefined, 'the oldest untouched entry is evicted');
  t.same(
    ['a', 'd', 'e', 'f'].map((key) => cache.lastKnown(key)),
    ['a', 'd', 'e', 'f'],
    'everything else is still there',
  );
});

t.test('GenerationCache: a key hit constantly survives any amount of churn', async (t) => {
  const cache = new GenerationCache<number, number>(100, () => 0);
  cache.set(-1, -1, 0);
  let lost = 0;
  for (let index = 0; index < 10_000; index++) {
    if (cache.get(-1) !== -1) lost++;
    cache.set(index, index, 0);
  }
  t.equal(lost, 0, 'the hot key was never evicted');
  t.equal(cache.size, 100);
  t.equal(cache.lastKnown(0), undefined, 'churned keys are evicted');
  t.equal(cache.lastKnown(9_999), 9_999);
});

t.test('LoadingCache: concurrent misses share one load; a load that straddles a change is not kept', async (t) => {
  const epoch = { generation: 1, cachesTrusted: true };
  const cache = new LoadingCache<string, number>(10, epoch);
  let loads = 0;
  const load = async () => ++loads;
  const [first, second] = await Promise.all([cache.get('k', load), cache.get('k', load)]);
  t.equal(first, 1);
  t.equal(second, 1);
  t.equal(loads, 1, 'one load for two concurrent misses');
  t.equal(await cache.get('k', load), 1, 'then a hit');

  let release!: (value: number) => void;
  const pending = cache.get('slow', () => new Promise<number>((resolve) => (release = resolve)));
  epoch.generation = 2;
  release(7);
  t.equal(await pending, 7, 'the caller still gets its value');
  t.equal(await cache.get('slow', load), 2, 'but it was not kept: the next call loads');
  t.equal(await cache.get('k', load), 3, 'and the generation change emptied the rest');

  epoch.cachesTrusted = false;
  t.equal(await cache.get('k', load), 4);
  t.equal(await cache.get('k', load), 5, 'nothing is cached while caches are not trusted');
});

t.test('GenerationCache: eviction keeps taking the oldest entry through deletes, refreshes and an emptied map', async (t) => {
  const cache = new GenerationCache<number, number>(3, () => 0);
  for (let key = 0; key < 3; key++) cache.set(key, key, 0);
  cache.set(3, 3, 0);
  t.same([0, 1, 2, 3].map((key) => cache.lastKnown(key)), [undefined, 1, 2, 3], 'first in, first out');
  cache.delete(1);
  cache.set(1, 10, 0); // re-added: now the newest
  cache.set(4, 4, 0);
  t.same([1, 2, 3, 4].map((key) => cache.lastKnown(key)), [10, undefined, 3, 4], 'a re-added key is newest; the oldest went');
  for (const key of [1, 3, 4]) cache.delete(key);
  t.equal(cache.size, 0);
  for (let key = 5; key < 10; key++) cache.set(key, key, 0);
  t.same([5, 6, 7, 8, 9].map((key) => cache.lastKnown(key)), [undefined, undefined, 7, 8, 9], 'after emptying, eviction still takes the oldest');
});
