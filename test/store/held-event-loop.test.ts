import t, { type Test } from 'tap';
import { Store, type StoreOptions } from '../../src/store/database.ts';
import { runningDeadline } from '../../src/store/connect-deadline.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';

const SERVER = process.env.TEST_DATABASE_URL || LOCAL_POSTGRES;

/** Holds this process's event loop, as a long synchronous task or a starved CPU would. */
function holdEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** A store on a database of its own, its health watched; `changes` lists every change of reachability. */
async function watchedStore(t: Test, options: Omit<StoreOptions, 'databaseUrl'>): Promise<{ store: Store; changes: boolean[] }> {
  const database = await createTestDatabase(SERVER);
  const store = await Store.open({ databaseUrl: database.url!, ...options });
  store.watchHealth();
  const changes: boolean[] = [];
  store.health.onChange((reachable) => changes.push(reachable));
  t.teardown(async () => {
    await store.close();
    await database.drop();
  });
  return { store, changes };
}

t.test('a connection opened while the event loop is held up past the connect timeout still opens', async (t) => {
  // Timeouts of 600 ms, a hold of 1.5 s: a plain timer fails, and a server that is merely slow on a
  // loaded machine (the probe opens its connections within the same timeout) does not.
  const { store, changes } = await watchedStore(t, { connectTimeoutMs: 600, queryTimeoutMs: 2000 });
  await store.ping();
  // Two at once: the second needs a new pooled connection, whose opening starts now and is then held up.
  const queries = [1, 2].map((n) => store.reader().getConnection().execute(`select ${n} as n`));
  // One turn, so that the pool has begun opening the connection (and pg armed its timer).
  await new Promise((resolve) => setImmediate(resolve));
  holdEventLoop(1500);
  const answers = await Promise.allSettled(queries);
  t.same(answers.map((answer) => answer.status), ['fulfilled', 'fulfilled'], 'pg\'s plain timer would have destroyed the second connection ("timeout expired")');
  t.equal(store.health.reachable, true);
  t.same(changes, [], 'never taken for a partition');
});

t.test('the first connection, opened while the ORM starts, is bounded in running time too', async (t) => {
  // The ORM opens a connection before Store.open returns (it checks the database exists): on a
  // loaded machine that opening was held up past a short connect timeout, and pg's plain timer
  // failed Store.open with 'timeout expired' (seen in CI). A relay holds the loop as it accepts.
  const database = await createTestDatabase(SERVER);
  const server = new URL(SERVER);
  let held = 0;
  const relay = await startTcpRelay(server.hostname, Number(server.port || 5432), {
    onAccept: () => {
      if (held++ === 0) holdEventLoop(1500);
    },
  });
  t.teardown(async () => {
    await relay.close();
    await database.drop();
  });
  const store = await Store.open({ databaseUrl: relay.urlFor(database.url!), connectTimeoutMs: 600, queryTimeoutMs: 2000 });
  t.teardown(() => store.close());
  t.ok(held >= 1, 'the relay held the loop on the first connection');
  const [row] = await store.reader().getConnection().execute('select 1 as n');
  t.equal(row?.n, 1);
});

t.test('the health probe opening its connection while the event loop is held up past its timeout does not take the database for unreachable', async (t) => {
  // The probe's interval and timeout: min(query timeout, 1 s).
  const { store, changes } = await watchedStore(t, { queryTimeoutMs: 600 });
  // The first probe opens the probe's own connection (TCP, startup, then the query): held up after its first step.
  const probing = store.health.runProbe();
  holdEventLoop(1500);
  await probing;
  t.equal(store.health.reachable, true, 'a plain timer would have failed the probe: the opening had several round trips left');
  t.same(changes, [], 'never taken for a partition');
  // And once open, a probe held up while its query is answered.
  const again = store.health.runProbe();
  await new Promise((resolve) => setImmediate(resolve));
  holdEventLoop(1500);
  await again;
  t.equal(store.health.reachable, true, 'a probe held up while its query was answered');
  t.same(changes, []);
});

