import t from 'tap';
import { splitSegments } from '../../src/support/segments.ts';

t.test("splitSegments(path, from) is path.slice(from).split('/')", async (t) => {
  const paths = ['', '/', '//', 'a', '/a', '/a/', '/a/b/c', '/v1/p-1/things', 'a//b', '/a/b//', '///x///', '/é/ü', '/a?b/c'];
  for (const path of paths) {
    for (const from of [0, 1]) {
      if (from > path.length) continue;
      t.same(splitSegments(path, from), path.slice(from).split('/'), `${JSON.stringify(path)} from ${from}`);
    }
  }
  t.same(splitSegments('/a/b'), ['', 'a', 'b'], 'from the start by default');
});
