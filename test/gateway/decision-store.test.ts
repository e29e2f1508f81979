import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DecisionStore } from '../../src/gateway/decision-store.ts';
import { outcomeOf } from '../../src/gateway/outcome.ts';
import { ProxiedRequest, type Authorization } from '../../src/gateway/proxied-request.ts';

// The in-process ring: bounded, newest first, the time written when read.

function proxied(): ProxiedRequest {
  const request = new ProxiedRequest({ method: 'GET', headers: {} } as never, {} as never, false);
  request.route = { target: { path: '/echo/v1/p/things' } as never, serviceType: 'echo', path: '/v1/p/things', encodedPath: '/v1/p/things' };
  request.subject = { roles: ['reader'], scope: 'project', projectId: 'p', userId: 'u' };
  request.authorization = { allowed: true, reason: 'allowed', rule: 'p, reader, project, /v1/{project_id}/things, GET, allow', source: 'echo.csv', line: 2 };
  return request;
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

// With Redis: one command per batch, not per request (an EVAL per request was over a third of the
// gateway's CPU per request on PostgreSQL + Redis, and its queued commands were promoted under load).
t.test('with Redis: a burst of decisions goes in batches, and Redis holds them all, bounded', async (t) => {
  const { testRedis } = await import('../helpers/redis.ts');
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  let evals = 0;
  const batches: unknown[] = [];
  const counted = new Proxy(redis.redis, {
    get(target, property, receiver) {
      if (property === 'eval') {
        evals += 1;
        return (...args: unknown[]) => {
          batches.push(args.at(-1));
          return (target.eval as (...a: unknown[]) => Promise<unknown>)(...args);
        };
      }
      const value = Reflect.get(target, property, receiver) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const warnings: string[] = [];
  const store = new DecisionStore({ kept: 150, clock: { now: () => 0 }, redis: { client: counted, keyPrefix: `${redis.prefix}decision:`, ttlSeconds: 60, log: { warn: (_object, message) => warnings.push(message) } } });
  const ids: string[] = [];
  for (let index = 0; index < 200; index++) {
    const request = proxied();
    ids.push(request.requestId);
    store.record(request, outcomeOf(request, 200, 1));
  }
  await store.flush();
  t.ok(evals <= 4, `200 decisions in ${evals} commands (batches of 64)`);
  t.equal(await redis.redis.llen(`${redis.prefix}decision:index`), 150, 'the index holds the bound');
  t.same(await redis.redis.lrange(`${redis.prefix}decision:index`, 0, 1), [ids[199], ids[198]], 'newest first');
  t.equal(await redis.redis.exists(`${redis.prefix}decision:${ids[49]}`), 0, 'the oldest are deleted');
  const stored = JSON.parse((await redis.redis.get(`${redis.prefix}decision:${ids[50]}`))!);
  t.match(stored.decision, { request_id: ids[50], method: 'GET', path: '/echo/v1/p/things', status: 200, effect: 'allow' });
  t.ok((await redis.redis.ttl(`${redis.prefix}decision:${ids[50]}`)) > 0, 'with a TTL');

  // A lone decision goes by itself, shortly (no flush called).
  const late = proxied();
  store.record(late, outcomeOf(late, 200, 1));
  let found = 0;
  for (let attempt = 0; attempt < 1000 && found === 0; attempt++) found = await redis.redis.exists(`${redis.prefix}decision:${late.requestId}`);
  t.equal(found, 1, 'sent without a full batch');
  // The batch travels in a reused buffer: strings per batch were promoted under load, a new Buffer
  // per batch was external-memory churn (both brought mark-compacts).
  t.ok(batches.every((batch) => Buffer.isBuffer(batch)), 'each batch is one buffer');
  const used = new Set(batches.map((batch) => (batch as Buffer).buffer));
  const before = batches.length;
  for (let index = 0; index < 3; index++) {
    const request = proxied();
    store.record(request, outcomeOf(request, 200, 1));
    await store.flush();
  }
  t.equal(batches.length, before + 3);
  t.ok(batches.slice(before).every((batch) => used.has((batch as Buffer).buffer)), 'later batches reuse the buffers of earlier ones');
  t.same(warnings, []);
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
  await withRedis.flush();
  const lines = Buffer.concat(sent).toString('utf8').split('\n').filter((line) => line !== '');
  t.equal(lines.length, 2 * count, 'an id line and a record line per decision');
  const kept = (await local.latest(count)).reverse();
  for (let index = 0; index < count; index++) {
    t.equal(lines[2 * index], kept[index]!.decision.request_id);
    t.equal(lines[2 * index + 1], JSON.stringify(kept[index]), `record ${index}`);
  }
});
