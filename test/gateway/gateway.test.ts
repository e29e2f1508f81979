import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/processes.ts';
import { pino, type Logger } from 'pino';
import { asSecurityResponse, FORGED_IDENTITY_HEADERS, securityCases } from '../helpers/security.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';
import { rawRequest, startEchoUpstream, type EchoUpstream } from '../helpers/upstream.ts';

const ECHO_RULES = `# test rules for the echo service
p, reader, project, /v1/{project_id}/things, GET, allow
p, reader, project, /v1/{project_id}/things/*, GET, allow
p, member, project, /v1/{project_id}/things, POST, allow
p, member, project, /v1/public/**, *, allow
p, admin, *, /**, *, allow
`;

/** A policy directory with the product's model and rules for the test's echo service. */
function policyDirectory(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-policy-'));
  fs.copyFileSync(path.join(ROOT, 'policies', 'model.conf'), path.join(directory, 'model.conf'));
  fs.writeFileSync(path.join(directory, 'echo.csv'), ECHO_RULES);
  return directory;
}

interface World {
  testApp: TestApp;
  upstream: EchoUpstream;
  port: number;
  projectId: string;
  otherProjectId: string;
  member: string;
  reader: string;
  admin: string;
  policies: string;
}

async function world(t: { teardown(fn: () => unknown): void }, overrides: Record<string, string> = {}, logger?: Logger): Promise<World> {
  const policies = policyDirectory();
  t.teardown(() => fs.rmSync(policies, { recursive: true, force: true }));
  const testApp = await startTestApp(t, { POLICY_DIR: policies, UPSTREAM_RESPONSE_TIMEOUT_MS: '1000', ...overrides }, logger ? { logger } : {});
  const upstream = await startEchoUpstream();
  t.teardown(() => upstream.close());
  const { call, login, app } = testApp;
  const service = (await call('POST', '/v3/services', { service: { type: 'echo', name: 'echo' } })).json().service;
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'internal', region_id: 'RegionOne', url: `${upstream.url}/v1` } });
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'public', region_id: 'RegionOne', url: 'http://gateway.test/echo/v1' } });
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'gw' } })).json().project;
  const other = (await call('POST', '/v3/projects', { project: { name: 'gw-other' } })).json().project;
  const tokens: Record<string, string> = {};
  for (const role of ['member', 'reader']) {
    const user = (await call('POST', '/v3/users', { user: { name: `gw-${role}`, password: 'Pw-1' } })).json().user;
    await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles[role]}`);
    await call('PUT', `/v3/projects/${other.id}/users/${user.id}/roles/${roles[role]}`);
    tokens[role] = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  }
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  return {
    testApp,
    upstream,
    port: typeof address === 'object' && address ? address.port : 0,
    projectId: project.id,
    otherProjectId: other.id,
    member: tokens.member!,
    reader: tokens.reader!,
    admin: testApp.adminToken,
    policies,
  };
}

const IDENTITY_HEADER = /^(x-identity-status|x-(service-)?(user|project|domain|roles|is-admin-project|service-catalog)|x-service-identity-status|openstack-system-scope|x-role|x-tenant|x-user)/;

t.test('allowed requests reach the internal endpoint with exactly our identity headers', async (t) => {
  const w = await world(t);
  const response = await rawRequest(w.port, {
    path: `/echo/v1/${w.projectId}/things?limit=2`,
    headers: { 'x-auth-token': w.member, ...FORGED_IDENTITY_HEADERS, 'x-user-id': 'forged', 'X-PROJECT-ID': 'forged', 'x-service-token': '' },
  });
  t.equal(response.status, 200);
  t.match(response.headers['x-openstack-request-id'], /^req-/);
  const received = w.upstream.received.at(-1)!;
  t.equal(received.url, `/v1/${w.projectId}/things?limit=2`, 'the endpoint path is not doubled; the query is kept');
  const identity = Object.fromEntries(Object.entries(received.headers).filter(([name]) => IDENTITY_HEADER.test(name)));
  const validated = (await w.testApp.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.member })).json().token;
  t.same(identity, {
    'x-identity-status': 'Confirmed',
    'x-user-id': validated.user.id,
    'x-user-name': 'gw-member',
    'x-user-domain-id': 'default',
    'x-user-domain-name': 'Default',
    'x-roles': validated.roles.map((role: { name: string }) => role.name).join(','),
    'x-project-id': w.projectId,
    'x-project-name': 'gw',
    'x-project-domain-id': 'default',
    'x-project-domain-name': 'Default',
    'x-is-admin-project': 'True',
  });
  t.equal(received.headers['x-auth-token'], w.member, 'the token is forwarded unchanged for keystonemiddleware behind us');
  t.equal(received.headers['x-forwarded-for'], '127.0.0.1');
  t.equal(received.headers['x-forwarded-host'], `127.0.0.1:${w.port}`);
  t.equal(received.headers['x-forwarded-proto'], 'http');
  t.match(received.headers['x-openstack-request-id'], /^req-/);
  t.equal(received.headers.host, `127.0.0.1:${w.upstream.port}`);

  // Bodies keep their Content-Length (uwsgi behind us does not de-chunk), and Location is rewritten.
  const created = await rawRequest(w.port, {
    method: 'POST',
    path: `/echo/v1/${w.projectId}/things`,
    headers: { 'x-auth-token': w.member, 'content-type': 'application/json', 'content-length': '10' },
    body: '{"a":"b"} ',
  });
  t.equal(created.status, 201);
  const post = w.upstream.received.at(-1)!;
  t.equal(post.headers['content-length'], '10');
  t.notOk(post.headers['transfer-encoding']);
  t.equal(post.body, '{"a":"b"} ');
  t.equal(created.headers.location, `${PUBLIC_URL}/echo/v1/${w.projectId}/things/thing-1`, 'Location points at the public gateway URL');
});

t.test('denials: policy, owner rule, tokens', async (t) => {
  const w = await world(t);
  const before = w.upstream.received.length;
  const denied = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(denied.status, 403);
  t.same(JSON.parse(denied.body), { error: { code: 403, title: 'Forbidden', message: 'You are not authorized to perform the requested action.' } });
  const otherProject = await rawRequest(w.port, { path: `/echo/v1/${w.otherProjectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(otherProject.status, 403, "the owner rule: another project's path is not the token's");
  const ownProject = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': w.reader } });
  t.equal(ownProject.status, 200);

  const unauthenticated = [
    { name: 'no token', headers: {} },
    { name: 'garbage', headers: { 'x-auth-token': 'gAAAAABgarbage' } },
    { name: 'forged headers only', headers: FORGED_IDENTITY_HEADERS },
  ];
  for (const attempt of unauthenticated) {
    const response = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: attempt.headers });
    t.equal(response.status, 401, attempt.name);
    t.equal(response.headers['www-authenticate'], 'Keystone uri="http://keystone.test:5000/v3"');
  }
  const unscoped = (await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', 'unscoped')).token;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': unscoped } })).status, 401, 'unscoped');
  const revoked = (await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } })).token;
  await w.testApp.call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': revoked });
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': revoked } })).status, 401, 'revoked');
  t.equal(w.upstream.received.length, before + 1, 'only the one allowed request reached the upstream');

  w.testApp.clock.advance(3601_000);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 401, 'expired');
  t.equal((await rawRequest(w.port, { path: '/nosuchservice/x', headers: {} })).status, 401, 'no service enumeration without a token');
});

