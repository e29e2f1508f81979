import t from 'tap';
import { ChangeGenerations } from '../../src/events/change-generations.ts';

t.test('watchers are told after the generations of their topics moved, and only then', async (t) => {
  const changes = new ChangeGenerations();
  const generation = changes.generationOf(['domain-config']);
  const seen: number[] = [];
  const stop = changes.watch(['domain-config', 'resource-added'], () => seen.push(generation()));
  changes.bump(['catalog']);
  t.same(seen, [], 'another topic: not told');
  changes.bump(['domain-config']);
  t.same(seen, [1], 'told, with the generation already moved');
  changes.bump(['resource-added']);
  t.same(seen, [1, 1]);
  changes.bumpAll();
  t.same(seen, [1, 1, 2], 'every topic (a missed message) tells every watcher');
  stop();
  changes.bump(['domain-config']);
  t.equal(seen.length, 3, 'stopped');
});
