import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DecisionStore, decisionKeys } from '../../src/gateway/decision-store.ts';
import { outcomeOf } from '../../src/gateway/outcome.ts';
import { ProxiedRequest, type Authorization } from '../../src/gateway/proxied-request.ts';
import { requestIdText } from '../../src/support/request-id.ts';

// The in-process ring: bounded, newest first, the time written when read.

function proxied(): ProxiedRequest {
  const request = new ProxiedRequest({ method: 'GET', headers: {} } as never, {} as never, false);
  request.route = { target: { path: '/echo/v1/p/things' } as never, serviceType: 'echo', path: '/v1/p/things', encodedPath: '/v1/p/things' };
  request.subject = { roles: ['reader'], scope: 'project', projectId: 'p', userId: 'u' };
  request.authorization = { allowed: true, reason: 'allowed', rule: 'p, reader, project, /v1/{project_id}/things, GET, allow', source: 'echo.csv', line: 2 };
  return request;
}

/**
 * Each `send` is a node that records `size` decisions and stops, leaving them in Redis as one batch;
 * `ids` lists every request id so far, oldest first.
 */
function batches(options: ConstructorParameters<typeof DecisionStore>[0]) {
  const ids: string[] = [];
  const send = async (size = 1) => {
    const node = new DecisionStore(options);
    for (let index = 0; index < size; index++) {
      const request = proxied();
      ids.push(request.requestId);
      node.record(request, outcomeOf(request, 200, 1));
    }
    await node.retire();
  };
  return { ids, send };
}

t.test('keeps the last `kept` decisions, newest first', async (t) => {
  let now = Date.UTC(2026, 10, 25, 4, 0, 0);
  const store = new DecisionStore({ kept: 3, clock: { now: () => now } });
  const ids: string[] = [];
  for (let index = 0; index < 5; index++) {
    const request = proxied();
    ids.push(request.requestId);
    store.record(request, outcomeOf(request, 200, 1));
    now += 1000;
  }
  t.equal(await store.find(ids[0]!), undefined, 'evicted');
  t.equal(await store.find(ids[1]!), undefined, 'evicted');
  t.match(await store.find(ids[2]!), { request_id: ids[2], time: '2026-11-25T04:00:02.000Z', effect: 'allow', rule: { file: 'echo.csv', line: 2 }, shadow: null });
  t.same((await store.latest(10)).map((entry) => entry.decision.request_id), [ids[4], ids[3], ids[2]]);
  t.same((await store.latest(2)).map((entry) => entry.decision.request_id), [ids[4], ids[3]]);
  t.same((await store.latest(2))[0]!.subject, { roles: ['reader'], scope: 'project', projectId: 'p', userId: 'u' });
  t.equal(await store.find('req-not-an-id'), undefined);
});

t.test('fewer than kept: latest returns what there is', async (t) => {
  const store = new DecisionStore({ kept: 5, clock: { now: () => 0 } });
  t.same(await store.latest(10), []);
  const request = proxied();
  store.record(request, outcomeOf(request, 200, 1));
  t.same((await store.latest(10)).map((entry) => entry.decision.request_id), [request.requestId]);
});

// What the ring keeps must not be the request's own objects: 10,000 of them outlive two scavenges
// and are promoted to the old generation, which brings mark-compacts (the gateway's longest pauses).
t.test('keeps nothing the request made alive', async (t) => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const store = new DecisionStore({ kept: 10, clock: { now: () => 0 } });
  let request: ProxiedRequest | undefined = proxied();
  let outcome: ReturnType<typeof outcomeOf> | undefined = outcomeOf(request, 200, 1);
  const id = request.requestId;
  const requestRef = new WeakRef(request);
  const outcomeRef = new WeakRef(outcome);
  store.record(request, outcome);
  request = undefined;
  outcome = undefined;
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  t.equal(outcomeRef.deref(), undefined, 'the outcome object is not retained');
  t.equal(requestRef.deref(), undefined, 'the proxied request is not retained');
  t.match(await store.find(id), { request_id: id, method: 'GET', path: '/echo/v1/p/things', status: 200, effect: 'allow' }, 'the decision is still there');
});

