import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { decisionKeys } from '../../src/gateway/decision-store.ts';
import { startTestApp } from '../helpers/app.ts';
import { ECHO_RULES, gatewayWorld, type World } from '../helpers/gateway.ts';
import { TEST_REDIS_URL, testRedis } from '../helpers/redis.ts';
import { rawRequest } from '../helpers/upstream.ts';

// POST /v3/gateway/policy/replay: the recorded decisions decided again with a candidate policy;
// exactly the requests whose outcome would change are reported.

async function send(w: World, token: string, method: string, path: string): Promise<{ status: number; requestId: string }> {
  const answer = await rawRequest(w.port, { method, path, headers: { 'x-auth-token': token, 'content-type': 'application/json' }, ...(method === 'POST' ? { body: '{}' } : {}) });
  return { status: answer.status, requestId: String(answer.headers['x-openstack-request-id']) };
}

const READER_DENIED = 'p, reader, project, /v1/{project_id}/things, GET, deny';
const READER_POSTS = 'p, reader, project, /v1/{project_id}/things, POST, allow';

t.test('replay reports exactly the requests a candidate would decide otherwise', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  const things = `/echo/v1/${w.projectId}/things`;
  const readerLists = await send(w, w.reader, 'GET', things);
  const memberPosts = await send(w, w.member, 'POST', things);
  const readerPosts = await send(w, w.reader, 'POST', things);
  const readerReadsOne = await send(w, w.reader, 'GET', `${things}/1`);
  const unauthenticated = await send(w, `${w.reader}x`, 'GET', things);
  t.same([readerLists, memberPosts, readerPosts, readerReadsOne, unauthenticated].map((answer) => answer.status), [200, 201, 403, 200, 401]);

  const stricter = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'echo.csv': `${ECHO_RULES}${READER_DENIED}\n` } } });
  t.equal(stricter.statusCode, 200);
  t.same(stricter.json(), {
    replay: {
      decisions: 4,
      changed: [{ request_id: readerLists.requestId, service: 'echo', method: 'GET', path: things, live: 'allow', candidate: 'deny', rule: { file: 'echo.csv', line: 7, text: READER_DENIED } }],
    },
  }, 'the 401 had no policy decision; only the reader\'s listing changes');

  const looser = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'echo.csv': `${ECHO_RULES}${READER_POSTS}\n` } } });
  t.same(looser.json().replay.changed, [{ request_id: readerPosts.requestId, service: 'echo', method: 'POST', path: things, live: 'deny', candidate: 'allow', rule: { file: 'echo.csv', line: 7, text: READER_POSTS } }]);

  const same = await call('POST', '/v3/gateway/policy/replay', { replay: { files: {} } });
  t.same(same.json(), { replay: { decisions: 4, changed: [] } }, 'no files: the live policy, nothing changes');

  const newest = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'echo.csv': `${ECHO_RULES}${READER_DENIED}\n` }, limit: 2 } });
  t.same(newest.json(), { replay: { decisions: 1, changed: [] } }, 'limit: the newest two recorded (the 401 and the reader reading one thing)');

  const unchangedLive = await send(w, w.reader, 'GET', things);
  t.equal(unchangedLive.status, 200, 'a replay changes nothing live');
});

