/**
 * Child processes of the benchmark (the service under test, the upstream, the bare proxy), their CPU
 * time, and a cleanup stack that runs on normal exit, on errors and on Ctrl-C.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..');

// ---- cleanup ----------------------------------------------------------------------------------

type CleanupStep = { name: string; run: () => Promise<void> | void };
const steps: CleanupStep[] = [];
/** Children still alive, killed synchronously from the 'exit' hook if nothing else got to them. */
const liveChildren = new Set<ChildProcess>();
let cleaning: Promise<void> | undefined;

/** Registers a step for cleanup(); steps run in reverse order of registration (last started, first stopped). */
export function onCleanup(name: string, run: () => Promise<void> | void): void {
  // Something started while cleanup was already running (Ctrl-C during start-up): undo it now.
  if (cleaning) void (async () => run())().catch(() => {});
  else steps.push({ name, run });
}

let interrupted = false;

/** Ctrl-C or SIGTERM arrived: the caller must stop starting work (the signal handler exits). */
export function isInterrupted(): boolean {
  return interrupted;
}

/** Runs every registered step once, even if some fail; later calls wait for the first. */
export function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    while (steps.length) {
      const step = steps.pop()!;
      try {
        await step.run();
      } catch (error) {
        process.stderr.write(`bench cleanup: ${step.name} failed: ${(error as Error).message}\n`);
      }
    }
  })();
  return cleaning;
}

/**
 * Ctrl-C and SIGTERM: the terminal also sends SIGINT to our children (same process group), but a
 * SIGTERM to us alone would not reach them, and temp dirs and the Postgres database need removing.
 */
export function installSignalHandlers(stopLoad: () => void): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (interrupted) return; // a second Ctrl-C while cleaning up: the exit hook still kills children
      interrupted = true;
      process.stderr.write(`\nbench: ${signal}, stopping and cleaning up...\n`);
      stopLoad();
      void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
    });
  }
  // Last resort (an uncaught throw, process.exit elsewhere): never leave children running.
  process.on('exit', () => {
    for (const child of liveChildren) child.kill('SIGKILL');
  });
}

