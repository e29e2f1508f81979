/**
 * npm run bench:memory — resident memory of one worker holding a large identity database.
 *
 * 1. Creates database `bench_large` (--database) on BENCH_DATABASE_URL's server, starts the service
 *    once on it (migrations and bootstrap), stops it.
 * 2. Seeds it with bulk SQL (generate_series, one statement per table): --domains domains,
 *    --projects projects spread over them, --users users (each with a password row; all share one
 *    precomputed bcrypt hash of cost --hash-cost) and one `member` assignment per user on a project of
 *    its domain (so --users assignments).
 * 3. Starts the service again, WORKERS=1 (one process: the worker is the process), login rate limits
 *    off, and drives a warm-up through the public API with --concurrency requests in flight:
 *      A "working set": password token issue for --logins users, then per token validate ×2,
 *        catalog, the user's projects and effective role assignments; GETs of --reads users and
 *        projects; filtered user lists (domain_id + name__startswith / enabled) and project lists
 *        per domain; role_assignments per project.
 *      B "full lists": unfiltered GET /v3/users, /v3/projects, /v3/role_assignments and
 *        /v3/role_assignments?effective (every row; the API has no pagination, as Keystone without
 *        list_limit; all four are read in pages and streamed).
 *    With --workers N (> 1) it is a cluster of N workers, the figures the largest worker's.
 *    VmRSS and VmHWM (/proc/<pid>/status) are read after start, after A, after B and after a pause,
 *    each with what it is made of: resident MB by kind of mapping (smaps) and the V8 heap by space.
 *    Each list of B restarts the workers' VmHWM (clear_refs) and reports its own peak (the largest
 *    worker's), so VmHWM in the readings after B counts from the start of the last list; the peak
 *    including the lists is the highest of the working set's and the lists' peaks.
 *    The process gets the node heap flags a cluster worker would (--heap-flags, default `worker`:
 *    src/cluster.ts workerHeapFlags() of WORKER_MAX_OLD_SPACE_MB / WORKER_MAX_SEMI_SPACE_MB, which
 *    BENCH_SERVICE_WORKER_MAX_* override; `none` for node's defaults); WORKERS=1 is one process, which
 *    the primary's worker flags would not reach.
 * 4. Prints a table, writes bench/results/memory-<timestamp>.json, drops the database unless --keep.
 *    With --heap-snapshot (or when RSS after A exceeds the target) the worker writes a heap snapshot
 *    (--heapsnapshot-signal) and the largest object groups are listed.
 *
 * Environment: BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/postgres), BENCH_LABEL,
 * BENCH_SERVICE_<NAME> as for npm run bench.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { hashSync } from '@node-rs/bcrypt';
import pg from 'pg';
import { cleanup, compiledEntry, installSignalHandlers, onCleanup, ROOT, startService, tempDirectory, type ServiceProcess } from './processes.ts';
import { writeResults } from './report.ts';
import { heapSpaces, mappingComposition, megabytes, proportionalMb } from './memory-composition.ts';
import { workerHeapFlags } from '../src/cluster.ts';
import { loadConfig } from '../src/config.ts';

const TARGET_RSS_MB = 200;

const { values: options } = parseArgs({
  options: {
    database: { type: 'string', default: 'bench_large' },
    keep: { type: 'boolean', default: false },
    users: { type: 'string', default: '100000' },
    projects: { type: 'string', default: '10000' },
    domains: { type: 'string', default: '10' },
    logins: { type: 'string', default: '300' },
    reads: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '16' },
    // 1: one process (the worker is the process, which also migrated and bootstrapped); more: a
    // cluster, and the figures are the largest worker's (the primary's RSS beside them).
    workers: { type: 'string', default: '1' },
    'hash-cost': { type: 'string', default: '4' },
    'heap-snapshot': { type: 'boolean', default: false },
    compiled: { type: 'boolean', default: false },
    // What a cluster worker gets (src/cluster.ts workerHeapFlags: WORKER_MAX_OLD_SPACE_MB and
    // WORKER_MAX_SEMI_SPACE_MB, from BENCH_SERVICE_* when set), 'none', or node flags verbatim
    // (--heap-flags='--max-old-space-size=128 --max-semi-space-size=2': with '=', as they start with a dash).
    'heap-flags': { type: 'string', default: 'worker' },
  },
});

function count(name: keyof typeof options): number {
  const value = Number(options[name]);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer, got '${options[name]}'`);
  return value;
}

const USERS = count('users');
const PROJECTS = count('projects');
const DOMAINS = count('domains');
const LOGINS = Math.min(count('logins'), USERS);
const READS = count('reads');
const CONCURRENCY = count('concurrency');
const WORKERS = count('workers');
const HASH_COST = count('hash-cost');
const DATABASE = options.database!;
if (!/^[a-z_][a-z0-9_]*$/.test(DATABASE)) throw new Error(`--database must be a plain lower-case identifier, got '${DATABASE}'`);
if (PROJECTS % DOMAINS !== 0) throw new Error('--projects must be a multiple of --domains (each user gets a project of its own domain)');

const log = (message: string) => process.stderr.write(`bench:memory: ${message}\n`);

// ---- database ---------------------------------------------------------------------------------

function databaseUrl(server: string, name: string): string {
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}

async function withClient<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

// Stable, Keystone-shaped ids (32 hex digits) so a kept database can be reused by other tools.
const userId = (expression: string) => `md5('kgb-user-' || ${expression})`;
const projectId = (expression: string) => `md5('kgb-project-' || ${expression})`;
const domainId = (expression: string) => `md5('kgb-domain-' || ${expression})`;

/**
 * Domain d (0-based) is `bench-large-<d>`; project j is `project-<j>` in domain j mod DOMAINS; user i
 * is `user-<i>` in domain i mod DOMAINS with `member` on project i mod PROJECTS, which is in the same
 * domain because PROJECTS is a multiple of DOMAINS.
 */
