import t from 'tap';
import { ClusterSync } from '../../src/events/cluster-sync.ts';
import type { ClusterMessage, EventBus } from '../../src/events/event-bus.ts';
import type { RevocationEvent, Revocations } from '../../src/events/revocation.ts';
import type { EntityManager, Store } from '../../src/store/database.ts';
import { DatabaseHealth } from '../../src/store/database-health.ts';
import { ManualClock } from '../helpers/clock.ts';
import { FakeBus } from '../helpers/event-bus.ts';

// ClusterSync's decisions with the database and Redis replaced by controllable stand-ins (the e2e
// tests faults.test.ts and nodes.test.ts run the real ones): what it publishes, when validations
// may use caches, and that a failed catch-up after another node's revocation fails closed.

/** catchUp() calls wait for release(); each resolves or rejects as the test says. */
class FakeRevocations {
  calls = 0;
  recorded = new WeakMap<object, number>();
  private pending: { resolve(): void; reject(error: Error): void }[] = [];
  catchUp(): Promise<number> {
    this.calls++;
    return new Promise((resolve, reject) => this.pending.push({ resolve: () => resolve(0), reject }));
  }
  eventRecordedIn(em: EntityManager): number | undefined {
    return this.recorded.get(em);
  }
  eventsRecordedIn(em: EntityManager): RevocationEvent[] {
    const id = this.recorded.get(em);
    return id === undefined ? [] : [{ id, auditId: `audit-${id}`, issuedBefore: 1000, revokedAt: 1000 }];
  }
  applied: RevocationEvent[] = [];
  apply(events: RevocationEvent[]): void {
    this.applied.push(...events);
  }
  settle(error?: Error): void {
    for (const call of this.pending.splice(0)) {
      if (error) call.reject(error);
      else call.resolve();
    }
  }
}

function setup(options: { staleValidationMaxMs?: number; teardown?: (stop: () => void) => void } = {}) {
  const listeners: ((em: EntityManager) => void)[] = [];
  // The real health object, its probe answered by the test (reachable unless told otherwise).
  const probe = { fails: false };
  const health = new DatabaseHealth(async () => {
    if (probe.fails) throw unreachable();
  }, { probeIntervalMs: 1000 });
  if (options.teardown) {
    health.start();
    options.teardown(() => health.stop());
  }
  const store = { onCommit: (listener: (em: EntityManager) => void) => listeners.push(listener), health } as unknown as Store;
  const revocations = new FakeRevocations();
  const bus = new FakeBus();
  const clock = new ManualClock();
  const sync = new ClusterSync(store, revocations as unknown as Revocations, bus, { error: () => {} }, { clock, staleValidationMaxMs: options.staleValidationMaxMs });
  sync.start();
  const commit = (em: object) => listeners.forEach((listener) => listener(em as EntityManager));
  return { sync, bus, revocations, commit, health, probe, clock };
}

const unreachable = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
const tick = () => new Promise((resolve) => setImmediate(resolve));

t.test('a commit tells the others whether it revoked something', async (t) => {
  const { sync, bus, revocations, commit } = setup();
  const plain = {};
  const revoking = {};
  revocations.recorded.set(revoking, 42);
  const before = sync.generation;
  commit(plain);
  commit(revoking);
  t.same(bus.published, [{ type: 'changed' }, { type: 'revoked', eventId: 42, events: [{ id: 42, auditId: 'audit-42', issuedBefore: 1000, revokedAt: 1000 }] }], 'with the events themselves');
  t.equal(sync.generation, before + 2, 'each commit drops this node’s caches');
});

t.test('validations wait for the read of another node’s revocation', async (t) => {
  const { sync, bus, revocations } = setup();
  bus.handlers!.message({ type: 'revoked', eventId: 7 });
  let ready = false;
  const validation = sync.prepareValidation().then((cacheable) => {
    ready = true;
    return cacheable;
  });
  await tick();
  t.notOk(ready, 'not answered while the event is being read');
  revocations.settle();
  t.equal(await validation, true, 'then caches are trusted again');
});

