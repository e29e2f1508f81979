import { spawn } from 'node:child_process';
import { once } from 'node:events';
import t from 'tap';
import { countKernelEvents, parsePerfStat, perfEventsAvailable, shortEventName } from '../../bench/kernel-events.ts';
import { cleanup } from '../../bench/processes.ts';
import { ensureDebianPackages } from '../helpers/debian-packages.ts';

// BENCH_PERF_EVENTS=1 counts what each proxy of the ingress bench asks of the kernel per request.

t.test('perf stat’s CSV: counts by event; an event of tasks that never ran is 0, one perf cannot count is left out', async (t) => {
  const output = [
    '# started on Tue Dec  1 00:58:54 2026',
    '',
    '5128,,raw_syscalls:sys_enter,31605996,100.00,,',
    '5001,,syscalls:sys_enter_write,31605996,100.00,,',
    '<not counted>,,syscalls:sys_enter_madvise,0,100.00,,',
    '<not supported>,,cpu-migrations,0,100.00,,',
    '12.5,msec,task-clock,12500000,100.00,0.5,CPUs utilized',
    'Events disabled',
    'Events enabled',
  ].join('\n');
  t.same(parsePerfStat(output), { 'raw_syscalls:sys_enter': 5128, 'syscalls:sys_enter_write': 5001, 'syscalls:sys_enter_madvise': 0, 'task-clock': 12.5 });
  t.same(['raw_syscalls:sys_enter', 'sched:sched_wakeup', 'syscalls:sys_enter_writev', 'page-faults'].map(shortEventName), ['syscalls', 'wakeups', 'writev', 'page-faults']);
});

t.test('a process’s system calls, counted from when counting starts to when it stops', async (t) => {
  ensureDebianPackages(['linux-perf']);
  t.equal(perfEventsAvailable(), undefined, 'perf counts tracepoints here');
  t.teardown(cleanup);
  // A process that makes 3,000 empty writes each time it is told to, then says so: the child of a
  // shell, whose pid is the one counted (as nginx's workers are its master's children).
  const script = "const fs=require('fs');process.stdin.on('data',()=>{for(let i=0;i<3000;i++)fs.writeSync(1,'');process.stdout.write('done\\n')})";
  const child = spawn('sh', ['-c', `"$0" -e "$1"; :`, process.execPath, script], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => void child.kill());
  await once(child, 'spawn');
  // Told once before counting starts: those writes must not be counted.
  child.stdin.write('go\n');
  await once(child.stdout, 'data');
  const counting = await countKernelEvents([child.pid!]);
  child.stdin.write('go\n');
  await once(child.stdout, 'data');
  const counts = await counting.stop();
  const writes = counts['syscalls:sys_enter_write']!;
  t.ok(writes >= 3001 && writes < 3100, `the writes of one round and its answer: ${writes}`);
  t.ok(counts['raw_syscalls:sys_enter']! >= writes, `all system calls, writes among them: ${counts['raw_syscalls:sys_enter']}`);
  t.ok(counts['page-faults'] !== undefined && counts['context-switches'] !== undefined, 'faults and switches counted');
});
