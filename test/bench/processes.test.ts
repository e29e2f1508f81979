import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { cpuMs, cpuTimes, gcEventOf, minorFaults, kernelThreadCounters, kernelThreadGrowth, schedulerCounters, schedulerGrowth, stealGrowth, stealMs, summariseGc, threadCounters } from '../../bench/processes.ts';

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

t.test('the kernel threads that ran between two readings, busiest first', async (t) => {
  const before = new Map([
    [79, { name: 'kdamond.0', runMs: 100, waitMs: 4, wakeups: 10 }],
    [14, { name: 'ksoftirqd/0', runMs: 50, waitMs: 20, wakeups: 400 }],
    [15, { name: 'rcu_preempt', runMs: 7, waitMs: 1, wakeups: 90 }],
    [16, { name: 'kworker/0:1-events', runMs: 3, waitMs: 0, wakeups: 30 }],
  ]);
  const after = new Map([
    [79, { name: 'kdamond.0', runMs: 312.46, waitMs: 10, wakeups: 30 }],
    [14, { name: 'ksoftirqd/0', runMs: 52, waitMs: 240.04, wakeups: 700 }],
    [15, { name: 'rcu_preempt', runMs: 7.5, waitMs: 1.2, wakeups: 95 }],
    [16, { name: 'kworker/0:1-mm_percpu_wq', runMs: 5, waitMs: 0, wakeups: 31 }],
    [900, { name: 'kworker/u8:3', runMs: 40, waitMs: 0, wakeups: 4 }],
  ]);
  t.same(kernelThreadGrowth(before, after), [
    { name: 'ksoftirqd/0', runMs: 2, waitMs: 220, wakeups: 300 },
    { name: 'kdamond.0', runMs: 212.5, waitMs: 6, wakeups: 20 },
    { name: 'kworker/0:1-mm_percpu_wq', runMs: 2, waitMs: 0, wakeups: 1 },
  ], 'by time run and waited; under a millisecond left out; a thread that started meanwhile has no growth; its latest name');
  t.same(kernelThreadGrowth(before, after, 1), [{ name: 'ksoftirqd/0', runMs: 2, waitMs: 220, wakeups: 300 }], 'at most `top`');
});

t.test("each CPU's steal time is read from /proc/stat in ms", async (t) => {
  const procStat = [
    'cpu  114803 0 109670 174015 548 0 69818 405 0 0',
    'cpu0 57346 0 54821 86944 352 0 34817 191 0 0',
    'cpu1 57456 0 54849 87070 195 0 35001 214 0 0',
    'intr 123 0 0',
    'ctxt 999',
  ].join('\n');
  t.same(stealMs(procStat), [1910, 2140], 'the eighth field of each cpuN line, ticks of 10 ms; the all-CPU line left out');
  t.same(stealMs(''), [], 'nothing readable: nothing');
  t.same(stealGrowth([1910, 2140], [1930, 2140]), [20, 0], 'growth per CPU');
  t.equal(stealGrowth([], [10, 20]), undefined, 'a reading missing: no growth');
  t.equal(stealGrowth([10], [10, 20]), undefined, 'CPUs that do not match: no growth');
  const here = stealMs();
  t.equal(here.length, readFileSync('/proc/stat', 'utf8').split('\n').filter((line) => /^cpu\d/.test(line)).length, 'one figure per CPU of this machine');
  t.ok(here.every((ms) => Number.isInteger(ms) && ms >= 0), 'whole ms, none negative');
});

t.test('the kernel threads are read, and no process of ours', async (t) => {
  const threads = kernelThreadCounters();
  t.ok(threads.size > 0, `kernel threads found (${threads.size})`);
  t.notOk(threads.has(process.pid), 'not this process');
  t.ok([...threads.values()].some((thread) => /^(ksoftirqd|kworker|rcu_|migration)/.test(thread.name)), 'a kernel thread every Linux has');
  t.ok([...threads.values()].every((thread) => Number.isFinite(thread.runMs) && thread.runMs >= 0 && Number.isInteger(thread.wakeups)), 'counters are numbers');
});

/**
 * A node process that spawns `children` grandchildren, each spinning on its main thread until it
 * has used `busyMs` of CPU, all pinned to the first CPU at the lowest priority (they contend with
 * each other, and any other test's process takes the CPU from them). Resolves with its
 * pid once every grandchild is spinning, and a way to stop the tree.
 */
async function spinningTree(children: number, busyMs: number): Promise<{ pid: number; stop(): Promise<unknown> }> {
  const spinner = `const s=process.cpuUsage();process.stdout.write('go\\n');while((process.cpuUsage(s).user+process.cpuUsage(s).system)/1000<${busyMs});setTimeout(()=>{},1000)`;
  const parent = `
    const { spawn } = require('node:child_process');
    let started = 0;
    const kids = Array.from({ length: ${children} }, () => spawn('nice', ['-n', '19', 'taskset', '-c', '0', process.execPath, '-e', ${JSON.stringify(spinner)}], { stdio: ['ignore', 'pipe', 'inherit'] }));
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
  // again and again. The readings are of the parent's pid; only its descendants spin. Read until
  // they have run 100 ms between them (150 ms each at most), not for a fixed time: on a loaded
  // machine they get less of the CPU, and they must not hold it long, beside other tests.
  const tree = await spinningTree(2, 150);
  const before = schedulerCounters([tree.pid]);
  const cpuBefore = cpuMs([tree.pid]);
  let grown = schedulerGrowth(before, before);
  for (const deadline = Date.now() + 60_000; grown.main.runMs < 100 && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    grown = schedulerGrowth(before, schedulerCounters([tree.pid]));
  }
  const cpu = cpuMs([tree.pid]) - cpuBefore;
  await tree.stop();

  t.ok(grown.main.runMs >= 100, `the spinners' main threads ran (${grown.main.runMs} ms)`);
  t.ok(grown.main.waitMs >= 50, `and waited for the CPU they share (${grown.main.waitMs} ms)`);
  t.ok(grown.main.preempted > 0, `preempted (${grown.main.preempted} times)`);
  t.ok(cpu >= 50, `their CPU counts as the tree's (${cpu} ms, in 10 ms ticks)`);
  t.ok(grown.others.runMs < grown.main.runMs, 'V8’s and libuv’s threads apart from the main ones');
});