t.test('a failed read after another node’s revocation fails closed until a read succeeds', async (t) => {
  const { sync, bus, revocations } = setup();
  bus.handlers!.message({ type: 'revoked', eventId: 8 });
  revocations.settle(unreachable());
  await tick();
  const failing = sync.prepareValidation();
  await tick();
  revocations.settle(unreachable());
  await t.rejects(failing, { code: 'ECONNREFUSED' }, 'no validation while the index may miss the event');
  const recovering = sync.prepareValidation();
  await tick();
  revocations.settle();
  t.equal(await recovering, false, 'the catch-up succeeded: answered, caches dropped once more');
  t.equal(await sync.prepareValidation(), true, 'then caches are trusted again, without reading');
});

t.test('a failed read after a plain change does not stop validations', async (t) => {
  const { sync, bus, revocations } = setup();
  const before = sync.generation;
  bus.handlers!.message({ type: 'changed' });
  t.ok(sync.generation > before, 'caches dropped');
  revocations.settle(unreachable());
  await tick();
  const calls = revocations.calls;
  t.equal(await sync.prepareValidation(), true, 'no revocation was written: caches (and last known answers) may serve');
  t.equal(revocations.calls, calls, 'without reading the database');
});

t.test('without Redis every validation reads new revocation events first', async (t) => {
  const { sync, bus, revocations } = setup();
  bus.connected = false;
  const validation = sync.prepareValidation();
  await tick();
  t.equal(revocations.calls, 1);
  revocations.settle();
  t.equal(await validation, false, 'caches are not trusted');
});

// Polling (pollRevocations) runs on real timers: test/e2e/nodes.test.ts checks it with one node cut off from Redis.

t.test('database unreachable: caches serve what they hold while Redis brings revocations, bounded without it', async (t) => {
  const { sync, bus, revocations, health, probe, clock } = setup({ staleValidationMaxMs: 300_000, teardown: (stop) => t.teardown(stop) });
  t.equal(sync.servingLastKnown, false);
  probe.fails = true;
  health.markUnreachable('database read timeout');
  t.equal(sync.servingLastKnown, true, 'older generations are served');
  t.equal(sync.cachesReady, true, 'at once (the gateway’s synchronous path)');
  t.equal(await sync.prepareValidation(), true);
  t.equal(revocations.calls, 0, 'without asking the database');

  // Another node's revocation, carried by its message: applied, and the node is not behind.
  bus.handlers!.message({ type: 'revoked', eventId: 9, events: [{ id: 9, auditId: 'abc', issuedBefore: 5000, revokedAt: 5000 }] });
  t.same(revocations.applied, [{ id: 9, auditId: 'abc', issuedBefore: 5000, revokedAt: 5000 }]);
  revocations.settle(unreachable());
  await tick();
  t.equal(sync.cachesReady, true, 'still served: the event is indexed');
  // A malformed one is not applied; without its events the node cannot know what was revoked.
  bus.handlers!.message({ type: 'revoked', eventId: 10, events: [{ id: 'x' }] as unknown as RevocationEvent[] });
  t.equal(revocations.applied.length, 1, 'malformed events are not applied');
  revocations.settle(unreachable());
  await tick();
  t.equal(sync.cachesReady, false, 'behind: nothing served from caches');
  const refused = sync.prepareValidation();
  await tick();
  revocations.settle(unreachable());
  await t.rejects(refused, { code: 'ECONNREFUSED' }, 'a 503, never a possibly revoked token');
});

t.test('database and Redis unreachable: cached validations trusted for STALE_VALIDATION_MAX_SECONDS after the node last heard from either', async (t) => {
  const { sync, bus, health, probe, clock } = setup({ staleValidationMaxMs: 300_000, teardown: (stop) => t.teardown(stop) });
  probe.fails = true;
  health.markUnreachable('database read timeout');
  clock.advance(100_000);
  t.equal(sync.cachesReady, true, 'Redis up: served, and heard from now');
  bus.connected = false;
  clock.advance(300_000);
  t.equal(sync.cachesReady, true, 'exactly the bound after the node last heard from Redis');
  t.equal(await sync.prepareValidation(), true);
  clock.advance(1);
  t.equal(sync.cachesReady, false, 'beyond it: not served');
  await t.rejects(sync.prepareValidation(), { name: 'UnavailableError', kind: 'unavailable', retryAfterSeconds: 1 }, 'a 503 with Retry-After');

  // The database is back: caches are dropped and revocation events read again.
  probe.fails = false;
  const generation = sync.generation;
  await health.runProbe();
  t.equal(health.reachable, true);
  t.equal(sync.servingLastKnown, false);
  t.ok(sync.generation > generation, 'what was cached during the partition is dropped');
});