async function seed(url: string, passwordHash: string): Promise<Record<string, number>> {
  return withClient(url, async (client) => {
    const timings: Record<string, number> = {};
    const step = async (name: string, sql: string, parameters: unknown[] = []) => {
      const started = performance.now();
      await client.query(sql, parameters);
      timings[name] = Math.round(performance.now() - started);
      log(`  ${name}: ${timings[name]} ms`);
    };
    const member = await client.query<{ id: string }>(`select id from role where name = 'member' and domain_id is null`);
    const memberRoleId = member.rows[0]?.id;
    if (!memberRoleId) throw new Error('no member role: bootstrap did not run');
    await client.query('begin');
    await step(
      'domains',
      `insert into project (id, name, domain_id, parent_id, is_domain, enabled, description)
       select ${domainId('d')}, 'bench-large-' || d, null, null, true, true, 'bench/seed-large.ts'
       from generate_series(0, $1 - 1) d`,
      [DOMAINS],
    );
    await step(
      'projects',
      `insert into project (id, name, domain_id, parent_id, is_domain, enabled, description)
       select ${projectId('j')}, 'project-' || j, ${domainId('j % $2')}, ${domainId('j % $2')}, false, true, ''
       from generate_series(0, $1 - 1) j`,
      [PROJECTS, DOMAINS],
    );
    await step(
      'users',
      `insert into identity_user (id, domain_id, name, enabled, default_project_id, extra)
       select ${userId('i')}, ${domainId('i % $2')}, 'user-' || i, true, ${projectId('i % $3')}, jsonb_build_object('email', 'user-' || i || '@example.org')
       from generate_series(0, $1 - 1) i`,
      [USERS, DOMAINS, PROJECTS],
    );
    await step(
      'passwords',
      `insert into password (user_id, password_hash, created_at, expires_at, self_service)
       select ${userId('i')}, $2, now(), null, false from generate_series(0, $1 - 1) i`,
      [USERS, passwordHash],
    );
    await step(
      'role_assignments',
      `insert into role_assignment (actor_type, actor_id, target_type, target_id, role_id, inherited)
       select 'user', ${userId('i')}, 'project', ${projectId('i % $2')}, $3, false from generate_series(0, $1 - 1) i`,
      [USERS, PROJECTS, memberRoleId],
    );
    await client.query('commit');
    await step('analyze', 'analyze');
    return timings;
  });
}