// ---- helpers ----------------------------------------------------------------------------------

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** Thrown from a waitFor check to stop waiting at once (other failures mean "not yet"). */
class ServiceExited extends Error {}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ready = await check().catch((error: unknown) => {
      if (error instanceof ServiceExited) throw error;
      return false;
    });
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A temp directory removed at cleanup. */
export function tempDirectory(prefix: string): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), prefix));
  onCleanup(`remove ${directory}`, () => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

/** SIGTERM, then SIGKILL if the process has not exited within `graceMs`. */
async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

function track(child: ChildProcess, name: string): void {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  onCleanup(`stop ${name} (pid ${child.pid})`, () => stopChild(child));
}

// ---- the service under test -------------------------------------------------------------------

/** The service's own settings that must not leak in from the caller's shell (reproducibility). */
const SERVICE_SETTINGS = [
  'PORT', 'HOST', 'PUBLIC_URL', 'DATABASE_URL', 'DATA_DIR', 'REDIS_URL', 'ADMIN_PASSWORD', 'TOKEN_EXPIRATION',
  'FERNET_KEY_REPOSITORY', 'FERNET_MAX_ACTIVE_KEYS', 'TOKEN_PROVIDER', 'JWS_KEY_REPOSITORY', 'JWS_MAX_ACTIVE_KEYS',
  'PASSWORD_HASH_ROUNDS', 'SECRET_PEPPER', 'LOG_LEVEL', 'POLICY_DIR', 'GATEWAY_REGION', 'UPSTREAM_CONNECTIONS',
  'GATEWAY_SERVICE_CATALOG_HEADER', 'SERVICE_TOKEN_ROLES', 'AUTH_RATE_LIMIT_PER_ADDRESS', 'AUTH_RATE_LIMIT_PER_USER',
  'AUTH_RATE_LIMIT_WINDOW', 'WORKERS', 'POLICY_SHADOW_DIR', 'GATEWAY_DECISIONS_KEPT', 'GATEWAY_DECISIONS_TTL_SECONDS',
];

export interface ServiceProcess {
  url: string;
  pid: number;
  /** What the bench passed on top of a cleaned environment, for the results file (no secrets). */
  settings: Record<string, string>;
  /** SIGTERM (SIGKILL after a grace period) and wait for the exit; cleanup does it otherwise. */
  stop(): Promise<void>;
}

/**
 * The node flags of package.json's `start` script (`node <flags> dist/main.js`): the service is
 * measured with the flags it runs with in production (the Dockerfile's CMD has the same ones).
 */
export function startNodeFlags(packageJson = readFileSync(path.join(ROOT, 'package.json'), 'utf8')): string[] {
  const start = (JSON.parse(packageJson) as { scripts?: { start?: string } }).scripts?.start ?? '';
  const words = start.trim().split(/\s+/);
  if (words[0] !== 'node') throw new Error(`package.json's start script does not run node: ${start}`);
  // The flags are the words between `node` and the script; each must be --name or --name=value, so
  // that no value written as a separate word is mistaken for the script.
  const flags: string[] = [];
  for (const word of words.slice(1)) {
    if (!word.startsWith('-')) break;
    if (!/^--[a-z0-9-]+(=\S+)?$/.test(word)) throw new Error(`package.json's start script has a node flag the bench cannot pass on: ${word} (write --name=value)`);
    flags.push(word);
  }
  return flags;
}

/**
 * Starts the service (`node --import=tsx src/main.ts`, or `options.entry`, e.g. the bundle `npm start` runs) with `npm start`'s node flags, with a temp DATA_DIR and the given
 * policy directory. The caller's service settings are dropped (PASSWORD_HASH_ROUNDS=4 from a test
 * shell would make the password scenario meaningless); BENCH_SERVICE_<NAME>=value passes NAME=value.
 */
export async function startService(options: {
  adminPassword: string;
  policyDirectory: string;
  databaseUrl?: string;
  /** Settings of the caller's own (e.g. WORKERS=1 for the memory bench); BENCH_SERVICE_* still win. */
  settings?: Record<string, string>;
  /** Node flags, before BENCH_SERVICE_NODE_ARGS. */
  nodeArgs?: string[];
  /** Where the service keeps its files; a temp directory removed at cleanup when unset. */
  dataDirectory?: string;
  /** What node runs instead of `--import=tsx src/main.ts`, e.g. a compiled bundle. */
  entry?: string[];
}): Promise<ServiceProcess> {
  const port = await freePort();
  const environment: Record<string, string | undefined> = { ...process.env };
  for (const name of SERVICE_SETTINGS) delete environment[name];
  const settings: Record<string, string> = {
    LOG_LEVEL: 'warn',
    POLICY_DIR: options.policyDirectory,
    DATA_DIR: options.dataDirectory ?? tempDirectory('kg-bench-data-'),
    // One client hammering one user from one address is what a benchmark is and what the login rate
    // limits exist to stop: measure issue throughput, not the limiter (BENCH_SERVICE_* re-enables it).
    AUTH_RATE_LIMIT_PER_ADDRESS: '0',
    AUTH_RATE_LIMIT_PER_USER: '0',
    ...options.settings,
  };
  if (options.databaseUrl) settings.DATABASE_URL = options.databaseUrl;
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('BENCH_SERVICE_') && name !== 'BENCH_SERVICE_NODE_ARGS' && value !== undefined) settings[name.slice('BENCH_SERVICE_'.length)] = value;
  }
  // The node flags production starts with (`npm start`), then the caller's, then
  // BENCH_SERVICE_NODE_ARGS: extra node flags for the service only, e.g. --cpu-prof (not allowed in NODE_OPTIONS).
  const nodeArgs = [...startNodeFlags(), ...(options.nodeArgs ?? []), ...(process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)];
  // BENCH_GC=1: every collection reported (gcSummary), to tell the tail's stalls from the rest.
  if (process.env.BENCH_GC === '1' && !nodeArgs.includes('--trace-gc-nvp')) nodeArgs.push('--trace-gc-nvp');
  const child = spawn(process.execPath, [...nodeArgs, ...(options.entry ?? ['--import=tsx', 'src/main.ts'])], {
    cwd: ROOT,
    env: { ...environment, ...settings, ADMIN_PASSWORD: options.adminPassword, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child, 'service');
  let output = '';
  // Keep only the tail: a long run at LOG_LEVEL=debug must not grow this without bound.
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // BENCH_SERVICE_OUTPUT=file: everything the service prints, whole (e.g. with --trace-gc in
  // BENCH_SERVICE_NODE_ARGS, to find what stalls it).
  if (process.env.BENCH_SERVICE_OUTPUT) {
    const file = createWriteStream(process.env.BENCH_SERVICE_OUTPUT);
    child.stdout?.pipe(file, { end: false });
    child.stderr?.pipe(file, { end: false });
  }
  if (nodeArgs.includes('--trace-gc-nvp')) {
    let partial = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const event = gcEventOf(line);
        if (event) gcEvents.push(event);
      }
    });
  }
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new ServiceExited(`the service exited (${child.exitCode ?? child.signalCode})`);
      return (await fetch(`${url}/v3`)).status === 200;
    }, `the service on ${url}`);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n--- service output ---\n${output}`);
  }
  child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[service] ${chunk.toString()}`));
  if (nodeArgs.length) settings.NODE_ARGS = nodeArgs.join(' ');
  return { url, pid: child.pid!, settings, stop: () => stopChild(child) };
}