t.test('paths longer than the ring keeps in place, other methods, and ids of another form', async (t) => {
  const store = new DecisionStore({ kept: 4, clock: { now: () => 0 } });
  const long = proxied();
  const longPath = `/echo/v1/${'é'.repeat(150)}`;
  long.route = { target: { path: longPath } as never, serviceType: 'echo', path: longPath.slice('/echo'.length), encodedPath: '' };
  store.record(long, outcomeOf(long, 200, 1));
  const odd = proxied();
  (odd.request as { method: string }).method = 'PROPFIND';
  store.record(odd, { ...outcomeOf(odd, 405, 1), request_id: 'req-NOT-A-UUID' });
  const unrouted = proxied();
  unrouted.route = undefined;
  unrouted.authorization = undefined;
  unrouted.subject = undefined;
  store.record(unrouted, outcomeOf(unrouted, 400, 1));
  const [third, second, first] = await store.latest(3);
  t.match(first, { decision: { request_id: long.requestId, path: longPath }, policyPath: longPath.slice('/echo'.length) });
  t.match(second, { decision: { request_id: 'req-NOT-A-UUID', method: 'PROPFIND', status: 405 } });
  t.match(third, { decision: { request_id: unrouted.requestId, path: '', effect: null, rule: null }, policyPath: null, subject: null });
  t.match(await store.find(long.requestId), { path: longPath });
  t.equal(await store.find('req-00000000-0000-0000-0000-000000000000'), undefined);
});

t.test('an id almost of the req-<uuid> form is kept as it was given, never read back as another', async (t) => {
  const nearMisses = [
    'req-ABCDEF01-2345-6789-abcd-ef0123456789', // upper case
    'req-abcdef01-2345-6789-abcd-ef012345678', // a digit short
    'req-abcdef01-2345-6789-abcd-ef01234567890', // a digit over
    'xeq-abcdef01-2345-6789-abcd-ef0123456789',
    'req-abcdef0123-45-6789-abcd-ef0123456789', // a dash out of place
    'req-abcdef01-2345-6789-abcd-ef01234-6789', // a dash for a digit
    'req-abcdef01-2345-6789-abcd-ef012345678g',
    'req-abcdef01-2345-6789-abcd-ef012345678\u0130', // its low byte is the code of '0'
    'req-abcdef01-2345-6789-abcd-ef012345678\u0161', // and this one's of 'a'
  ];
  const store = new DecisionStore({ kept: 10, clock: { now: () => 0 } });
  for (const id of nearMisses) {
    const request = proxied();
    store.record(request, { ...outcomeOf(request, 200, 1), request_id: id });
  }
  const uuid = proxied();
  store.record(uuid, outcomeOf(uuid, 200, 1));
  t.same((await store.latest(10)).map((entry) => entry.decision.request_id), [uuid.requestId, ...[...nearMisses].reverse()]);
  t.equal((await store.find(uuid.requestId))?.request_id, uuid.requestId, 'a req-<uuid> is read back from its 16 bytes');
});

t.test("a request's own id is kept from the bytes it was drawn from, not read back from its text", async (t) => {
  const store = new DecisionStore({ kept: 10, clock: { now: () => 0 } });
  const request = proxied();
  const { bytes, at, text } = request.drawnRequestId;
  t.equal(requestIdText(bytes, at, Buffer.alloc(40)), text, 'the bytes are the id');
  store.record(request, outcomeOf(request, 200, 1));
  t.equal((await store.find(request.requestId))?.request_id, request.requestId);
  // Bytes that say another id (never the case but here) show which of the two the store kept.
  const other = proxied();
  const { bytes: otherBytes, at: otherAt } = other.drawnRequestId;
  otherBytes[otherAt] = otherBytes[otherAt]! ^ 0xff;
  const otherText = requestIdText(otherBytes, otherAt, Buffer.alloc(40));
  store.record(other, outcomeOf(other, 200, 1));
  t.equal((await store.latest(1))[0]?.decision.request_id, otherText, 'the record holds the bytes');
  t.equal(await store.find(other.requestId), undefined);
});

