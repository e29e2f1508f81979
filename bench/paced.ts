/**
 * The paced (open-loop) runs of the ingress comparison, by bench/paced.c: compiled once per bench
 * run with the machine's C compiler into a temp directory, then run per target. Out of process and
 * in C, it leaves the cores to what it measures (the in-process Node generator's own p99 was 3 ms
 * against nginx answering directly at 12,700 req/s).
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { recordCpuHolders } from './cpu-holders.ts';
import type { GeneratorLag, LatencyQuantiles, LoadSettings, Placement, ScenarioResult } from './load.ts';
import { cpuTimes, kernelThreadCounters, kernelThreadGrowth, processTree, schedulerCounters, schedulerGrowth, settle, stealGrowth, stealMs, tempDirectory, type ThreadCounters } from './processes.ts';

const run = promisify(execFile);

/** paced.c's slot, ms. */
const SLOT_MS = 10;

/** What paced.c prints. */
interface PacedReport {
  requests: number;
  sent: number;
  errors: number;
  timeouts: number;
  durationS: number;
  latencyMs: { p50: number; p90: number; p99: number; p999: number; max: number; mean: number };
  statusCodes: Record<string, number>;
  /** The generator's own scheduling over its run (absent from an older build of paced.c). */
  scheduler?: ThreadCounters;
  /** How late the generator itself was: sending on a free connection, and reading what the kernel had received. */
  generatorLagMs?: GeneratorLag;
  /** Latencies to the kernel's receipt of each answer's last segment, not to the generator's read of it. */
  arrivalLatencyMs?: LatencyQuantiles;
  /** Requests of the measured window answered in over 10 ms. */
  overTenMs?: number;
}

/** The generator's binary, or why there is none (then the bench falls back to the in-process one). */
export function compilePaced(): { binary: string } | { unavailable: string } {
  const directory = tempDirectory('kg-bench-paced-');
  const binary = path.join(directory, 'paced');
  const source = path.join(import.meta.dirname, 'paced.c');
  const compiled = spawnSync(process.env.CC || 'cc', ['-O2', '-o', binary, source], { encoding: 'utf8' });
  if (compiled.error) return { unavailable: `no C compiler (${(compiled.error as NodeJS.ErrnoException).code}): apt-get install gcc` };
  if (compiled.status !== 0) return { unavailable: `bench/paced.c did not compile: ${compiled.stderr.slice(0, 500)}` };
  return { binary };
}