// ---- garbage collection (BENCH_GC=1: the service runs with --trace-gc-nvp) ---------------------

/** One collection of the service's, as --trace-gc-nvp reports it, stamped when its line arrived. */
export interface GcEvent {
  at: number;
  /** 's': scavenge (young generation); 'ms', 'mmc', …: a mark-compact of the whole heap. */
  kind: string;
  pauseMs: number;
  /** Bytes this collection moved to the old generation. */
  promoted: number;
  /** Why V8 collected (its `reason`, then its `collector_reason` if any), and whether to shrink the heap. */
  reason: string;
  reduceMemory: boolean;
}

/** The started services' collections (one service per bench run), in arrival order. */
const gcEvents: GcEvent[] = [];

/** The collection a --trace-gc-nvp line reports, or undefined for any other line. */
export function gcEventOf(line: string, at = Date.now()): GcEvent | undefined {
  const start = line.indexOf(' GC: {');
  if (start < 0) return undefined;
  try {
    const fields = JSON.parse(line.slice(start + 5)) as Record<string, unknown>;
    const reason = [fields.reason, fields.collector_reason].filter((part) => typeof part === 'string' && part.length > 0).join('; ');
    return { at, kind: String(fields.gc), pauseMs: Number(fields.pause), promoted: Number(fields.promoted ?? 0), reason, reduceMemory: fields.reduce_memory === true };
  } catch {
    return undefined;
  }
}

export interface GcSummary {
  scavenges: number;
  markCompacts: number;
  /** Every pause's total, and the longest, in ms. */
  pauseMs: number;
  maxPauseMs: number;
  /** Requests served per scavenge (the young generation filling up: the allocation rate's mirror). */
  requestsPerScavenge: number;
  /** Bytes moved to the old generation per request: what makes mark-compacts come. */
  promotedBytesPerRequest: number;
  /** Each mark-compact's pause and why V8 started it: the long pauses of a tail, explained. */
  markCompactCauses: { pauseMs: number; reason: string; reduceMemory: boolean }[];
}

/** The service's collections between `from` and `to` (Date.now()), per `requests` served meanwhile. */
export function gcSummary(from: number, to: number, requests: number): GcSummary | undefined {
  return summariseGc(
    gcEvents.filter((event) => event.at >= from && event.at <= to),
    requests,
  );
}

export function summariseGc(events: readonly GcEvent[], requests: number): GcSummary | undefined {
  if (events.length === 0) return undefined;
  const sum = (pick: (event: GcEvent) => number) => events.reduce((total, event) => total + pick(event), 0);
  const per = (bytes: number) => (requests > 0 ? Math.round(bytes / requests) : 0);
  const markCompacts = events.filter((event) => event.kind !== 's');
  return {
    scavenges: events.length - markCompacts.length,
    markCompacts: markCompacts.length,
    pauseMs: Math.round(sum((event) => event.pauseMs) * 10) / 10,
    maxPauseMs: Math.max(...events.map((event) => event.pauseMs)),
    requestsPerScavenge: Math.round(requests / Math.max(1, events.length - markCompacts.length)),
    promotedBytesPerRequest: per(sum((event) => event.promoted)),
    markCompactCauses: markCompacts.map(({ pauseMs, reason, reduceMemory }) => ({ pauseMs, reason, reduceMemory })),
  };
}