// With Redis: nothing per request goes to Redis (sending every decision cost the gateway a quarter of
// its CPU per proxied request on PostgreSQL + Redis, and brought mark-compacts): a node asks the
// others for what it does not hold, and a stopping node leaves its ring in Redis.
t.test('with Redis: the other nodes are asked; a stopping node leaves its decisions in Redis', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const { RedisDecisionPeers } = await import('../../src/gateway/decision-peers.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const commands: string[] = [];
  const counted = new Proxy(redis.redis, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (property !== 'publish') commands.push(String(property));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  const warnings: string[] = [];
  const keyPrefix = `${redis.prefix}decision:`;
  const log = { warn: (_object: object, message: string) => warnings.push(message) };
  const options = { clock: { now: () => Date.UTC(2026, 11, 1) }, redis: { client: counted, keyPrefix, ttlSeconds: 60, log } };
  const peers = () => {
    const subscriber = redis.redis.duplicate();
    const exchange = new RedisDecisionPeers(redis.redis, subscriber, keyPrefix, log);
    t.teardown(() => exchange.close());
    return exchange;
  };
  const storePeers = peers();
  const otherPeers = peers();
  const store = new DecisionStore({ kept: 150, ...options, peers: storePeers });
  const other = new DecisionStore({ kept: 150, ...options, peers: otherPeers });
  await Promise.all([storePeers.start(), otherPeers.start()]);
  const ids: string[] = [];
  for (let index = 0; index < 200; index++) {
    const request = proxied();
    ids.push(request.requestId);
    store.record(request, outcomeOf(request, 200, 1));
  }
  await new Promise((resolve) => setImmediate(resolve));
  t.same(commands, [], 'recording sends nothing to Redis');
  t.equal(await redis.redis.exists(...Object.values(decisionKeys(keyPrefix))), 0, 'and nothing is there');

  t.match(await other.find(ids[199]!), { request_id: ids[199], method: 'GET', path: '/echo/v1/p/things', status: 200, effect: 'allow', time: '2026-12-01T00:00:00.000Z' }, 'the other node asks the one that holds it');
  t.same(commands, [], 'found over pub/sub: no list read');
  t.equal(await other.find(ids[49]!), undefined, 'beyond its ring: not answered');
  t.same((await other.latest(1000)).map((entry) => entry.decision.request_id), ids.slice(50).reverse(), 'latest: the other node\'s newest 150, newest first');

  // A third node: its own decisions are newer; latest merges both rings by time.
  const thirdPeers = peers();
  await thirdPeers.start();
  const third = new DecisionStore({ kept: 150, ...options, clock: { now: () => Date.UTC(2026, 11, 1, 0, 0, 1) }, peers: thirdPeers });
  const newer = proxied();
  third.record(newer, outcomeOf(newer, 200, 1));
  t.same((await third.latest(3)).map((entry) => entry.decision.request_id), [newer.requestId, ids[199], ids[198]], 'merged newest first');

  // The first node stops: its ring goes to Redis as one batch, and the others still find it there.
  await storePeers.close();
  commands.length = 0;
  await store.retire();
  t.same(commands, ['eval'], 'one command for a ring of 150');
  t.match(await other.find(ids[60]!), { request_id: ids[60] }, 'found in Redis after its node stopped');
  t.same((await other.latest(1000)).map((entry) => entry.decision.request_id).slice(0, 3), [newer.requestId, ids[199], ids[198]]);
  for (const key of Object.values(decisionKeys(keyPrefix))) {
    const ttl = await redis.redis.ttl(key);
    t.ok(ttl > 0 && ttl <= 60, `${key} has a TTL (${ttl} s)`);
  }
  t.same(warnings, []);
});

// A node that hears a question and never answers (a silent partition) costs the asker the timeout,
// not a hang; an answer after it is dropped; questions that are not ours are never answered.
t.test('with Redis: a node that does not answer delays a lookup by the timeout only', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const { RedisDecisionPeers } = await import('../../src/gateway/decision-peers.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const keyPrefix = `${redis.prefix}decision:`;
  const warnings: string[] = [];
  const log = { warn: (_object: object, message: string) => warnings.push(message) };
  const silent = redis.redis.duplicate();
  t.teardown(() => silent.disconnect());
  const heard: string[] = [];
  silent.on('message', (_channel: string, message: string) => heard.push(message));
  await silent.subscribe(`${keyPrefix}questions`);
  const exchange = new RedisDecisionPeers(redis.redis, redis.redis.duplicate(), keyPrefix, log, 300);
  t.teardown(() => exchange.close());
  await exchange.start();
  const store = new DecisionStore({ kept: 10, clock: { now: () => 0 }, peers: exchange });
  const started = performance.now();
  t.equal(await store.find('req-00000000-0000-4000-8000-000000000000'), undefined);
  const waited = performance.now() - started;
  t.ok(waited >= 290 && waited < 3000, `answered after the timeout (${Math.round(waited)} ms)`);
  const question = JSON.parse(heard[0]!) as { id: string; from: string };
  t.match(question, { find: 'req-00000000-0000-4000-8000-000000000000' }, 'the question was heard');
  t.equal((exchange as unknown as { questions: Map<string, unknown> }).questions.size, 0, 'nothing left waiting');

  // The silent node answers at last: dropped, nothing thrown.
  const late = proxied();
  const lateStore = new DecisionStore({ kept: 1, clock: { now: () => 0 } });
  lateStore.record(late, outcomeOf(late, 200, 1));
  await redis.redis.publish(`${keyPrefix}answers:${question.from}`, `${question.id}\t1\n${JSON.stringify((await lateStore.latest(1))[0])}`);

  // A node that would answer (it holds a decision) hears garbage and malformed questions: none is answered.
  const answering = new RedisDecisionPeers(redis.redis, redis.redis.duplicate(), keyPrefix, log);
  t.teardown(() => answering.close());
  await answering.start();
  const holder = new DecisionStore({ kept: 10, clock: { now: () => 0 }, peers: answering });
  holder.record(late, outcomeOf(late, 200, 1));
  const monitor = redis.redis.duplicate();
  t.teardown(() => monitor.disconnect());
  const answers: string[] = [];
  monitor.on('pmessage', (_pattern: string, _channel: string, message: string) => answers.push(message));
  await monitor.psubscribe(`${keyPrefix}answers:*`);
  const uuid = '00000000-0000-4000-8000-000000000001';
  for (const garbage of ['not json', JSON.stringify({ id: 'x\ny', from: uuid, latest: 5 }), JSON.stringify({ id: uuid, from: 'z\n', latest: 5 }), JSON.stringify({ id: uuid, from: uuid, latest: -1 }), JSON.stringify({ id: uuid, from: uuid, latest: 1e300 }), JSON.stringify({ id: uuid, from: uuid })]) {
    await redis.redis.publish(`${keyPrefix}questions`, garbage);
  }
  // A well-formed question last: its answer shows the ones before were read and left unanswered.
  await redis.redis.publish(`${keyPrefix}questions`, JSON.stringify({ id: uuid, from: uuid, find: late.requestId }));
  for (let attempt = 0; attempt < 200 && answers.length < 2; attempt++) await new Promise((resolve) => setTimeout(resolve, 5));
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.same(answers.map((answer) => answer.split('\n')[0]), [`${uuid}\t1`, `${uuid}\t1`], 'only the well-formed question is answered, by both nodes');
  t.equal(answers.filter((answer) => answer.includes(late.requestId)).length, 1, 'with the record by the node that holds it');
  t.same(warnings, []);
});

// A rolling restart: every stopping node leaves its ring, and Redis keeps RETIRED_RINGS of them, so
// the nodes that stopped first are not pushed out by those after; what is answered is ordered by
// the records' times, not by when their node stopped.
t.test('with Redis: after a rolling restart every stopped node\'s decisions are found, newest first by time', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const keyPrefix = `${redis.prefix}decision:`;
  const start = Date.UTC(2026, 11, 1);
  let now = start;
  const options = { kept: 3, clock: { now: () => now }, redis: { client: redis.redis, keyPrefix, ttlSeconds: 600, log: { warn: () => {} } } };
  const ids: Record<string, string[]> = {};
  // A at +0..2 s, B at +10..12 s, C (idle since) at +5..7 s; they stop in that order.
  for (const [node, from] of [['A', 0], ['B', 10_000], ['C', 5_000]] as const) {
    const store = new DecisionStore(options);
    ids[node] = [];
    for (let index = 0; index < 3; index++) {
      now = start + from + index * 1000;
      const request = proxied();
      ids[node].push(request.requestId);
      store.record(request, outcomeOf(request, 200, 1));
    }
    await store.retire();
  }
  now = start + 20_000;
  const keys = decisionKeys(keyPrefix);
  t.same(await redis.redis.lrange(keys.sizes, 0, -1), [`3 ${start + 7000}`, `3 ${start + 12_000}`, `3 ${start + 2000}`], 'a batch per node, with its newest record\'s time');
  const survivor = new DecisionStore(options);
  for (const id of [...ids.A!, ...ids.B!, ...ids.C!]) t.match(await survivor.find(id), { request_id: id }, `${id} found`);
  t.same((await survivor.latest(4)).map((entry) => entry.decision.request_id), [ids.B![2], ids.B![1], ids.B![0], ids.C![2]], 'the newest by time, though C stopped last');
  t.equal((await survivor.latest(100)).length, 9);
});

