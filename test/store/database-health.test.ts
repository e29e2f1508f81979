import t, { type Test } from 'tap';
import { DatabaseHealth } from '../../src/store/database-health.ts';
import { Store, type StoreOptions } from '../../src/store/database.ts';
import { databaseUnavailable, isDatabaseKnownUnreachable } from '../../src/store/unavailable.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { eventually } from '../helpers/keystone-client.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';

// The store's own view of a partition, on a real PostgreSQL behind a relay that drops every byte.
const SERVER = process.env.TEST_DATABASE_URL || LOCAL_POSTGRES;
const TIMEOUT_MS = 500;

async function partitionable(t: Test, timeoutMs = TIMEOUT_MS, options: Pick<StoreOptions, 'poolSize'> = {}) {
  const database = await createTestDatabase(SERVER);
  const server = new URL(SERVER);
  const relay = await startTcpRelay(server.hostname, Number(server.port || 5432));
  const store = await Store.open({ databaseUrl: relay.urlFor(database.url!), connectTimeoutMs: timeoutMs, queryTimeoutMs: timeoutMs, acquireTimeoutMs: 2000, ...options });
  store.watchHealth();
  const changes: boolean[] = [];
  store.health.onChange((reachable) => changes.push(reachable));
  t.teardown(async () => {
    relay.restore();
    await store.close();
    await relay.close();
    await database.drop();
  });
  return { store, relay, changes, databaseUrl: database.url! };
}

/** Another node's store on the same database, reached directly (not through the relay). */
async function directStore(t: Test, databaseUrl: string): Promise<Store> {
  const store = await Store.open({ databaseUrl, connectTimeoutMs: TIMEOUT_MS, queryTimeoutMs: TIMEOUT_MS, acquireTimeoutMs: 2000 });
  t.teardown(() => store.close());
  return store;
}

/** Connections the store's pool has handed out and not had back. */
function checkedOut(store: Store): number {
  return (store.orm.em.getConnection().getKnex().client as { pool: { numUsed(): number } }).pool.numUsed();
}

async function timed(work: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    await work();
    return { error: undefined, ms: Date.now() - started };
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
}

t.test('a query timeout marks the database unreachable; queries then fail at once; the probe finds it back', async (t) => {
  const { store, relay, changes } = await partitionable(t);
  await store.ping(); // a pooled connection, idle when the partition begins
  relay.cut('blackhole');
  const first = await timed(() => store.reader().getConnection().execute('select 1'));
  t.ok(first.error, 'the query on the silent connection fails');
  t.ok(first.ms >= TIMEOUT_MS - 50 && first.ms < TIMEOUT_MS + 1000, `after the query timeout: ${first.ms} ms`);
  // The timeout sets the probe off; its failure, within one probe interval, confirms the partition.
  t.ok(await eventually(() => !store.health.reachable, TIMEOUT_MS + 1000, 10), 'confirmed by the probe');
  t.same(changes, [false]);

  const next = await timed(() => store.transaction((em) => em.getConnection().execute('select 1')));
  t.ok(isDatabaseKnownUnreachable(next.error), 'a transaction is refused without asking');
  t.ok(next.ms < 50, `at once: ${next.ms} ms`);
  const unavailable = databaseUnavailable(next.error);
  t.match(unavailable, { kind: 'unavailable', retryAfterSeconds: 1 }, 'a 503 with Retry-After');
  t.equal(store.health.partitions, 1);

  relay.restore();
  t.ok(await eventually(() => store.health.reachable, 3000, 20), 'the probe finds it back');
  t.same(changes, [false, true], 'one change each way');
  await store.ping();
  t.pass('queries work again, on new connections');
});

t.test('a connection that cannot be opened marks it unreachable too', async (t) => {
  const { store, relay } = await partitionable(t);
  relay.cut('blackhole');
  // The pool holds no connection yet (min 0): the query must open one, and the connect times out.
  const first = await timed(() => store.ping());
  t.ok(first.error);
  t.ok(first.ms < TIMEOUT_MS + 1000, `within the connect timeout: ${first.ms} ms`);
  t.ok(await eventually(() => !store.health.reachable, TIMEOUT_MS + 1000, 10), 'confirmed by the probe');
  relay.restore();
  t.ok(await eventually(() => store.health.reachable, 3000, 20));
});