/**
 * src/ bundled as `npm run build` does (scripts/build.ts), for plain node to run as `npm start`
 * does (no tsx transforming TypeScript in the process): the node arguments of its entry. Built into
 * a temp directory inside the checkout (so that node_modules resolves; not dist/, which may be in
 * use), removed at cleanup. The bundle sits two levels below the checkout, so the service needs
 * IDENTITY_POLICY_DIR (and POLICY_DIR) set: their defaults are relative to the source tree.
 */
export async function compiledEntry(log: (message: string) => void): Promise<string[]> {
  const { build } = await import('../scripts/build.ts');
  mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  const directory = mkdtempSync(path.join(ROOT, 'bench', 'results', '.build-'));
  onCleanup(`remove ${directory}`, () => rmSync(directory, { recursive: true, force: true }));
  const result = await build({ outdir: directory, sourcemap: false });
  log(`built ${path.relative(ROOT, result.main)} in ${result.ms} ms`);
  return [result.main];
}

/** A fresh database on the BENCH_DATABASE_URL server, dropped at cleanup (after the service stops). */
export async function createDatabase(serverUrl: string): Promise<string> {
  const { default: pg } = await import('pg');
  const name = `kg_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  onCleanup(`drop database ${name}`, async () => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await client.end();
    }
  });
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// ---- helper servers (upstream, bare proxy) ----------------------------------------------------

export interface HelperProcess {
  url: string;
  pid: number;
}

/**
 * Runs bench/<script> in its own process (its CPU must be measurable apart from ours and the
 * service's). It listens on port 0 and reports the port over IPC, so there is no port race; it
 * exits when the IPC channel closes, i.e. when this process dies, even by SIGKILL.
 */
export async function startHelper(script: string, args: string[] = []): Promise<HelperProcess> {
  const child = spawn(process.execPath, ['--import=tsx', path.join(ROOT, 'bench', script), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  track(child, script);
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not report its port`)), 30_000);
    child.once('message', (message: { port?: number }) => {
      clearTimeout(timer);
      if (typeof message?.port === 'number') resolve(message.port);
      else reject(new Error(`${script} sent ${JSON.stringify(message)}`));
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with code ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid! };
}

// ---- CPU time ---------------------------------------------------------------------------------

let clockTicks: number | undefined;

/** Clock ticks per second of /proc/<pid>/stat times (almost always 100; asked, not assumed). */
export function clockTicksPerSecond(): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  return clockTicks;
}

interface ProcStat {
  ppid: number;
  /** The kernel's per-process flags (field 9): PF_KTHREAD marks a kernel thread. */
  flags: number;
  userTicks: number;
  systemTicks: number;
  /** Page faults served without I/O (field 10): a page's first touch, or one given back and touched again. */
  minorFaults: number;
}

/** PF_KTHREAD in include/linux/sched.h. */
const KERNEL_THREAD_FLAG = 0x00200000;

/** ppid, flags, utime and stime of one process; undefined if it is gone. */
function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): ppid is field 4, flags 9, minflt 10, utime 14, stime 15.
  return { ppid: Number(fields[1]), flags: Number(fields[6]), minorFaults: Number(fields[7]), userTicks: Number(fields[11]), systemTicks: Number(fields[12]) };
}

/** The given processes and all their live descendants (a service that forks workers is one tree). */
export function processTree(pids: readonly number[]): number[] {
  if (!pids.length) return [];
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (!stat) continue;
    const siblings = children.get(stat.ppid) ?? [];
    siblings.push(Number(entry));
    children.set(stat.ppid, siblings);
  }
  const tree: number[] = [];
  const seen = new Set<number>();
  const visit = (pid: number) => {
    if (seen.has(pid)) return;
    seen.add(pid);
    tree.push(pid);
    for (const child of children.get(pid) ?? []) visit(child);
  };
  for (const pid of pids) visit(pid);
  return tree;
}

/**
 * CPU time (ms) used so far by the given processes and all their live descendants, as bench.sh
 * counts it (a service that forks workers is measured whole).
 */