// A node's answer to `latest` goes in parts (ANSWER_PART_RECORDS), the event loop free between them.
t.test('with Redis: a ring larger than a part is answered in parts, all of it', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const { RedisDecisionPeers, ANSWER_PART_RECORDS } = await import('../../src/gateway/decision-peers.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const keyPrefix = `${redis.prefix}decision:`;
  const log = { warn: () => {} };
  const exchanges = [0, 1].map(() => new RedisDecisionPeers(redis.redis, redis.redis.duplicate(), keyPrefix, log));
  for (const exchange of exchanges) t.teardown(() => exchange.close());
  await Promise.all(exchanges.map((exchange) => exchange.start()));
  const holder = new DecisionStore({ kept: 1200, clock: { now: () => 0 }, peers: exchanges[0] });
  const asker = new DecisionStore({ kept: 1200, clock: { now: () => 0 }, peers: exchanges[1] });
  const monitor = redis.redis.duplicate();
  t.teardown(() => monitor.disconnect());
  const parts: string[] = [];
  monitor.on('pmessage', (_pattern: string, _channel: string, message: string) => parts.push(message));
  await monitor.psubscribe(`${keyPrefix}answers:*`);
  const ids: string[] = [];
  for (let index = 0; index < 1100; index++) {
    const request = proxied();
    ids.push(request.requestId);
    holder.record(request, outcomeOf(request, 200, 1));
  }
  const latest = await asker.latest(1200);
  t.same(latest.map((entry) => entry.decision.request_id), ids.slice().reverse(), 'every record, newest first');
  // The monitor's copies come on a connection of their own.
  for (let attempt = 0; attempt < 200 && parts.length < 3; attempt++) await new Promise((resolve) => setTimeout(resolve, 5));
  t.same(parts.map((part) => part.split('\n').length - 1), [ANSWER_PART_RECORDS, ANSWER_PART_RECORDS, 1100 - 2 * ANSWER_PART_RECORDS], 'in parts');
  t.same(parts.map((part) => part.split('\n')[0]!.split('\t')[1]), ['0', '0', '1'], 'the last marked');
  t.same((await asker.latest(700)).map((entry) => entry.decision.request_id), ids.slice(-700).reverse(), 'a limit between parts');
});