t.test('a candidate that does not load or fails its fixtures is a 400 naming the file and line', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  await send(w, w.reader, 'GET', `/echo/v1/${w.projectId}/things`);
  const broken = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'echo.csv': `${ECHO_RULES}p, reader\n` } } });
  t.equal(broken.statusCode, 400);
  t.match(broken.json().error.message, /echo\.csv:7: expected 5 fields/);
  t.notOk(broken.body.includes('kg-replay-'), 'no temporary path');

  fs.mkdirSync(path.join(w.policies, 'tests'));
  fs.writeFileSync(
    path.join(w.policies, 'tests', 'echo.yaml'),
    `- name: a reader lists things\n  service: echo\n  roles: [reader]\n  scope: project\n  project_id: p1\n  method: GET\n  path: /v1/p1/things\n  expect: allow\n`,
  );
  const failing = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'echo.csv': `${ECHO_RULES}${READER_DENIED}\n` } } });
  t.equal(failing.statusCode, 400);
  t.match(failing.json().error.message, /fixture.*tests\/echo\.yaml: case 1 "a reader lists things": expected allow, got deny/);
  t.match(failing.json().error.message, /echo\.csv:7/, 'the deciding line is named');

  // The same change with the fixture it means to flip: the candidate is gated by its own fixtures.
  const flippedFixture = fs.readFileSync(path.join(w.policies, 'tests', 'echo.yaml'), 'utf8').replace('expect: allow', 'expect: deny');
  const withFixture = await call('POST', '/v3/gateway/policy/replay', {
    replay: { files: { 'echo.csv': `${ECHO_RULES}${READER_DENIED}\n`, 'tests/echo.yaml': flippedFixture } },
  });
  t.equal(withFixture.statusCode, 200, withFixture.body);
  t.equal(withFixture.json().replay.changed.length, 1, 'the reader\'s listing would change');
  const fixtureAlone = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'tests/echo.yaml': flippedFixture } } });
  t.equal(fixtureAlone.statusCode, 400, 'the live rules fail the candidate fixture');
  t.match(fixtureAlone.json().error.message, /tests\/echo\.yaml: case 1 "a reader lists things": expected deny, got allow/);
  t.equal(fs.readFileSync(path.join(w.policies, 'tests', 'echo.yaml'), 'utf8').includes('expect: allow'), true, 'the live fixture is untouched');

  for (const name of ['../echo.csv', 'echo.conf', '.hidden.csv', 'model.conf', 'tests/../echo.csv', 'tests/echo.csv', 'tests/.x.yaml', 'other/echo.yaml']) {
    const refused = await call('POST', '/v3/gateway/policy/replay', { replay: { files: { [name]: ECHO_RULES } } });
    t.equal(refused.statusCode, 400, name);
  }
  t.equal((await call('POST', '/v3/gateway/policy/replay', { replay: { files: {}, limit: 0 } })).statusCode, 400);
  t.equal((await call('POST', '/v3/gateway/policy/replay', { replay: {} })).statusCode, 400);
});

t.test('admins only', async (t) => {
  const w = await gatewayWorld(t);
  const body = { replay: { files: {} } };
  t.equal((await w.testApp.call('POST', '/v3/gateway/policy/replay', body, w.member)).statusCode, 403);
  t.equal((await w.testApp.call('POST', '/v3/gateway/policy/replay', body, w.reader)).statusCode, 403);
  t.equal((await w.testApp.call('POST', '/v3/gateway/policy/replay', body, null)).statusCode, 401);
});

t.test('with Redis, a replay on any node covers every node\'s decisions', async (t) => {
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const shared = {
    REDIS_URL: TEST_REDIS_URL,
    REDIS_EVENTS_CHANNEL: `${redis.prefix}events`,
    AUDIT_STREAM: `${redis.prefix}audit`,
    RATE_LIMIT_KEY_PREFIX: `${redis.prefix}ratelimit:`,
    GATEWAY_DECISIONS_KEY_PREFIX: `${redis.prefix}decision:`,
  };
  const w = await gatewayWorld(t, shared);
  const other = await startTestApp(t, { ...shared, POLICY_DIR: w.policies });
  const listed = await send(w, w.reader, 'GET', `/echo/v1/${w.projectId}/things`);
  // Nothing goes to Redis per request: the replaying node asks the other.
  t.equal(await redis.redis.llen(decisionKeys(`${redis.prefix}decision:`).batches), 0);
  const replay = await other.call('POST', '/v3/gateway/policy/replay', { replay: { files: { 'echo.csv': `${ECHO_RULES}${READER_DENIED}\n` } } });
  t.equal(replay.statusCode, 200);
  t.same(replay.json().replay, { decisions: 1, changed: [{ request_id: listed.requestId, service: 'echo', method: 'GET', path: `/echo/v1/${w.projectId}/things`, live: 'allow', candidate: 'deny', rule: { file: 'echo.csv', line: 7, text: READER_DENIED } }] });
});