t.test('a query that is merely slow is no partition: the probe answers, nothing is marked unreachable', async (t) => {
  // A longer timeout than the other tests': the probe the timeout sets off has half a probe interval
  // (half of min(timeout, 1 s): 500 ms here, 250 with 500) to open a connection and answer, and a
  // loaded server can take a quarter of a second to start a session.
  const timeoutMs = 2000;
  const { store, changes } = await partitionable(t, timeoutMs);
  // Silent for twice the query timeout, on a server that answers everything else at once.
  const slow = await timed(() => store.reader().getConnection().execute(`select pg_sleep(${(2 * timeoutMs) / 1000})`));
  t.ok(slow.error, 'the silent query itself is dropped (a 503 for that request)');
  t.ok(slow.ms < 2 * timeoutMs, `after the query timeout: ${slow.ms} ms`);
  // Long enough for the probe set off by the timeout to have answered.
  await store.ping();
  await new Promise((resolve) => setTimeout(resolve, timeoutMs / 2 + 200));
  t.equal(store.health.reachable, true, 'still reachable');
  t.equal(store.health.partitions, 0, 'never marked unreachable');
  t.same(changes, [], 'no change announced');
  await store.ping();
  t.pass('queries go on');
});

t.test('an idle store notices through its probe', async (t) => {
  const { store, relay } = await partitionable(t);
  relay.cut('blackhole');
  t.ok(await eventually(() => !store.health.reachable, 1000 + TIMEOUT_MS + 1000, 20), 'within one interval and the probe timeout');
  relay.restore();
  t.ok(await eventually(() => store.health.reachable, 3000, 20));
});

t.test('a statement waiting on a lock fails (a 503) within the query timeout: a busy row is no partition', async (t) => {
  const { store, databaseUrl } = await partitionable(t);
  const other = await directStore(t, databaseUrl);
  await other.reader().getConnection().execute('create table held (id int)');
  let release!: () => void;
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const holding = other.transaction(async (em) => {
    await em.getConnection().execute('lock table held in access exclusive mode', [], 'run', em.getTransactionContext());
    locked();
    await new Promise<void>((resolve) => (release = resolve));
  });
  await isLocked;
  const waited = await timed(() => store.reader().getConnection().execute('select * from held'));
  release();
  await holding;
  // (55P03 is the server's lock_timeout answering: had the query timeout come first, the error would be ours.)
  t.match(waited.error, { code: '55P03' }, 'lock_timeout, before the query timeout: the server says so');
  t.ok(waited.ms < TIMEOUT_MS + 1500, `and no long wait (${waited.ms} ms; lock_timeout is half the query timeout)`);
  t.match(databaseUnavailable(waited.error), { kind: 'unavailable', retryAfterSeconds: 1 }, 'a 503 with Retry-After');
  t.equal(store.health.partitions, 0, 'the database was never marked unreachable');
});

t.test('a node cut off inside a transaction does not hold its locks for long', async (t) => {
  const { store, relay, databaseUrl } = await partitionable(t);
  const other = await directStore(t, databaseUrl);
  await other.reader().getConnection().execute('create table held (id int)');
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const cutOff = store.transaction(async (em) => {
    await em.getConnection().execute('lock table held in access exclusive mode', [], 'run', em.getTransactionContext());
    relay.cut('blackhole');
    locked();
    // Still inside the transaction when the partition begins: the server sees an idle session.
    await em.getConnection().execute('select 1', [], 'run', em.getTransactionContext());
  });
  cutOff.catch(() => {});
  await isLocked;
  const freed = await eventually(async () => {
    try {
      await other.reader().getConnection().execute('select * from held');
      return true;
    } catch {
      return false;
    }
  }, 5000, 50);
  t.ok(freed, 'the server ended the idle transaction: the lock is free for the other nodes');
  await t.rejects(cutOff, 'the cut-off transaction did not commit');
});