// ---- the service's memory ---------------------------------------------------------------------

interface Memory {
  /** Of the process, or with --workers > 1 of the largest worker (pid). */
  pid: number;
  rssMb: number;
  hwmMb: number;
  /** Proportional set size (shared pages divided among the processes sharing them). */
  pssMb: number;
  /** Resident MB by kind of mapping (bench/memory-composition.ts). */
  mappings: Record<string, number>;
  /** Committed MB of each V8 heap space, from the service's /metrics (with --workers > 1 the workers' mean). */
  heapSpaces: Record<string, number>;
  /** With --workers > 1: the cluster primary's VmRSS. */
  primaryRssMb?: number;
}

function statusMb(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMb: megabytes(kb('VmRSS') * 1024), hwmMb: megabytes(kb('VmHWM') * 1024) };
}

/** The cluster's workers: the primary's child processes. */
function workerPids(primary: number): number[] {
  const children = readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  if (children.length !== WORKERS) throw new Error(`expected ${WORKERS} workers under pid ${primary}, found ${children.length}`);
  return children;
}

/** The processes whose memory is read: the workers, or the one process. */
const measuredPids = (service: ServiceProcess) => (WORKERS > 1 ? workerPids(service.pid) : [service.pid]);

/** Restarts each process's peak RSS (VmHWM) from its current RSS (proc(5): clear_refs, 5). */
function resetPeaks(pids: number[]): void {
  for (const pid of pids) writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** The highest peak RSS (VmHWM) among the processes. */
const peakMb = (pids: number[]) => Math.max(...pids.map((pid) => statusMb(pid).hwmMb));

async function memoryOf(service: ServiceProcess): Promise<Memory> {
  const [largest] = measuredPids(service).map((pid) => ({ pid, ...statusMb(pid) })).sort((a, b) => b.rssMb - a.rssMb);
  const smaps = readFileSync(`/proc/${largest!.pid}/smaps`, 'utf8');
  const mappings = mappingComposition(smaps, process.execPath);
  const metrics = await fetch(`${service.url}/metrics`);
  if (!metrics.ok) throw new Error(`GET /metrics answered ${metrics.status}`);
  return { ...largest!, pssMb: proportionalMb(smaps), mappings, heapSpaces: heapSpaces(await metrics.text(), WORKERS), ...(WORKERS > 1 ? { primaryRssMb: statusMb(service.pid).rssMb } : {}) };
}

/** One row per kind of memory, one column per reading: where the resident size went. */
function compositionTable(readings: Record<string, Memory>): string[] {
  const labels = Object.keys(readings);
  const rows = (title: string, pick: (memory: Memory) => Record<string, number>) => {
    const kinds = [...new Set(labels.flatMap((label) => Object.keys(pick(readings[label]!))))];
    const last = pick(readings[labels[labels.length - 1]!]!);
    kinds.sort((a, b) => (last[b] ?? 0) - (last[a] ?? 0));
    const width = Math.max(...labels.map((label) => label.length)) + 2;
    return [
      title,
      `${''.padEnd(26)}${labels.map((label) => label.padStart(width)).join('')}`,
      ...kinds.map((kind) => `  ${kind.slice(0, 24).padEnd(24)}${labels.map((label) => (pick(readings[label]!)[kind] ?? 0).toFixed(1).padStart(width)).join('')}`),
    ];
  };
  // The series carry node:cluster's worker id, not a pid: with WORKERS > 1 the V8 figures are the workers' mean.
  const heapTitle = WORKERS > 1 ? `V8 heap committed MB (mean of ${WORKERS} workers)` : 'V8 heap committed MB';
  return [...rows(WORKERS > 1 ? 'resident MB by mapping (largest worker)' : 'resident MB by mapping', (memory) => memory.mappings), '', ...rows(heapTitle, (memory) => memory.heapSpaces)];
}

// ---- the workload -----------------------------------------------------------------------------

class Api {
  requests = 0;
  failures: string[] = [];
  constructor(private readonly base: string) {}

  async call(method: string, path: string, token?: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; json: any }> {
    const response = await fetch(`${this.base}/v3${path}`, {
      method,
      headers: { ...headers, ...(token ? { 'x-auth-token': token } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    this.requests++;
    if (response.status < 200 || response.status > 299) {
      if (this.failures.length < 20) this.failures.push(`${method} ${path} -> ${response.status} ${text.slice(0, 200)}`);
      return { status: response.status, headers: response.headers, json: undefined };
    }
    return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined };
  }

  async token(user: string, domain: string, password: string, project: string): Promise<string | undefined> {
    const { headers } = await this.call('POST', '/auth/tokens', undefined, {
      auth: {
        identity: { methods: ['password'], password: { user: { name: user, domain: { name: domain }, password } } },
        scope: { project: { name: project, domain: { name: domain } } },
      },
    });
    return headers.get('x-subject-token') ?? undefined;
  }
}

/** Runs `tasks` with at most CONCURRENCY in flight. */
async function pool<T>(items: readonly T[], task: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
}

/** Spread sample of `count` indexes over 0..total-1 (a stride, so every domain and range is touched). */
function sample(total: number, count: number, salt = 0): number[] {
  const stride = Math.max(1, Math.floor(total / count));
  return Array.from({ length: Math.min(count, total) }, (_, k) => (k * stride + salt) % total);
}

/** The id seed() gave entity `index` (md5 as in its SQL). */
function hexId(kind: 'user' | 'project' | 'domain', index: number): string {
  return createHash('md5').update(`kgb-${kind}-${index}`).digest('hex');
}

async function workingSet(api: Api, adminToken: string, password: string): Promise<void> {
  const tokens: { token: string; user: number }[] = [];
  await pool(sample(USERS, LOGINS, 7), async (i) => {
    const token = await api.token(`user-${i}`, `bench-large-${i % DOMAINS}`, password, `project-${i % PROJECTS}`);
    if (token) tokens.push({ token, user: i });
  });
  log(`  ${tokens.length} of ${LOGINS} logins issued a token`);
  await pool(tokens, async ({ token, user }) => {
    const id = hexId('user', user);
    await api.call('GET', '/auth/tokens', adminToken, undefined, { 'x-subject-token': token });
    await api.call('GET', '/auth/catalog', token);
    await api.call('GET', `/users/${id}/projects`, token);
    await api.call('GET', `/role_assignments?user.id=${id}&effective`, adminToken);
    await api.call('GET', '/auth/tokens', adminToken, undefined, { 'x-subject-token': token });
  });
  await pool(sample(USERS, READS, 3), async (i) => api.call('GET', `/users/${hexId('user', i)}`, adminToken));
  await pool(sample(PROJECTS, READS, 5), async (j) => api.call('GET', `/projects/${hexId('project', j)}`, adminToken));
  const listings: string[] = [];
  for (let d = 0; d < DOMAINS; d++) {
    const domain = hexId('domain', d);
    for (let prefix = 1; prefix <= 9; prefix++) listings.push(`/users?domain_id=${domain}&name__startswith=user-${prefix}${d}`);
    listings.push(`/users?domain_id=${domain}&enabled=true&name__contains=999`);
    listings.push(`/projects?domain_id=${domain}`);
    listings.push(`/projects?domain_id=${domain}&name__startswith=project-1`);
  }
  await pool(listings, (path) => api.call('GET', path, adminToken));
  await pool(sample(PROJECTS, Math.min(READS, 500), 11), async (j) => api.call('GET', `/role_assignments?scope.project.id=${hexId('project', j)}&include_names`, adminToken));
}

/** One full list: how many entries, how long it took, and the highest peak RSS of a worker meanwhile. */
interface Listing {
  entries: number;
  seconds: number;
  peakMb: number;
}

async function fullLists(api: Api, adminToken: string, pids: number[]): Promise<Record<string, Listing>> {
  const listings: Record<string, Listing> = {};
  for (const [name, path] of [
    ['users', '/users'],
    ['projects', '/projects'],
    ['role_assignments', '/role_assignments'],
    // Expanded page by page too (group members, inherited grants, implied roles).
    ['role_assignments', '/role_assignments?effective'],
  ] as const) {
    // Each list's own peak: which list makes the peak, not only that there was one.
    resetPeaks(pids);
    const started = performance.now();
    const { json } = await api.call('GET', path, adminToken);
    const seconds = Math.round(performance.now() - started) / 1000;
    const entries = Array.isArray(json?.[name]) ? json[name].length : -1;
    listings[path.slice(1)] = { entries, seconds, peakMb: peakMb(pids) };
    log(`  GET ${path}: ${entries} entries in ${seconds} s, peak RSS ${listings[path.slice(1)]!.peakMb} MB`);
  }
  return listings;
}

// ---- heap snapshot ----------------------------------------------------------------------------

/** Self size per constructor name (nodes of type object/closure/array/string…), largest first. */
function summariseSnapshot(file: string): { totalMb: number; top: { name: string; count: number; mb: number }[] } {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snapshot.snapshot.meta.node_types[0];
  const groups = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let at = 0; at < snapshot.nodes.length; at += width) {
    const type = types[snapshot.nodes[at + typeAt]!]!;
    const size = snapshot.nodes[at + sizeAt]!;
    total += size;
    const name = type === 'object' || type === 'closure' ? `${type === 'closure' ? 'closure ' : ''}${snapshot.strings[snapshot.nodes[at + nameAt]!]}` : `(${type})`;
    const group = groups.get(name) ?? { count: 0, bytes: 0 };
    group.count++;
    group.bytes += size;
    groups.set(name, group);
  }
  const top = [...groups.entries()]
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .slice(0, 15)
    .map(([name, { count, bytes }]) => ({ name, count, mb: megabytes(bytes) }));
  return { totalMb: megabytes(total), top };
}

async function heapSnapshot(pid: number, directory: string): Promise<string | undefined> {
  const before = new Set(readdirSync(directory));
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const created = readdirSync(directory).find((file) => file.endsWith('.heapsnapshot') && !before.has(file));
    if (created) {
      // Written in chunks, and the process keeps serving: done when it parses (the closing brackets came).
      const file = path.join(directory, created);
      let size = -1;
      while (Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 2000));
        const now = statSync(file).size;
        if (now !== size) {
          size = now;
          continue;
        }
        if (readFileSync(file, 'utf8').trimEnd().endsWith('}')) return file;
      }
      return undefined;
    }
  }
  return undefined;
}