// Parts are taken by sequence number from the question's moment: decisions recorded between parts
// neither repeat records nor push any out of the answer, and records overwritten meanwhile end it.
t.test('an answer in parts: what was newest when asked, each once, whatever is recorded between parts', async (t) => {
  const { answerInParts, ANSWER_PART_RECORDS } = await import('../../src/gateway/decision-peers.ts');
  for (const kept of [3000, 600]) {
    let answers: Parameters<import('../../src/gateway/decision-peers.ts').DecisionPeers['answerWith']>[0] | undefined;
    const peers = { answerWith: (given: typeof answers) => (answers = given), find: async () => undefined, latest: async () => [], close: async () => {} };
    const store = new DecisionStore({ kept, clock: { now: () => 0 }, peers: peers as never });
    const ids: string[] = [];
    const record = (count: number) => {
      for (let index = 0; index < count; index++) {
        const request = proxied();
        ids.push(request.requestId);
        store.record(request, outcomeOf(request, 200, 1));
      }
    };
    record(kept);
    const asked = ids.slice();
    const parts: { records: string[]; last: boolean }[] = [];
    await new Promise<void>((resolve) => {
      answerInParts(answers!, 1100, performance.now() + 10_000, () => false, (records, last) => {
        parts.push({ records, last });
        record(300); // traffic between parts
        if (last) resolve();
      }, (error) => t.fail(String(error)));
    });
    const sent = parts.flatMap((part) => part.records.map((text) => (JSON.parse(text) as { decision: { request_id: string } }).decision.request_id));
    t.same(parts.map((part) => part.last), parts.map((_part, index) => index === parts.length - 1), `kept ${kept}: only the last part marked`);
    t.ok(parts.every((part) => part.records.length <= ANSWER_PART_RECORDS));
    if (kept === 3000) t.same(sent, asked.slice(-1100).reverse(), 'the 1,100 newest when asked, newest first, each once');
    else t.same(sent, asked.slice(-ANSWER_PART_RECORDS).reverse(), 'the first part, then the rest was overwritten: ended, nothing repeated');
  }
});