t.test('path tricks never reach a route policy denies', async (t) => {
  const w = await world(t);
  const attempts = [
    '/echo/v1/public/../admin/secrets',
    '/echo/v1/public/%2e%2e/admin/secrets',
    '/echo/v1/public/%2E%2E/admin/secrets',
    '/echo/v1/public/..%2fadmin/secrets',
    '/echo/v1/public%2f..%2fadmin/secrets',
    '/echo/v1/public/..%5cadmin/secrets',
    '/echo/v1/public/..\\admin/secrets',
    '/echo/v1/public/..;/admin/secrets',
    '/echo/v1/public;/../admin/secrets',
    '/echo/v1/public/%00/../admin/secrets',
    '/echo/v1/public/%252e%252e/admin/secrets',
    '/echo//v1//admin//secrets',
    '/echo/v1/./admin/secrets',
    '/echo/v1/public/./../admin/secrets',
    '/echo/v1/ADMIN/../admin/secrets',
  ];
  for (const attempt of attempts) {
    const response = await rawRequest(w.port, { path: attempt, headers: { 'x-auth-token': w.member } });
    t.ok(response.status === 400 || response.status === 403, `${attempt} -> ${response.status}`);
  }
  t.notOk(
    w.upstream.received.some((request) => /admin/i.test(request.url)),
    `the upstream never saw an admin path: ${w.upstream.received.map((request) => request.url).join(' ')}`,
  );
  const allowed = await rawRequest(w.port, { path: '/echo/v1/public/./docs/../readme', headers: { 'x-auth-token': w.member } });
  t.equal(allowed.status, 200);
  t.equal(w.upstream.received.at(-1)!.url, '/v1/public/readme', 'the forwarded path is the one policy allowed');
  const admin = await rawRequest(w.port, { path: '/echo/v1/admin/secrets', headers: { 'x-auth-token': w.admin } });
  t.equal(admin.status, 200, 'admin reaches it by its real name');

  // An absolute-form request target can never choose the upstream.
  const absolute = await new Promise<string>((resolve) => {
    const socket = net.connect(w.port, '127.0.0.1', () => {
      socket.write(`GET http://127.0.0.1:1/echo/v1/public/x HTTP/1.1\r\nHost: evil.example\r\nX-Auth-Token: ${w.member}\r\nConnection: close\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString()));
    socket.on('end', () => resolve(data));
  });
  t.match(absolute, /^HTTP\/1\.1 400/);
});

t.test('HTTP-level defences', async (t) => {
  const w = await world(t);
  const send = (text: string) =>
    new Promise<string>((resolve) => {
      const socket = net.connect(w.port, '127.0.0.1', () => socket.write(text));
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', () => resolve(data));
    });
  const smuggled = await send(
    `POST /echo/v1/public/x HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.member}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /echo/v1/admin/x HTTP/1.1\r\nHost: a\r\n\r\n`,
  );
  t.match(smuggled, /^HTTP\/1\.1 400/, 'Content-Length with Transfer-Encoding is refused');
  t.notOk(w.upstream.received.some((request) => request.url.includes('admin')));

  const huge = await rawRequest(w.port, { path: '/echo/v1/public/x', headers: { 'x-auth-token': w.member, 'x-padding': 'a'.repeat(20_000) } }).catch(() => ({ status: 0, body: '', headers: {} }));
  t.equal(huge.status, 431);

  const trace = await rawRequest(w.port, { method: 'TRACE', path: '/echo/v1/public/x', headers: { 'x-auth-token': w.member } });
  t.equal(trace.status, 405);
  t.equal(JSON.parse(trace.body).error.code, 405);
});

t.test('upstream failures: slow is 504, down is 502', async (t) => {
  const w = await world(t);
  w.upstream.delayMs = 2000;
  const slow = await rawRequest(w.port, { path: '/echo/v1/public/slow', headers: { 'x-auth-token': w.member } });
  t.equal(slow.status, 504);
  t.equal(JSON.parse(slow.body).error.code, 504);
  w.upstream.delayMs = 0;
  await w.upstream.close();
  const down = await rawRequest(w.port, { path: '/echo/v1/public/down', headers: { 'x-auth-token': w.member } });
  t.equal(down.status, 502);
  t.equal(JSON.parse(down.body).error.title, 'Bad Gateway');
});

t.test('catalog and policy changes take effect without a restart', async (t) => {
  const w = await world(t);
  const path = `/echo/v1/${w.projectId}/things`;
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status, 200);

  // A broken rule file: the last good policy stays.
  fs.writeFileSync(`${w.policies}/echo.csv`, `${ECHO_RULES}p, reader, this is not a rule\n`);
  t.equal(await w.testApp.app.reloadPolicy(), false);
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status, 200, 'still the old policy');
  // A good change: readers lose GET on things.
  fs.writeFileSync(`${w.policies}/echo.csv`, ECHO_RULES.replace(/^p, reader, project, \/v1\/\{project_id\}\/things, GET, allow\n/m, ''));
  t.equal(await w.testApp.app.reloadPolicy(), true);
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status, 403, 'the new policy');

  // The endpoint moves: the next request goes to the new place.
  const second = await startEchoUpstream();
  t.teardown(() => second.close());
  const endpoints = (await w.testApp.call('GET', '/v3/endpoints?interface=internal')).json().endpoints;
  const echo = endpoints.find((endpoint: { url: string }) => endpoint.url.startsWith(w.upstream.url));
  await w.testApp.call('PATCH', `/v3/endpoints/${echo.id}`, { endpoint: { url: `${second.url}/v1` } });
  t.equal((await rawRequest(w.port, { path: '/echo/v1/public/moved', headers: { 'x-auth-token': w.member } })).status, 200);
  t.equal(second.received.at(-1)?.url, '/v1/public/moved');
});

t.test('the identity API is reachable through the gateway at /identity/v3', async (t) => {
  const w = await world(t, { PUBLIC_URL: '' });
  const version = await rawRequest(w.port, { path: '/identity/v3', headers: { host: 'gateway.test' } });
  t.equal(version.status, 200);
  t.equal(JSON.parse(version.body).version.links[0].href, 'http://gateway.test/identity/v3/');
  const users = await rawRequest(w.port, { path: '/identity/v3/users', headers: { host: 'gateway.test', 'x-auth-token': w.admin } });
  t.equal(users.status, 200);
  t.equal(JSON.parse(users.body).links.self, 'http://gateway.test/identity/v3/users');
});

t.test('application-credential access rules are enforced at the gateway', async (t) => {
  const w = await world(t);
  const { call, login } = w.testApp;
  const user = (await call('GET', '/v3/users?name=gw-member')).json().users[0];
  const session = (await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } })).token;
  const created = await call(
    'POST',
    `/v3/users/${user.id}/application_credentials`,
    { application_credential: { name: 'things-reader', access_rules: [{ service: 'echo', method: 'GET', path: '/v1/*/things' }] } },
    session,
  );
  t.equal(created.statusCode, 201);
  const credential = created.json().application_credential;
  const issued = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: credential.secret } } } }, null);
  t.equal(issued.statusCode, 201);
  const token = String(issued.headers['x-subject-token']);

  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } })).status, 200, 'the rule matches');
  const before = w.upstream.received.length;
  const outside = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': token } });
  t.equal(outside.status, 403, 'policy would allow a member this path, the access rules do not');
  const wrongMethod = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } });
  t.equal(wrongMethod.status, 403);
  t.equal(w.upstream.received.length, before, 'nothing outside the rules reached the upstream');

  // As keystonemiddleware: a valid service token alongside waives the access rules.
  const withService = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': token, 'x-service-token': w.admin } });
  t.equal(withService.status, 200);
  const badService = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': token, 'x-service-token': 'gAAAAABnope' } });
  t.equal(badService.status, 401, 'an invalid service token is refused, not ignored');
});

t.test('one audit line per request, never a token', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const w = await world(t, {}, logger);
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
  const w = await world(t);
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
  const w = await world(t);
  const path = `/echo/v1/${w.projectId}/things`;
  const statuses: number[] = [];
  const client = async () => {
    for (let i = 0; i < 25; i++) statuses.push((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status);
  };
  let done = false;
  const clients = Promise.all(Array.from({ length: 8 }, client)).finally(() => (done = true));
  let reloads = 0;
  while (!done) {
    // Equivalent rule sets that differ in text, so each reload really swaps.
    fs.writeFileSync(`${w.policies}/echo.csv`, `${ECHO_RULES}p, reader, project, /v1/{project_id}/round-${reloads}, GET, allow\n`);
    if (await w.testApp.app.reloadPolicy()) reloads++;
    await new Promise((resolve) => setImmediate(resolve));
  }
  await clients;
  t.ok(reloads >= 3, `${reloads} reloads while ${statuses.length} requests ran`);
  t.equal(statuses.length, 200);
  t.same([...new Set(statuses)], [200], 'every request during the reloads succeeded');
});

t.test('every gateway route refuses missing, bad and forged credentials (shared generator)', async (t) => {
  const w = await world(t);
  const { call, login } = w.testApp;
  const revoked = (await login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } })).token;
  await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': revoked });
  // A member of another project only: the owner rules give it nothing here.
  const outsider = (await call('POST', '/v3/users', { user: { name: 'gw-outsider', password: 'Pw-1' } })).json().user;
  const elsewhere = (await call('POST', '/v3/projects', { project: { name: 'gw-elsewhere' } })).json().project;
  const memberRole = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${elsewhere.id}/users/${outsider.id}/roles/${memberRole.id}`);
  const outsiderToken = (await login({ id: outsider.id }, 'Pw-1', { project: { id: elsewhere.id } })).token;
  const tokens = { member: outsiderToken, revoked, expiredOrGarbage: 'gAAAAABgarbage-token' };
  const routes = [
    { method: 'GET', url: `/echo/v1/${w.projectId}/things` },
    { method: 'POST', url: `/echo/v1/${w.projectId}/things` },
    { method: 'GET', url: `/echo/v1/${w.projectId}/things/x` },
    { method: 'DELETE', url: `/echo/v1/${w.projectId}/things/x` },
    { method: 'PUT', url: '/echo/v1/admin/secrets' },
  ];
  const send = async (route: { method: string; url: string }, headers: Record<string, string>) => {
    const body = route.method === 'POST' || route.method === 'PUT' ? '{}' : undefined;
    const response = await rawRequest(w.port, { method: route.method, path: route.url, headers: { ...headers, ...(body ? { 'content-type': 'application/json', 'content-length': '2' } : {}) }, body });
    return asSecurityResponse(response);
  };
  for (const route of routes) {
    const baseline = await send(route, { 'X-Auth-Token': outsiderToken });
    for (const securityCase of securityCases({ ...route, public: false }, tokens)) {
      const failure = securityCase.check(await send(route, securityCase.headers), baseline);
      t.notOk(failure, `${route.method} ${route.url}: ${securityCase.name}${failure ? ` — ${failure}` : ''}`);
    }
  }
  t.same(w.upstream.received, [], 'none of it reached the upstream');
});
