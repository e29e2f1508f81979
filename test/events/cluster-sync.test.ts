import t from 'tap';
import { ClusterSync } from '../../src/events/cluster-sync.ts';
import type { ClusterMessage, EventBus } from '../../src/events/event-bus.ts';
import type { Revocations } from '../../src/events/revocation.ts';
import type { EntityManager, Store } from '../../src/store/database.ts';

// ClusterSync's decisions with the database and Redis replaced by controllable stand-ins (the e2e
// tests faults.test.ts and nodes.test.ts run the real ones): what it publishes, when validations
// may use caches, and that a failed catch-up after another node's revocation fails closed.

class FakeBus implements EventBus {
  connected = true;
  published: ClusterMessage[] = [];
  handlers: Parameters<EventBus['subscribe']>[0] | undefined;
  publish(message: ClusterMessage): void {
    this.published.push(message);
  }
  subscribe(handlers: Parameters<EventBus['subscribe']>[0]): void {
    this.handlers = handlers;
  }
  async close(): Promise<void> {}
}

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
  settle(error?: Error): void {
    for (const call of this.pending.splice(0)) {
      if (error) call.reject(error);
      else call.resolve();
    }
  }
}

function setup() {
  const listeners: ((em: EntityManager) => void)[] = [];
  const store = { onCommit: (listener: (em: EntityManager) => void) => listeners.push(listener) } as unknown as Store;
  const revocations = new FakeRevocations();
  const bus = new FakeBus();
  const sync = new ClusterSync(store, revocations as unknown as Revocations, bus, { error: () => {} });
  sync.start();
  const commit = (em: object) => listeners.forEach((listener) => listener(em as EntityManager));
  return { sync, bus, revocations, commit };
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
  t.same(bus.published, [{ type: 'changed' }, { type: 'revoked', eventId: 42 }]);
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
