/**
 * Who held the CPU while the target's main threads waited for one (BENCH_PACED_SCHED=1 with
 * BENCH_PACED_TIMELINE). The generator's placement samples (paced.c) tell whether a main thread
 * waited behind the generator or beside the upstream; they cannot name anything else. Here
 * `perf record` takes every scheduler switch and wake-up on every CPU over the paced run, and each
 * wait of a watched thread (woken or preempted, until it runs) is laid over what ran on the CPU it
 * then ran on, and over the other CPUs' idle time: a thread that waited while a CPU sat idle is one
 * the kernel left where it was.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { startControlledPerf } from './perf-control.ts';
import { onCleanup, tempDirectory } from './processes.ts';

/** The scheduler tracepoints recorded. */
// sched_waking is traced on the waker's CPU when the wake-up starts; sched_wakeup only once the
// woken task is queued (on an idle target CPU, after that CPU has come out of idle).
const EVENTS = ['sched:sched_switch', 'sched:sched_waking', 'sched:sched_wakeup', 'sched:sched_wakeup_new'];

export interface CpuHolder {
  /** `generator`, `target main thread`, `target thread (V8 Worker)`, `upstream (nginx)`, or another task's name. */
  who: string;
  ms: number;
}

export interface CpuHolders {
  /** The watched threads' waits for a CPU, summed, ms. */
  waitMs: number;
  /** Of that, ms in which another CPU sat idle. */
  otherCpuIdleMs: number;
  /** What ran on the CPU each wait ended on, while it waited: ms each, most first (`idle`: nothing, the CPU waking up). */
  holders: CpuHolder[];
}

export interface CpuHoldersReport {
  all: CpuHolders;
  /** Over the slots where a queue built up (placementOf's choice). */
  queueBuilding: CpuHolders;
  /** Buffers of events perf lost (full before it drained them): the tally is short by those. */
  lostChunks?: number;
}

/** What the classifier needs to name a task. */
export interface TaskRoles {
  /** Processes of the target (its main threads are their first threads). */
  target: ReadonlySet<number>;
  upstream: ReadonlySet<number>;
  /** The generator's process name (paced.c's binary). */
  generatorComm: string;
}

/** One line of `perf script -F pid,tid,cpu,time,event,trace`. */
export type SchedEvent =
  | { kind: 'switch'; cpu: number; timeMs: number; pid: number; tid: number; prevComm: string; prevState: string; nextComm: string; nextTid: number }
  | { kind: 'wakeup'; cpu: number; timeMs: number; tid: number };

const LINE = /^\s*(-?\d+)\/(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+sched:(sched_switch|sched_waking|sched_wakeup|sched_wakeup_new):\s+(.*)$/;
const SWITCH = /^prev_comm=(.*) prev_pid=(\d+) prev_prio=-?\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+) next_prio=-?\d+$/;
const WAKEUP = /^comm=.* pid=(\d+) prio=-?\d+ target_cpu=\d+$/;

/** A perf script line as an event, or undefined (a header, a warning, an event not asked for). */
export function parseSchedLine(line: string): SchedEvent | undefined {
  const match = LINE.exec(line);
  if (!match) return undefined;
  const [, pid, tid, cpu, time, event, fields] = match as unknown as [string, string, string, string, string, string, string];
  // Seconds with µs: whole ms plus µs, so a time reads back as written.
  const [seconds, fraction] = time.split('.') as [string, string];
  const common = { cpu: Number(cpu), timeMs: Number(seconds) * 1000 + Number(fraction.padEnd(6, '0').slice(0, 6)) / 1000 };
  if (event === 'sched_switch') {
    const sw = SWITCH.exec(fields);
    if (!sw) return undefined;
    return { kind: 'switch', ...common, pid: Number(pid), tid: Number(tid), prevComm: sw[1]!, prevState: sw[3]!, nextComm: sw[4]!, nextTid: Number(sw[5]) };
  }
  const wake = WAKEUP.exec(fields);
  return wake ? { kind: 'wakeup', ...common, tid: Number(wake[1]) } : undefined;
}

interface Interval {
  from: number;
  to: number;
}
interface Run extends Interval {
  who: string;
}
interface Wait extends Interval {
  cpu: number;
}

function nameOf(pid: number, tid: number, comm: string, roles: TaskRoles): string {
  if (tid === 0) return 'idle';
  if (roles.target.has(pid)) return tid === pid ? 'target main thread' : `target thread (${comm})`;
  if (roles.upstream.has(pid)) return `upstream (${comm})`;
  if (comm === roles.generatorComm) return 'generator';
  // kworker/1:2, ksoftirqd/0: one name per kind, not per CPU.
  return comm.replace(/\/\d+(:\d+H?)?$/, '');
}

/**
 * Lays the watched threads' waits over what ran on each CPU, within `windows` (monotonic ms):
 * the measured window's slots, all of them or those where a queue built up.
 */
