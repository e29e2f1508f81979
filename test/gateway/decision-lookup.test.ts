import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { decisionKeys } from '../../src/gateway/decision-store.ts';
import { startTestApp } from '../helpers/app.ts';
import { ECHO_RULES, gatewayWorld, type World } from '../helpers/gateway.ts';
import { ROOT } from '../helpers/processes.ts';
import { TEST_REDIS_URL, testRedis } from '../helpers/redis.ts';
import { rawRequest } from '../helpers/upstream.ts';

// GET /v3/gateway/decisions/{request_id}: how the gateway decided a proxied request, found by the
// X-OpenStack-Request-Id it returned; admins only; kept in process, and in Redis for every node.

const READER_LISTS = 'p, reader, project, /v1/{project_id}/things, GET, allow';

/** Sends a GET through the gateway as `token`; returns the status and the request id it was given. */
async function proxied(w: World, token: string, path = `/echo/v1/${w.projectId}/things`): Promise<{ status: number; requestId: string }> {
  const answer = await rawRequest(w.port, { path, headers: { 'x-auth-token': token } });
  const requestId = answer.headers['x-openstack-request-id'];
  if (typeof requestId !== 'string') throw new Error('no X-OpenStack-Request-Id');
  return { status: answer.status, requestId };
}

t.test('a proxied request\'s decision is found by its request id, as it was decided', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  const allowed = await proxied(w, w.reader);
  t.equal(allowed.status, 200);
  const validated = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.reader })).json().token;

  const found = await call('GET', `/v3/gateway/decisions/${allowed.requestId}`);
  t.equal(found.statusCode, 200);
  const decision = found.json().decision;
  t.same(decision, {
    request_id: allowed.requestId,
    time: new Date(w.testApp.clock.now()).toISOString(),
    service: 'echo',
    method: 'GET',
    path: `/echo/v1/${w.projectId}/things`,
    user_id: validated.user.id,
    project_id: w.projectId,
    token_audit_id: validated.audit_ids[0],
    effect: 'allow',
    reason: 'allowed',
    rule: { file: 'echo.csv', line: 2, text: READER_LISTS },
    shadow: null,
    upstream: w.upstream.url,
    status: 200,
  });
  const text = found.body;
  for (const token of [w.reader, w.admin]) t.notOk(text.includes(token), 'no token in the record');

  const denied = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(denied.status, 403);
  t.match((await call('GET', `/v3/gateway/decisions/${denied.headers['x-openstack-request-id']}`)).json().decision, { effect: 'deny', reason: 'no rule allows', rule: null, status: 403, upstream: w.upstream.url });
  const unauthenticated = await proxied(w, `${w.reader}x`);
  t.equal(unauthenticated.status, 401);
  t.match((await call('GET', `/v3/gateway/decisions/${unauthenticated.requestId}`)).json().decision, { effect: null, reason: 'invalid token', user_id: null, token_audit_id: null, status: 401 });

  // The live policy changes: the old decision still reads as it was decided.
  fs.writeFileSync(path.join(w.policies, 'echo.csv'), `# reader moved down\n\n${ECHO_RULES.replace(`${READER_LISTS}\n`, '')}p, reader, project, /v1/{project_id}/**, GET, allow\n`);
  t.ok(await w.testApp.app.reloadPolicy(), 'the policy reloaded');
  const after = await proxied(w, w.reader);
  t.match((await call('GET', `/v3/gateway/decisions/${after.requestId}`)).json().decision.rule, { file: 'echo.csv', text: 'p, reader, project, /v1/{project_id}/**, GET, allow' }, 'a new request: the new rule');
  t.same((await call('GET', `/v3/gateway/decisions/${allowed.requestId}`)).json().decision, decision, 'the old one: unchanged');
});

t.test('admins only; an unknown request id is 404', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  const { requestId } = await proxied(w, w.reader);
  const forbidden = await call('GET', `/v3/gateway/decisions/${requestId}`, undefined, w.member);
  t.equal(forbidden.statusCode, 403);
  t.notOk(forbidden.body.includes(requestId), 'nothing of the decision');
  t.equal((await call('GET', `/v3/gateway/decisions/${requestId}`, undefined, w.reader)).statusCode, 403);
  t.equal((await call('GET', `/v3/gateway/decisions/${requestId}`, undefined, null)).statusCode, 401);
  const unknown = await call('GET', '/v3/gateway/decisions/req-00000000-0000-4000-8000-000000000000');
  t.equal(unknown.statusCode, 404);
  t.same(unknown.json(), { error: { code: 404, title: 'Not Found', message: 'Could not find gateway decision: req-00000000-0000-4000-8000-000000000000.' } });
  t.equal((await call('GET', '/v3/gateway/decisions/not-a-request-id')).statusCode, 404);
});