export function cpuMs(pids: readonly number[]): number {
  const { userMs, systemMs } = cpuTimes(pids);
  return userMs + systemMs;
}

/**
 * cpuMs split into user and kernel time: a proxy's system calls and the kernel's work on its
 * sockets (loopback TCP, waking the peer) are charged to it as system time.
 */
export function cpuTimes(pids: readonly number[]): { userMs: number; systemMs: number } {
  let user = 0;
  let system = 0;
  for (const pid of processTree(pids)) {
    const stat = readStat(pid);
    user += stat?.userTicks ?? 0;
    system += stat?.systemTicks ?? 0;
  }
  const msPerTick = 1000 / clockTicksPerSecond();
  return { userMs: user * msPerTick, systemMs: system * msPerTick };
}

/**
 * Minor page faults so far of the given processes and their live descendants. Each costs CPU, and
 * on some virtual machines far more than elsewhere (a first touch of a page the host has not backed
 * yet: ~20 µs here against ~1 µs on bare metal), charged as user time as much as kernel time.
 */
export function minorFaults(pids: readonly number[]): number {
  let faults = 0;
  for (const pid of processTree(pids)) faults += readStat(pid)?.minorFaults ?? 0;
  return faults;
}

// ---- The scheduler's view ---------------------------------------------------------------------

/** One group of threads as the kernel's scheduler counts them, summed. */
export interface ThreadCounters {
  /** Time on a CPU. */
  runMs: number;
  /** Time runnable but waiting for a CPU (the run queue): a request that arrives meanwhile waits too. */
  waitMs: number;
  /** Involuntary context switches: times the thread was preempted while it had work. */
  preempted: number;
}

/**
 * What the scheduler says of a process tree: its main threads (a node process's event loop) apart
 * from the rest (V8's collector and compiler, libuv's pool). Read from /proc/<pid>/task/<tid>/
 * schedstat and status; a thread that ended between two readings drops out of the second.
 */
export interface SchedulerCounters {
  main: ThreadCounters;
  others: ThreadCounters;
}

/** One thread's counters from its `schedstat` ("<ns on cpu> <ns waiting> <slices>") and `status` files. */
export function threadCounters(schedstat: string, status: string): ThreadCounters {
  const [runNs, waitNs] = schedstat.trim().split(/\s+/).map(Number);
  const preempted = /^nonvoluntary_ctxt_switches:\s*(\d+)$/m.exec(status)?.[1];
  return { runMs: (runNs ?? 0) / 1e6, waitMs: (waitNs ?? 0) / 1e6, preempted: Number(preempted ?? 0) };
}

export function schedulerCounters(pids: readonly number[]): SchedulerCounters {
  const counters: SchedulerCounters = { main: { runMs: 0, waitMs: 0, preempted: 0 }, others: { runMs: 0, waitMs: 0, preempted: 0 } };
  for (const pid of processTree(pids)) {
    let threads: string[];
    try {
      threads = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // gone
    }
    for (const tid of threads) {
      let thread: ThreadCounters;
      try {
        thread = threadCounters(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8'), readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'));
      } catch {
        continue; // ended, or a kernel without schedstat
      }
      const group = Number(tid) === pid ? counters.main : counters.others;
      group.runMs += thread.runMs;
      group.waitMs += thread.waitMs;
      group.preempted += thread.preempted;
    }
  }
  return counters;
}

/** The counters' growth from `before` to `after`, rounded to 0.1 ms. */
export function schedulerGrowth(before: SchedulerCounters, after: SchedulerCounters): SchedulerCounters {
  const grown = (from: ThreadCounters, to: ThreadCounters): ThreadCounters => ({
    runMs: Math.round((to.runMs - from.runMs) * 10) / 10,
    waitMs: Math.round((to.waitMs - from.waitMs) * 10) / 10,
    preempted: to.preempted - from.preempted,
  });
  return { main: grown(before.main, after.main), others: grown(before.others, after.others) };
}

/** What one of the host's kernel threads did over a run. */
export interface KernelThreadActivity {
  name: string;
  /** Time on a CPU: a CPU the benchmark's processes did not have meanwhile. */
  runMs: number;
  /** Time runnable but waiting for a CPU: for ksoftirqd, packets between two processes on loopback wait as long. */
  waitMs: number;
  /** Times it went to sleep of its own accord: its wake-ups, about. */
  wakeups: number;
}