// The subscribed connection is lost (a Redis restart, a proxy's idle cut): it subscribes again.
t.test('with Redis: after the subscribed connection is cut, the node asks and answers again', async (t) => {
  const { testRedis, TEST_REDIS_URL } = await import('../helpers/redis.ts');
  const { Redis } = await import('ioredis');
  const { RedisDecisionPeers } = await import('../../src/gateway/decision-peers.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const keyPrefix = `${redis.prefix}decision:`;
  const log = { warn: () => {} };
  const subscribers = [0, 1].map(() => new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1, retryStrategy: () => 50 }));
  const clientIds = await Promise.all(subscribers.map((subscriber) => subscriber.client('ID') as Promise<number>));
  const exchanges = subscribers.map((subscriber) => new RedisDecisionPeers(redis.redis, subscriber, keyPrefix, log));
  for (const exchange of exchanges) t.teardown(() => exchange.close());
  await Promise.all(exchanges.map((exchange) => exchange.start()));
  const holder = new DecisionStore({ kept: 10, clock: { now: () => 0 }, peers: exchanges[0] });
  const asker = new DecisionStore({ kept: 10, clock: { now: () => 0 }, peers: exchanges[1] });
  const request = proxied();
  holder.record(request, outcomeOf(request, 200, 1));
  t.match(await asker.find(request.requestId), { request_id: request.requestId }, 'before');
  for (const id of clientIds) await redis.redis.client('KILL', 'ID', String(id));
  let found: unknown;
  for (let attempt = 0; attempt < 40 && !found; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    found = await asker.find(request.requestId);
  }
  t.match(found, { request_id: request.requestId }, 'after both subscribed again');
});

// Redis drops whole batches, so it may hold up to a batch more than the bound, and drops a batch by
// time only as later ones come: neither extra is ever answered.
t.test('with Redis: the bound and the TTL, in what Redis keeps and in what is answered', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const start = Date.UTC(2026, 11, 1);
  let now = start;
  // Redis bounded to one ring (`kept`), as a deployment of one node at a time sees it.
  const options = { clock: { now: () => now }, retiredRings: 1, redis: { client: redis.redis, keyPrefix: `${redis.prefix}decision:`, ttlSeconds: 60, log: { warn: () => {} } } };
  const other = new DecisionStore({ kept: 3, ...options });
  const keys = decisionKeys(`${redis.prefix}decision:`);
  const sizes = async () => (await redis.redis.lrange(keys.sizes, 0, -1)).map((entry) => Number(entry.split(' ')[0]));
  const { ids, send: batch } = batches({ kept: 3, ...options });
  // Batches recorded at start, +1 s and +2 s.
  for (const size of [2, 1, 1]) {
    await batch(size);
    now += 1000;
  }
  t.same(await sizes(), [1, 1, 2], 'the batch of two stays: without it Redis would hold fewer than three');
  t.same((await redis.redis.lrange(keys.sizes, 0, -1)).map((entry) => Number(entry.split(' ')[1])), [start + 2000, start + 1000, start], 'with its newest record\'s time');
  t.equal(await other.find(ids[0]!), undefined, 'the fourth newest is not answered');
  t.same((await other.latest(10)).map((entry) => entry.decision.request_id), ids.slice(1).reverse());
  t.match(await other.find(ids[1]!), { request_id: ids[1] });

  // At +3 s, one more: the other three hold the bound without the batch of two, which goes.
  await batch(1);
  t.same(await sizes(), [1, 1, 1], 'the oldest batch is dropped by count');
  t.equal(await redis.redis.llen(keys.batches), 3, 'with its records');
  t.equal(await redis.redis.get(keys.count), '3');
  t.same((await other.latest(10)).map((entry) => entry.decision.request_id), ids.slice(2).reverse());

  // 60 s after the batch of +1 s: it is not answered, though Redis still holds it.
  now = start + 61_000;
  t.equal(await other.find(ids[2]!), undefined, 'older than the TTL');
  t.match(await other.find(ids[3]!), { request_id: ids[3] });
  t.same((await other.latest(10)).map((entry) => entry.decision.request_id), ids.slice(3).reverse());
  t.equal(await redis.redis.llen(keys.batches), 3);

  // The next batch, at +62.5 s, drops those of +1 s and +2 s by time, though the count did not ask it.
  now = start + 62_500;
  await batch(1);
  t.same(await sizes(), [1, 1], 'the expired batches are dropped');
  t.equal(await redis.redis.get(keys.count), '2');
  t.same((await other.latest(10)).map((entry) => entry.decision.request_id), ids.slice(4).reverse());
});