t.test('the shadow policy\'s decision is in the record', async (t) => {
  const shadow = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-shadow-'));
  t.teardown(() => fs.rmSync(shadow, { recursive: true, force: true }));
  fs.copyFileSync(path.join(ROOT, 'policies', 'model.conf'), path.join(shadow, 'model.conf'));
  const deny = 'p, reader, project, /v1/{project_id}/things, GET, deny';
  fs.writeFileSync(path.join(shadow, 'echo.csv'), `${ECHO_RULES}${deny}\n`);
  const w = await gatewayWorld(t, { POLICY_SHADOW_DIR: shadow });
  const disagreed = await proxied(w, w.reader);
  t.equal(disagreed.status, 200);
  t.match((await w.testApp.call('GET', `/v3/gateway/decisions/${disagreed.requestId}`)).json().decision, {
    effect: 'allow',
    rule: { text: READER_LISTS },
    shadow: { effect: 'deny', rule: { file: 'echo.csv', line: 7, text: deny } },
  });
  const agreed = await proxied(w, w.member, `/echo/v1/${w.projectId}/things/1`);
  t.same((await w.testApp.call('GET', `/v3/gateway/decisions/${agreed.requestId}`)).json().decision.shadow, { effect: 'allow', rule: { file: 'echo.csv', line: 3, text: 'p, reader, project, /v1/{project_id}/things/*, GET, allow' } });
});

t.test('GATEWAY_DECISIONS_KEPT bounds what this process keeps', async (t) => {
  const w = await gatewayWorld(t, { GATEWAY_DECISIONS_KEPT: '2' });
  const ids = [];
  for (let index = 0; index < 3; index++) ids.push((await proxied(w, w.reader)).requestId);
  t.equal((await w.testApp.call('GET', `/v3/gateway/decisions/${ids[0]}`)).statusCode, 404, 'the oldest is gone');
  for (const id of ids.slice(1)) t.equal((await w.testApp.call('GET', `/v3/gateway/decisions/${id}`)).statusCode, 200);
});

t.test('with Redis, any node answers for any request; a stopped node\'s in Redis, bounded, with a TTL, never the token', async (t) => {
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const shared = {
    REDIS_URL: TEST_REDIS_URL,
    REDIS_EVENTS_CHANNEL: `${redis.prefix}events`,
    AUDIT_STREAM: `${redis.prefix}audit`,
    RATE_LIMIT_KEY_PREFIX: `${redis.prefix}ratelimit:`,
    GATEWAY_DECISIONS_KEY_PREFIX: `${redis.prefix}decision:`,
    GATEWAY_DECISIONS_KEPT: '3',
    GATEWAY_DECISIONS_TTL_SECONDS: '600',
  };
  const w = await gatewayWorld(t, shared);
  const other = await startTestApp(t, shared);
  const { requestId } = await proxied(w, w.reader);
  const keys = decisionKeys(`${redis.prefix}decision:`);

  // Nothing goes to Redis per request: the other node asks this one.
  const elsewhere = await other.call('GET', `/v3/gateway/decisions/${requestId}`);
  t.equal(elsewhere.statusCode, 200, 'the other node answers');
  t.match(elsewhere.json().decision, { request_id: requestId, service: 'echo', effect: 'allow', rule: { text: READER_LISTS }, status: 200 });
  t.equal(await redis.redis.exists(keys.batches, keys.sizes, keys.count), 0, 'nothing in Redis while the node runs');

  // Three more: the first is beyond the bound, on both nodes.
  const ids: string[] = [];
  for (let index = 0; index < 3; index++) ids.push((await proxied(w, w.reader)).requestId);
  t.equal((await other.call('GET', `/v3/gateway/decisions/${ids[2]}`)).statusCode, 200, 'the other node sees the last at once');
  t.equal((await other.call('GET', `/v3/gateway/decisions/${requestId}`)).statusCode, 404);
  t.equal((await w.testApp.call('GET', `/v3/gateway/decisions/${requestId}`)).statusCode, 404);

  // The node stops: it leaves its decisions in Redis, where the other still finds them.
  await w.testApp.close();
  const stored = (await redis.redis.lrange(keys.batches, 0, -1)).join('');
  for (const id of ids) t.ok(stored.includes(`"request_id":"${id}"`), `${id} left in Redis`);
  t.notOk(stored.includes(requestId), 'not one beyond the bound');
  t.notOk(stored.includes(w.reader), 'no token in Redis');
  const ttl = await redis.redis.ttl(keys.batches);
  t.ok(ttl > 0 && ttl <= 600, `a TTL (${ttl} s)`);
  for (const id of ids) {
    const found = await other.call('GET', `/v3/gateway/decisions/${id}`);
    t.equal(found.statusCode, 200, 'found after its node stopped');
    t.match(found.json().decision, { request_id: id, effect: 'allow', status: 200 });
  }
  t.equal((await other.call('GET', `/v3/gateway/decisions/${requestId}`)).statusCode, 404);
});