/** --heap-flags: the node flags a worker would get, none, or the given ones. */
function heapFlagsOption(): string[] {
  const option = options['heap-flags']!;
  if (option === 'none') return [];
  if (option !== 'worker') return option.split(/\s+/).filter(Boolean);
  const environment: Record<string, string> = {};
  for (const name of ['WORKER_MAX_OLD_SPACE_MB', 'WORKER_MAX_SEMI_SPACE_MB']) {
    const value = process.env[`BENCH_SERVICE_${name}`];
    if (value !== undefined) environment[name] = value;
  }
  return workerHeapFlags(loadConfig(environment).workerHeap);
}

// ---- main -------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const startedAt = new Date();
  installSignalHandlers(() => {});
  const server = process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const url = databaseUrl(server, DATABASE);
  await withClient(server, async (client) => {
    await client.query(`drop database if exists ${DATABASE} with (force)`);
    await client.query(`create database ${DATABASE}`);
  });
  if (!options.keep) onCleanup(`drop database ${DATABASE}`, () => withClient(server, (client) => client.query(`drop database if exists ${DATABASE} with (force)`)).then(() => undefined));
  else log(`--keep: database ${DATABASE} stays (drop database ${DATABASE} when done)`);

  const adminPassword = `bench-${randomBytes(12).toString('hex')}`;
  const dataDirectory = tempDirectory('kg-bench-memory-data-');
  const snapshotDirectory = tempDirectory('kg-bench-memory-heap-');
  const entry = options.compiled ? await compiledEntry(log) : undefined;
  const common = {
    adminPassword,
    policyDirectory: path.join(ROOT, 'policies'),
    databaseUrl: url,
    dataDirectory,
    // The bundle lives elsewhere: the identity policy's default path is relative to the source tree.
    settings: { WORKERS: String(WORKERS), IDENTITY_POLICY_DIR: path.join(ROOT, 'policies', 'identity') },
    ...(entry ? { entry } : {}),
  };

  log(`migrating and bootstrapping ${DATABASE}`);
  const first = await startService(common);
  await first.stop();

  const password = `seed-${randomBytes(8).toString('hex')}`;
  log(`seeding ${DOMAINS} domains, ${PROJECTS} projects, ${USERS} users with passwords (one bcrypt cost-${HASH_COST} hash), ${USERS} assignments`);
  const seedStarted = performance.now();
  const seedTimings = await seed(url, hashSync(password, { cost: HASH_COST }));
  const seedMs = Math.round(performance.now() - seedStarted);
  const tableSizes = await withClient(url, async (client) => {
    const result = await client.query<{ name: string; rows: string }>(
      `select 'project' as name, count(*) as rows from project union all select 'identity_user', count(*) from identity_user
       union all select 'password', count(*) from password union all select 'role_assignment', count(*) from role_assignment`,
    );
    return Object.fromEntries(result.rows.map((row) => [row.name, Number(row.rows)]));
  });
  log(`seeded in ${seedMs} ms: ${JSON.stringify(tableSizes)}`);

  // WORKERS=1 is one process, which the primary's flags for its workers do not reach: give them here.
  const heapFlags = heapFlagsOption();
  const service = await startService({ ...common, nodeArgs: [...heapFlags, `--heapsnapshot-signal=SIGUSR2`, `--diagnostic-dir=${snapshotDirectory}`] });
  log(`service pid ${service.pid} at ${service.url} (WORKERS=${WORKERS}${heapFlags.length ? `, ${heapFlags.join(' ')}` : ''})`);
  const api = new Api(service.url);
  const readings: Record<string, Memory & { at: string }> = {};
  const read = async (label: string) => {
    readings[label] = { ...(await memoryOf(service)), at: new Date().toISOString() };
    const reading = readings[label]!;
    log(`${label}: VmRSS ${reading.rssMb} MB, VmHWM ${reading.hwmMb} MB, PSS ${reading.pssMb} MB${reading.primaryRssMb === undefined ? '' : ` (largest of ${WORKERS} workers; primary ${reading.primaryRssMb} MB)`}`);
  };
  await read('started');
  const adminToken = await api.token('admin', 'Default', adminPassword, 'admin');
  if (!adminToken) throw new Error(`admin login failed: ${api.failures.join('; ')}`);

  log('A: working set (logins, validations, catalogs, reads, filtered lists)');
  let started = performance.now();
  await workingSet(api, adminToken, password);
  const workingSetS = Math.round(performance.now() - started) / 1000;
  const requestsA = api.requests;
  await read('after working set');
  log('A again (the same requests: caches warm, nothing new to hold)');
  await workingSet(api, adminToken, password);
  await read('after working set ×2');

  log('B: full lists');
  started = performance.now();
  const pids = measuredPids(service);
  // The working set's peak, before the lists restart it.
  const workingSetPeakMb = peakMb(pids);
  const listed = await fullLists(api, adminToken, pids);
  const fullListsS = Math.round(performance.now() - started) / 1000;
  await read('after full lists');
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  await read('10 s idle');
  const peakIncludingListsMb = Math.max(workingSetPeakMb, ...Object.values(listed).map((listing) => listing.peakMb), peakMb(pids));

  let heap: ReturnType<typeof summariseSnapshot> | undefined;
  if (options['heap-snapshot'] || readings['after working set ×2']!.rssMb > TARGET_RSS_MB) {
    log('writing a heap snapshot of the worker');
    const file = await heapSnapshot(readings['after working set ×2']!.pid, snapshotDirectory);
    if (file) heap = summariseSnapshot(file);
    else log('no heap snapshot appeared');
  }

  const rows = Object.entries(readings);
  const after = readings['after working set ×2']!;
  const table = [
    `memory of one worker: ${USERS} users, ${PROJECTS} projects (${DOMAINS} domains), ${USERS} role assignments; PostgreSQL; ${options.compiled ? 'compiled bundle (--compiled)' : 'node --import=tsx src/main.ts'}${heapFlags.length ? ` ${heapFlags.join(' ')}` : ''}; node ${process.version}, ${os.availableParallelism()} cores, load ${os.loadavg().map((value) => value.toFixed(2)).join(' ')}`,
    `seeded in ${(seedMs / 1000).toFixed(1)} s; working set: ${requestsA} requests in ${workingSetS} s (${LOGINS} logins, ${CONCURRENCY} in flight); full lists in ${fullListsS} s (${Object.entries(listed).map(([name, listing]) => `${name} ${listing.entries} in ${listing.seconds} s, peak ${listing.peakMb} MB`).join('; ')})`,
    '',
    ...(WORKERS > 1 ? [`WORKERS=${WORKERS}: the largest worker's figures; the primary's RSS beside them`] : []),
    `${'when'.padEnd(24)}  ${'VmRSS MB'.padStart(9)}  ${'VmHWM MB'.padStart(9)}  ${'PSS MB'.padStart(7)}${WORKERS > 1 ? `  ${'primary MB'.padStart(10)}` : ''}`,
    ...rows.map(([label, memory]) => `${label.padEnd(24)}  ${memory.rssMb.toFixed(1).padStart(9)}  ${memory.hwmMb.toFixed(1).padStart(9)}  ${memory.pssMb.toFixed(1).padStart(7)}${memory.primaryRssMb === undefined ? '' : `  ${memory.primaryRssMb.toFixed(1).padStart(10)}`}`),
    '',
    ...compositionTable(readings),
    '',
    `target ≤ ${TARGET_RSS_MB} MB RSS per worker: after the working set ${after.rssMb} MB → ${after.rssMb <= TARGET_RSS_MB ? 'MET' : 'NOT MET'}; ` +
      `peak including full lists ${peakIncludingListsMb} MB → ${peakIncludingListsMb <= TARGET_RSS_MB ? 'MET' : 'NOT MET'}`,
    `PSS after the working set ${after.pssMb} MB: pages shared with other processes (node's binary: the node's other workers and primary, and this bench's own node) divided among them`,
  ];
  if (heap) {
    table.push('', `heap snapshot: ${heap.totalMb} MB of objects; largest groups (self size):`);
    for (const group of heap.top) table.push(`  ${group.mb.toFixed(1).padStart(7)} MB  ${String(group.count).padStart(8)} × ${group.name}`);
  }
  if (api.failures.length) table.push('', `!!! ${api.failures.length} failed requests (first ones):`, ...api.failures.map((failure) => `  ${failure}`));
  process.stdout.write(`\n${table.join('\n')}\n`);

  const file = writeResults(
    {
      kind: 'memory',
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      label: process.env.BENCH_LABEL ?? '',
      machine: { node: process.version, cores: os.availableParallelism(), cpu: os.cpus()[0]?.model, loadavgAfter: os.loadavg() },
      settings: { compiled: Boolean(options.compiled), heapFlags, workers: WORKERS, users: USERS, projects: PROJECTS, domains: DOMAINS, logins: LOGINS, reads: READS, concurrency: CONCURRENCY, hashCost: HASH_COST, database: DATABASE, service: service.settings },
      seed: { ms: seedMs, steps: seedTimings, rows: tableSizes },
      requests: api.requests,
      failures: api.failures,
      workingSetS,
      fullListsS,
      listed,
      workingSetPeakMb,
      peakIncludingListsMb,
      readings,
      targetRssMb: TARGET_RSS_MB,
      heap,
    },
    startedAt,
    'memory-',
  );
  process.stdout.write(`\nwrote ${path.relative(process.cwd(), file)}\n`);
  if (!existsSync(file)) return 2;
  return api.failures.length ? 1 : 0;
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (error: unknown) => {
    process.stderr.write(`bench:memory failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    await cleanup();
    process.exit(2);
  });