/** One paced run at `rate` against `url` (GET with `headers`), the CPU of `pids` measured over it. */
export async function runExternalPaced(
  binary: string,
  target: { name: string; measures: string; url: string; headers: Record<string, string>; role: 'service' | 'proxy'; pids: number[]; upstreamPids?: number[] },
  settings: LoadSettings,
  rate: number,
): Promise<ScenarioResult> {
  const url = new URL(target.url);
  const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`, ...Object.entries(target.headers).map(([name, value]) => `${name}: ${value}`)];
  const requestFile = path.join(path.dirname(binary), `request-${target.name}`);
  writeFileSync(requestFile, `${lines.join('\r\n')}\r\n\r\n`);
  await settle(target.pids);
  const before = cpuTimes(target.pids);
  const scheduledBefore = schedulerCounters(target.pids);
  const upstreamBefore = target.upstreamPids && schedulerCounters(target.upstreamPids);
  const kernelBefore = kernelThreadCounters();
  const stealBefore = stealMs();
  // BENCH_PACED_TIMELINE=prefix: each target's worst latency per 10 ms slot in prefix-<target> (bench/paced.c),
  // and where the target's main threads were each ms: behind the generator, or beside the upstream, on one CPU.
  const timeline = process.env.BENCH_PACED_TIMELINE ? `${process.env.BENCH_PACED_TIMELINE}-${target.name}` : '';
  const serverTree = processTree(target.pids);
  const upstreamTree = processTree(target.upstreamPids ?? []);
  const watch = timeline ? `${serverTree.join(',')};${upstreamTree.join(',')}` : '';
  // BENCH_PACED_SCHED=1 as well: perf names whatever held the CPU while they waited (cpu-holders.ts),
  // its recording kept beside the timeline (prefix-<target>.sched).
  const holdersRecording = timeline && process.env.BENCH_PACED_SCHED ? await recordCpuHolders(`${timeline}.sched`) : undefined;
  // BENCH_PACED_ISOLATE=1: the target's main threads get the last CPU to themselves, the generator and
  // the upstream the others, for this run (its helper threads and everything else go where the kernel puts them).
  let isolation: ReturnType<typeof isolate> | undefined;
  let stdout: string;
  try {
    isolation = process.env.BENCH_PACED_ISOLATE ? isolate(serverTree, upstreamTree) : undefined;
    // The CPU is read around the whole run, warm-up included, so it is divided by every request
    // scheduled in it (the report's `sent` counts the measured window only).
    const [program, ...programArgs] = isolation ? ['taskset', '-c', isolation.others, binary] : [binary];
    ({ stdout } = await run(program!, [...programArgs, url.hostname, url.port || '80', String(rate), String(settings.duration), String(settings.warmup), String(settings.connections), String(settings.timeout), requestFile], {
      maxBuffer: 1 << 20,
      env: { ...process.env, PACED_TIMELINE: timeline, PACED_WATCH: watch },
    }));
  } catch (error) {
    // A system-wide recording must not outlive a failed run.
    await holdersRecording?.abandon();
    throw error;
  } finally {
    isolation?.restore();
  }
  const timelineText = timeline ? readFileSync(timeline, 'utf8') : '';
  const placement = timeline ? placementOf(timelineText) : undefined;
  const cpuHolders =
    holdersRecording && (await holdersRecording.stop(new Set(serverTree), { target: new Set(serverTree), upstream: new Set(upstreamTree), generatorComm: path.basename(binary) }, slotWindows(timelineText)));
  const scheduler = schedulerGrowth(scheduledBefore, schedulerCounters(target.pids));
  const upstreamScheduler = upstreamBefore && schedulerGrowth(upstreamBefore, schedulerCounters(target.upstreamPids!));
  // None seen at all (a container's /proc): none reported, rather than "none busy".
  const kernelThreads = kernelBefore.size > 0 ? kernelThreadGrowth(kernelBefore, kernelThreadCounters(), 4) : undefined;
  const stolenMs = stealGrowth(stealBefore, stealMs());
  await settle(target.pids);
  const after = cpuTimes(target.pids);
  const cpu = after.userMs + after.systemMs - before.userMs - before.systemMs;
  const kernel = after.systemMs - before.systemMs;
  const report = JSON.parse(stdout) as PacedReport;
  const scheduledInAll = rate * (settings.duration + settings.warmup);
  const non2xx = Object.entries(report.statusCodes).reduce((sum, [code, count]) => sum + (code.startsWith('2') ? 0 : count), 0);
  return {
    name: target.name,
    request: `GET ${url.pathname}`,
    measures: target.measures,
    durationS: report.durationS,
    requests: report.requests,
    sent: report.sent,
    rps: Math.round((report.requests / report.durationS) * 10) / 10,
    latencyMs: { p50: report.latencyMs.p50, p90: report.latencyMs.p90, p99: report.latencyMs.p99, max: report.latencyMs.max },
    statusCodes: report.statusCodes,
    non2xx,
    errors: report.errors,
    timeouts: report.timeouts,
    errorSamples: [],
    cpuUsPerRequest: { [target.role]: scheduledInAll ? Math.round((cpu * 1000) / scheduledInAll) : 0 },
    ...(scheduledInAll ? { kernelUsPerRequest: Math.round((kernel * 1000) / scheduledInAll) } : {}),
    scheduler,
    ...(upstreamScheduler ? { upstreamScheduler } : {}),
    ...(report.scheduler ? { generatorScheduler: report.scheduler } : {}),
    ...(report.generatorLagMs ? { generatorLagMs: report.generatorLagMs } : {}),
    ...(report.arrivalLatencyMs ? { arrivalLatencyMs: report.arrivalLatencyMs } : {}),
    ...(report.overTenMs === undefined ? {} : { overTenMs: report.overTenMs }),
    ...(kernelThreads ? { kernelThreads } : {}),
    ...(stolenMs ? { stolenMs } : {}),
    ...(placement ? { placement } : {}),
    ...(cpuHolders ? { cpuHolders } : {}),
  };
}

/**
 * What a timeline with PACED_WATCH columns says of where the target's main threads waited, and how
 * long they ran and waited for a CPU per 10 ms slot: over the whole window, and over the slots in
 * which a queue built up (the worst latency over 1 ms above the slot before's), where a thread short
 * of its CPU shows first. Undefined without those columns.
 */
export function placementOf(timeline: string): Placement | undefined {
  const { slots, building } = timelineSlots(timeline);
  if (slots.length === 0 || slots.some((slot) => slot.length < 8)) return undefined;
  const share = (chosen: number[][]) => {
    const samples = chosen.reduce((sum, slot) => sum + slot[3]!, 0);
    const sum = (column: number) => chosen.reduce((total, slot) => total + slot[column]!, 0);
    const percent = (column: number) => (samples ? Math.round((sum(column) * 1000) / samples) / 10 : 0);
    // µs per slot → ms per slot, one decimal.
    const perSlot = (column: number) => (chosen.length ? Math.round(sum(column) / chosen.length / 100) / 10 : 0);
    return { slots: chosen.length, samples, behindGeneratorPercent: percent(4), besideUpstreamPercent: percent(5), runMsPerSlot: perSlot(6), waitMsPerSlot: perSlot(7) };
  };
  return { all: share(slots), queueBuilding: share(building) };
}

/** A timeline's slots (columns as numbers) and those in which a queue built up (the worst latency over 1 ms above the slot before's). */
function timelineSlots(timeline: string): { slots: number[][]; building: number[][] } {
  const slots = timeline
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.split(' ').map(Number));
  return { slots, building: slots.filter((slot, index) => index > 0 && slot[2]! > slots[index - 1]![2]! + 1) };
}

/** The wall-clock ms each slot covers (10 ms from its start): the measured window, and where a queue built up. */
export function slotWindows(timeline: string): { all: { from: number; to: number }[]; queueBuilding: { from: number; to: number }[] } {
  const { slots, building } = timelineSlots(timeline);
  const windows = (chosen: number[][]) => chosen.map((slot) => ({ from: slot[0]!, to: slot[0]! + SLOT_MS }));
  // The whole window as one interval: slots are contiguous.
  const all = slots.length ? [{ from: slots[0]![0]!, to: slots.at(-1)![0]! + SLOT_MS }] : [];
  return { all, queueBuilding: windows(building) };
}

/** Pins `mainThreads` (pids: their first threads only) to the last CPU and all threads of `others` to the rest; `restore()` frees them. */
function isolate(mainThreads: readonly number[], others: readonly number[]): { others: string; restore(): void } {
  const cpus = os.availableParallelism();
  const last = String(cpus - 1);
  const rest = cpus > 2 ? `0-${cpus - 2}` : '0';
  const all = `0-${cpus - 1}`;
  const pin = (cpuList: string, pids: readonly number[], allThreads: boolean) => {
    for (const pid of pids) execFileSync('taskset', [...(allThreads ? ['-a'] : []), '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
  };
  const restore = () => {
    // Each pid on its own: one that has exited meanwhile does not keep the others pinned.
    for (const pid of mainThreads) tryPin(() => pin(all, [pid], false));
    for (const pid of others) tryPin(() => pin(all, [pid], true));
  };
  try {
    pin(last, mainThreads, false);
    pin(rest, others, true);
  } catch (error) {
    restore();
    throw error;
  }
  return { others: rest, restore };
}

function tryPin(pin: () => void): void {
  try {
    pin();
  } catch {
    // The process is gone: nothing to free.
  }
}