// A key lost from Redis (evicted, deleted) must not leave the count or the lists wrong for good.
t.test('with Redis: after any one of its keys is lost, the bound holds again', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  for (const lost of ['batches', 'sizes', 'count'] as const) {
    const keyPrefix = `${redis.prefix}${lost}:`;
    const options = { clock: { now: () => Date.UTC(2026, 11, 1) }, retiredRings: 1, redis: { client: redis.redis, keyPrefix, ttlSeconds: 60, log: { warn: () => {} } } };
    const other = new DecisionStore({ kept: 3, ...options });
    const keys = decisionKeys(keyPrefix);
    const { ids, send: batch } = batches({ kept: 3, ...options });
    for (let index = 0; index < 4; index++) await batch();
    await redis.redis.del(keys[lost]);
    for (let index = 0; index < 4; index++) await batch();
    const sizes = (await redis.redis.lrange(keys.sizes, 0, -1)).map((entry) => Number(entry.split(' ')[0]));
    t.equal(sizes.length, await redis.redis.llen(keys.batches), `${lost} lost: a size per batch`);
    t.equal(Number(await redis.redis.get(keys.count)), sizes.reduce((sum, size) => sum + size, 0), `${lost} lost: the count is their sum`);
    t.same(sizes, [1, 1, 1], `${lost} lost: three kept again`);
    t.same((await other.latest(10)).map((entry) => entry.decision.request_id), ids.slice(-3).reverse(), `${lost} lost: the newest three answered`);
  }
});