/** A kernel thread's counters at one moment, by pid. */
export type KernelThreadCounters = Map<number, KernelThreadActivity>;

/**
 * The host's kernel threads (PF_KTHREAD; none where /proc shows only a container's own processes)
 * as the scheduler counts them now. A
 * kernel thread that runs in bursts (a memory monitor waking every half second, say) takes a
 * core away from a 2-core benchmark for as long, and no process's own counters show it.
 */
export function kernelThreadCounters(): KernelThreadCounters {
  const counters: KernelThreadCounters = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const stat = readStat(pid);
    if (!stat || (stat.flags & KERNEL_THREAD_FLAG) === 0) continue;
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const { runMs, waitMs } = threadCounters(readFileSync(`/proc/${pid}/schedstat`, 'utf8'), status);
      const wakeups = Number(/^voluntary_ctxt_switches:\s*(\d+)$/m.exec(status)?.[1] ?? 0);
      counters.set(pid, { name: /^Name:\s*(.*)$/m.exec(status)?.[1] ?? String(pid), runMs, waitMs, wakeups });
    } catch {
      // ended, or a kernel without schedstat
    }
  }
  return counters;
}

/** The kernel threads that ran or waited to run at least `minMs` between two readings, busiest first (at most `top`). */
export function kernelThreadGrowth(before: KernelThreadCounters, after: KernelThreadCounters, top = 3, minMs = 1): KernelThreadActivity[] {
  const grown: KernelThreadActivity[] = [];
  for (const [pid, now] of after) {
    const then = before.get(pid);
    if (!then) continue; // started meanwhile: its counters are not a growth
    const runMs = Math.round((now.runMs - then.runMs) * 10) / 10;
    const waitMs = Math.round((now.waitMs - then.waitMs) * 10) / 10;
    if (runMs + waitMs >= minMs) grown.push({ name: now.name, runMs, waitMs, wakeups: now.wakeups - then.wakeups });
  }
  return grown.sort((a, b) => b.runMs + b.waitMs - (a.runMs + a.waitMs)).slice(0, top);
}

/**
 * Each CPU's steal time now, in ms (`/proc/stat`, the eighth field of each `cpuN` line, in clock
 * ticks of 10 ms): time a vCPU had work but the hypervisor ran something else. A thread on a stolen
 * vCPU accrues neither run time nor run-queue wait in its schedstat (CONFIG_PARAVIRT_TIME_ACCOUNTING),
 * so without this a stall of the whole VM looks like every process sleeping at once. Empty where
 * `/proc/stat` cannot be read.
 */
export function stealMs(procStat: string = readProcStat()): number[] {
  const stolen: number[] = [];
  for (const line of procStat.split('\n')) {
    const fields = /^cpu(\d+)\s+(.*)$/.exec(line);
    if (!fields) continue;
    const steal = Number(fields[2]!.trim().split(/\s+/)[7] ?? 0);
    stolen[Number(fields[1])] = Number.isFinite(steal) ? steal * 10 : 0;
  }
  return stolen;
}

function readProcStat(): string {
  try {
    return readFileSync('/proc/stat', 'utf8');
  } catch {
    return '';
  }
}

/** Steal per CPU between two readings of stealMs(); undefined where either could not be read. */
export function stealGrowth(before: readonly number[], after: readonly number[]): number[] | undefined {
  if (before.length === 0 || before.length !== after.length) return undefined;
  return after.map((ms, cpu) => ms - before[cpu]!);
}

/**
 * Waits until the processes are idle (at most one clock tick, 10 ms, over 250 ms), at most `maxMs`;
 * false if they never were. Requests still in flight when a run stops (64 queued bcrypt hashes
 * take seconds) would otherwise be billed to the next scenario.
 */
export async function settle(pids: readonly number[], maxMs = 60_000): Promise<boolean> {
  if (!pids.length) {
    await new Promise((resolve) => setTimeout(resolve, 1000)); // unknown server processes: a fixed pause
    return true;
  }
  const deadline = Date.now() + maxMs;
  let last = cpuMs(pids);
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const now = cpuMs(pids);
    if (now - last <= 1000 / clockTicksPerSecond()) return true;
    last = now;
  }
  return false;
}