export class CpuHolderTally {
  private readonly running = new Map<number, { tid: number; since: number }>();
  private readonly waitingSince = new Map<number, number>();
  private readonly onCpu = new Set<number>();
  private readonly runs = new Map<number, Run[]>();
  private readonly idle = new Map<number, Interval[]>();
  private readonly waits: Wait[] = [];

  constructor(
    private readonly watched: ReadonlySet<number>,
    private readonly roles: TaskRoles,
  ) {}

  add(event: SchedEvent): void {
    if (event.kind === 'wakeup') {
      // A running task is woken too (the kernel traces the wake-up of one already on a CPU): no wait.
      if (!this.waitingSince.has(event.tid) && !this.onCpu.has(event.tid)) this.waitingSince.set(event.tid, event.timeMs);
      return;
    }
    const { cpu, timeMs } = event;
    // The sample is taken in the outgoing task's context: pid and tid are its own.
    const since = this.running.get(cpu)?.since ?? timeMs;
    const who = nameOf(event.pid, event.tid, event.prevComm, this.roles);
    if (who === 'idle') push(this.idle, cpu, { from: since, to: timeMs });
    else push(this.runs, cpu, { from: since, to: timeMs, who });
    // Preempted (still runnable), it waits from now; otherwise it sleeps.
    this.onCpu.delete(event.tid);
    if (event.tid !== 0 && event.prevState.startsWith('R')) this.waitingSince.set(event.tid, timeMs);
    else this.waitingSince.delete(event.tid);
    const waited = this.waitingSince.get(event.nextTid);
    this.waitingSince.delete(event.nextTid);
    if (waited !== undefined && this.watched.has(event.nextTid)) this.waits.push({ from: waited, to: timeMs, cpu });
    this.running.set(cpu, { tid: event.nextTid, since: timeMs });
    if (event.nextTid !== 0) this.onCpu.add(event.nextTid);
  }

  /** The waits within `windows` (sorted, not overlapping), by what ran meanwhile. */
  holders(windows: readonly Interval[]): CpuHolders {
    const byWho = new Map<string, number>();
    let waitMs = 0;
    let otherCpuIdleMs = 0;
    for (const wait of this.waits) {
      overlapping(windows, wait.from, wait.to, (from, to) => {
        waitMs += to - from;
        overlapping(this.runs.get(wait.cpu) ?? [], from, to, (runFrom, runTo, run) => byWho.set(run.who, (byWho.get(run.who) ?? 0) + runTo - runFrom));
        // Its own CPU idle: woken onto a CPU that had yet to come out of idle (in a VM, a halted vCPU).
        overlapping(this.idle.get(wait.cpu) ?? [], from, to, (idleFrom, idleTo) => byWho.set('idle', (byWho.get('idle') ?? 0) + idleTo - idleFrom));
        // Idle time on any other CPU during the wait (two vCPUs here: the other one).
        for (const [cpu, intervals] of this.idle) if (cpu !== wait.cpu) overlapping(intervals, from, to, (idleFrom, idleTo) => (otherCpuIdleMs += idleTo - idleFrom));
      });
    }
    const round = (ms: number) => Math.round(ms * 10) / 10;
    const holders = [...byWho].map(([who, ms]) => ({ who, ms: round(ms) })).sort((a, b) => b.ms - a.ms);
    return { waitMs: round(waitMs), otherCpuIdleMs: round(otherCpuIdleMs), holders };
  }
}

/** Calls `each` with the part of every interval of `sorted` (in time order, not overlapping) within [from, to). */
function overlapping<T extends Interval>(sorted: readonly T[], from: number, to: number, each: (from: number, to: number, interval: T) => void): void {
  // The first interval ending after `from`.
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (sorted[middle]!.to <= from) low = middle + 1;
    else high = middle;
  }
  for (let index = low; index < sorted.length && sorted[index]!.from < to; index++) {
    const interval = sorted[index]!;
    const start = Math.max(from, interval.from);
    const end = Math.min(to, interval.to);
    if (end > start) each(start, end, interval);
  }
}

