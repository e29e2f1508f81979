import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CpuHolderTally, parseSchedLine, recordCpuHolders, schedRecordUnavailable, type SchedEvent } from '../../bench/cpu-holders.ts';
import { cleanup, tempDirectory } from '../../bench/processes.ts';
import { ensureDebianPackages } from '../helpers/debian-packages.ts';

// BENCH_PACED_SCHED=1 names what held the CPU while the target's main threads waited for one.

t.test('perf script’s scheduler lines: switches with both tasks, wake-ups with the woken task; anything else is skipped', async (t) => {
  t.same(parseSchedLine(' 7498/7498  [000]   757.565532:       sched:sched_switch: prev_comm=perf prev_pid=7498 prev_prio=120 prev_state=D ==> next_comm=migration/0 next_pid=18 next_prio=0'), {
    kind: 'switch',
    cpu: 0,
    timeMs: 757565.532,
    pid: 7498,
    tid: 7498,
    prevComm: 'perf',
    prevState: 'D',
    nextComm: 'migration/0',
    nextTid: 18,
  });
  // A task name with spaces (V8's helper threads are "node-V8Worker", but others have spaces).
  t.match(parseSchedLine('  310/312  [001]     1.000250:       sched:sched_switch: prev_comm=Web Content prev_pid=312 prev_prio=120 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120'), {
    pid: 310,
    tid: 312,
    prevComm: 'Web Content',
    prevState: 'R+',
    nextTid: 0,
  });
  t.same(parseSchedLine('    0/0     [000]   757.565709:       sched:sched_wakeup: comm=perf-exec pid=7500 prio=120 target_cpu=000'), { kind: 'wakeup', cpu: 0, timeMs: 757565.709, tid: 7500 });
  t.equal(parseSchedLine("'trace' not valid for hardware events. Ignoring."), undefined);
  t.equal(parseSchedLine('   18/18    [000]   757.565538: sched:sched_migrate_task: comm=perf pid=7498 prio=120 orig_cpu=0 dest_cpu=1'), undefined);
});

t.test('a watched thread’s waits, laid over what ran on its CPU and the other CPU’s idle time', async (t) => {
  // Target process 100 (main thread 100, V8 helper 101), upstream 200, generator "paced" 300, postgres 400.
  const roles = { target: new Set([100]), upstream: new Set([200]), generatorComm: 'paced' };
  const tally = new CpuHolderTally(new Set([100]), roles);
  const events: SchedEvent[] = [
    // CPU0: the generator runs from 0; CPU1: idle from 0.
    { kind: 'switch', cpu: 0, timeMs: 0, pid: 0, tid: 0, prevComm: 'swapper/0', prevState: 'R', nextComm: 'paced', nextTid: 300 },
    { kind: 'switch', cpu: 1, timeMs: 0, pid: 0, tid: 0, prevComm: 'swapper/1', prevState: 'R', nextComm: 'swapper/1', nextTid: 0 },
    // The gateway is woken onto CPU0 at 1 and waits behind the generator until 5 (CPU1 idle all along).
    { kind: 'wakeup', cpu: 0, timeMs: 1, tid: 100 },
    { kind: 'switch', cpu: 0, timeMs: 5, pid: 300, tid: 300, prevComm: 'paced', prevState: 'S', nextComm: 'node-MainThread', nextTid: 100 },
    // Woken again while it runs: not a wait.
    { kind: 'wakeup', cpu: 1, timeMs: 6, tid: 100 },
    // CPU1 runs nginx from 6, then postgres from 8, so it is not idle after 6.
    { kind: 'switch', cpu: 1, timeMs: 6, pid: 0, tid: 0, prevComm: 'swapper/1', prevState: 'R', nextComm: 'nginx', nextTid: 200 },
    // Preempted at 7 on CPU0 by a kworker, then by its own V8 helper, back at 10: a wait of 3.
    { kind: 'switch', cpu: 0, timeMs: 7, pid: 100, tid: 100, prevComm: 'node-MainThread', prevState: 'R+', nextComm: 'kworker/0:1', nextTid: 50 },
    { kind: 'switch', cpu: 1, timeMs: 8, pid: 200, tid: 200, prevComm: 'nginx', prevState: 'S', nextComm: 'postgres', nextTid: 400 },
    { kind: 'switch', cpu: 0, timeMs: 8, pid: 50, tid: 50, prevComm: 'kworker/0:1', prevState: 'I', nextComm: 'node-V8Worker', nextTid: 101 },
    { kind: 'switch', cpu: 0, timeMs: 10, pid: 100, tid: 101, prevComm: 'node-V8Worker', prevState: 'S', nextComm: 'node-MainThread', nextTid: 100 },
    // Sleeps at 12, later switched in without a wake-up seen: no wait.
    { kind: 'switch', cpu: 0, timeMs: 12, pid: 100, tid: 100, prevComm: 'node-MainThread', prevState: 'S', nextComm: 'swapper/0', nextTid: 0 },
    { kind: 'switch', cpu: 0, timeMs: 20, pid: 0, tid: 0, prevComm: 'swapper/0', prevState: 'R', nextComm: 'node-MainThread', nextTid: 100 },
    { kind: 'switch', cpu: 1, timeMs: 20, pid: 400, tid: 400, prevComm: 'postgres', prevState: 'S', nextComm: 'swapper/1', nextTid: 0 },
    // Sleeps at 21; woken at 22 onto CPU0, idle, which runs it only at 22.5 (a vCPU coming out of halt).
    { kind: 'switch', cpu: 0, timeMs: 21, pid: 100, tid: 100, prevComm: 'node-MainThread', prevState: 'S', nextComm: 'swapper/0', nextTid: 0 },
    { kind: 'wakeup', cpu: 1, timeMs: 22, tid: 100 },
    { kind: 'switch', cpu: 0, timeMs: 22.5, pid: 0, tid: 0, prevComm: 'swapper/0', prevState: 'R', nextComm: 'node-MainThread', nextTid: 100 },
  ];
  for (const event of events) tally.add(event);

  // CPU1's idle from 20 has not ended when the recording does: not counted.
  t.same(tally.holders([{ from: 0, to: 30 }]), {
    waitMs: 7.5,
    otherCpuIdleMs: 4,
    holders: [
      { who: 'generator', ms: 4 },
      { who: 'target thread (node-V8Worker)', ms: 2 },
      { who: 'kworker', ms: 1 },
      { who: 'idle', ms: 0.5 },
    ],
  });
  // Only the windows count: [0, 3) holds 2 ms of the first wait, [9, 10) 1 ms of the second.
  t.same(tally.holders([{ from: 0, to: 3 }, { from: 9, to: 10 }]), {
    waitMs: 3,
    otherCpuIdleMs: 2,
    holders: [
      { who: 'generator', ms: 2 },
      { who: 'target thread (node-V8Worker)', ms: 1 },
    ],
  });
  t.same(tally.holders([]), { waitMs: 0, otherCpuIdleMs: 0, holders: [] });
});

