/**
 * What a process asks of the kernel per request: system calls by name, the wake-ups it causes,
 * its context switches and page faults, counted by `perf stat` on its pids while a wrk run loads
 * it (BENCH_PERF_EVENTS=1 in the ingress bench). CPU time alone says how much kernel time a proxy
 * costs; these say what for, and tell a proxy that asks for more from one whose every call costs
 * more (issue 21 item 3: the gateway's kernel time is 2–3× nginx's per request).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startControlledPerf } from './perf-control.ts';
import { processTree, tempDirectory } from './processes.ts';

/** The system calls counted one by one (a proxy's loop: readiness, reads, writes, timers, memory). */
const SYSCALLS = ['epoll_wait', 'epoll_pwait', 'epoll_ctl', 'read', 'readv', 'recvfrom', 'write', 'writev', 'sendto', 'sendmsg', 'accept4', 'close', 'futex', 'madvise', 'mprotect', 'mmap', 'munmap', 'getpid'];

/** The events counted: all system calls, those above, wake-ups this process causes, and the rest. */
export const KERNEL_EVENTS = ['raw_syscalls:sys_enter', ...SYSCALLS.map((name) => `syscalls:sys_enter_${name}`), 'sched:sched_wakeup', 'context-switches', 'cpu-migrations', 'page-faults'];

/** Short names for the table: `syscalls`, `write`, `wakeups`… */
export function shortEventName(event: string): string {
  if (event === 'raw_syscalls:sys_enter') return 'syscalls';
  if (event === 'sched:sched_wakeup') return 'wakeups';
  return event.replace(/^syscalls:sys_enter_/, '');
}

/**
 * `perf stat -x,` output: one line per event, `<count>,<unit>,<event>,…`. `<not counted>` is an
 * event whose tasks never ran while counting (0); events perf cannot count here (`<not
 * supported>`) are left out; comment lines are skipped.
 */
export function parsePerfStat(output: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of output.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [count, , event] = line.split(',');
    if (!event || count === undefined) continue;
    if (count === '<not counted>') counts[event] ??= 0;
    else if (/^\d+(\.\d+)?$/.test(count)) counts[event] = (counts[event] ?? 0) + Number(count);
  }
  return counts;
}

/** Whether perf can count these tracepoints here (perf installed, tracefs readable). */
export function perfEventsAvailable(): string | undefined {
  const probe = spawnSync('perf', ['stat', '-x,', '-e', 'raw_syscalls:sys_enter,sched:sched_wakeup', '--', 'true'], { encoding: 'utf8' });
  if (probe.error) return 'perf is missing (Debian: linux-perf)';
  if (probe.status !== 0 || !/raw_syscalls:sys_enter/.test(probe.stderr) || /not supported|<not counted>/.test(probe.stderr)) return `perf cannot count tracepoints here: ${probe.stderr.trim().slice(0, 300)}`;
  return undefined;
}

/**
 * Counts on `pids` and their descendants (nginx's workers are its master's children; each
 * process's threads as they are now) from when it resolves (perf-control.ts). `stop()` ends the
 * count and gives it. Start it just before the load and stop it just after, as the CPU reading is.
 */
export async function countKernelEvents(pids: readonly number[], events: readonly string[] = KERNEL_EVENTS): Promise<{ stop(): Promise<Record<string, number>> }> {
  const directory = tempDirectory('kg-bench-perf-');
  const file = path.join(directory, 'stat.csv');
  const perf = await startControlledPerf('stat', ['-x,', '-o', file, '-e', events.join(','), '-p', processTree(pids).join(',')], directory);
  return {
    async stop() {
      // perf stat prints its counts when interrupted.
      const { code, errors } = await perf.stop();
      let output = '';
      try {
        output = readFileSync(file, 'utf8');
      } catch {
        throw new Error(`perf stat wrote no counts (exit ${code}): ${errors}`);
      }
      rmSync(directory, { recursive: true, force: true });
      const counts = parsePerfStat(output);
      if (counts['raw_syscalls:sys_enter'] === undefined) throw new Error(`perf stat counted no system calls (exit ${code}): ${errors}${output.slice(0, 500)}`);
      return counts;
    },
  };
}

/**
 * The host's TCP counters (/proc/net/snmp and /proc/net/netstat) that tell how segments went:
 * segments each way, pure ACKs, delayed ACKs, and the recoveries (retransmits, loss probes,
 * timeouts, zero-window probes) that stall a connection for tens of milliseconds even on loopback.
 * System-wide, so read around a run in which only its target, its upstream and the load generator
 * talk.
 */
const TCP_COUNTERS = ['Tcp:InSegs', 'Tcp:OutSegs', 'Tcp:RetransSegs', 'TcpExt:TCPPureAcks', 'TcpExt:DelayedACKs', 'TcpExt:TCPLossProbes', 'TcpExt:TCPTimeouts', 'TcpExt:TCPWinProbe', 'TcpExt:TCPBacklogCoalesce', 'TcpExt:TCPAutoCorking'];

export function tcpCounters(): Record<string, number> {
  const counters: Record<string, number> = {};
  for (const file of ['/proc/net/snmp', '/proc/net/netstat']) {
    let lines: string[];
    try {
      lines = readFileSync(file, 'utf8').split('\n');
    } catch {
      continue;
    }
    // Pairs of lines: `Prefix: name name …` then `Prefix: value value …`.
    for (let index = 0; index + 1 < lines.length; index += 2) {
      const names = lines[index]!.split(' ');
      const values = lines[index + 1]!.split(' ');
      const prefix = names[0]!;
      for (let column = 1; column < names.length; column++) {
        const name = `${prefix}${names[column]}`;
        if (TCP_COUNTERS.includes(name)) counters[name] = Number(values[column]);
      }
    }
  }
  return counters;
}

/** What grew between two readings of tcpCounters(), by short name (`tcp:OutSegs`, `tcp:DelayedACKs`…). */
export function tcpGrowth(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const growth: Record<string, number> = {};
  for (const name of TCP_COUNTERS) {
    if (before[name] === undefined || after[name] === undefined) continue;
    growth[`tcp:${name.slice(name.indexOf(':') + 1)}`] = after[name]! - before[name]!;
  }
  return growth;
}
