import { readFileSync } from 'node:fs';
import t from 'tap';
import { heapSpaces, mappingComposition, proportionalMb } from '../../bench/memory-composition.ts';
import { ServiceMetrics } from '../../src/metrics/service-metrics.ts';

// npm run bench:memory says what a worker's resident memory is made of; these read real inputs.

t.test('mappings are grouped by what backs them', async (t) => {
  const smaps = [
    '00400000-00600000 r-xp 00000000 fe:01 123 /opt/node/bin/node',
    'Rss:                2048 kB',
    'Pss:                2048 kB',
    '00600000-00700000 rw-p 00000000 00:00 0 ',
    'Rss:                1024 kB',
    '00700000-00800000 rw-p 00000000 00:00 0                                  [heap]',
    'Rss:                 512 kB',
    '00800000-00900000 rw-p 00000000 00:00 0',
    'Rss:                1024 kB',
    '00900000-00a00000 r--p 00000000 fe:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6',
    'Rss:                 100 kB',
    '00a00000-00b00000 rw-p 00000000 00:00 0                                  [anon:v8 young]',
    'Rss:                 300 kB',
    '7ffd0000-7ffe0000 rw-p 00000000 00:00 0                                  [stack]',
    'Rss:                 200 kB',
    '7ffe0000-7ffe1000 r-xp 00000000 00:00 0                                  [vdso]',
    'Rss:                   4 kB',
  ].join('\n');
  t.same(mappingComposition(smaps, '/opt/node/bin/node'), {
    'node binary': 2,
    anonymous: 2,
    'malloc heap': 0.5,
    'other files': 0.1,
    '[anon:v8 young]': 0.3,
    stacks: 0.2,
    kernel: 0,
  });
});

t.test("this process's own mappings add up to its resident size", async (t) => {
  const composition = mappingComposition(readFileSync('/proc/self/smaps', 'utf8'), process.execPath);
  const rssMb = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
  const sum = Object.values(composition).reduce((total, value) => total + value, 0);
  t.ok(Math.abs(sum - rssMb) < rssMb * 0.1, `mappings ${sum.toFixed(1)} MB, VmRSS ${rssMb.toFixed(1)} MB`);
  t.ok(composition['node binary']! > 1, 'node binary pages are told apart');
  t.ok(composition.anonymous! > 1, 'anonymous memory (the V8 heap) is counted');
});

t.test("V8's spaces come from the service's own /metrics rendering, workers summed", async (t) => {
  const metrics = new ServiceMetrics({ worker: '1', eventLoopDelay: false });
  t.teardown(() => metrics.close());
  // One rendering, and the same as a second worker's: the live heap moves between two renderings.
  // Each figure is rounded to 0.1 MB, so a sum may differ from twice a part by that much.
  const text = metrics.render();
  const single = heapSpaces(text);
  for (const space of ['new', 'old', 'code', '(external)']) t.ok(single[space]! > 0, `${space}: ${single[space]} MB`);
  const both = heapSpaces(text + text.replaceAll('worker="1"', 'worker="2"'));
  t.ok(Math.abs(both.old! - 2 * single.old!) <= 0.15, `two workers' old space ${both.old} MB is twice one's ${single.old} MB`);
  t.ok(Math.abs(both.new! - 2 * single.new!) <= 0.15, `and their young generations ${both.new} MB`);
  t.ok(Math.abs(both['(external)']! - 2 * single['(external)']!) <= 0.15, `and their external memory ${both['(external)']} MB`);
  t.same(heapSpaces(text + text.replaceAll('worker="1"', 'worker="2"'), 2), single, "divided by two, two such workers' mean is one's figures");
});

t.test('PSS sums the proportional sizes; on a real process it is at most its RSS', async (t) => {
  const smaps = ['00400000-00600000 r-xp 00000000 fe:01 123 /opt/node/bin/node', 'Rss:   2048 kB', 'Pss:   1024 kB', '00600000-00700000 rw-p 00000000 00:00 0', 'Rss:   1024 kB', 'Pss:   1024 kB'].join('\n');
  t.equal(proportionalMb(smaps), 2, 'the binary shared by two processes counts half');
  const own = readFileSync('/proc/self/smaps', 'utf8');
  const rss = Object.values(mappingComposition(own, process.execPath)).reduce((sum, mb) => sum + mb, 0);
  const pss = proportionalMb(own);
  t.ok(pss > 0 && pss <= rss + 0.5, `PSS ${pss} MB, RSS ${rss.toFixed(1)} MB`);
});