t.test('CPU split into user and kernel time', async (t) => {
  // A child that reads /dev/zero in 1 MB blocks (kernel time: the kernel fills the buffer) until it
  // has 60 ms of system time, then spins in user space for 60 ms more, and waits to be read.
  const script = `const fs=require('node:fs');const fd=fs.openSync('/dev/zero','r');const b=Buffer.alloc(1<<20);
    const s=process.cpuUsage();while(process.cpuUsage(s).system<60000)fs.readSync(fd,b,0,b.length,0);
    const u=process.cpuUsage();while(process.cpuUsage(u).user<60000);process.stdout.write('done\\n');setTimeout(()=>{},10000)`;
  const child = spawn('nice', ['-n', '19', process.execPath, '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill());
  const ready = await Promise.race([once(child.stdout, 'data').then(() => true), once(child, 'exit').then(() => false)]);
  t.ok(ready, 'the child burned both kinds of time');
  const { userMs, systemMs } = cpuTimes([child.pid!]);
  t.ok(systemMs >= 40, `kernel time counted (${systemMs} ms, in ticks)`);
  t.ok(userMs >= 40, `user time counted (${userMs} ms)`);
  // A second reading may be a tick later; the sum is cpuMs within that.
  const total = cpuMs([child.pid!]);
  t.ok(total >= userMs + systemMs && total <= userMs + systemMs + 50, `cpuMs is their sum (${total} against ${userMs + systemMs})`);
});

t.test('minor page faults: a child touching 64 MB of new memory has at least one per page', async (t) => {
  // fill() writes every 4 KB page (Buffer.alloc's zeroed pages are only mapped, not touched).
  const script = `const b=Buffer.allocUnsafe(64<<20).fill(1);process.stdout.write('done\\n');setTimeout(()=>b.length,10000)`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill());
  await once(child.stdout, 'data');
  const faults = minorFaults([child.pid!]);
  t.ok(faults >= (64 << 20) / 4096, `${faults} faults counted for 16,384 pages`);
  t.equal(minorFaults([2 ** 22 + 12345]), 0, 'a process that is gone counts none');
});

t.test('a process that is gone reads as nothing', async (t) => {
  t.same(schedulerCounters([2 ** 22 + 12345]), { main: { runMs: 0, waitMs: 0, preempted: 0 }, others: { runMs: 0, waitMs: 0, preempted: 0 } });
  t.equal(cpuMs([]), 0);
  t.same(cpuTimes([2 ** 22 + 12345]), { userMs: 0, systemMs: 0 });
});

// With BENCH_GC=1 the service runs with --trace-gc-nvp; lines as Node 26's V8 prints them (trimmed).
const SCAVENGE = '[14269:0x4119b000:0]       60 ms: GC: {"pause":0.675,"mutator":46.634,"gc":"s","reduce_memory":false,"reason":"allocation failure","collector_reason":"","promoted":1200}';
const REDUCER =
  '[14269:0x4119b000:0]      371 ms: GC: {"pause":14.447,"mutator":1.768,"gc":"mc","reduce_memory":true,"reason":"memory reducer","collector_reason":"GC in old space requested","promoted":0}';

t.test('a collection read off --trace-gc-nvp, with why V8 started it', async (t) => {
  t.same(gcEventOf(SCAVENGE, 5), { at: 5, kind: 's', pauseMs: 0.675, promoted: 1200, reason: 'allocation failure', reduceMemory: false });
  t.same(gcEventOf(REDUCER, 6), { at: 6, kind: 'mc', pauseMs: 14.447, promoted: 0, reason: 'memory reducer; GC in old space requested', reduceMemory: true });
  t.equal(gcEventOf('[service] listening on 127.0.0.1:5000'), undefined, 'another line');
  t.equal(gcEventOf('[1:0x1]  5 ms: GC: {"pause":'), undefined, 'a line cut short');
});

t.test('a run’s collections summed, each mark-compact with its cause', async (t) => {
  const events = [gcEventOf(SCAVENGE)!, gcEventOf(SCAVENGE)!, gcEventOf(REDUCER)!];
  t.same(summariseGc(events, 3000), {
    scavenges: 2,
    markCompacts: 1,
    pauseMs: 15.8,
    maxPauseMs: 14.447,
    requestsPerScavenge: 1500,
    promotedBytesPerRequest: 1,
    markCompactCauses: [{ pauseMs: 14.447, reason: 'memory reducer; GC in old space requested', reduceMemory: true }],
  });
  t.equal(summariseGc([], 3000), undefined, 'none seen: nothing to say');
});
