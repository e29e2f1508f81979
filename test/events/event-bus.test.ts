import { randomUUID } from 'node:crypto';
import t from 'tap';
import { RedisEventBus, type ClusterMessage } from '../../src/events/event-bus.ts';
import { waitFor } from '../helpers/processes.ts';
import { TEST_REDIS_URL } from '../helpers/redis.ts';
import { startTcpRelay } from '../helpers/tcp-relay.ts';

function recordingLog() {
  const lines: string[] = [];
  return { lines, log: { warn: (_object: object, message: string) => lines.push(message), info: (_object: object, message: string) => lines.push(message) } };
}

t.test('a silent partition from Redis (connections open, nothing answers) is noticed by the heartbeat and healed', async (t) => {
  const redisUrl = new URL(TEST_REDIS_URL);
  const relay = await startTcpRelay(redisUrl.hostname, Number(redisUrl.port || 6379));
  const { lines, log } = recordingLog();
  // A channel of its own: other test files' nodes publish on the default one meanwhile.
  const channel = `partition-${randomUUID()}`;
  const partitioned = new RedisEventBus(relay.urlFor(TEST_REDIS_URL), log, { heartbeatIntervalMs: 200, channel });
  const peer = new RedisEventBus(TEST_REDIS_URL, recordingLog().log, { heartbeatIntervalMs: 200, channel });
  t.teardown(async () => {
    await partitioned.close();
    await peer.close();
    await relay.close();
  });
  const received: ClusterMessage[] = [];
  let reconnections = 0;
  partitioned.subscribe({ message: (message) => received.push(message), reconnected: () => reconnections++ });
  peer.subscribe({ message: () => {}, reconnected: () => {} });
  await waitFor(async () => partitioned.connected && peer.connected && reconnections >= 1, 'both buses to subscribe', 10_000);

  peer.publish({ type: 'changed' });
  await waitFor(async () => received.length === 1, 'a message through the relay', 5_000);
  t.same(received, [{ type: 'changed' }], 'messages from another node arrive; heartbeats are not handed on');

  const reconnectionsBefore = reconnections;
  relay.cut('blackhole');
  await waitFor(async () => !partitioned.connected, 'the partitioned bus to report itself disconnected', 5_000);
  t.pass('the open but silent connections no longer count as connected');
  t.ok(peer.connected, 'the node with a working connection stays connected');
  // The getter turns false as soon as heartbeats are overdue; the next beat logs and reconnects.
  await waitFor(async () => lines.some((line) => line.startsWith('Redis stopped answering')), 'the partition to be logged', 5_000);
  peer.publish({ type: 'revoked', eventId: 42 });

  relay.restore();
  await waitFor(async () => partitioned.connected && reconnections > reconnectionsBefore, 'the bus to reconnect and ask for a catch-up', 15_000);
  t.pass('after the partition the owner is told to catch up from the database (what was published meanwhile is lost)');
  t.notOk(received.some((message) => message.type === 'revoked'), 'the message sent during the partition never arrived: hence the catch-up');
  peer.publish({ type: 'keys-changed' });
  await waitFor(async () => received.some((message) => message.type === 'keys-changed'), 'messages to flow again', 5_000);
});

t.test('a stalled event loop is not taken for a silent Redis', async (t) => {
  const { lines, log } = recordingLog();
  // (Beats 150 ms apart: overdue after 450 ms, which a Redis shared by a loaded machine's tests does
  // not take to answer; the stalls are longer than that.)
  const bus = new RedisEventBus(TEST_REDIS_URL, log, { heartbeatIntervalMs: 150, channel: `stall-${randomUUID()}` });
  t.teardown(() => bus.close());
  let subscriptions = 0;
  bus.subscribe({ message: () => {}, reconnected: () => subscriptions++ });
  await waitFor(async () => bus.connected && subscriptions >= 1, 'the bus to subscribe', 10_000);
  const before = subscriptions;
  for (let stall = 0; stall < 5; stall++) {
    // Answers arrive while the loop is blocked and are read only after the timer has run.
    const until = performance.now() + 600;
    while (performance.now() < until);
    t.notOk(bus.connected, 'right after the stall the last heartbeat looks overdue');
    // The loop runs again: the timer fires and the answers are read, until our own heartbeat is back.
    await waitFor(async () => bus.connected, 'a heartbeat answered after the stall', 5_000);
  }
  t.notOk(lines.some((line) => line.startsWith('Redis stopped answering')), 'no partition reported');
  t.equal(subscriptions, before, 'the connections were kept');
  t.ok(bus.connected, 'connected');
});

t.test('deployments sharing one Redis on different REDIS_EVENTS_CHANNEL values do not hear each other', async (t) => {
  const suffix = Math.random().toString(36).slice(2);
  const quiet = recordingLog().log;
  const [first, sameDeployment, otherDeployment] = [`a-${suffix}`, `a-${suffix}`, `b-${suffix}`].map((channel) => new RedisEventBus(TEST_REDIS_URL, quiet, { channel }));
  t.teardown(async () => {
    for (const bus of [first, sameDeployment, otherDeployment]) await bus!.close();
  });
  const heard = { same: [] as ClusterMessage[], other: [] as ClusterMessage[] };
  let subscribed = 0;
  first!.subscribe({ message: () => {}, reconnected: () => subscribed++ });
  sameDeployment!.subscribe({ message: (message) => heard.same.push(message), reconnected: () => subscribed++ });
  otherDeployment!.subscribe({ message: (message) => heard.other.push(message), reconnected: () => subscribed++ });
  // A bus drops what it publishes before its publishing connection is ready (by design: the database
  // is the fallback), and that connection may come up after the subscription: wait for both.
  await waitFor(async () => subscribed === 3 && [first, sameDeployment, otherDeployment].every((bus) => bus!.connected), 'three connected buses', 10_000);

  first!.publish({ type: 'changed' });
  await waitFor(async () => heard.same.length > 0, 'the node of the same deployment to hear it', 5_000);
  // A marker published on b after a's message: once b hears it, a's message would have arrived before.
  const marker = new RedisEventBus(TEST_REDIS_URL, quiet, { channel: `b-${suffix}` });
  t.teardown(() => marker.close());
  marker.subscribe({ message: () => {}, reconnected: () => {} });
  await waitFor(async () => marker.connected, 'the marker bus to connect', 10_000);
  marker.publish({ type: 'revoked', eventId: 1 });
  await waitFor(async () => heard.other.length > 0, 'the other deployment to hear its own marker', 5_000);
  t.same(heard.same, [{ type: 'changed' }], 'same channel: heard');
  t.same(heard.other, [{ type: 'revoked', eventId: 1 }], 'the other channel heard only its own deployment');
});
