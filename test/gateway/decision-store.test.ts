import t from 'tap';
import { DecisionStore } from '../../src/gateway/decision-store.ts';
import { outcomeOf } from '../../src/gateway/outcome.ts';
import { ProxiedRequest } from '../../src/gateway/proxied-request.ts';

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