t.test('recorded by perf: a process sharing one CPU with a spinner waits, and the spinner is what held the CPU', async (t) => {
  ensureDebianPackages(['linux-perf']);
  t.equal(schedRecordUnavailable(), undefined, 'perf records scheduler tracepoints here');
  t.teardown(cleanup);
  // Two busy shells on CPU0; the watched one can only run when the other is preempted, and the
  // other is named by its task name ("sh"): it is neither target, upstream nor generator. At nice
  // -19 both, so that the suite's other processes on CPU0 (at nice 0, ~1/70 of the weight) do not
  // take the other spinner's place in the watched one's waits.
  const spin = () => spawn('nice', ['-n', '-19', 'taskset', '-c', '0', 'sh', '-c', 'while :; do :; done'], { stdio: 'ignore' });
  const [watched, other] = [spin(), spin()];
  t.teardown(() => void [watched, other].forEach((child) => child.kill('SIGKILL')));
  await Promise.all([once(watched, 'spawn'), once(other, 'spawn')]);
  const file = path.join(tempDirectory('kg-test-sched-'), 'sched.data');
  const recording = await recordCpuHolders(file);
  const from = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 400));
  const to = Date.now();
  // Not through the tally, which reads the whole machine's recording for seconds.
  for (const child of [watched, other]) child.kill('SIGKILL');
  const report = await recording.stop(new Set([watched.pid!]), { target: new Set([watched.pid!]), upstream: new Set(), generatorComm: 'paced' }, { all: [{ from, to }], queueBuilding: [] });
  // Half of 400 ms each, give or take the scheduler and the machine's other work.
  t.ok(report.all.waitMs > 100 && report.all.waitMs <= to - from, `the watched spinner waited ${report.all.waitMs} ms of ${to - from}`);
  t.equal(report.all.holders[0]?.who, 'sh', `the other spinner held the CPU most: ${JSON.stringify(report.all.holders)}`);
  t.ok(report.all.holders[0]!.ms > report.all.waitMs / 3, 'for a good part of the wait (the rest: whatever else the machine runs on CPU0)');
  t.same(report.queueBuilding, { waitMs: 0, otherCpuIdleMs: 0, holders: [] });
  t.ok(statSync(file).size > 0, 'the recording is kept');
});