t.test('an early wake-up of the idle timer does not drop a query unanswered for less than the query timeout', async (t) => {
  const database = await createTestDatabase(SERVER);
  const store = await Store.open({ databaseUrl: database.url!, queryTimeoutMs: 1000 });
  store.watchHealth();
  t.teardown(async () => {
    await store.close();
    await database.drop();
  });
  const knex = store.orm.em.getConnection().getKnex();
  const connection = (await knex.client.acquireConnection()) as { query(sql: string): Promise<unknown>; connection: { stream: import('node:net').Socket } };
  t.teardown(() => knex.client.releaseConnection(connection));
  // Measured after a held-up event loop: a write refreshes the socket's idle timer from the loop's
  // stale clock, and the timer fired 19 ms after the query went out. Here it fires at once.
  const slow = connection.query('select pg_sleep(0.3) as slept');
  connection.connection.stream.emit('timeout');
  t.equal(await slow.then(() => 'answered', (error: Error) => error.message), 'answered');
  t.equal(connection.connection.stream.destroyed, false);
  t.equal(store.health.reachable, true);
});

t.test('a server that does not answer still fails the opening within the connect timeout', async (t) => {
  const database = await createTestDatabase(SERVER);
  const server = new URL(SERVER);
  const relay = await startTcpRelay(server.hostname, Number(server.port || 5432));
  const store = await Store.open({ databaseUrl: relay.urlFor(database.url!), connectTimeoutMs: 300, queryTimeoutMs: 300, acquireTimeoutMs: 3000 });
  t.teardown(async () => {
    relay.restore();
    await store.close();
    await relay.close();
    await database.drop();
  });
  relay.cut('blackhole');
  const started = performance.now();
  // Both need a connection: the one left from opening is dropped by its query timeout, the next one's opening hears nothing.
  const outcome = await Promise.allSettled([1, 2].map(() => store.reader().getConnection().execute('select 1')));
  const ms = performance.now() - started;
  t.same(outcome.map((answer) => answer.status), ['rejected', 'rejected']);
  t.ok(ms < 3000, `failed within the bounds, not the pool's acquire timeout: ${Math.round(ms)} ms`);
  t.match(outcome.map((answer) => String((answer as PromiseRejectedResult).reason?.message)).join(' | '), /timeout expired|read timeout/);
});

t.test('runningDeadline: on time it expires; held up, it gives the time back once', async (t) => {
  // The deadline's timers are unref'd (they never keep a process alive): this one does, meanwhile.
  const alive = setInterval(() => {}, 1000);
  t.teardown(() => clearInterval(alive));
  // On time: a clock that says the timer fired when it was due (a loaded machine's real clock could
  // rightly say it was held up). Read once to arm and once as it fires: no second arming.
  let expired = 0;
  let clockReads = 0;
  const onTime = () => (clockReads++ === 0 ? 1000 : 1100);
  await new Promise<void>((resolve) => runningDeadline(100, () => (expired++, resolve()), onTime));
  t.equal(expired, 1);
  t.equal(clockReads, 2, 'no extension when the loop ran');
  // Late by more than 50 ms: armed once more (and then it expires, late or not).
  let lateReads = 0;
  const late = () => [1000, 1200, 1200, 2000][lateReads++] ?? 2000;
  await new Promise<void>((resolve) => runningDeadline(30, resolve, late));
  t.equal(lateReads, 4, 'extended once when the timer came late');

  let heldExpiredAt = 0;
  const heldStarted = performance.now();
  const held = new Promise<void>((resolve) => runningDeadline(30, () => ((heldExpiredAt = performance.now()), resolve())));
  holdEventLoop(300);
  await held;
  t.ok(heldExpiredAt - heldStarted >= 300 + 250, `extended by the hold-up and the grace: ${Math.round(heldExpiredAt - heldStarted)} ms`);

  let cancelledFired = false;
  const cancel = runningDeadline(10, () => (cancelledFired = true));
  cancel();
  await new Promise((resolve) => setTimeout(resolve, 40));
  t.equal(cancelledFired, false, 'cancelled');
});