t.test('a transaction cut off gives its pooled connection back: a pool of one serves again after the partition', async (t) => {
  // Cut while a statement of the transaction is under way, and while its COMMIT is: either way the
  // rollback that follows fails on the dead connection, and the connection must still leave the pool.
  // (MikroORM 7's kysely 0.29.6 kept it checked out, kysely-org/kysely#1990: the next one waited forever.)
  for (const when of ['statement', 'commit'] as const) {
    const { store, relay } = await partitionable(t, TIMEOUT_MS, { poolSize: 1 });
    const cutOff = store.transaction(async (em) => {
      await em.getConnection().execute('select 1', [], 'run', em.getTransactionContext());
      relay.cut('blackhole');
      if (when === 'statement') await em.getConnection().execute('select 1', [], 'run', em.getTransactionContext());
    });
    await t.rejects(cutOff, `${when}: the cut-off transaction failed`);
    t.ok(await eventually(() => !store.health.reachable, 5000, 50), `${when}: the probe confirmed the partition`);
    relay.restore();
    t.ok(await eventually(() => store.health.reachable, 5000, 50), `${when}: the probe found the database back`);
    t.equal(checkedOut(store), 0, `${when}: no connection is still checked out`);
    const answered = await timed(() => store.transaction((em) => em.getConnection().execute('select 1 as one', [], 'all', em.getTransactionContext())));
    t.equal(answered.error, undefined, `${when}: the pool's one connection serves the next transaction`);
  }
});

t.test('too many connections (53300) is a 503, not a partition', async (t) => {
  const { databaseUrl } = await partitionable(t);
  const admin = await directStore(t, databaseUrl);
  const role = `kg_limited_${process.pid}`;
  // One session allowed: the transaction below holds it, so the query inside it needs a second one.
  await admin.reader().getConnection().execute(`create role ${role} login connection limit 1`);
  t.teardown(() => admin.reader().getConnection().execute(`drop role if exists ${role}`));
  const url = new URL(databaseUrl);
  url.username = role;
  url.password = '';
  const store = await Store.open({ databaseUrl: url.toString(), connectTimeoutMs: TIMEOUT_MS, queryTimeoutMs: TIMEOUT_MS, acquireTimeoutMs: 2000 });
  store.watchHealth();
  t.teardown(() => store.close());
  const refused = await timed(() => store.transaction(() => store.ping()));
  t.match(refused.error, { code: '53300' });
  t.match(databaseUnavailable(refused.error), { kind: 'unavailable', retryAfterSeconds: 1 }, 'a 503 with Retry-After');
  t.equal(store.health.reachable, true, 'not marked unreachable by the query');
  await store.health.runProbe();
  t.equal(store.health.reachable, true, 'nor by the probe (the server answered)');
});

t.test('the probe waits no longer than its interval (1 s), whatever the query and connect timeouts', async (t) => {
  const { store, relay } = await partitionable(t, 4000);
  await store.ping();
  relay.cut('blackhole');
  const cutAt = Date.now();
  t.ok(await eventually(() => !store.health.reachable, 10_000, 20));
  const noticedMs = Date.now() - cutAt;
  t.ok(noticedMs < 2 * 1000 + 1000, `an idle store is not ready ${noticedMs} ms into the partition: within two intervals, not the 4 s query timeout`);
  // Let a probe start on the dead path, then end the partition.
  await new Promise((resolve) => setTimeout(resolve, 1200));
  relay.restore();
  const healedAt = Date.now();
  t.ok(await eventually(() => store.health.reachable, 10_000, 20));
  const backMs = Date.now() - healedAt;
  t.ok(backMs < 2 * 1000 + 1000, `reachable ${backMs} ms after the partition ended: within two intervals, not the 4 s connect timeout`);
});