function push<T>(map: Map<number, T[]>, key: number, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** Why perf cannot record the scheduler here, or undefined if it can. */
export function schedRecordUnavailable(): string | undefined {
  const probe = spawnSync('perf', ['record', '-q', '-a', '-e', EVENTS.join(','), '-o', '/dev/null', '--', 'true'], { encoding: 'utf8' });
  if (probe.error) return 'perf is missing (Debian: linux-perf)';
  if (probe.status !== 0) return `perf cannot record scheduler tracepoints here (is tracefs mounted at /sys/kernel/tracing?): ${probe.stderr.trim().slice(0, 300)}`;
  return undefined;
}

/** The slots to tally over, wall-clock ms (paced.ts slotWindows). */
export interface SlotWindows {
  all: Interval[];
  queueBuilding: Interval[];
}

/**
 * Records the scheduler on every CPU into `file` from when it resolves; `stop(watched, roles, slots)`
 * ends the recording and tallies it in a child process: a recording holds millions of events, and
 * the garbage of reading them, left in the bench's own heap, is collected during the next measured
 * run (a 250 MB heap's mark-compact, on the CPUs being measured).
 */
export async function recordCpuHolders(file: string): Promise<{ stop(watched: ReadonlySet<number>, roles: TaskRoles, slots: SlotWindows): Promise<CpuHoldersReport>; abandon(): Promise<void> }> {
  const unavailable = schedRecordUnavailable();
  if (unavailable) throw new Error(`BENCH_PACED_SCHED: ${unavailable}`);
  // The control fifos only: the recording stays in `file` for `perf sched timehist -i` and the like.
  const directory = tempDirectory('kg-bench-sched-');
  // perf drains each CPU's buffer when it is half full, in one write that the kernel (PREEMPT_NONE
  // here) does not interrupt: 16 MB buffers held a CPU for 5–10 ms at a time, 512 KB ones for well under 1.
  const perf = await startControlledPerf('record', ['-q', '-a', '-k', 'mono', '-m', '128', '-e', EVENTS.join(','), '-o', file], directory);
  // Stopped at the bench's cleanup too, should the run fail before stop() or abandon().
  let stopped = false;
  const stopPerf = async () => {
    if (stopped) return { errors: '' };
    stopped = true;
    const { errors } = await perf.stop();
    rmSync(directory, { recursive: true, force: true });
    return { errors };
  };
  onCleanup(`stop perf record (${file})`, async () => void (await stopPerf()));
  return {
    async abandon() {
      await stopPerf();
    },
    async stop(watched, roles, slots) {
      // perf record re-raises the SIGINT that stops it, so its exit says nothing: perf script judges the file.
      const { errors } = await stopPerf();
      const request: TallyRequest = { file, watched: [...watched], target: [...roles.target], upstream: [...roles.upstream], generatorComm: roles.generatorComm, slots };
      // This module, run by the same node and loader (tsx) as the bench; the report comes back over
      // IPC, as the bench's node flags (--trace-gc…) may print on the child's stdout too.
      const child = spawn(process.execPath, [...process.execArgv, import.meta.filename], { stdio: ['pipe', 'ignore', 'pipe', 'ipc'] });
      // A child that dies early fails below by its exit status, not by an EPIPE here.
      child.stdin!.on('error', () => {});
      child.stdin!.end(JSON.stringify(request));
      let report: CpuHoldersReport | undefined;
      let stderr = '';
      child.on('message', (message) => (report = message as CpuHoldersReport));
      child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
      // 'close', not 'exit': the report's message may arrive after the exit.
      const [status] = (await once(child, 'close')) as [number | null];
      if (status !== 0 || !report) throw new Error(`tallying ${file} failed (exit ${status}): ${stderr}; perf record said: ${errors}`);
      return report;
    },
  };
}

interface TallyRequest {
  file: string;
  watched: number[];
  target: number[];
  upstream: number[];
  generatorComm: string;
  slots: SlotWindows;
}

/**
 * Reads a recording with `perf script` and tallies it. Timestamps are CLOCK_MONOTONIC (`-k mono`),
 * slots wall-clock ms: converted with the offset between the two clocks read now. Events perf lost
 * (its buffer full before it drained it) are counted in the report, as a tally missing them is short.
 */
async function tally(request: TallyRequest): Promise<CpuHoldersReport> {
  const holders = new CpuHolderTally(new Set(request.watched), { target: new Set(request.target), upstream: new Set(request.upstream), generatorComm: request.generatorComm });
  let switches = 0;
  const script = spawn('perf', ['script', '-i', request.file, '-F', 'pid,tid,cpu,time,event,trace'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let errors = '';
  script.stderr.on('data', (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-4000)));
  const exited = once(script, 'exit') as Promise<[number | null]>;
  for await (const line of createInterface({ input: script.stdout })) {
    const event = parseSchedLine(line);
    if (!event) continue;
    if (event.kind === 'switch') switches++;
    holders.add(event);
  }
  const [status] = await exited;
  if (status !== 0) throw new Error(`perf script failed (exit ${status}): ${errors}`);
  // Not "0 ms waited": a perf that prints switches in another format.
  if (switches === 0) throw new Error(`no scheduler switch read from ${request.file} (perf script's format?): ${errors}`);
  const wallMinusMonotonic = Date.now() - Number(process.hrtime.bigint()) / 1e6;
  const monotonic = (intervals: Interval[]) => intervals.map(({ from, to }) => ({ from: from - wallMinusMonotonic, to: to - wallMinusMonotonic }));
  const lost = /lost (\d+) chunks/.exec(errors);
  return { all: holders.holders(monotonic(request.slots.all)), queueBuilding: holders.holders(monotonic(request.slots.queueBuilding)), ...(lost ? { lostChunks: Number(lost[1]) } : {}) };
}

// Run as a script (by recordCpuHolders): a TallyRequest on stdin, the report to the parent.
if (process.argv[1] === import.meta.filename && process.send) {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  const report = await tally(JSON.parse(input) as TallyRequest);
  await new Promise((resolve) => process.send!(report, undefined, {}, resolve));
  process.disconnect!();
}