// Reading takes several round trips (8 batches each) while other nodes push batches in front,
// which moves those already read into the next read.
t.test('with Redis: reading across round trips, while batches are written, visits each record once', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const keyPrefix = `${redis.prefix}decision:`;
  const clock = { now: () => Date.UTC(2026, 11, 1) };
  const { ids, send: batch } = batches({ kept: 20, clock, retiredRings: 1, redis: { client: redis.redis, keyPrefix, ttlSeconds: 60, log: { warn: () => {} } } });
  for (let index = 0; index < 20; index++) await batch();
  const before = ids.slice();
  let reads = 0;
  const writing = new Proxy(redis.redis, {
    get(target, property, receiver) {
      if (property === 'lrangeBuffer') {
        return async (...args: unknown[]) => {
          const read = await (target.lrangeBuffer as (...a: unknown[]) => Promise<Buffer[]>)(...args);
          // After the first read, another node writes three batches in front.
          if (reads++ === 0) for (let index = 0; index < 3; index++) await batch();
          return read;
        };
      }
      const value = Reflect.get(target, property, receiver) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const reader = new DecisionStore({ kept: 20, clock, retiredRings: 1, redis: { client: writing, keyPrefix, ttlSeconds: 60, log: { warn: () => {} } } });
  const latest = (await reader.latest(20)).map((entry) => entry.decision.request_id);
  t.ok(reads >= 3, `read in ${reads} round trips`);
  t.same(latest.slice(0, 17), before.slice(3).reverse(), 'newest first, none twice, none skipped');
  t.equal(new Set(latest).size, latest.length, 'no record twice');
  reads = 1;
  t.match(await reader.find(ids[3]!), { request_id: ids[3] }, 'the 20th newest (of 23) is found, past the first read');
  t.equal(await reader.find(ids[2]!), undefined, 'the 21st newest is gone');
});

// A ring larger than a batch leaves in several, oldest first, so Redis's newest batch holds the newest.
t.test('with Redis: a stopping node\'s ring goes in batches of 1,000, the newest last', async (t) => {
  const sent: { size: unknown; newest: unknown; batch: string }[] = [];
  const client = { eval: async (...args: unknown[]) => void sent.push({ size: args[6], newest: args[8], batch: String(args.at(-1)) }) } as never;
  let now = 0;
  const store = new DecisionStore({ kept: 2500, clock: { now: () => now }, redis: { client, keyPrefix: 'k:', ttlSeconds: 60, log: { warn: () => {} } } });
  const ids: string[] = [];
  for (let index = 0; index < 2600; index++) {
    now = 1_000_000 + index;
    const request = proxied();
    ids.push(request.requestId);
    store.record(request, outcomeOf(request, 200, 1));
  }
  await store.retire();
  t.same(sent.map((command) => command.size), [1000, 1000, 500]);
  t.same(sent.map((command) => command.newest), [1_000_000 + 1099, 1_000_000 + 2099, 1_000_000 + 2599], 'each with its newest record\'s time');
  t.ok(sent[0]!.batch.startsWith(`{"decision":{"request_id":"${ids[100]}"`), 'the oldest kept first');
  t.ok(sent[2]!.batch.trimEnd().split('\n').at(-1)!.startsWith(`{"decision":{"request_id":"${ids[2599]}"`), 'the newest last');
});

// The record sent to Redis is written from pieces (recordJson), not stringified whole: it must be
// the very text JSON.stringify gives for the record the ring builds (what find() and latest()
// answer here), for every shape a decision takes.
t.test('with Redis: each record sent is the text JSON.stringify makes of the kept record', async (t) => {
  const sent: Buffer[] = [];
  const client = { eval: async (...args: unknown[]) => void sent.push(Buffer.from(args.at(-1) as Buffer)) } as never;
  let now = Date.UTC(2026, 11, 1, 9, 0, 0, 123);
  const clock = { now: () => now };
  const withRedis = new DecisionStore({ kept: 100, clock, redis: { client, keyPrefix: 'k:', ttlSeconds: 60, log: { warn: () => {} } } });
  const local = new DecisionStore({ kept: 100, clock });
  const deny: Authorization = { allowed: false, reason: 'denied by rule', rule: 'p, *, *, /"x"\\/**, *, deny', source: undefined, line: undefined };
  const shapes: ((request: ProxiedRequest) => void)[] = [
    () => {},
    (request) => (request.shadow = deny),
    (request) => {
      request.authorization = deny;
      request.shadow = { allowed: true, reason: 'allowed' };
    },
    (request) => {
      request.authorization = { allowed: false, reason: 'no rule allows' };
      request.subject = { roles: [], scope: 'domain', userId: 'u\u00e9"\n' };
    },
    (request) => {
      // Ended before any stage but canonicalise: no subject, no decision, a reason of the gateway's own.
      request.authorization = undefined;
      request.subject = undefined;
      request.reason = 'The "request" you have made requires authentication.\\';
    },
    (request) => {
      request.route = { target: { path: '/echo/' + 'x'.repeat(300) } as never, serviceType: 'echo', path: '/' + 'x'.repeat(300), encodedPath: '/' + 'x'.repeat(300) };
    },
    (request) => {
      request.route = { target: { path: '/z\u00fcrich/a b' } as never, serviceType: 'z\u00fcrich', path: '/a b', encodedPath: '/a%20b' };
    },
    (request) => {
      request.route = undefined;
      request.authorization = undefined;
      request.reason = 'not found';
    },
  ];
  let count = 0;
  for (const [index, shape] of shapes.entries()) {
    for (const method of ['GET', 'PATCH', 'PROPFIND']) {
      const request = proxied();
      (request.request as { method: string }).method = method;
      shape(request);
      const outcome = outcomeOf(request, index === 4 ? 401 : 200 + index, 1.5);
      if (index === 7) outcome.request_id = 'req-not-a-uuid"\u00e9';
      withRedis.record(request, outcome);
      local.record(request, outcome);
      now += 1;
      count++;
    }
  }
  await withRedis.retire();
  const lines = Buffer.concat(sent).toString('utf8').split('\n');
  t.equal(lines.pop(), '', 'each record ends its line');
  t.equal(lines.length, count, 'a line per decision');
  const kept = (await local.latest(count)).reverse();
  for (let index = 0; index < count; index++) t.equal(lines[index], JSON.stringify(kept[index]), `record ${index}`);
});

// Redis down: the node keeps recording in its ring and answers from it; one warning.
t.test('with Redis unreachable: this node\'s decisions, and one warning', async (t) => {
  const down = async () => {
    throw new Error('connect ECONNREFUSED');
  };
  const warnings: string[] = [];
  const store = new DecisionStore({ kept: 10, clock: { now: () => 0 }, redis: { client: { eval: down, lrangeBuffer: down } as never, keyPrefix: 'k:', ttlSeconds: 60, log: { warn: (_object, message) => warnings.push(message) } } });
  const first = proxied();
  store.record(first, outcomeOf(first, 200, 1));
  const second = proxied();
  store.record(second, outcomeOf(second, 200, 1));
  t.equal(await store.find('req-00000000-0000-4000-8000-000000000000'), undefined, 'another node\'s: not found, no error');
  t.equal(await store.find('req-00000000-0000-4000-8000-000000000001'), undefined);
  t.same(warnings, ['Redis unreachable: the gateway decisions of stopped nodes cannot be looked up'], 'a warning once, not per lookup');
  await store.retire();
  t.same(warnings.slice(1), ['Redis unreachable: this node\'s gateway decisions are lost as it stops'], 'another failure is still told');
  t.match(await store.find(first.requestId), { request_id: first.requestId }, 'its own, from the ring');
  t.equal(await store.find('req-00000000-0000-4000-8000-000000000000'), undefined, 'another node\'s: not found, no error');
  t.same((await store.latest(10)).map((entry) => entry.decision.request_id), [second.requestId, first.requestId], 'latest falls back to the ring');
});
