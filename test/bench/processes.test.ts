import { spawn } from 'node:child_process';
import { once } from 'node:events';
import t from 'tap';
import { cpuMs, schedulerCounters, schedulerGrowth, threadCounters } from '../../bench/processes.ts';

// The ingress bench charges CPU to a process tree and reads the scheduler's counters around its
// paced runs, to say whether a tail is the event loop waiting for a CPU. Real processes here.

t.test('a thread’s counters as /proc writes them', async (t) => {
  const status = 'Name:\tnode\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t37\n';
  t.same(threadCounters('2500000000 125000000 900\n', status), { runMs: 2500, waitMs: 125, preempted: 37 });
  t.same(threadCounters('0 0 0\n', 'Name:\tx\n'), { runMs: 0, waitMs: 0, preempted: 0 }, 'no switch line: none counted');
});

t.test('growth between two readings', async (t) => {
  const before = { main: { runMs: 10, waitMs: 1, preempted: 2 }, others: { runMs: 5, waitMs: 0.5, preempted: 0 } };
  const after = { main: { runMs: 110.04, waitMs: 31.06, preempted: 12 }, others: { runMs: 5, waitMs: 0.5, preempted: 3 } };
  t.same(schedulerGrowth(before, after), { main: { runMs: 100, waitMs: 30.1, preempted: 10 }, others: { runMs: 0, waitMs: 0, preempted: 3 } });
});

/**
 * A node process that spawns `children` grandchildren, each spinning on its main thread until it
 * has used `cpuMs` of CPU, all pinned to the first CPU; it exits when they have. Resolves with its
 * pid once every grandchild is spinning, and a way to stop the tree.
 */
async function spinningTree(children: number, busyMs: number): Promise<{ pid: number; stop(): Promise<unknown> }> {
  const spinner = `const s=process.cpuUsage();process.stdout.write('go\\n');while((process.cpuUsage(s).user+process.cpuUsage(s).system)/1000<${busyMs});setTimeout(()=>{},1000)`;
  const parent = `
    const { spawn } = require('node:child_process');
    let started = 0;
    const kids = Array.from({ length: ${children} }, () => spawn('taskset', ['-c', '0', process.execPath, '-e', ${JSON.stringify(spinner)}], { stdio: ['ignore', 'pipe', 'inherit'] }));
    for (const kid of kids) kid.stdout.once('data', () => { if (++started === kids.length) process.stdout.write('spinning\\n'); });
    process.stdin.once('data', () => { for (const kid of kids) kid.kill(); process.exit(0); });
  `;
  const child = spawn(process.execPath, ['-e', parent], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  await once(child.stdout, 'data');
  return { pid: child.pid!, stop: () => (child.stdin.write('x\n'), exited) };
}

t.test('a tree’s CPU and run-queue waits, its descendants included', async (t) => {
  // Two spinners on one CPU: each runs about half the time and waits the other half, preempted
  // again and again. The readings are of the parent's pid; only its descendants spin.
  const tree = await spinningTree(2, 400);
  const before = schedulerCounters([tree.pid]);
  const cpuBefore = cpuMs([tree.pid]);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const grown = schedulerGrowth(before, schedulerCounters([tree.pid]));
  const cpu = cpuMs([tree.pid]) - cpuBefore;
  await tree.stop();

  t.ok(grown.main.runMs > 200, `the spinners' main threads ran (${grown.main.runMs} ms)`);
  t.ok(grown.main.waitMs > 100, `and waited for the CPU they share (${grown.main.waitMs} ms)`);
  t.ok(grown.main.preempted > 0, `preempted (${grown.main.preempted} times)`);
  t.ok(cpu > 200, `their CPU counts as the tree's (${cpu} ms)`);
  t.ok(grown.others.runMs < grown.main.runMs, 'V8’s and libuv’s threads apart from the main ones');
});

t.test('a process that is gone reads as nothing', async (t) => {
  t.same(schedulerCounters([2 ** 22 + 12345]), { main: { runMs: 0, waitMs: 0, preempted: 0 }, others: { runMs: 0, waitMs: 0, preempted: 0 } });
  t.equal(cpuMs([]), 0);
});
