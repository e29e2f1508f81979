import fs from 'node:fs';
import t from 'tap';
import { pino } from 'pino';
import { ECHO_RULES, gatewayWorld } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// What security teams and operators see: audit lines, explain, policy reloads.

t.test('one audit line per request, never a token', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const w = await gatewayWorld(t, {}, { logger });
  lines.length = 0;
  const requests = [
    { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader }, status: 200 },
    { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader }, status: 403 },
    { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': `${w.member}x` }, status: 401 },
    { path: `/nothing/here`, headers: { 'x-auth-token': w.member }, status: 404 },
  ];
  for (const { status, ...request } of requests) t.equal((await rawRequest(w.port, request)).status, status, `${request.method ?? 'GET'} ${request.path}`);
  const audits = lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'gateway').map((entry) => entry.audit);
  t.equal(audits.length, requests.length, 'one line per request');
  const validated = (await w.testApp.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.reader })).json().token;
  t.match(audits[0], {
    request_id: /^req-/,
    audit_id: validated.audit_ids[0],
    user_id: validated.user.id,
    project_id: w.projectId,
    service: 'echo',
    method: 'GET',
    path: `/echo/v1/${w.projectId}/things`,
    rule: 'p, reader, project, /v1/{project_id}/things, GET, allow',
    effect: 'allow',
    upstream: w.upstream.url,
    status: 200,
    latency_ms: Number,
  });
  t.match(audits[1], { effect: 'deny', reason: 'no rule allows', status: 403 });
  t.match(audits[2], { reason: 'invalid token', status: 401 });
  t.match(audits[3], { reason: 'no internal endpoint', status: 404 });
  const everything = lines.join('\n');
  for (const token of [w.reader, w.member, w.admin]) t.notOk(everything.includes(token), 'no token in any log line');
});

t.test('POST /v3/gateway/policy/explain: admins ask how a request would be decided', async (t) => {
  const w = await gatewayWorld(t);
  const { call } = w.testApp;
  const byRoles = await call('POST', '/v3/gateway/policy/explain', {
    explain: { method: 'get', path: `/echo/v1/x/../${w.projectId}/things`, roles: ['reader'], scope: 'project', project_id: w.projectId, user_id: 'u1' },
  });
  t.equal(byRoles.statusCode, 200);
  t.same(byRoles.json().explanation, {
    allowed: true,
    reason: 'allowed',
    rule: 'p, reader, project, /v1/{project_id}/things, GET, allow',
    source: 'echo.csv',
    line: 2,
    service: 'echo',
    method: 'GET',
    path: `/v1/${w.projectId}/things`,
    subject: { roles: ['reader'], scope: 'project', project_id: w.projectId, user_id: 'u1' },
    matches: [{ rule: 'p, reader, project, /v1/{project_id}/things, GET, allow', source: 'echo.csv', line: 2, effect: 'allow' }],
  });
  const byToken = await call('POST', '/v3/gateway/policy/explain', { explain: { method: 'POST', path: `/echo/v1/${w.otherProjectId}/things`, token: w.member } });
  t.equal(byToken.statusCode, 200);
  t.match(byToken.json().explanation, { allowed: false, reason: 'no rule allows', subject: { scope: 'project', project_id: w.projectId } });
  t.same([...byToken.json().explanation.subject.roles].sort(), ['member', 'reader']);
  const unknown = await call('POST', '/v3/gateway/policy/explain', { explain: { method: 'GET', path: '/nosuch/x', roles: ['admin'], scope: 'system' } });
  t.match(unknown.json().explanation, { allowed: false, reason: 'unknown service', matches: [] });

  const refused = [
    { body: { explain: { method: 'GET', path: '/echo/v1' } }, status: 400, why: 'no subject' },
    { body: { explain: { method: 'GET', path: '/echo/v1', token: w.member, roles: ['admin'], scope: 'system' } }, status: 400, why: 'both' },
    { body: { explain: { method: 'GET', path: '/echo/%2e%2e/%2e%2e/x', roles: [], scope: 'project' } }, status: 400, why: 'a path the gateway refuses' },
    { body: { explain: { method: 'BREW', path: '/echo/v1', roles: [], scope: 'project' } }, status: 400, why: 'unknown method' },
    { body: { explain: { method: 'GET', path: '/echo/v1', roles: [], scope: 'galaxy' } }, status: 400, why: 'bad scope' },
    { body: { explain: { method: 'GET', path: '/echo/v1', roles: [], scope: 'project', extra: 1 } }, status: 400, why: 'unknown field' },
    // As for X-Subject-Token on GET /v3/auth/tokens: the token asked about is not found.
    { body: { explain: { method: 'GET', path: '/echo/v1', token: 'gAAAAABnope' } }, status: 404, why: 'a token that does not validate' },
  ];
  for (const { body, status, why } of refused) {
    const response = await call('POST', '/v3/gateway/policy/explain', body);
    t.equal(response.statusCode, status, why);
    t.equal(response.json().error.code, status, `${why}: Keystone-shaped`);
  }
  const asMember = await call('POST', '/v3/gateway/policy/explain', { explain: { method: 'GET', path: '/echo/v1', roles: ['admin'], scope: 'system' } }, w.member);
  t.equal(asMember.statusCode, 403, 'admin only');
});

t.test('a policy reload under load fails no request', async (t) => {
  const w = await gatewayWorld(t);
  const path = `/echo/v1/${w.projectId}/things`;
  const statuses: number[] = [];
  let reloads = 0;
  // Settled at each reload, then replaced.
  let reloadDone = () => {};
  const nextReload = () => new Promise<void>((resolve) => (reloadDone = resolve));
  let reloaded = nextReload();
  const client = async () => {
    for (let i = 0; i < 25; i++) {
      // Requests 2-4 of each client wait for a reload each: three happen while requests run,
      // however slow a reload is next to a request.
      while (i <= 3 && reloads < i) await reloaded;
      statuses.push((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status);
    }
  };
  let done = false;
  const clients = Promise.all(Array.from({ length: 8 }, client)).finally(() => (done = true));
  while (!done) {
    // Equivalent rule sets that differ in text, so each reload really swaps.
    fs.writeFileSync(`${w.policies}/echo.csv`, `${ECHO_RULES}p, reader, project, /v1/{project_id}/round-${reloads}, GET, allow\n`);
    if (await w.testApp.app.reloadPolicy()) {
      reloads++;
      reloadDone();
      reloaded = nextReload();
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await clients;
  t.ok(reloads >= 3, `${reloads} reloads while ${statuses.length} requests ran`);
  t.equal(statuses.length, 200);
  t.same([...new Set(statuses)], [200], 'every request during the reloads succeeded');
});