t.test('an unwatched store (the manage CLI) never stops asking the database', async (t) => {
  const { sync, health } = setup();
  health.markUnreachable('connect ECONNREFUSED');
  t.equal(health.reachable, true, 'no probe would ever find it back');
  t.equal(sync.servingLastKnown, false);
});

t.test('without Redis the bound counts from when the database was lost', async (t) => {
  const { sync, bus, health, probe, clock } = setup({ staleValidationMaxMs: 60_000, teardown: (stop) => t.teardown(stop) });
  bus.linksNodes = false; // LocalEventBus: connected, but to no other node
  probe.fails = true;
  health.markUnreachable('database read timeout');
  clock.advance(60_000);
  t.equal(sync.cachesReady, true);
  clock.advance(1);
  t.equal(sync.cachesReady, false);
});

t.test('a read of announced revocations under way when the partition is found: nothing served from caches', async (t) => {
  const { sync, bus, revocations, health, probe } = setup({ teardown: (stop) => t.teardown(stop) });
  // Redis is back after an outage: the events written meanwhile are being read...
  bus.handlers!.reconnected();
  // ...when another query times out first.
  probe.fails = true;
  health.markUnreachable('database read timeout');
  t.equal(sync.cachesReady, false, 'not at once');
  const refused = sync.prepareValidation();
  await tick();
  revocations.settle(unreachable());
  await tick();
  revocations.settle(unreachable()); // its own catch-up, refused at once while unreachable
  await t.rejects(refused, { code: 'ECONNREFUSED' }, 'refused (a 503) once the read failed, never a token revoked during the outage of Redis');
  t.equal(sync.cachesReady, false, 'behind until a read succeeds');
});

t.test('during a partition, a revocation message without its events makes the node behind at once', async (t) => {
  const { sync, bus, health, probe } = setup({ teardown: (stop) => t.teardown(stop) });
  probe.fails = true;
  health.markUnreachable('database read timeout');
  t.equal(sync.cachesReady, true);
  // An older node (rolling upgrade) announces a revocation without carrying it.
  bus.handlers!.message({ type: 'revoked', eventId: 11 });
  t.equal(sync.cachesReady, false, 'before the (failing) read has even settled');
});

t.test('recovery: caches kept when Redis stayed up through the partition; revocations read again all the same', async (t) => {
  const { sync, bus, revocations, health, probe } = setup({ teardown: (stop) => t.teardown(stop) });
  probe.fails = true;
  health.markUnreachable('database read timeout');
  await tick(); // the probe it started at once
  probe.fails = false;
  const generation = sync.generation;
  const calls = revocations.calls;
  await health.runProbe();
  t.equal(health.reachable, true);
  t.equal(sync.generation, generation, 'nothing dropped: changes meanwhile came through Redis');
  t.equal(revocations.calls, calls + 1, 'a catch-up from the database');
  t.equal(sync.cachesReady, false, 'validations wait for it');
  revocations.settle();
  await tick();
  t.equal(sync.cachesReady, true);
  t.equal(sync.generation, generation, 'still nothing dropped');

  // Redis lost and back during the next partition: everything is read again.
  probe.fails = true;
  health.markUnreachable('database read timeout');
  bus.connected = false;
  bus.connected = true;
  bus.handlers!.reconnected();
  revocations.settle(unreachable());
  await tick();
  probe.fails = false;
  await tick();
  const before = sync.generation;
  await health.runProbe();
  t.ok(sync.generation > before, 'caches dropped');
});