t.test('a probe that gives up on a dead connection is followed at once: back within one interval of the partition ending, not two', async (t) => {
  // (1 s: a timer held up on a loaded machine must not look like the beat skipped, which takes two.)
  const INTERVAL_MS = 1000;
  const started: number[] = [];
  let healed = false;
  let healedAt = 0;
  // As DatabaseProbe does on a silent connection: it gives up after its interval, deciding after that loop turn's I/O.
  const health = new DatabaseHealth((timeoutMs = INTERVAL_MS) => {
    started.push(performance.now());
    if (healed) return Promise.resolve();
    if (started.length === 3) {
      // The partition ends just after this probe set off on the dead path.
      healed = true;
      healedAt = performance.now();
    }
    return new Promise((_resolve, reject) => setTimeout(() => setImmediate(() => reject(new Error('database read timeout'))), timeoutMs));
  }, { probeIntervalMs: INTERVAL_MS });
  health.start();
  t.teardown(() => health.stop());
  health.markUnreachable('cut off');
  t.ok(await eventually(() => health.reachable, 10 * INTERVAL_MS, 5), 'reachable again');
  const backMs = performance.now() - healedAt;
  t.ok(backMs < 1.6 * INTERVAL_MS, `back ${Math.round(backMs)} ms after the partition ended (interval ${INTERVAL_MS} ms; a beat skipped would take two)`);
  t.ok(started.length >= 4, 'the probe that found it back was the one after the dead one');
});

t.test('a suspicion while a probe is under way waits half an interval for a verdict, not what is left of that probe’s interval', async (t) => {
  // Long enough that the old wait (what is left of the interval, ~1,950 ms) and the bound (half
  // an interval, plus a timer held up on a loaded machine: runningDeadline's grace) are far apart.
  const INTERVAL_MS = 4000;
  let suspectedAt = 0;
  // A partition: every probe is silent until it gives up after its own timeout (the periodic one gets a whole interval).
  const health = new DatabaseHealth(
    (timeoutMs = INTERVAL_MS) => new Promise((_resolve, reject) => setTimeout(() => setImmediate(() => reject(new Error('database read timeout'))), timeoutMs)),
    { probeIntervalMs: INTERVAL_MS },
  );
  health.start();
  t.teardown(() => health.stop());
  // The first periodic probe sets off after one interval; a query times out just after that.
  await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS + 50));
  suspectedAt = performance.now();
  health.suspect('the query timed out');
  t.ok(health.pendingVerdict, 'requests have a verdict to wait for');
  await health.pendingVerdict;
  const waitedMs = performance.now() - suspectedAt;
  t.equal(health.reachable, false, 'the verdict: unreachable');
  t.equal(health.lastReason, 'the query timed out', 'for the reason suspected');
  t.ok(waitedMs < INTERVAL_MS / 2 + 1000, `verdict ${Math.round(waitedMs)} ms after the suspicion (half an interval is ${INTERVAL_MS / 2} ms; the probe under way had ~${INTERVAL_MS - 50} ms left)`);
  t.equal(health.pendingVerdict, undefined, 'no verdict pending once decided');
});

t.test('a probe under way that answers within the confirmation time clears the suspicion', async (t) => {
  const INTERVAL_MS = 800;
  // The probes answer when the test says (not after a delay that a loaded machine could stretch).
  const answers: (() => void)[] = [];
  const health = new DatabaseHealth(() => new Promise<void>((resolve) => answers.push(resolve)), { probeIntervalMs: INTERVAL_MS });
  health.start();
  t.teardown(() => health.stop());
  t.ok(await eventually(() => answers.length === 1, 10 * INTERVAL_MS, 5), 'the first periodic probe is under way');
  health.suspect('a slow query');
  t.ok(health.pendingVerdict, 'a verdict to wait for');
  // The probe under way answers a quarter of an interval later: slow, but within the confirmation time (half an interval).
  setTimeout(() => answers[0]!(), INTERVAL_MS / 4);
  await health.pendingVerdict;
  t.equal(health.reachable, true, 'a slow answer is no partition');
  t.equal(health.partitions, 0);
});
